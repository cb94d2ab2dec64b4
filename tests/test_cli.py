"""Tests of experiments._cli's argument types and of how the commands depend on each other."""
import argparse
import ast
from pathlib import Path

import pytest

from experiments._cli import bounded_int
from experiments._runner import MAX_STEPS, steps_arg

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


@pytest.mark.parametrize("lo, text, value", [(0, "0", 0), (1, "1", 1), (1, " 7 ", 7),
                                             (3, "10", 10), (0, "+5", 5)])
def test_bounded_int_accepts_lo_to_hi(lo, text, value):
    assert bounded_int(lo, 10)(text) == value


@pytest.mark.parametrize("lo, text, message", [
    (0, "-1", "expected a non-negative integer, got '-1'"),
    (1, "0", "expected a positive integer, got '0'"),
    (3, "2", "expected an integer >= 3, got '2'"),
    (1, "1.5", "expected an integer, got '1.5'"),
    (1, "1e3", "expected an integer, got '1e3'"),
    (1, "1001", "1001 is more than the maximum of 1,000 things (a reason)"),
])
def test_bounded_int_names_the_problem(lo, text, message):
    with pytest.raises(argparse.ArgumentTypeError) as e:
        bounded_int(lo, 1000, "things", "a reason")(text)
    assert str(e.value) == message


def test_steps_arg_is_1_to_max_steps():
    assert steps_arg("1") == 1 and steps_arg(str(MAX_STEPS)) == MAX_STEPS
    with pytest.raises(argparse.ArgumentTypeError, match="positive"):
        steps_arg("0")
    with pytest.raises(argparse.ArgumentTypeError,
                       match=f"more than the maximum of {MAX_STEPS:,} steps per run"):
        steps_arg(str(MAX_STEPS + 1))


def _imported_modules(path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            if node.module == "experiments":
                yield from (f"experiments.{a.name}" for a in node.names)


def test_no_command_imports_another_command():
    """Commands share machinery through the private modules (experiments/_*.py) only."""
    commands = {f"experiments.{p.stem}" for p in EXPERIMENTS.glob("*.py")
                if not p.stem.startswith("_")}
    assert "experiments.four_variants" in commands and "experiments.norm_cost" in commands
    found = {(p.name, m) for p in EXPERIMENTS.glob("*.py") for m in _imported_modules(p)
             if m in commands}
    assert found == set()


# --------------------------------------------------------------------- Ctrl-C while starting
def _python(code: str, timeout: float = 60):
    import os
    import subprocess
    import sys
    import signal
    env = dict(os.environ, PYTHONPATH=str(EXPERIMENTS.parent))
    # SIGINT as a terminal gives it, even when pytest runs as a background job of a
    # non-interactive shell (which starts it with SIGINT ignored, and children inherit that)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=str(EXPERIMENTS.parent),
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def test_ctrl_c_while_a_command_starts_is_one_line_and_130():
    # What experiments/__init__.py installs when Python runs a command with -m; the signal is
    # sent by the process to itself, so the test does not depend on timing.
    r = _python("import os, signal, sys, time\n"
                "sys.orig_argv = ['python', '-m', 'experiments.four_variants', '--tiny']\n"
                "from experiments._startup import interrupt_quietly_while_starting\n"
                "interrupt_quietly_while_starting()\n"
                "os.kill(os.getpid(), signal.SIGINT)\n"
                "time.sleep(30)\n")
    assert r.returncode == 130
    assert r.stderr == "python -m experiments.four_variants: interrupted; nothing written\n"
    assert r.stdout == ""


def test_run_main_gives_ctrl_c_back_to_python_before_main():
    import signal
    from experiments import _cli, _startup
    seen = []
    previous = signal.getsignal(signal.SIGINT)
    try:
        signal.signal(signal.SIGINT, _startup._interrupted_while_starting)
        assert signal.getsignal(signal.SIGINT) is _startup._interrupted_while_starting
        assert _cli.run_main("prog", lambda argv: seen.append(signal.getsignal(signal.SIGINT))
                             or 0, []) == 0
    finally:
        signal.signal(signal.SIGINT, previous)
    assert seen == [signal.default_int_handler]  # Ctrl-C inside main is a KeyboardInterrupt


def test_a_command_ignores_ctrl_c_once_done_and_a_library_call_does_not():
    import signal
    from experiments import _cli, _startup
    previous = signal.getsignal(signal.SIGINT)
    try:
        signal.signal(signal.SIGINT, _startup._interrupted_while_starting)  # python -m's
        assert _cli.run_main("prog", lambda argv: 0, []) == 0
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # Python's shutdown is safe
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a test's, a notebook's
        assert _cli.run_main("prog", lambda argv: 0, []) == 0
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, previous)


def test_ctrl_c_while_files_were_moved_says_where_they_are(capsys):
    from experiments import _cli
    from experiments._atomic import InterruptedAfterCommit

    def main(argv):
        raise InterruptedAfterCommit("/some/dir")

    assert _cli.run_main("prog", main, []) == 130
    assert capsys.readouterr().err == "prog: interrupted; outputs already written to /some/dir\n"


def test_importing_experiments_as_a_library_leaves_ctrl_c_alone():
    r = _python("import signal, experiments.four_variants\n"
                "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True"


@pytest.mark.skipif(not hasattr(__import__("signal"), "pthread_sigmask"), reason="POSIX only")
def test_processes_started_while_workers_start_inherit_sigint_blocked():
    # run_jobs starts its worker processes inside sigint_blocked(): a Ctrl-C to the terminal's
    # process group cannot interrupt them half-way through Python's start-up.
    import signal
    import subprocess
    import sys
    from experiments._processes import sigint_blocked
    probe = ("import signal; print(signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, []))")
    with sigint_blocked():
        assert signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, [])
        inside = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    outside = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])
    assert (inside.stdout.strip(), outside.stdout.strip()) == ("True", "False")
