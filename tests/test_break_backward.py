"""Tests of ``experiments.break_backward`` and the wrong backward passes of ``experiments._broken``:
testing the tester (HIPS/autograd ``tests/test_tests.py``): every planted mistake must be caught
by the gradient check and located in the input it corrupts, and every right backward must pass.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from minigrad import Tensor, gradcheck_report
from layers.relu2 import ReLU2Function

from experiments import _broken as B
from experiments import break_backward as bb

ROOT = Path(__file__).resolve().parents[1]
PROG = [sys.executable, "-m", "experiments.break_backward"]

# The wrong backward passes the issue asks for, and the input each one corrupts (independent of
# the CASES table: written from the formulas).
REQUIRED = {
    ("LayerNorm", "no mean term"): {"x"},
    ("LayerNorm", "no xhat (variance) term"): {"x"},
    ("RMSNorm", "no projection term"): {"x"},
    ("GELU", "drops the tanh' term"): {"x"},
    ("SwiGLU", "drops silu'"): {"x", "w_gate"},
    ("RoPE", "rotates the wrong way"): {"x"},
    ("softmax", "no subtracted sum"): {"x"},
}


def _cmd(*args, timeout=60):
    return subprocess.run(PROG + list(args), cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def rows():
    return bb.run_cases(seed=0)


# ----------------------------------------------------------------------------- the cases

def test_cases_cover_the_issue_list():
    have = {(bb.SETUPS[c.setup].layer, c.variant): set(c.wrong_inputs) for c in bb.CASES}
    for key, inputs in REQUIRED.items():
        assert key in have, key
        assert have[key] == inputs, key
    # every layer with a wrong backward also has its right one beside it
    for c in bb.CASES:
        if c.broken:
            assert any(not d.broken and d.setup == c.setup for d in bb.CASES), c


@pytest.mark.parametrize("case", [c for c in bb.CASES if c.broken], ids=lambda c: c.fn_cls.__name__)
def test_wrong_backward_is_caught_at_the_right_input(rows, case):
    row = next(r for r in rows if r.case is case)
    rep = row.report
    assert rep.passed is False
    assert row.verdict == "CAUGHT"
    # caught by an entrywise comparison, not by a crash or a shape error
    assert rep.check in ("jacobian", "vjp"), rep.message
    assert row.where_input in case.wrong_inputs, rep.message
    names = bb.SETUPS[case.setup].names
    assert names[rep.worst[0]] == row.where_input
    # the worst entry is a real violation: far outside the tolerance
    assert rep.max_tol_ratio > 10
    assert rep.n_violations >= 1


@pytest.mark.parametrize("case", [c for c in bb.CASES if not c.broken],
                         ids=lambda c: f"{c.setup}-{c.fn_cls.__name__}")
def test_right_backward_passes(rows, case):
    row = next(r for r in rows if r.case is case)
    assert row.report.passed, row.report.message
    assert row.verdict == "PASS"
    assert row.report.max_abs_err < 1e-6


@pytest.mark.parametrize("seed", [1, 7])
def test_other_seeds_same_verdicts(seed):
    for r in bb.run_cases(seed=seed):
        assert r.ok, (r.layer, r.variant, r.report.message)
        if r.case.broken:
            assert r.where_input in r.case.wrong_inputs, (r.layer, r.variant, r.report.message)


@pytest.mark.parametrize("case", [c for c in bb.CASES if c.broken], ids=lambda c: c.fn_cls.__name__)
def test_wrong_function_keeps_the_real_forward(case):
    """Only backward differs: the subclass's forward output is bit-identical to the real one."""
    real = next(c.fn_cls for c in bb.CASES if c.setup == case.setup and not c.broken)
    assert issubclass(case.fn_cls, real)
    assert case.fn_cls.forward is real.forward
    setup = bb.SETUPS[case.setup]
    inputs = setup.build(np.random.default_rng(3))
    a = setup.call(real, *inputs).data
    b = setup.call(case.fn_cls, *inputs).data
    assert a.tobytes() == b.tobytes()


def test_scale_and_transpose_hints(rows):
    """The report explains the simple mistakes: factors from the maths, not from the code."""
    by = {r.case.fn_cls: r.report.message for r in rows}
    assert "constant factor 0.5" in by[B.ReLU2NoTwo]                   # d(r^2)/dr = 2r, not r
    assert "constant factor 2 " in by[B.AttentionDqUnscaled]          # sqrt(hs), hs = 4
    n_rows = 4                                                        # logits (4, 5)
    assert f"constant factor {n_rows} " in by[B.CrossEntropyNoMean]   # the missing 1/N
    assert "transpose" in by[B.LinearDWeightTransposed]


def test_embedding_overwrite_differs_only_on_repeated_rows():
    idx = np.array([[1, 3, 1], [0, 3, 3]])
    rng = np.random.default_rng(0)
    dout = rng.standard_normal((2, 3, 4))
    cache = (idx.reshape(-1).astype(np.intp), (5, 4), np.dtype(np.float64))
    wrong = B.embedding_backward_overwrite(dout, cache)
    right = np.zeros((5, 4))
    np.add.at(right, idx.reshape(-1), dout.reshape(-1, 4))
    np.testing.assert_array_equal(wrong[0], right[0])          # looked up once: same
    assert np.all(wrong[[2, 4]] == 0)                          # unused rows: 0 in both
    assert not np.allclose(wrong[1], right[1])                 # repeated: the sum is lost
    assert not np.allclose(wrong[3], right[3])


def test_layernorm_forgetting_eps_hides_on_ordinary_rows():
    """Why the near-constant rows are in the table: with var ~ 1 the missing eps changes the
    gradient by ~eps/2 = 5e-6 relative, far below rtol = 1e-3, so the check cannot see it."""
    rng = np.random.default_rng(0)
    x = Tensor(rng.standard_normal((3, 6)), requires_grad=True)
    w = Tensor(rng.normal(1.0, 0.5, 6), requires_grad=True)
    b = Tensor(rng.normal(0.0, 0.5, 6), requires_grad=True)
    rep = gradcheck_report(lambda x, w, b: B.LayerNormNoEps.apply(x, w, b, eps=1e-5), [x, w, b])
    assert rep.passed
    # and with a 1e-3 spread (var ~ 1e-6 << eps) it is caught
    xf = Tensor(0.5 + 1e-3 * rng.standard_normal((3, 6)), requires_grad=True)
    rep = gradcheck_report(lambda x, w, b: B.LayerNormNoEps.apply(x, w, b, eps=1e-5), [xf, w, b])
    assert not rep.passed and rep.worst[0] == 0


# ----------------------------------------------------------------------------- exit status

def test_main_exit_1_when_a_wrong_one_is_missed(monkeypatch, capsys):
    # a "wrong" case that is in fact the real backward: the check passes, so MISSED
    fake = bb.Case("relu2", "pretends to be broken", ReLU2Function, ("x",))
    monkeypatch.setattr(bb, "CASES", (fake,))
    assert bb.run([]) == 1
    assert "MISSED" in capsys.readouterr().out


def test_main_exit_1_when_a_right_one_fails(monkeypatch, capsys):
    fake = bb.Case("ln", "correct", B.LayerNormNoMean)
    monkeypatch.setattr(bb, "CASES", (fake,))
    assert bb.run([]) == 1
    assert "WRONGLY FAILED" in capsys.readouterr().out


def test_verdict_names():
    assert bb.verdict(broken=False, passed=True) == "PASS"
    assert bb.verdict(broken=False, passed=False) == "WRONGLY FAILED"
    assert bb.verdict(broken=True, passed=False) == "CAUGHT"
    assert bb.verdict(broken=True, passed=True) == "MISSED"


# ----------------------------------------------------------------------------- the command

@pytest.fixture(scope="module")
def cli_run():
    return _cmd()


def test_command_exit_0_and_table(cli_run):
    r = cli_run
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    header = next(i for i, l in enumerate(lines) if l.startswith("layer"))
    for col in ("layer", "variant", "verdict", "max abs err", "max rel err", "where"):
        assert col in lines[header]
    assert set(lines[header + 1].replace(" ", "")) == {"-"}
    body = lines[header + 2:header + 2 + len(bb.CASES)]
    # every row: layer, variant, verdict, two errors and a where cell, columns aligned
    verdict_col = lines[header].index("verdict")
    for case, line in zip(bb.CASES, body):
        layer = bb.SETUPS[case.setup].layer
        assert line.startswith(layer + " "), line
        assert case.variant in line
        want = "CAUGHT" if case.broken else "PASS"
        assert line[verdict_col:].startswith(want), line
        assert "MISSED" not in line and "WRONGLY" not in line
    for (layer, variant), names in REQUIRED.items():
        line = next(l for l in body if l.startswith(layer + " ") and variant in l)
        where = line.rsplit("  ", 1)[-1]          # last column, e.g. "x[1, 2, 4]"
        assert where.split("[")[0] in names, line
    n_right = sum(not c.broken for c in bb.CASES)
    n_wrong = len(bb.CASES) - n_right
    assert lines[-1] == (f"{n_right} of {n_right} right backward passes pass, {n_wrong} of "
                         f"{n_wrong} wrong ones caught; 0 missed, 0 wrongly failed")
    assert r.stderr == ""


def test_command_is_deterministic(cli_run):
    again = _cmd()
    assert again.returncode == 0
    assert again.stdout == cli_run.stdout


def test_command_json(tmp_path):
    out = tmp_path / "rows.json"
    r = _cmd("--seed", "3", "--json", str(out))
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    assert data["seed"] == 3 and data["ok"] is True
    assert len(data["rows"]) == len(bb.CASES)
    for row, case in zip(data["rows"], bb.CASES):
        assert row["variant"] == case.variant
        assert row["verdict"] == ("CAUGHT" if case.broken else "PASS")
        assert isinstance(row["max_abs_err"], float)
        if case.broken:
            assert row["where"]["input"] in case.wrong_inputs
        assert isinstance(row["where"]["index"], list)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rows.json"]   # no temporary left


@pytest.mark.parametrize("args", [["--seed", "-1"], ["--seed"], ["--bogus"], ["--json", ""]])
def test_bad_options_exit_2_one_line(args):
    r = _cmd(*args)
    assert r.returncode == 2
    assert r.stdout == ""
    err = r.stderr.strip("\n")
    assert len(err.splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert err.startswith("python -m experiments.break_backward: error:")
