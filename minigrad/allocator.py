"""glibc's allocator, tuned for a training loop of NumPy arrays (done once, on import).

A training step allocates and frees the same large temporaries every step (a GELU backward on
the MLP's (B, T, 4C) activations makes five of 1.5 MB each). By default glibc hands every
freed array above its mmap threshold back to the system and faults it in again page by page
on the next step. ``mallopt`` with a fixed mmap threshold of 32 MiB (glibc's largest) and a
trim threshold of 256 MiB keeps freed arrays in the heap for reuse: nanoGPT's CPU step went
from 114 to 107 ms with it, an isolated GELU backward from 5.5 to 0.9 ms (docs/performance.md,
"The allocator"). NumPy tunes the allocator of the process it is imported into in the same
way (hugepages through ``madvise``). Set ``MINIGRAD_MALLOPT=0`` before importing minigrad to
leave glibc as it is; elsewhere than glibc this does nothing.
"""
import ctypes
import os

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3   # glibc's malloc.h


def tune_malloc():
    """Call glibc's ``mallopt`` as the module docstring says; False where there is no glibc
    or ``MINIGRAD_MALLOPT=0``."""
    if os.environ.get("MINIGRAD_MALLOPT") == "0":
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, 32 << 20)
                    and libc.mallopt(M_TRIM_THRESHOLD, 256 << 20))
    except (OSError, AttributeError):   # not glibc (macOS, musl, Windows)
        return False


TUNED = tune_malloc()
