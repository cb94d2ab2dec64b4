"""Tests of ``python -m experiments.bench``: the record at a minimal size, the matmul list against
an independent count, peak memory that is the fresh process's own, the reference on the same
weights, one-line errors on bad input. No test asserts a time."""
import argparse
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from gpt import GPT, GPTConfig

from experiments import bench, cli

REFERENCE = Path(__file__).resolve().parents[2] / "shared" / "reference" / "torch_seed"
MINIMAL = ["--sizes", "tiny", "--variants", "rms+swiglu", "--repeats", "2", "--steps", "1",
           "--warmup", "1"]


def _main(argv, capsys):
    """The command as ``python -m`` runs it: (status, stdout, stderr)."""
    with pytest.raises(SystemExit) as e, cli.errors(bench.PROG):
        sys.exit(bench.run(argv))
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


def test_the_record_at_a_minimal_size(tmp_path, capsys):
    path = tmp_path / "sub" / "bench.json"
    code, out, err = _main(MINIMAL + ["--data", "corpus,random", "--json", str(path)], capsys)
    assert code == 0, err
    d = json.loads(path.read_text())
    assert d["args"]["repeats"] == 2 and d["reference"] is None and d["torch"] is None
    (row,) = d["results"]
    assert (row["size"], row["variant"], row["data"]) == ("tiny", "rms+swiglu", ["corpus", "random"])
    assert row["config"]["d_model"] == 64 and row["config"]["norm"] == "rms"
    assert list(row["ms"]) == ["floor", "ours", "ours random"]
    for name in ("ours", "ours random"):
        for phase in ("forward", "backward", "clip", "optimizer", "step"):
            s = row["ms"][name][phase]
            assert 0 < s["min"] <= s["median"] <= s["max"]
        assert row["ms"][name]["step"]["median"] >= row["ms"][name]["forward"]["median"]
    assert list(row["ratios"]) == ["ours/floor", "ours random/ours"]
    assert row["ratios"]["ours/floor"]["min"] > 0
    assert row["peak_mib"]["ours"] > 0 and "torch" not in row["peak_mib"]
    assert sorted(row["first_loss"]) == ["ours", "ours random"]
    assert all(np.isfinite(v) and v > 0 for v in row["first_loss"].values())
    assert "rms+swiglu" in out and "ours/floor" in out and "peak" in out
    assert out.splitlines()[0] == ("PyTorch reference: none (--reference DIR, the folder of the "
                                   "chapter's projects/07_the-details-that-matter/build.py); "
                                   "timing ours and the floor")


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


@pytest.mark.slow
def test_the_peak_memory_is_the_fresh_process_own(tmp_path):
    """The child's ``ru_maxrss`` would start from this process's high-water mark."""
    big = np.ones(400 * 2**20 // 8)   # 400 MiB in this process, touched
    args = argparse.Namespace(data=["corpus"], seed=0, threads=1)
    peak = bench.peak_memory("ours", "tiny", "ln+gelu", args, tmp_path)
    assert 10 < peak < 300 and big.sum() > 0


@pytest.mark.slow
def test_reference_starts_from_the_same_weights(tmp_path, capsys):
    pytest.importorskip("torch")
    if not (REFERENCE / bench.BUILD_PY).is_file():
        pytest.skip("the chapter's PyTorch build.py is not beside the checkout")
    path = tmp_path / "bench.json"
    code, out, err = _main(MINIMAL + ["--reference", str(REFERENCE), "--no-memory", "--json",
                                      str(path)], capsys)
    assert code == 0, err
    (row,) = json.loads(path.read_text())["results"]
    # same weights, same first batch: the same loss up to float32 rounding
    assert abs(row["first_loss"]["ours"] - row["first_loss"]["torch"]) < 1e-4
    assert list(row["ms"]) == ["floor", "torch floor", "ours", "torch"]
    assert row["ratios"]["ours/torch"]["median"] > 0 and "torch floor/floor" in row["ratios"]


@pytest.mark.parametrize("args, words", [
    (["--sizes", "huge"], "unknown huge"),
    (["--variants", "ln+relu"], "unknown ln+relu"),
    (["--data", "corpus,zeros"], "unknown zeros"),
    (["--repeats", "0"], "--repeats"),
    (["--steps", "x"], "--steps"),
    (["--seed", "-1"], "--seed"),
    (["--reference", "/nonexistent-folder"], "--reference"),
])
def test_bad_input_is_one_line_and_exit_2(args, words, capsys):
    code, out, err = _main(args, capsys)
    assert code == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and words in lines[0], err


def test_a_reference_without_torch_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    (tmp_path / bench.BUILD_PY).parent.mkdir(parents=True)
    (tmp_path / bench.BUILD_PY).write_text("")
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else find_spec(name, *a))
    code, out, err = _main(MINIMAL + ["--reference", str(tmp_path)], capsys)
    assert code == 2 and out == ""
    assert err.splitlines() == ['python -m experiments.bench: error: --reference needs torch: '
                                'pip install -e ".[parity]"']


def test_a_json_path_under_a_file_is_refused_before_measuring(tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    code, out, err = _main(MINIMAL + ["--json", str(tmp_path / "file" / "b.json")], capsys)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_ctrl_c_prints_one_line_and_exits_130(tmp_path, monkeypatch, capsys):
    def interrupt(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(bench, "measure", interrupt)
    path = tmp_path / "bench.json"
    code, out, err = _main(MINIMAL + ["--json", str(path)], capsys)
    assert code == 130 and len(err.splitlines()) == 1 and not path.exists()
