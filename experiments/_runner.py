"""Names that bench and generate import from their old place; the runner is
``experiments.four_variants``. Deleted once those commands import from there."""
import os

from experiments.four_variants import MAX_STEPS, VARIANTS, memory_lower_bound, steps_arg  # noqa


def physical_memory():
    """Bytes of physical memory."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
