"""``--scheduler ADDRESS``: a study's runs on a Dask cluster (a ``LocalCluster`` of two worker
processes, one thread each) give the numbers of ``--jobs 1``, also when a worker dies
mid-sweep; Ctrl-C is status 130; without distributed, or with no scheduler at the address,
one line, status 2, nothing written. The cluster tests skip without distributed (the
``cluster`` extra).
"""
import concurrent.futures
import json
import os
import socket
import sys
import threading

import pytest

from experiments import cli, four_variants, runner
from test_four_variants import SMALL, load, main, numbers

pytestmark = pytest.mark.slow  # every test here trains or runs a command

ARGS = SMALL + ["--seeds", "2"]


@pytest.fixture(scope="module")
def cluster():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as c:
        yield c


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    out = tmp_path_factory.mktemp("serial")
    assert main(ARGS + ["--jobs", "1", "--output-dir", str(out)]) == 0
    return out


def _same_numbers(a, b):
    assert (a / "curves.csv").read_bytes() == (b / "curves.csv").read_bytes()
    assert numbers(load(a)[0])["runs"] == numbers(load(b)[0])["runs"]


@pytest.mark.slow
def test_a_cluster_gives_the_numbers_of_jobs_1(cluster, serial, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(ARGS + ["--scheduler", cluster.scheduler_address, "--output-dir", str(out)]) == 0
    assert f"on the Dask cluster at {cluster.scheduler_address}" in capsys.readouterr().err
    _same_numbers(out, serial)
    assert numbers(load(out)[0]) == numbers(load(serial)[0])  # results.json
    assert (out / "run_log.txt").read_text() == (serial / "run_log.txt").read_text()


class DieOnce:
    """A ``Variant.modify`` that ends its worker process the first time it is called (a
    machine lost mid-sweep) and changes nothing afterwards."""
    __name__ = "die_once"

    def __init__(self, marker):
        self.marker = marker

    def __call__(self, model):
        try:
            open(self.marker, "x").close()
        except FileExistsError:
            return
        os._exit(1)


@pytest.mark.slow
def test_a_worker_lost_mid_sweep_changes_no_number(cluster, serial, tmp_path):
    first, *others = four_variants.STUDY.variants
    lossy = runner.Study(**{**vars(four_variants.STUDY), "variants": (
        runner.Variant(**{**vars(first), "modify": DieOnce(tmp_path / "died")}), *others)})
    out = tmp_path / "out"
    assert main(ARGS + ["--scheduler", cluster.scheduler_address, "--output-dir", str(out)],
                lossy) == 0
    assert (tmp_path / "died").exists()  # a worker did die
    _same_numbers(out, serial)


@pytest.mark.slow
def test_ctrl_c_on_a_cluster_is_status_130_and_keeps_only_the_finished_runs(cluster, tmp_path,
                                                                           capsys, monkeypatch):
    calls, result = [], concurrent.futures.Future.result

    def interrupted(self, *a, **k):  # Ctrl-C while the second run is awaited
        if threading.current_thread() is threading.main_thread():  # not Dask's own threads
            calls.append(1)
            if len(calls) == 2:
                raise KeyboardInterrupt
        return result(self, *a, **k)

    monkeypatch.setattr(concurrent.futures.Future, "result", interrupted)
    out = tmp_path / "out"
    assert main(ARGS + ["--scheduler", cluster.scheduler_address, "--output-dir", str(out)]) == 130
    assert capsys.readouterr().err.splitlines()[-1] == f"{four_variants.STUDY.prog}: interrupted"
    kept = json.loads((out / "results.json").read_text())    # the run before the Ctrl-C
    assert [p.name for p in out.iterdir()] == ["results.json"] and kept["status"] == "incomplete"
    assert len(kept["runs"]) == 1


def refused(args, tmp_path, capsys):
    """Run with ``args``: (status, stdout, the lines of stderr, whether the output folder
    exists)."""
    code = main(ARGS + args + ["--output-dir", str(tmp_path / "out")])
    cap = capsys.readouterr()
    out = tmp_path / "out"
    return code, cap.out, cap.err.strip().splitlines(), out.exists() and any(out.iterdir())


def test_without_distributed_scheduler_names_the_extra(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed: ImportError
    code, out, err, written = refused(["--scheduler", "tcp://127.0.0.1:8786"], tmp_path, capsys)
    assert (code, out, len(err), written) == (2, "", 1, False), err
    assert 'pip install -e ".[cluster]"' in err[0]


def test_no_scheduler_at_the_address_is_one_line(tmp_path, capsys, monkeypatch):
    pytest.importorskip("distributed")
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(cli, "CONNECT_TIMEOUT", 0.5)
    code, out, err, written = refused(["--scheduler", f"tcp://127.0.0.1:{port}"], tmp_path, capsys)
    assert (code, out, len(err), written) == (2, "", 1, False), err
    assert f"no Dask scheduler at tcp://127.0.0.1:{port}: Timed out" in err[0]
    code, out, err, written = refused(["--scheduler", "127.0.0.1"], tmp_path, capsys)
    assert (code, out, len(err), written) == (2, "", 1, False), err
    assert "missing port" in err[0]


def test_jobs_and_scheduler_exclude_each_other(tmp_path, capsys):
    code, out, err, written = refused(["--jobs", "2", "--scheduler", "tcp://127.0.0.1:8786"],
                                      tmp_path, capsys)
    assert (code, out, len(err), written) == (2, "", 1, False), err
    assert "--scheduler: not allowed with argument --jobs" in err[0]


def test_backward_stays_on_this_machine(tmp_path, capsys):
    # a worker that installed a learner's backward would keep it for every later run
    code, out, err, written = refused(["--backward", str(tmp_path),
                                       "--scheduler", "tcp://127.0.0.1:8786"], tmp_path, capsys)
    assert (code, out, len(err), written) == (2, "", 1, False), err
    assert "--backward trains on this machine only" in err[0]


def test_an_empty_scheduler_address_is_refused(tmp_path, capsys):
    code, out, err, written = refused(["--scheduler", ""], tmp_path, capsys)
    assert (code, out, len(err), written) == (2, "", 1, False), err
    assert "--scheduler: empty value" in err[0]
