"""pytest configuration shared by every test file.

BLAS and OpenMP threads: one each, unless the environment already says otherwise. NumPy's
OpenBLAS and torch read these variables when they are first imported, which is after this file
is loaded. On a 2-core machine shared with other processes the thread-per-core default made the
suite several times slower (the idle BLAS threads spin while they wait; docs/performance.md,
"BLAS threads"), and the results do not depend on the thread count.
"""
import os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")
