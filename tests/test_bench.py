"""Tests of ``python -m experiments.bench``: the JSON record at a minimal size, the matmul list
against an independent count, the reference on the same weights, one-line errors on bad input.
No test asserts a time."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs the benchmark and the PyTorch reference; leave out with -m "not slow"

from gpt import GPT, GPTConfig

from experiments import bench, cli

ROOT = Path(__file__).resolve().parents[1]
PROG = [sys.executable, "-m", "experiments.bench"]
MINIMAL = ["--sizes", "tiny", "--variants", "rms+swiglu", "--repeats", "2", "--steps", "1",
           "--warmup", "1"]


def _cmd(*args, env=None):
    e = dict(os.environ, OPENBLAS_NUM_THREADS="1", **(env or {}))
    return subprocess.run(PROG + list(args), cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=e)


def test_json_record_at_a_minimal_size(tmp_path):
    out = tmp_path / "bench.json"
    r = _cmd(*MINIMAL, "--no-reference", "--json", str(out))
    assert r.returncode == 0, r.stderr
    d = json.loads(out.read_text())
    assert d["repeats"] == 2 and d["steps"] == 1 and d["reference"] is None
    assert d["threads"]["OPENBLAS_NUM_THREADS"] == "1"
    (row,) = d["results"]
    assert (row["size"], row["variant"], row["data"]) == ("tiny", "rms+swiglu", "corpus")
    assert row["config"]["d_model"] == 64 and row["config"]["norm"] == "rms"
    for phase in ("forward", "backward", "clip", "optimizer", "step"):
        s = row["ours"][phase]
        assert 0 < s["min"] <= s["median"] <= s["max"]
    assert 0 < row["floor"]["step"]["median"]
    assert row["ours"]["peak_rss_mib"] > 0
    assert "reference" not in row and "ours_over_reference" not in row["ratios"]
    assert row["ratios"]["ours_over_floor"]["median"] > 0
    assert "rms+swiglu" in r.stdout and "ours/floor" in r.stdout


@pytest.mark.parametrize("mlp", ["gelu", "swiglu"])
def test_matmul_list_matches_an_independent_flop_count(mlp):
    # Every 2-D weight but the position table is used in one linear map: 3 products of
    # 2*N*in*out FLOPs (forward, dx, dW). Attention: 6 products of 2*B*H*T*T*hs per layer.
    B, T = 4, 8
    cfg = GPTConfig(vocab_size=11, block_size=T, n_layers=2, n_heads=2, d_model=16, mlp=mlp)
    model = GPT(cfg, seed=0)
    N = B * T
    linear = sum(6 * N * p.shape[0] * p.shape[1] for name, p in model.named_parameters()
                 if p.ndim == 2 and name != "position_embedding.weight")
    attention = cfg.n_layers * 6 * 2 * B * T * T * cfg.d_model
    got = sum(2 * b * m * k * n for b, m, k, n in bench.step_matmuls(cfg, B))
    assert got == linear + attention


def test_reference_starts_from_the_same_weights(tmp_path):
    pytest.importorskip("torch")
    if bench.find_reference() is None:
        pytest.skip("the chapter's PyTorch build.py is not beside the checkout")
    out = tmp_path / "bench.json"
    r = _cmd(*MINIMAL, "--no-memory", "--json", str(out))
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(out.read_text())["results"]
    # same weights, same first batch: the same loss up to float32 rounding
    assert abs(row["first_loss"]["ours"] - row["first_loss"]["reference"]) < 1e-4
    assert "peak_rss_mib" not in row["reference"]
    assert row["ratios"]["ours_over_reference"]["median"] > 0


@pytest.mark.parametrize("args, words", [
    (["--sizes", "huge"], "unknown size huge"),
    (["--variants", "ln+relu"], "unknown variant"),
    (["--data", "corpus,zeros"], "unknown data zeros"),
    (["--repeats", "0"], "--repeats"),
    (["--steps", "x"], "--steps"),
    (["--seed", "-1"], "--seed"),
    (["--reference", "/nonexistent-folder"], "--reference"),
])
def test_bad_input_is_one_line_and_exit_2(args, words):
    r = _cmd(*args)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], r.stderr


def test_json_into_a_missing_directory_writes_nothing(tmp_path):
    r = _cmd(*MINIMAL, "--no-reference", "--json", str(tmp_path / "no" / "b.json"))
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "no").exists()


def test_ctrl_c_prints_one_line_and_exits_130(tmp_path, monkeypatch, capsys):
    """Ctrl-C while measuring: one line on stderr, status 130, no JSON written."""
    def interrupt(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(bench, "in_fresh_process", interrupt)
    out = tmp_path / "bench.json"
    with pytest.raises(SystemExit) as e:
        cli.main(bench.PROG, bench.run, MINIMAL + ["--no-reference", "--json", str(out)])
    assert e.value.code == 130
    assert len(capsys.readouterr().err.splitlines()) == 1
    assert not out.exists()
