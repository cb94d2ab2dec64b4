"""Tests of the commands' allocator setting (``experiments._allocator``): applied on glibc for
the process and its children, a caller's own setting kept, and no page faults per step after."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments import _allocator

ROOT = Path(__file__).resolve().parents[1]
NAMES = [name for _, name, _ in _allocator.SETTINGS]


def _glibc() -> bool:
    try:
        return sys.platform.startswith("linux") and \
            os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc")
    except (ValueError, OSError, AttributeError):
        return False


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in NAMES and k != "GLIBC_TUNABLES"}
    env.update(extra)
    return env


@pytest.mark.parametrize("name", NAMES)
def test_a_variable_set_by_the_caller_wins(name):
    environ = {name: "12345"}
    assert _allocator.configure(environ) is False
    assert environ == {name: "12345"}


def test_a_glibc_malloc_tunable_set_by_the_caller_wins():
    environ = {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1000"}
    assert _allocator.configure(environ) is False
    assert environ == {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1000"}


_CHILD = r"""
import resource, sys
from experiments import _allocator
applied = _allocator.configure() if sys.argv[1] == "on" else False
import numpy as np
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
def step():  # what a training step does: a stack of activations kept, then all freed
    kept = [np.ones(1 << 17) for _ in range(20)]  # 20 arrays of 1 MiB
    del kept
for _ in range(5):  # warm up: the heap grows to the working set once
    step()
before = faults()
for _ in range(50):
    step()
print(applied, faults() - before)
"""


@pytest.mark.slow
@pytest.mark.skipif(not _glibc(), reason="the setting applies to glibc only")
def test_freed_arrays_are_reused_without_page_faults():
    def run(mode):
        r = subprocess.run([sys.executable, "-c", _CHILD, mode], cwd=ROOT, capture_output=True,
                           text=True, timeout=120, env=_clean_env())
        assert r.returncode == 0, r.stderr
        applied, faults = r.stdout.split()
        return applied, int(faults)

    applied, faults = run("on")
    assert applied == "True"
    # glibc's default gives the 20 MiB back at the end of each round and faults it in again
    # (about 5,120 pages a round); kept, the 50 rounds fault almost nothing.
    assert faults < 500, faults
    applied, faults = run("off")
    assert applied == "False" and faults > 50 * 4000, faults  # what the setting removes


@pytest.mark.slow
@pytest.mark.skipif(not _glibc(), reason="the setting applies to glibc only")
def test_started_as_python_m_the_package_sets_it_for_child_processes():
    code = ("import sys; sys.argv = ['-m']; import experiments, os; "
            "print(os.environ.get('MALLOC_MMAP_THRESHOLD_'), os.environ.get('MALLOC_TRIM_THRESHOLD_'))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=60, env=_clean_env())
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [str(32 << 20), str(256 << 20)]
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                       timeout=60, env=_clean_env(MALLOC_TRIM_THRESHOLD_="999"))
    assert r.stdout.split() == ["None", "999"]
