"""Tests of ``python -m experiments.gradcheck_report``: every primitive and layer listed and
passing, exit status 1 on a failing op, JSON output, one-line errors on bad options."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from minigrad import Tensor

from experiments import _broken as B
from experiments import gradcheck_report as gr

ROOT = Path(__file__).resolve().parents[1]
PROG = [sys.executable, "-m", "experiments.gradcheck_report"]

# The list, written out independently of the module's tables.
OPS = ["add", "sub", "mul", "div", "neg", "pow", "exp", "log", "sqrt", "tanh", "sigmoid", "relu",
       "matmul", "sum", "mean", "max", "reshape", "transpose", "getitem", "concatenate", "stack",
       "split", "where", "masked_fill", "broadcast_to"]
LAYERS = ["layer_norm", "rms_norm", "gelu", "relu2", "silu", "swiglu", "apply_rope", "softmax",
          "cross_entropy", "scaled_dot_product_attention", "linear", "embedding"]


def _cmd(*args):
    return subprocess.run(PROG + list(args), cwd=ROOT, capture_output=True, text=True, timeout=120)


def _table(stdout):
    lines = stdout.splitlines()
    h = next(i for i, l in enumerate(lines) if l.startswith("op "))
    body = []
    for l in lines[h + 2:]:
        if not l.strip():
            break
        body.append(l)
    return lines[h], body, lines


@pytest.fixture(scope="module")
def slow_run():
    return _cmd()


def test_exit_0_lists_every_op_and_layer(slow_run):
    r = slow_run
    assert r.returncode == 0, r.stdout + r.stderr
    header, body, lines = _table(r.stdout)
    for col in ("op", "kind", "inputs", "mode", "max abs err", "max rel err", "result", "seconds"):
        assert col in header
    names = [l.split("  ")[0].strip() for l in body]
    for op in OPS:
        assert any(n == op or n.startswith(op + " (") for n in names), op
    for layer in LAYERS:
        assert any(n == layer or n.startswith(layer + " (") for n in names), layer
    assert "getitem (repeated index)" in names
    assert "scaled_dot_product_attention (causal)" in names
    assert "scaled_dot_product_attention" in names            # and the non-causal one
    result_col = header.index("result")
    mode_col = header.index("mode")
    for l in body:
        assert l[result_col:].startswith("PASS"), l
        assert l[mode_col:].startswith("slow"), l
    assert len(body) == len(gr.ALL_CASES)
    assert lines[-1].startswith(f"{len(body)} of {len(body)} passed (")
    assert " 0 failed" in lines[-1]
    assert r.stderr == ""


def test_every_row_within_tolerance():
    for row in gr.run_cases(seed=0):
        assert row["passed"], row["report"].message
        assert row["max_abs_err"] < 1e-6, row["name"]
        assert row["report"].mode == "slow"


def test_fast_mode_and_seed():
    r = _cmd("--fast", "--seed", "5")
    assert r.returncode == 0, r.stdout + r.stderr
    header, body, lines = _table(r.stdout)
    mode_col = header.index("mode")
    assert all(l[mode_col:].startswith("fast") for l in body)
    assert "seed 5" in lines[0]


def test_exit_1_when_an_op_fails(monkeypatch, capsys):
    def wrong_softmax(r):
        return [Tensor(r.standard_normal((3, 4)), requires_grad=True)], \
            lambda x: B.SoftmaxNoSum.apply(x, axis=-1)

    cases = gr.ALL_CASES[:2] + (gr.OpCase("softmax (wrong)", "layer", wrong_softmax),)
    monkeypatch.setattr(gr, "ALL_CASES", cases)
    assert gr.run([]) == 1
    out = capsys.readouterr().out
    header, body, lines = _table(out)
    result_col = header.index("result")
    assert body[-1].startswith("softmax (wrong)") and body[-1][result_col:].startswith("FAIL")
    assert "2 of 3 passed" in out and "1 failed" in out
    assert "gradcheck failed" in out                     # the failure message follows the table


def test_json(tmp_path):
    out = tmp_path / "report.json"
    r = _cmd("--fast", "--json", str(out))
    assert r.returncode == 0, r.stderr
    data = json.loads(out.read_text())
    assert data["mode"] == "fast" and data["passed"] is True
    assert [row["op"] for row in data["rows"]] == [c.name for c in gr.ALL_CASES]
    for row in data["rows"]:
        assert row["passed"] is True and row["mode"] == "fast"
        assert 0 <= row["max_abs_err"] < 1e-6
        assert row["seconds"] >= 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_format_table_aligns():
    t = gr.format_table(["a", "num"], [["xyz", "1.0"], ["b", "10.25"]], [False, True])
    lines = t.splitlines()
    assert lines == ["a      num", "---  -----", "xyz    1.0", "b    10.25"]


def test_shapes_column():
    assert gr._shapes([Tensor(np.zeros((2, 3))), np.zeros(4, dtype=np.int64),
                       np.zeros((1, 2), bool)]) == "(2,3) (4,)int (1,2)bool"


@pytest.mark.parametrize("args", [
    ["--seed", "2.0"], ["--fast=yes"], ["--json", "/nonexistent-dir-xyz/r.json"], ["--json", "."],
])
def test_bad_options_exit_2_one_line(args):
    r = _cmd(*args)
    assert r.returncode == 2
    assert r.stdout == ""
    err = r.stderr.strip("\n")
    assert len(err.splitlines()) == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert err.startswith("python -m experiments.gradcheck_report: error:")
