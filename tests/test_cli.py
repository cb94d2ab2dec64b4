"""Tests of experiments.cli: argument types, one-line errors and statuses, files written whole,
the BLAS threads, and the worker processes (in order, Ctrl-C stops them)."""
import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from experiments import cli


@pytest.mark.parametrize("parse, text, value", [
    (cli.positive_int, "3", 3), (cli.nonnegative_int, "0", 0), (cli.positive_float, "1e-3", 1e-3),
    (cli.nonnegative_float, "0", 0.0), (cli.bounded_int(1, 10), "10", 10)])
def test_argument_types_accept(parse, text, value):
    assert parse(text) == value


@pytest.mark.parametrize("parse, text, words", [
    (cli.positive_int, "0", ">= 1"), (cli.positive_int, "2.5", "an integer"),
    (cli.bounded_int(1, 1000, "seeds"), "1001", "maximum of 1,000 seeds"),
    (cli.bounded_int(1, 12), "13", "^13 is more than the maximum of 12$"),   # no unit, no space
    (cli.positive_float, "0", "> 0"), (cli.positive_float, "nan", "finite"),
    (cli.nonnegative_float, "-1", ">= 0"), (cli.positive_float, "x", "finite"),
    (cli.path_arg, "", "empty"), (cli.nonempty, "", "empty")])
def test_argument_types_name_the_problem(parse, text, words):
    with pytest.raises(argparse.ArgumentTypeError, match=words):
        parse(text)


def status(run, argv=()):
    with pytest.raises(SystemExit) as e, cli.errors("prog"):
        sys.exit(run(list(argv)))
    return e.value.code


def raising(exc):
    def run(argv):
        raise exc
    return run


@pytest.mark.parametrize("exc, code, line", [
    (cli.UsageError("bad --x"), 2, "prog: error: bad --x"),
    (KeyboardInterrupt(), 130, "prog: interrupted"),
    (OSError(28, "No space left on device", "out/results.json"), 1,
     "prog: error: out/results.json: No space left on device")])
def test_errors_turns_an_exception_into_one_line_and_a_status(exc, code, line, capsys):
    assert status(raising(exc)) == code
    out, err = capsys.readouterr()
    assert out == "" and err == line + "\n"


def test_a_parser_error_is_one_line_and_the_status_of_run_is_kept(capsys):
    p = cli.ArgumentParser(prog="prog")
    p.add_argument("--n", type=cli.positive_int, default=1, help="n")
    assert status(lambda argv: p.parse_args(argv).n * 0) == 0
    assert status(lambda argv: p.parse_args(["--n", "0"]) and 0) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert "(default: 1)" in p.format_help()


def test_write_outputs_writes_in_order_removes_nothing_else_and_keeps_the_suffix(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    seen = []
    cli.write_outputs(tmp_path, {"a.txt": "é", "sub/b.bin": b"\x00",
                                 "c.npz": lambda path: (seen.append(str(path)),
                                                        np.savez(path, x=np.ones(2)))})
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "é"
    assert (tmp_path / "sub" / "b.bin").read_bytes() == b"\x00"
    assert seen[0].endswith("c.npz") and np.load(tmp_path / "c.npz")["x"].tolist() == [1, 1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "c.npz", "notes.txt", "sub"]


@pytest.mark.parametrize("exc", [KeyboardInterrupt, OSError])
def test_a_file_cut_short_is_absent_and_the_error_names_it(tmp_path, exc):
    def half(path):
        path.write_text("half")
        raise exc()
    with pytest.raises(exc) as e:
        cli.write_outputs(tmp_path, {"first.txt": "1", "second.txt": half, "third.txt": "3"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["first.txt"]
    if exc is OSError:
        assert e.value.filename == str(tmp_path / "second.txt")


def test_ctrl_c_while_the_outputs_are_written_is_heard_after_the_last_file(tmp_path, capsys):
    # before: a Ctrl-C between two files left the new run's first beside an earlier run's last
    for name in ("a.txt", "b.txt", "results.json"):
        (tmp_path / name).write_text("earlier run")

    def first(path):
        signal.raise_signal(signal.SIGINT)   # Ctrl-C while the first file is written
        path.write_text("this run")

    def run(argv):
        cli.write_outputs(tmp_path, {"a.txt": first, "b.txt": "this run",
                                     "results.json": "this run"})
        return 0
    assert status(run) == 130
    assert capsys.readouterr().err == "prog: interrupted\n"
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {
        "a.txt": "this run", "b.txt": "this run", "results.json": "this run"}
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    cli.write_outputs(tmp_path, {"c.txt": "x"})   # nothing held back: no Ctrl-C afterwards


def test_an_output_folder_that_cannot_be_made_is_bad_input(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(cli.UsageError, match="output folder"):
        cli.output_dir(tmp_path / "file" / "out")


WRITE_REFUSED = [Path("/proc"), Path("/sys/kernel")]   # sysfs refuses root too


@pytest.mark.parametrize("folder", WRITE_REFUSED + ["read-only"])
def test_an_output_folder_this_process_cannot_write_into_is_bad_input_before_any_work(
        folder, tmp_path, capsys):
    # before: four_variants --output-dir /sys/kernel trained every run, then could not write
    if folder == "read-only":
        if os.geteuid() == 0:
            pytest.skip("root writes into a folder of mode 0o555")
        folder = tmp_path / "ro"
        folder.mkdir(mode=0o555)
    if not folder.is_dir():
        pytest.skip(f"no {folder} here")
    with pytest.raises(cli.UsageError, match=f"^output folder {folder}: cannot write into it: "):
        cli.output_dir(folder)
    with pytest.raises(cli.UsageError, match=f"^output folder {folder}: cannot write into it: "):
        cli.output_file(folder / "out.json")
    from experiments import four_variants, runner
    argv = ["--steps", "2", "--output-dir", str(folder)]
    assert status(lambda argv: runner.run(four_variants.STUDY, argv), argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "cannot write into it" in err


def square(x):
    return x * x, os.getpid()


@pytest.mark.slow
def test_in_workers_runs_in_worker_processes_and_yields_in_order():
    there = list(cli.in_workers(square, range(7), jobs=2))
    assert [r for r, _ in there] == [0, 1, 4, 9, 16, 25, 36]
    assert os.getpid() not in {p for _, p in there}


def test_the_blas_threads_change_at_run_time():
    code = ("import numpy, ctypes, re; from experiments import cli; cli.blas_threads(3); "
            "lib = [p for p in re.findall(r'\\S*openblas\\S*\\.so\\S*', open('/proc/self/maps')"
            ".read())][0]; l = ctypes.CDLL(lib); f = [getattr(l, n) for n in "
            "('scipy_openblas_get_num_threads64_', 'openblas_get_num_threads64_', "
            "'openblas_get_num_threads') if hasattr(l, n)][0]; print(f())")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if r.returncode:
        pytest.skip(f"no OpenBLAS to ask: {r.stderr.strip().splitlines()[-1]}")
    assert r.stdout.strip() == "3"


@pytest.mark.slow
def test_ctrl_c_stops_a_large_sweep_at_once_and_leaves_no_worker(tmp_path):
    script = ("import signal, time\nfrom experiments import cli\n"
              "signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a terminal\n"
              "def nap(i):\n    time.sleep(0.2)\n    return i\n"
              "if __name__ == '__main__':\n"
              "    with cli.errors('prog'):\n"
              "        sum(cli.in_workers(nap, range(100000), jobs=2))\n")
    (tmp_path / "sweep.py").write_text(script)
    env = {**os.environ, "PYTHONPATH": str(Path(cli.__file__).parents[1])}
    p = subprocess.Popen([sys.executable, "sweep.py"], cwd=tmp_path, env=env, text=True,
                         stderr=subprocess.PIPE, start_new_session=True)

    def group():
        return subprocess.run(["ps", "-o", "stat=", "-g", str(p.pid)], capture_output=True,
                              text=True).stdout.split()
    try:
        for _ in range(120):   # until the two workers run (a slow machine takes its time)
            if len([s for s in group() if not s.startswith("Z")]) >= 4:
                break
            time.sleep(0.25)
        time.sleep(1)
        t0 = time.monotonic()
        os.killpg(p.pid, 2)   # a Ctrl-C reaches the whole process group, as in a terminal
        _, err = p.communicate(timeout=30)
        assert time.monotonic() - t0 < 5
        assert p.returncode == 130 and err.strip().splitlines() == ["prog: interrupted"]
        for _ in range(20):   # the workers and the resource tracker are gone (zombies aside)
            left = group()
            if all(s.startswith("Z") for s in left):
                break
            time.sleep(0.25)
        assert all(s.startswith("Z") for s in left), left
    finally:   # never leave the sweep behind, whatever happened
        subprocess.run(["pkill", "-9", "-g", str(p.pid)])


@pytest.mark.parametrize("module", ["experiments.exercises.break_backward",
                                    "experiments.gradcheck_report", "experiments.bench"])
def test_json_naming_a_folder_or_under_a_file_is_bad_input_before_any_work(module, tmp_path,
                                                                        capsys):
    run = __import__(module, fromlist=["run"]).run
    (tmp_path / "file").write_text("x")
    for path, words in ((tmp_path, "is a folder: give a file name"),
                        (tmp_path / "file" / "x.json", "output folder .*file: is a file")):
        with pytest.raises(cli.UsageError, match=words):
            run(["--json", str(path)])
        assert capsys.readouterr().out == ""   # refused before the run printed anything
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_the_folders_a_run_made_and_left_empty_are_removed_and_no_other(tmp_path):
    (tmp_path / "mine").mkdir()   # existed before: stays, empty as it is

    def run(argv):
        cli.output_dir(tmp_path / "mine")
        cli.output_dir(tmp_path / "a" / "b" / "c")      # made, left empty: all three go
        cli.output_dir(tmp_path / "d" / "e")            # made, a file written: both stay
        (tmp_path / "d" / "e" / "run_log.txt").write_text("x")
        raise KeyboardInterrupt
    assert status(run) == 130
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d", "mine"]
    assert not any((tmp_path / "mine").iterdir())


COMMANDS = ["four_variants", "break_it", "activations", "positions", "hidden_stats", "train_gpt",
            "bench", "gradcheck_report", "exercises.break_backward", "norm_cost", "generate",
            "explain", "jacobians", "exercises"]


@pytest.mark.parametrize("command", COMMANDS)
def test_ctrl_c_while_numpy_loads_is_the_same_one_line_and_130(command, tmp_path):
    (tmp_path / "numpy").mkdir()   # found before the real one: a Ctrl-C inside NumPy's import
    (tmp_path / "numpy" / "__init__.py").write_text("raise KeyboardInterrupt\n")
    repo = Path(cli.__file__).parents[1]
    r = subprocess.run([sys.executable, "-m", f"experiments.{command}"], cwd=repo,
                       env={**os.environ, "PYTHONPATH": str(tmp_path)}, capture_output=True,
                       text=True)
    assert (r.returncode, r.stdout, r.stderr) == (
        130, "", f"python -m experiments.{command}: interrupted\n")


def test_q_at_a_breakpoint_prompt_ends_the_command_as_ctrl_c():
    code = "from experiments import cli\nwith cli.errors('prog'):\n    breakpoint()\n    x = 1\n"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONBREAKPOINT"}
    r = subprocess.run([sys.executable, "-c", code], cwd=Path(cli.__file__).parents[1], env=env,
                       input="q\n", capture_output=True, text=True)
    assert (r.returncode, r.stderr) == (130, "prog: interrupted\n")
