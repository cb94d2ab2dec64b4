"""Tests of ``python -m experiments.exercises.break_backward``: every right backward passes the gradient
check, every one built with a term left out or flipped is caught at the input whose gradient it
breaks, and the command says so."""
import json
import sys

import numpy as np
import pytest

from experiments import cli
from experiments.exercises import break_backward as bb
from experiments.exercises.catalogue import EXERCISES, make_cases


@pytest.fixture(scope="module")
def rows():
    return bb.rows(seed=0)


def test_the_rows_are_a_right_one_per_layer_and_each_break(rows):
    assert [r["layer"] for r in rows if not r["broken"]] == \
        [ex.title for n, ex in EXERCISES.items() if n in {b[0] for b in bb.BREAKS}]
    assert len([r for r in rows if r["broken"]]) == len(bb.BREAKS) == \
        sum(len(ex.breaks) for ex in EXERCISES.values())
    assert any("sign flipped: -rotate_half" in r["variant"] for r in rows)   # the wrong way round


def test_right_ones_pass_and_wrong_ones_are_caught_at_their_input(rows):
    for r in rows:
        assert r["verdict"] == ("CAUGHT" if r["broken"] else "PASS"), r
        if r["broken"]:
            assert r["where"].startswith(r["expected_input"] + "["), r


@pytest.mark.parametrize("name,grad,term,factor", bb.BREAKS[:3])
def test_a_break_changes_its_term_and_nothing_else(name, grad, term, factor):
    ex = EXERCISES[name]
    case = make_cases(ex, 0)[0]
    got = bb.broken(ex, grad, term, factor)(case.dout, case.cache)
    for g, a, r in zip(ex.grads, got if len(ex.grads) > 1 else (got,), case.right):
        assert (np.abs(a - r).max() > 1e-3) == (g == grad)


def main(argv):
    with pytest.raises(SystemExit) as ei, cli.errors(bb.PROG):
        sys.exit(bb.run(argv))
    return ei.value.code


def test_the_command_prints_the_table_and_writes_json(tmp_path, capsys):
    assert main(["--seed", "1", "--json", str(tmp_path / "out" / "break.json")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("seed 1") and out[2].split() == [
        "layer", "variant", "verdict", "max", "abs", "err", "max", "rel", "err", "where"]
    layers, breaks = len(EXERCISES), sum(len(ex.breaks) for ex in EXERCISES.values())
    assert out[-1] == (f"{layers} of {layers} right backward passes pass, {breaks} of {breaks} "
                       f"wrong ones caught; 0 missed, 0 wrongly failed")
    doc = json.loads((tmp_path / "out" / "break.json").read_text())
    assert doc["ok"] and doc["seed"] == 1 and len(doc["rows"]) == layers + breaks


def test_a_wrong_one_missed_is_exit_1(monkeypatch, capsys):
    monkeypatch.setattr(bb, "BREAKS", (("relu2", "dx", 1, 1),))   # a factor 1 breaks nothing
    assert main([]) == 1
    assert "MISSED" in capsys.readouterr().out


@pytest.mark.parametrize("args", [["--seed", "-1"], ["--seed"], ["--bogus"], ["--json", ""]])
def test_bad_options_are_one_line_and_status_2(args, capsys):
    assert main(args) == 2
    assert capsys.readouterr().err.count("\n") == 1
