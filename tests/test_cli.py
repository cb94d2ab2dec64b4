"""experiments.cli: argument types, one-line errors and exit statuses, complete-or-absent files."""
import argparse
import contextlib
import errno
import io
import json
import os
import sys

import pytest

from experiments import cli


@pytest.mark.parametrize("parse, text, value", [
    (cli.positive_int, "3", 3), (cli.nonnegative_int, "0", 0), (cli.bounded_int(1, 5), "5", 5),
    (cli.positive_float, "0.5", 0.5), (cli.nonnegative_float, "0", 0.0)])
def test_argument_types_accept(parse, text, value):
    assert parse(text) == value


@pytest.mark.parametrize("parse, text, words", [
    (cli.positive_int, "0", ">= 1"), (cli.positive_int, "1.5", "integer"),
    (cli.positive_int, "1e3", "integer"), (cli.nonnegative_int, "-1", ">= 0"),
    (cli.bounded_int(1, 5, "steps"), "6", "maximum of 5 steps"),
    (cli.positive_float, "0", "> 0"), (cli.positive_float, "nan", "finite"),
    (cli.nonnegative_float, "x", "number"), (cli.path_arg, "", "empty path")])
def test_argument_types_name_the_problem(parse, text, words):
    with pytest.raises(argparse.ArgumentTypeError, match=words):
        parse(text)


def _run_main(run, argv=()):
    with pytest.raises(SystemExit) as e:
        cli.main("prog", run, list(argv))
    return e.value.code


def test_a_bad_argument_is_one_line_and_status_2(capsys):
    def run(argv):
        p = cli.ArgumentParser(prog="prog")
        p.add_argument("--steps", type=cli.positive_int, default=3)
        p.parse_args(argv)
        return cli.EXIT_OK
    assert _run_main(run, ["--steps", "0"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("prog: error: argument --steps")


@pytest.mark.parametrize("exc, status, line", [
    (cli.UsageError("no such corpus"), 2, "prog: error: no such corpus\n"),
    (PermissionError(13, "Permission denied", "/out/x"), 2, "prog: error: /out/x: Permission denied\n"),
    (KeyboardInterrupt(), 130, "prog: interrupted\n")])
def test_main_turns_an_exception_into_one_line_and_a_status(capsys, exc, status, line):
    def run(argv):
        raise exc
    assert _run_main(run) == status
    assert capsys.readouterr().err == line


def test_main_returns_the_status_of_run(capsys):
    assert _run_main(lambda argv: cli.EXIT_DIVERGED) == cli.EXIT_DIVERGED


def test_main_sets_the_blas_threads_from_the_option(monkeypatch):
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    _run_main(lambda argv: 0)
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"
    _run_main(lambda argv: 0, ["--threads", "2"])
    assert os.environ["OPENBLAS_NUM_THREADS"] == "2"


def test_more_threads_than_cpus_are_refused_in_one_line(monkeypatch, capsys):
    monkeypatch.setattr(cli, "available_cpus", lambda: 2)

    def run(argv):
        p = cli.ArgumentParser(prog="prog")
        cli.add_threads_option(p)
        return p.parse_args(argv).threads
    assert _run_main(run, ["--threads", "2"]) == 2   # the value, returned as the status
    assert _run_main(run, ["--threads", "1000"]) == cli.EXIT_USAGE
    assert capsys.readouterr().err == ("prog: error: argument --threads: 1000 is more than the "
                                       "maximum of 2 threads, the CPUs this process may use\n")


def test_available_cpus_are_those_of_the_affinity_mask():
    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert cli.available_cpus() == expected


def _progress(argv):
    cli.progress("step 1")
    return cli.EXIT_OK


def _bad_input(argv):
    raise cli.UsageError("--steps 0")


def _interrupted(argv):
    raise KeyboardInterrupt


@pytest.mark.parametrize("run, status", [(_progress, cli.EXIT_USAGE), (_bad_input, cli.EXIT_USAGE),
                                         (_interrupted, cli.EXIT_INTERRUPTED)])
def test_stderr_that_cannot_be_written_keeps_the_status_of_what_happened(run, status,
                                                                         monkeypatch):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    full = open("/dev/full", "w", buffering=1)   # line-buffered, as sys.stderr
    monkeypatch.setattr(sys, "stderr", full)
    assert _run_main(run) == status   # not 1 (a run diverged), and no exception
    monkeypatch.undo()
    with contextlib.suppress(OSError):   # the line that could not be written is still buffered
        full.close()


class _ReaderGoesAway(io.StringIO):
    """stdout whose reader leaves after ``n`` characters (``| head -c n``)."""

    def __init__(self, n):
        super().__init__()
        self.n = n

    def write(self, text):
        if len(self.getvalue()) >= self.n:
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")
        return super().write(text)


def test_a_closed_pipe_stops_the_command_at_its_next_write_with_cats_status(monkeypatch):
    written = []

    def run(argv):
        for i in range(1000):
            print(i)
            written.append(i)
        return cli.EXIT_DIVERGED
    monkeypatch.setattr(sys, "stdout", _ReaderGoesAway(10))
    assert _run_main(run) == cli.EXIT_BROKEN_PIPE == 128 + 13   # 128 + SIGPIPE, as cat's
    assert written == [0, 1, 2, 3, 4]   # "0\n".."4\n" are 10 characters; the 6th print raised


def test_a_character_stdout_cannot_encode_is_escaped_not_raised(monkeypatch):
    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="ascii"))
    assert _run_main(lambda argv: print("Café ± ReLU²") or cli.EXIT_OK) == 0
    assert raw.getvalue() == b"Caf\\xe9 \\xb1 ReLU\\xb2\n"


def test_write_outputs_writes_in_order_and_removes_nothing_else(tmp_path):
    (tmp_path / "ln_gelu.npz").write_text("the user's")
    (tmp_path / "deltas.png").write_text("the user's too")
    cli.write_outputs(tmp_path / "out", {"a.txt": "text", "b.bin": b"\x00\x01",
                                         "sub/c.txt": lambda p: open(p, "w").write("c")})
    cli.write_outputs(tmp_path, {"results.json": "{}"})
    assert (tmp_path / "out" / "a.txt").read_text() == "text"
    assert (tmp_path / "out" / "b.bin").read_bytes() == b"\x00\x01"
    assert (tmp_path / "out" / "sub" / "c.txt").read_text() == "c"
    assert sorted(os.listdir(tmp_path)) == ["deltas.png", "ln_gelu.npz", "out", "results.json"]
    assert (tmp_path / "ln_gelu.npz").read_text() == "the user's"


def test_a_callable_writes_a_path_that_ends_like_the_name(tmp_path):
    seen = []
    cli.write_outputs(tmp_path, {"ln_gelu.npz": lambda p: (seen.append(p), open(p, "w").close())})
    assert seen[0].endswith("ln_gelu.npz") and not os.path.exists(seen[0])


@pytest.mark.parametrize("exc", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_a_file_cut_short_is_absent_and_leaves_no_temporary(tmp_path, exc):
    (tmp_path / "b.txt").write_text("old")

    def half(path):
        open(path, "w").write("half")
        raise exc
    with pytest.raises(type(exc)):
        cli.write_outputs(tmp_path, {"a.txt": "a", "b.txt": half, "c.txt": "c"})
    assert sorted(os.listdir(tmp_path)) == ["a.txt", "b.txt"]
    assert (tmp_path / "b.txt").read_text() == "old"


def test_a_folder_that_takes_no_file_is_named_not_our_temporary_name(tmp_path, monkeypatch):
    def refuse(dir, prefix, suffix):
        raise OSError(errno.ENOENT, "No such file or directory", f"{dir}/{prefix}x1{suffix}")
    monkeypatch.setattr(cli.tempfile, "mkstemp", refuse)
    with pytest.raises(cli.UsageError) as ei:
        cli.write_outputs(tmp_path, {"a.txt": "a"})
    assert str(ei.value) == f"cannot write in {tmp_path}: No such file or directory"


def test_help_shows_a_default_once():
    p = cli.ArgumentParser(prog="p")
    p.add_argument("--corpus", help="a file (default: the built-in corpus)")
    p.add_argument("--seed", type=int, default=3, help="a seed")
    text = " ".join(p.format_help().split())
    assert "a file (default: the built-in corpus) --seed" in text
    assert "a seed (default: 3)" in text


def test_write_json_is_strict_json(tmp_path):
    cli.write_json(tmp_path / "r.json", {"loss": 1.5})
    assert json.loads((tmp_path / "r.json").read_text()) == {"loss": 1.5}
    with pytest.raises(ValueError):
        cli.write_json(tmp_path / "bad.json", {"loss": float("nan")})
    assert sorted(os.listdir(tmp_path)) == ["r.json"]


def test_check_output_dir_rejects_a_file_and_creates_nothing(tmp_path):
    (tmp_path / "f").write_text("")
    for path in (tmp_path / "f", tmp_path / "f" / "out"):
        with pytest.raises(cli.UsageError, match="not a directory"):
            cli.check_output_dir(path)
    assert cli.check_output_dir(tmp_path / "new" / "out") == tmp_path / "new" / "out"
    assert os.listdir(tmp_path) == ["f"]


def test_a_destination_that_is_not_a_regular_file_is_refused_before_any_write(tmp_path):
    (tmp_path / "results.json").mkdir()
    os.mkfifo(tmp_path / "run_log.txt")
    for name in ("results.json", "run_log.txt"):
        with pytest.raises(cli.UsageError, match="not a regular file"):
            cli.write_outputs(tmp_path, {"a.txt": "a", name: "{}"})
    assert sorted(os.listdir(tmp_path)) == ["results.json", "run_log.txt"]


def test_importing_the_commands_changes_nothing():
    import subprocess
    import sys
    code = ("import os, signal, experiments.cli, experiments.four_variants;"
            "assert signal.getsignal(signal.SIGINT) is signal.default_int_handler;"
            "assert 'OPENBLAS_NUM_THREADS' not in os.environ; print('ok')")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout == "ok\n", out.stderr
