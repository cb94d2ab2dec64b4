"""Tests of the op counter of experiments.flops and of `python -m experiments.norm_cost`.

The FLOP and byte counts are checked against hand counts of layers/layernorm.py and
layers/rmsnorm.py, line by line, for a small shape. No test looks at a time.
"""
import json
import sys

import numpy as np
import pytest

from experiments import cli, norm_cost
from experiments.flops import count, fused_min_bytes, make_inputs, norm_flop_ratios, trace
from layers.layernorm import layernorm_backward, layernorm_forward
from layers.rmsnorm import rmsnorm_backward, rmsnorm_forward

B, T, C = 2, 3, 4
N, E = B * T, B * T * C          # rows, elements


def _inputs(dtype=np.float32):
    return make_inputs((B, T, C), dtype, seed=0)


# Hand counts (one FLOP per output element, n - m adds for a reduction of n to m values):
# layernorm_forward:  mean = reduce (E - N) + divide (N) = E;  x - mean  E;  xc * xc  E;
#   mean  E;  var + eps  N;  sqrt  N;  1 / .  N;  xc * rstd  E;  * weight  E;  + bias  E
#   -> 7E + 3N
# rmsnorm_forward:  x * x  E;  mean  E;  + eps, sqrt, 1 / .  3N;  x * rstd  E;  * weight  E
#   -> 4E + 3N
# layernorm_backward:  dout.sum(axis=0)  E - C;  einsum nc,nc->c  E mults + (E - C) adds;
#   dout * weight  E;  mean(dxhat)  E;  dxhat - .  E;  dxhat * xhat  E;  mean  E;  xhat * .  E;
#   dx -= .  E;  dx *= rstd  E  -> 11E - 2C
# rmsnorm_backward:  einsum  2E - C;  dout * weight  E;  dxhat * xhat  E;  mean  E;
#   xhat * .  E;  dxhat - .  E;  dx *= rstd  E  -> 8E - C
HAND_FLOPS = {
    ("ln", "forward"): 7 * E + 3 * N,                                   # 186
    ("rms", "forward"): 4 * E + 3 * N,                                  # 114
    ("ln", "forward_backward"): 7 * E + 3 * N + 11 * E - 2 * C,         # 442
    ("rms", "forward_backward"): 4 * E + 3 * N + 8 * E - C,             # 302
}


@pytest.mark.parametrize("norm, pass_", list(HAND_FLOPS))
def test_flops_traced_from_the_code_match_the_hand_count(norm, pass_):
    assert count(norm, pass_, _inputs())["flops"] == HAND_FLOPS[(norm, pass_)]


def test_layernorm_forward_bytes_match_the_hand_count():
    # Elements read, op by op: reduce E, divide N, x - mean E + N, xc * xc 2E, reduce E,
    # divide N, + eps N, sqrt N, 1 / . N, xc * rstd E + N, * weight E + C, + bias E + C
    # -> 8E + 7N + 2C.  Written: N, N, E, E, N, N, N, N, N, E, E, E -> 5E + 7N.
    for dtype, size in ((np.float32, 4), (np.float64, 8)):
        c = count("ln", "forward", _inputs(dtype))
        assert sum(op[2] for op in c["ops"]) == size * (8 * E + 7 * N + 2 * C)
        assert sum(op[3] for op in c["ops"]) == size * (5 * E + 7 * N)
        assert c["bytes_unfused"] == size * (13 * E + 14 * N + 2 * C)


def test_fused_minimum_bytes_match_the_hand_count():
    i = _inputs()
    args = i["x"], i["dout"], i["weight"], i["bias"]
    # forward reads x (E), weight, bias (C each); writes out, xhat (E each) and rstd (N)
    assert fused_min_bytes("ln", "forward", *args) == 4 * (3 * E + 2 * C + N)
    assert fused_min_bytes("rms", "forward", *args) == 4 * (3 * E + C + N)
    # the backward adds: reads dout, xhat (E each), weight (C), rstd (N); writes dx (E), grads
    assert (fused_min_bytes("rms", "forward_backward", *args)
            == 4 * (3 * E + C + N) + 4 * (3 * E + 2 * C + N))


def test_the_ratios_four_variants_prints_are_the_hand_counts():
    e, n, c = 4 * 8 * 16, 4 * 8, 16
    r = norm_flop_ratios((4, 8, 16))
    assert r["forward"] == pytest.approx((4 * e + 3 * n) / (7 * e + 3 * n))
    assert r["forward_backward"] == pytest.approx((12 * e + 3 * n - c) / (18 * e + 3 * n - 2 * c))


def test_tracing_changes_no_value_and_counts_other_code_by_the_same_model():
    inp = _inputs(np.float64)
    x, w, b = inp["x"], inp["weight"], inp["bias"]
    (out, cache), _ = trace(layernorm_forward, x, w, b)
    ref, ref_cache = layernorm_forward(x, w, b)
    assert np.array_equal(np.asarray(out), ref)
    (dx, dw, db), _ = trace(layernorm_backward, inp["dout"], cache)
    assert all(np.array_equal(np.asarray(a), r) for a, r in
               zip((dx, dw, db), layernorm_backward(inp["dout"], ref_cache)))
    (o2, c2), _ = trace(rmsnorm_forward, x, w)
    assert np.array_equal(np.asarray(o2), rmsnorm_forward(x, w)[0])
    _, rec = trace(rmsnorm_backward, inp["dout"], c2)
    assert rec[0][0] == "einsum nc,nc->c"
    # a matrix product (m, n) @ (n, k) by einsum: m*n*k multiplications, m*k*(n-1) additions
    a, m = np.ones((5, 7)), np.ones((7, 3))
    _, rec = trace(lambda p, q: np.einsum("ij,jk->ik", p, q), a, m)
    assert sum(op[1] for op in rec) == 5 * 7 * 3 + 5 * 3 * 6
    # x * x + 1: two elementwise ops of 35 outputs; the scalar costs no byte
    _, rec = trace(lambda p: p * p + 1.0, a)
    assert [op[1:] for op in rec] == [(35, 2 * 280, 280), (35, 280, 280)]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("nc") / "out"
    return norm_cost.run(["--tiny", "--repeats", "2", "--output-dir", str(out)]), out


def test_command_writes_the_documented_files(tiny_run):
    code, out = tiny_run
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == ["results.json", "run_log.txt"]
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert res["experiment"] == "norm_cost" and res["files"] == ["run_log.txt", "results.json"]
    (s,) = res["shapes"]
    assert s["shape"] == "32x32x64"
    n, e = 32 * 32, 32 * 32 * 64
    for pass_, p in s["passes"].items():
        for norm in ("ln", "rms"):
            t = p[norm]["time_s"]
            assert len(t["samples"]) == 2 and all(v > 0 for v in t["samples"])
            assert min(t["samples"]) <= t["p25"] <= t["median"] <= t["p75"] <= max(t["samples"])
            assert p[norm]["calls_per_sample"] >= 1
            assert sum(op[1] for op in p[norm]["ops"]) == p[norm]["flops"]
            assert sum(op[2] + op[3] for op in p[norm]["ops"]) == p[norm]["bytes_unfused"]
        r = p["rms_over_ln"]
        assert r["flops"] == pytest.approx(p["rms"]["flops"] / p["ln"]["flops"])
        ratios = np.divide(p["rms"]["time_s"]["samples"], p["ln"]["time_s"]["samples"])
        assert r["time"]["samples"] == pytest.approx(ratios)
    # the tiny shape's forward count, from the hand counts above: 7E + 3N and 4E + 3N
    assert s["passes"]["forward"]["ln"]["flops"] == 7 * e + 3 * n
    assert s["passes"]["forward"]["rms"]["flops"] == 4 * e + 3 * n
    log = (out / "run_log.txt").read_text(encoding="utf-8")
    assert norm_cost.CLAIM in log
    assert f"forward {(4 * e + 3 * n) / (7 * e + 3 * n):.2f} (about half)" in log
    assert all(f"- {v}" in log for v in res["verdict"]) and len(res["verdict"]) == 3
    assert "no verdict" in res["verdict"][1]          # two repeats: no spread to judge by


@pytest.mark.parametrize("args, needle", [
    (["--repeats", "0"], "--repeats"),
    (["--repeats", "x"], "--repeats"),
    (["--repeats", "1001"], "maximum"),
    (["--dtype", "float16"], "--dtype"),
    (["--output-dir", ""], "empty path"),
    (["--bogus"], "unrecognized"),
])
def test_bad_input_is_one_line_exit_2(args, needle, capsys):
    with pytest.raises(SystemExit) as e, cli.errors(norm_cost.PROG):
        sys.exit(norm_cost.run([*args, "--tiny"]))
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


def test_an_output_dir_under_a_file_is_one_line_exit_2_and_nothing_written(tmp_path, capsys):
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(SystemExit) as e, cli.errors(norm_cost.PROG):
        sys.exit(norm_cost.run(["--tiny", "--output-dir", str(f / "sub")]))
    assert e.value.code == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and "not a directory" in err[0].lower() and captured.out == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def _ratio(median, p25, p75, flops=0.55, unfused=0.6):
    return {"flops": flops, "bytes_unfused": unfused,
            "time": {"median": median, "p25": p25, "p75": p75}}


@pytest.mark.parametrize("r, words", [
    (_ratio(0.57, 0.55, 0.60), "saves what the FLOPs predict"),            # inside the IQR
    (_ratio(0.57, 0.56, 0.5699, flops=0.5745), "saves what the FLOPs predict"),  # same printed
    (_ratio(0.45, 0.44, 0.46), "saves more than the FLOPs predict; nearer the FLOPs"),
    (_ratio(0.62, 0.61, 0.63, flops=0.5, unfused=0.64), "saves less than the FLOPs predict; "
                                                        "nearer the unfused bytes"),
])
def test_the_verdict_compares_the_time_with_the_counts(r, words):
    line = norm_cost.verdict("32x32x64", "forward", r, 15)
    assert line.startswith(f"Time 32x32x64 forward: RMSNorm/LayerNorm {r['time']['median']:.2f}")
    assert line.endswith(words + ".")


@pytest.mark.parametrize("repeats", [1, 4])
def test_too_few_repeats_give_the_times_and_no_verdict(repeats):
    r = _ratio(0.57, 0.57, 0.57, flops=0.67)   # one sample: a zero-width "IQR"
    line = norm_cost.verdict("32x32x64", "forward", r, repeats)
    assert f"0.57 (IQR 0.57-0.57)" in line and "no verdict" in line and "saves" not in line
    assert "saves more" in norm_cost.verdict("32x32x64", "forward", r, 5)
