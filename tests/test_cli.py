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
