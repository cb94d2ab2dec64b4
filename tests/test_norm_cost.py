"""Tests of the op counter of experiments._norm_counts and `python -m experiments.norm_cost`.

The FLOP and byte counts are checked against hand counts of layers/layernorm.py and
layers/rmsnorm.py, line by line, for a small shape. No test looks at a time.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from experiments import cli, norm_cost
from experiments._norm_counts import count, fused_min_bytes, load_claim, make_inputs, totals, trace
from layers.layernorm import layernorm_backward, layernorm_forward
from layers.rmsnorm import rmsnorm_backward, rmsnorm_forward

REPO = Path(__file__).resolve().parents[1]
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
    c = count("ln", "forward", _inputs(np.float32))
    assert c["bytes_read"] == 4 * (8 * E + 7 * N + 2 * C)
    assert c["bytes_written"] == 4 * (5 * E + 7 * N)
    c64 = count("ln", "forward", _inputs(np.float64))
    assert c64["bytes_read"] == 8 * (8 * E + 7 * N + 2 * C)


def test_fused_minimum_bytes_match_the_hand_count():
    # forward reads x (E), weight, bias (C each); writes out, xhat (E each) and rstd (N)
    assert fused_min_bytes("ln", "forward", _inputs()) == 4 * (3 * E + 2 * C + N)
    assert fused_min_bytes("rms", "forward", _inputs()) == 4 * (3 * E + C + N)
    # the backward adds: reads dout, xhat (E each), weight (C), rstd (N); writes dx (E), grads
    assert (fused_min_bytes("rms", "forward_backward", _inputs())
            == 4 * (3 * E + C + N) + 4 * (3 * E + 2 * C + N))


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
    assert [r.name for r in rec][0] == "einsum nc,nc->c"
    # a matrix product (m, n) @ (n, k) by einsum: m*n*k multiplications, m*k*(n-1) additions
    a, m = np.ones((5, 7)), np.ones((7, 3))
    _, rec = trace(lambda p, q: np.einsum("ij,jk->ik", p, q), a, m)
    assert totals(rec)["flops"] == 5 * 7 * 3 + 5 * 3 * 6
    # x * x + 1: two elementwise ops of 35 outputs; the scalar costs no byte
    _, rec = trace(lambda p: p * p + 1.0, a)
    assert totals(rec) == {"flops": 70, "bytes_read": 2 * 280 + 280, "bytes_written": 560}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("nc") / "out"
    code = norm_cost.run(["--tiny", "--repeats", "2", "--output-dir", str(out)])
    return code, out


def test_command_writes_the_documented_structure(tiny_run):
    code, out = tiny_run
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == ["results.json", "run_log.txt"]
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert res["experiment"] == "norm_cost" and res["schema_version"] == 1
    assert [s["name"] for s in res["shapes"]] == ["tiny"]
    s = res["shapes"][0]
    assert (s["B"], s["T"], s["C"]) == (32, 32, 64)
    n, e = 32 * 32, 32 * 32 * 64
    for pass_ in ("forward", "forward_backward"):
        p = s["passes"][pass_]
        for norm in ("ln", "rms"):
            t = p[norm]["time_s"]
            assert len(t["samples"]) == 2 and all(v > 0 for v in t["samples"])
            assert t["min"] <= t["p25"] <= t["median"] <= t["p75"] <= t["max"]
            assert p[norm]["number"] >= 1
            assert sum(op[1] for op in p[norm]["ops"]) == p[norm]["flops"]
        r = p["ratio_rms_over_ln"]
        assert r["flops"] == pytest.approx(p["rms"]["flops"] / p["ln"]["flops"])
        assert r["time_p25"] <= r["time_median"] <= r["time_p75"]
    # the tiny shape's forward ratio, from the hand counts above: (4E + 3N) / (7E + 3N)
    claim = load_claim(out / "results.json")
    assert claim["flops_ratio"]["forward"] == pytest.approx((4 * e + 3 * n) / (7 * e + 3 * n))
    assert claim["time_ratio"]["shape"] == "32x32x64"
    log = (out / "run_log.txt").read_text(encoding="utf-8")
    assert norm_cost.CHAPTER_CLAIM in log
    # the verdict quotes the measured ratio, not a fixed text
    assert f"forward {claim['flops_ratio']['forward']:.2f}, about half" in log
    assert claim["verdict"][0] in log
    assert json.loads((out / "results.json").read_text())["files"] == ["run_log.txt",
                                                                       "results.json"]


def test_load_claim_refuses_other_files(tmp_path):
    p = tmp_path / "results.json"
    p.write_text(json.dumps({"experiment": "four_variants"}), encoding="utf-8")
    with pytest.raises(ValueError, match="not a norm_cost"):
        load_claim(p)
    p.write_text("{", encoding="utf-8")
    with pytest.raises(ValueError, match="not JSON"):
        load_claim(p)


@pytest.mark.parametrize("args, needle", [
    (["--repeats", "0"], "--repeats"),
    (["--repeats", "x"], "--repeats"),
    (["--repeats", "1001"], "maximum"),
    (["--dtype", "float16"], "--dtype"),
    (["--output-dir", ""], "empty path"),
    (["--bogus"], "unrecognized"),
])
def test_bad_input_is_one_line_exit_2(args, needle, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(norm_cost.PROG, norm_cost.run, [*args, "--tiny"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0]


def test_output_dir_that_is_a_file_writes_nothing(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-m", "experiments.norm_cost", "--tiny",
                           "--output-dir", str(f / "sub")], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "not a directory" in proc.stderr.lower()
    assert "Traceback" not in proc.stderr and proc.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def _ratio(t, lo, hi, flops=0.55, unfused=0.6, fused=0.75):
    return {"flops": flops, "bytes_unfused": unfused, "bytes_fused_min": fused,
            "time_median": t, "time_min": lo, "time_max": hi}


def test_an_implausible_time_ratio_is_flagged():
    """Bounds by hand: 0.5 x min(0.55, 0.6, 0.75) = 0.275, 2 x max(..., 1) = 2.0."""
    assert norm_cost.implausible(_ratio(0.6, 0.5, 0.7)) is None
    assert norm_cost.implausible(_ratio(0.28, 0.27, 0.29)) is None
    assert "0.28-2.00" in norm_cost.implausible(_ratio(0.02, 0.01, 0.03))   # the busy-machine case
    assert "plausible range" in norm_cost.implausible(_ratio(2.5, 2.4, 2.6))
    assert "disagree" in norm_cost.implausible(_ratio(0.6, 0.2, 0.9))      # 4.5x apart
    assert norm_cost.implausible(_ratio(0.6, 0.2, 0.8)) is None           # exactly 4x: kept


def test_the_verdict_says_an_implausible_ratio_is_not_to_be_quoted():
    r = dict(_ratio(0.02, 0.01, 0.03), time_p25=0.015, time_p75=0.025)
    shape = {"B": 32, "T": 32, "C": 64, "passes": {
        p: {"ratio_rms_over_ln": r, "ln": {"minor_faults_per_call": 0},
            "rms": {"minor_faults_per_call": 0}} for p in norm_cost.PASSES}}
    lines = [v for v in norm_cost.verdict([shape], 15) if v.startswith("Time")]
    assert len(lines) == 2
    assert all("= 0.02 is not a measurement to quote" in v and "busy" in v for v in lines)


def test_the_verdict_does_not_call_equal_printed_savings_larger():
    # FLOP ratio 0.5745 just above the IQR's top 0.5699: both savings print as 43%
    r = dict(_ratio(0.57, 0.55, 0.58), flops=0.5745, time_p25=0.55, time_p75=0.5699)
    shape = {"B": 32, "T": 32, "C": 64, "passes": {
        p: {"ratio_rms_over_ln": r, "ln": {"minor_faults_per_call": 0},
            "rms": {"minor_faults_per_call": 0}} for p in norm_cost.PASSES}}
    lines = [v for v in norm_cost.verdict([shape], 15) if v.startswith("Time")]
    assert len(lines) == 2
    assert all("the saving the FLOPs predict (43%)" in v and "larger" not in v for v in lines)


@pytest.mark.parametrize("repeats", [1, 4])
def test_too_few_repeats_give_the_times_and_no_verdict(repeats):
    # one sample: median = both quartiles, a zero-width "IQR" that would call 0.57 a larger
    # saving than the FLOPs' 0.67
    r = dict(_ratio(0.57, 0.57, 0.57), flops=0.67, time_p25=0.57, time_p75=0.57)
    shape = {"B": 32, "T": 32, "C": 64, "passes": {
        p: {"ratio_rms_over_ln": r, "ln": {"minor_faults_per_call": 0},
            "rms": {"minor_faults_per_call": 0}} for p in norm_cost.PASSES}}
    lines = [v for v in norm_cost.verdict([shape], repeats) if v.startswith("Time")]
    assert len(lines) == 2
    assert all(f"= 0.57 from {repeats} repeat" in v and "no verdict" in v
               and "saving" not in v and "--repeats 5 or more" in v for v in lines)
    five = [v for v in norm_cost.verdict([shape], 5) if v.startswith("Time")]
    assert all("a larger saving than the FLOPs predict" in v for v in five)
