"""Tests of the commands' worker processes (``experiments._processes``) and of the figures drawn
in them (``experiments._plots.write_figures`` with ``processes`` > 1)."""
from __future__ import annotations

import errno
import os
import sys
import threading

import pytest

from experiments import _plots, _processes, four_variants
from experiments._atomic import AtomicGroup

linux_fork = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="forked workers are used on Linux only")
TINY = ["--steps", "3", "--seeds", "2", "--n-layers", "1", "--d-model", "16", "--n-heads", "2",
        "--block-size", "8", "--batch-size", "4", "--eval-every", "2"]


@linux_fork
def test_fork_only_while_this_process_runs_one_thread():
    assert _processes.start_method() == "fork"
    release = threading.Event()
    t = threading.Thread(target=release.wait)
    t.start()
    try:
        assert _processes.start_method(wait=0.05) == "spawn"
    finally:
        release.set()
        t.join()
    assert _processes.start_method() == "fork"  # the joined thread may linger: it is waited for


@linux_fork
def test_calls_run_in_processes_of_their_own_and_return_in_order():
    pids = _processes.run_in_processes([lambda: str(os.getpid()), lambda: "second"])
    assert pids[1] == "second" and pids[0] != str(os.getpid())


def test_one_call_runs_here():
    assert _processes.run_in_processes([lambda: str(os.getpid())]) == [str(os.getpid())]


def _disk_full():
    raise OSError(errno.ENOSPC, "No space left on device")


class _Unpicklable(Exception):
    def __reduce__(self):
        raise TypeError("not picklable")


def _raise_unpicklable():
    raise _Unpicklable("odd")


@linux_fork
def test_a_call_s_exception_is_raised_again_here_with_its_type():
    with pytest.raises(OSError) as e:
        _processes.run_in_processes([lambda: None, _disk_full])
    assert e.value.errno == errno.ENOSPC
    with pytest.raises(RuntimeError, match="_Unpicklable: odd"):
        _processes.run_in_processes([lambda: None, _raise_unpicklable])


@linux_fork
def test_a_process_that_dies_is_reported():
    with pytest.raises(RuntimeError, match=r"died \(exit status 3\)"):
        _processes.run_in_processes([lambda: None, lambda: os._exit(3)])


def test_unstage_removes_the_temporary_file_and_leaves_the_destination(tmp_path):
    dest = tmp_path / "a.png"
    dest.write_text("old")
    with AtomicGroup() as group:
        tmp = group.stage(dest)
        group.write_text(tmp_path / "b.txt", "b")
        group.unstage(dest)
        assert not tmp.exists()
    assert dest.read_text() == "old" and (tmp_path / "b.txt").read_text() == "b"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.png", "b.txt"]


@pytest.mark.slow
@linux_fork
def test_figures_drawn_in_processes_are_the_same_bytes(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    outs = {}
    for jobs in ("1", "2"):
        outs[jobs] = tmp_path / jobs
        assert four_variants.main(TINY + ["--jobs", jobs, "--output-dir", str(outs[jobs])]) == 0
    for name in ("loss_curves.png", "deltas.png", "grad_norms.png"):
        one, two = (outs["1"] / name).read_bytes(), (outs["2"] / name).read_bytes()
        assert one[:8] == b"\x89PNG\r\n\x1a\n" and one == two, name


@pytest.mark.slow
@linux_fork
def test_a_figure_that_cannot_be_written_in_its_process_writes_nothing(tmp_path, capsys,
                                                                          monkeypatch):
    pytest.importorskip("matplotlib")

    def full(fig, path, **kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(_plots, "_save", full)  # the forked processes inherit it
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as e:
        four_variants.main(TINY + ["--jobs", "2", "--output-dir", str(out)])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "No space left on device" in err[-1] and "nothing written" in err[-1]
    assert not out.exists() or list(out.iterdir()) == []
