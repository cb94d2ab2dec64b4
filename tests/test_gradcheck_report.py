"""Tests of ``python -m experiments.gradcheck_report``: every primitive and layer listed and
passing, exit status 1 on a failing op, JSON output, one-line errors on bad options; through
``cli.errors``, in this process."""
from __future__ import annotations

import json
import sys

import numpy as np
import pytest

from minigrad import Function, Tensor

from experiments import cli
from experiments import gradcheck_report as gr

# The list, written out independently of the module's tables.
OPS = ["add", "sub", "mul", "div", "neg", "pow", "exp", "log", "sqrt", "tanh", "sigmoid", "relu",
       "matmul", "sum", "mean", "max", "reshape", "transpose", "getitem", "concatenate", "stack",
       "split", "where", "masked_fill", "broadcast_to"]
LAYERS = ["layer_norm", "rms_norm", "gelu", "relu2", "silu", "swiglu", "apply_rope", "softmax",
          "cross_entropy", "scaled_dot_product_attention", "linear", "embedding", "batch_norm"]


class WrongDouble(Function):
    """y = 2 x, with a backward 1% off."""

    @staticmethod
    def forward(ctx, x):
        return 2.0 * x

    @staticmethod
    def backward(ctx, dy):
        return 2.02 * dy


def _main(argv, capsys):
    """The command as ``python -m`` runs it: (status, stdout, stderr)."""
    with pytest.raises(SystemExit) as e, cli.errors(gr.PROG):
        sys.exit(gr.run(argv))
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def _table(stdout):
    lines = stdout.splitlines()
    h = next(i for i, l in enumerate(lines) if l.startswith("op "))
    body = []
    for l in lines[h + 2:]:
        if not l.strip():
            break
        body.append(l)
    return lines[h], body, lines


def test_exit_0_lists_every_op_and_layer(capsys):
    code, out, err = _main([], capsys)
    assert code == 0 and err == "", out + err
    header, body, lines = _table(out)
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
    result_col, mode_col = header.index("result"), header.index("mode")
    for l in body:
        assert l[result_col:].startswith("PASS"), l
        assert l[mode_col:].startswith("slow"), l
    assert len(body) == len(gr.CASES)
    assert lines[-1].startswith(f"{len(body)} of {len(body)} passed (")
    assert " 0 failed" in lines[-1]


def test_every_row_within_tolerance():
    for row in gr.run_cases(seed=0):
        assert row["passed"], row["report"].message
        assert row["max_abs_err"] < 1e-6, row["op"]
        assert row["mode"] == "slow"


def test_exit_1_when_an_op_fails(capsys, monkeypatch):
    cases = gr.CASES[:2] + [("double (wrong)", "op", (lambda x: WrongDouble.apply(x), (3, 4)))]
    monkeypatch.setattr(gr, "CASES", cases)
    code, out, _ = _main([], capsys)
    assert code == 1
    header, body, lines = _table(out)
    result_col = header.index("result")
    assert body[-1].startswith("double (wrong)") and body[-1][result_col:].startswith("FAIL")
    assert "2 of 3 passed" in out and "1 failed" in out
    assert "gradcheck failed" in out                     # the failure message follows the table


def test_fast_mode_seed_and_json(tmp_path, capsys):
    path = tmp_path / "sub" / "report.json"
    code, out, _ = _main(["--fast", "--seed", "5", "--json", str(path)], capsys)
    assert code == 0
    header, body, lines = _table(out)
    mode_col = header.index("mode")
    assert all(l[mode_col:].startswith("fast") for l in body)
    assert "seed 5" in lines[0]
    data = json.loads(path.read_text())
    assert data["mode"] == "fast" and data["passed"] is True and data["seed"] == 5
    assert [row["op"] for row in data["rows"]] == [c[0] for c in gr.CASES]
    for row in data["rows"]:
        assert row["passed"] is True and row["mode"] == "fast"
        assert 0 <= row["max_abs_err"] < 1e-6 and row["seconds"] >= 0
    assert sorted(p.name for p in path.parent.iterdir()) == ["report.json"]


def test_shapes_column():
    assert gr.shapes([Tensor(np.zeros((2, 3))), np.zeros(4, dtype=np.int64),
                      np.zeros((1, 2), bool)]) == "(2,3) (4,)int (1,2)bool"


@pytest.mark.parametrize("args, needle", [
    (["--seed", "2.0"], "--seed"), (["--fast=yes"], "--fast"), (["--json", ""], "empty path"),
])
def test_bad_options_exit_2_one_line(args, needle, capsys):
    code, out, err = _main(args, capsys)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and needle in err
    assert err.startswith("python -m experiments.gradcheck_report: error:")


def test_a_json_path_under_a_file_is_one_line_exit_2_before_any_check(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    code, out, err = _main(["--json", str(tmp_path / "file" / "r.json")], capsys)
    assert code == 2 and out == "" and len(err.splitlines()) == 1
