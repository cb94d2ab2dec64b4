"""Tests of the commands' BLAS-thread rule (``experiments._threads``): ``--threads N`` wins, a
thread count set by the caller is kept, else one thread; applied only before numpy loads."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments import _threads

ROOT = Path(__file__).resolve().parents[1]


def _effective(*args, **env):
    e = {k: v for k, v in os.environ.items() if k not in _threads.THREAD_VARIABLES}
    e.update(env)
    r = subprocess.run([sys.executable, "-m", "experiments._threads", *args], cwd=ROOT,
                       capture_output=True, text=True, timeout=60, env=e)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.mark.parametrize("args, env, expected", [
    ((), {}, "OPENBLAS_NUM_THREADS=1"),                                  # the default
    ((), {"OPENBLAS_NUM_THREADS": "2"}, "OPENBLAS_NUM_THREADS=2"),       # the caller's choice
    ((), {"OMP_NUM_THREADS": "2"}, "OPENBLAS_NUM_THREADS=None"),         # left to OpenBLAS
    (("--threads", "3"), {"OPENBLAS_NUM_THREADS": "2"}, "OPENBLAS_NUM_THREADS=3"),
    (("--threads=2",), {}, "OPENBLAS_NUM_THREADS=2"),
    (("--threads", "0"), {}, "OPENBLAS_NUM_THREADS=1"),                  # invalid: parser says so
])
def test_rule_when_started_with_python_m(args, env, expected):
    assert _effective(*args, **env) == expected


def test_threads_from_argv():
    assert _threads.threads_from_argv(["--steps", "3", "--threads", "4"]) == 4
    assert _threads.threads_from_argv(["--threads=2", "--threads", "5"]) == 5
    assert _threads.threads_from_argv(["--threads", "x"]) is None
    assert _threads.threads_from_argv(["--threads"]) is None
    assert _threads.threads_from_argv([]) is None


def test_no_effect_once_numpy_is_loaded(monkeypatch):
    import numpy  # noqa: F401
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    assert _threads.configure(["-m", "--threads", "2"]) is None
    assert "OPENBLAS_NUM_THREADS" not in os.environ


def test_commands_accept_and_check_the_option():
    r = subprocess.run([sys.executable, "-m", "experiments.four_variants", "--threads", "0"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--threads" in r.stderr and len(r.stderr.splitlines()) == 1
