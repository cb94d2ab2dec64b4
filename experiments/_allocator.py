"""The C allocator of the commands: freed arrays are kept for reuse, not given back to the system
(docs/performance.md, "Fourth round").

A training step allocates and frees the same arrays every step: activations, gradients and
scratch buffers of 64 KiB to a few MiB. NumPy takes them from the C library's ``malloc``.
glibc's default policy decides, from the history of earlier allocations, whether a freed block
goes back to the system: blocks above a moving threshold are ``mmap``-ed and unmapped when
freed, and free memory at the top of the heap is trimmed. Each block given back is faulted in
again, page by page, the next time it is needed. On the tiny model that was 480-3,700 page
faults per step and a step up to a third slower, the amount depending on how earlier steps
happened to allocate (which is why the step time seemed to depend on the data;
``tools/page_faults.py``). With large blocks served from the heap (``M_MMAP_THRESHOLD`` 32 MiB,
glibc's maximum) and the top of the heap kept up to ``M_TRIM_THRESHOLD`` (256 MiB), a step
makes no page faults after the first few steps, the results are bit-identical, and the peak
resident memory grew by 0.4-1.3 MiB.

``configure`` does this for the process it runs in (``mallopt``) and, through glibc's
environment variables ``MALLOC_MMAP_THRESHOLD_`` and ``MALLOC_TRIM_THRESHOLD_``, for the worker
processes it starts. ``experiments`` calls it when a command is started as ``python -m
experiments.<command>``. It changes nothing when the C library is not glibc, or when the caller
already set either variable (or a ``glibc.malloc`` tunable), which then wins.
"""
from __future__ import annotations

import os
import sys
from typing import Dict, Optional

__all__ = ["SETTINGS", "configure"]

#: mallopt parameter number, environment variable, value (bytes).
SETTINGS = (
    (-3, "MALLOC_MMAP_THRESHOLD_", 32 << 20),   # M_MMAP_THRESHOLD; 32 MiB is glibc's largest
    (-1, "MALLOC_TRIM_THRESHOLD_", 256 << 20),  # M_TRIM_THRESHOLD
)


def configure(environ: Optional[Dict[str, str]] = None) -> bool:
    """Apply ``SETTINGS`` to this process and its future children; True when applied.

    Does nothing (returns False) off Linux, when the C library is not glibc, when ``mallopt``
    refuses a value, or when ``environ`` (default ``os.environ``) already names one of the
    variables or a ``glibc.malloc`` tunable in ``GLIBC_TUNABLES``.
    """
    environ = os.environ if environ is None else environ
    if not sys.platform.startswith("linux"):
        return False
    if any(name in environ for _, name, _ in SETTINGS) or \
            "glibc.malloc" in environ.get("GLIBC_TUNABLES", ""):
        return False
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
            return False
    except (ValueError, OSError, AttributeError):
        return False
    import ctypes
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    if not all(mallopt(param, value) == 1 for param, _, value in SETTINGS):
        return False
    for _, name, value in SETTINGS:
        environ[name] = str(value)
    return True

