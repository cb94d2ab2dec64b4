"""pytest configuration shared by every test file.

BLAS and OpenMP threads: one each, unless the environment already says otherwise; the
environment is restored after every test. NumPy's OpenBLAS and torch read these variables when
they are first imported, which is after this file is loaded. On a 2-core machine shared with other processes the thread-per-core default made the
suite several times slower (the idle BLAS threads spin while they wait; docs/performance.md,
"BLAS threads"), and the results do not depend on the thread count.

Shared references: test files import ``composite_core`` and ``composite_norms`` as top-level
modules. This folder has no ``__init__.py``, so pytest's default import mode (``prepend``) puts
it on ``sys.path`` before it imports this file or any test: the imports work the same with
``pip install -e .`` and with ``PYTHONPATH=$PWD``, from any working directory.
"""
import os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _restore_environ():
    """Undo what a test sets in ``os.environ`` (``--threads 1000`` in one test would give
    every later test's worker processes 1000 BLAS threads)."""
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)
