"""Tests of the chapter's hidden-state statistics (gpt.capture.tensor_stats), the residual
stream capture (gpt.capture) and `python -m experiments.hidden_stats`."""
import csv
import json
import math
import sys

import numpy as np
import pytest

import minigrad
from experiments import cli, hidden_stats, runner
from gpt import GPT, GPTConfig
from gpt.capture import capture_residual_stream, tensor_stats
from layers.functional import embedding

TINY = ["--steps", "4", "--n-layers", "2", "--d-model", "16", "--n-heads", "2",
        "--block-size", "8", "--eval-every", "2"]


# ---------------------------------------------------------------- the statistics

def test_tensor_stats_hand_computed_cases():
    # [0, 0, 0, 4]: mean 1, centred [-1, -1, -1, 3], var (1+1+1+9)/4 = 3,
    # fourth moment (1+1+1+81)/4 = 21, kurtosis 21 / 3^2 = 7/3 (the guards change it < 1e-11)
    s = tensor_stats(np.array([[0.0, 0.0], [0.0, 4.0]]))
    assert s == pytest.approx({"mean": 1.0, "var": 3.0, "min": 0.0, "max": 4.0,
                               "kurtosis": 7 / 3}, rel=1e-11)
    # +-1: var 1, kurtosis 1 (the smallest possible)
    s = tensor_stats(np.array([-1.0, 1.0, -1.0, 1.0], dtype=np.float32))
    assert s["var"] == 1.0 and s["kurtosis"] == pytest.approx(1.0, abs=1e-11)
    # a constant: var 0, std = sqrt(1e-12) = 1e-6, kurtosis 0 / (1e-24 + 1e-12) = 0
    s = tensor_stats(np.full((3, 5), 2.5))
    assert s == {"mean": 2.5, "var": 0.0, "min": 2.5, "max": 2.5, "kurtosis": 0.0}
    # a large Gaussian sample: kurtosis near 3 (sd of the estimate ~ sqrt(24/n) = 0.005)
    g = np.random.default_rng(0).standard_normal(10 ** 6)
    assert tensor_stats(g)["kurtosis"] == pytest.approx(3.0, abs=0.03)


@pytest.mark.slow  # runs PyTorch; leave out with -m "not slow"
def test_tensor_stats_matches_the_chapters_torch_function():
    torch = pytest.importorskip("torch")

    def chapter_tensor_stats(x):   # the chapter's step 4, verbatim (in float64 here)
        flat = x.detach().double().reshape(-1)
        mean = flat.mean()
        var = flat.var(unbiased=False)
        std = torch.sqrt(var + 1e-12)
        centered = flat - mean
        kurt = (centered ** 4).mean() / (std ** 4 + 1e-12)
        return {"mean": mean.item(), "var": var.item(), "min": flat.min().item(),
                "max": flat.max().item(), "kurtosis": kurt.item()}

    x = np.random.default_rng(1).standard_t(4, size=(4, 8, 16)) * 3 + 0.7
    assert tensor_stats(x) == pytest.approx(chapter_tensor_stats(torch.from_numpy(x)), rel=1e-10)


# ---------------------------------------------------------------- the capture

def _model(dtype="float64"):
    cfg = GPTConfig(vocab_size=11, block_size=8, n_layers=2, n_heads=2, d_model=16,
                    norm="rms", dtype=dtype)
    return GPT(cfg, seed=2)


def test_capture_records_the_inputs_of_ln1_and_ln2_and_changes_nothing():
    model = _model()
    idx = np.random.default_rng(0).integers(0, 11, (3, 8))
    y = np.random.default_rng(1).integers(0, 11, (3, 8))
    logits, loss = model(idx, y)
    loss.backward()
    grads = {n: p.grad.copy() for n, p in model.named_parameters()}
    model.zero_grad()
    with capture_residual_stream(model) as cap:
        logits2, loss2 = model(idx, y)
        loss2.backward()
    assert np.array_equal(logits.numpy(), logits2.numpy())
    for n, p in model.named_parameters():
        assert np.array_equal(p.grad, grads[n]), n
    assert list(cap) == ["blocks.0.pre_attn", "blocks.0.pre_mlp", "blocks.1.pre_attn",
                         "blocks.1.pre_mlp"]
    # independently: the embeddings, then each block's sub-layers called by hand
    with minigrad.no_grad():
        x = embedding(idx, model.token_embedding.weight) + \
            embedding(np.arange(8), model.position_embedding.weight)
        for i, b in enumerate(model.blocks):
            assert np.array_equal(cap[f"blocks.{i}.pre_attn"], x.numpy())
            x = x + b.attn(b.ln1(x))
            assert np.array_equal(cap[f"blocks.{i}.pre_mlp"], x.numpy())
            x = x + b.mlp(b.ln2(x))
    # copies, not views of the graph's arrays; the capture is removed on exit
    assert all(a.flags.owndata for a in cap.values())
    assert all(b.capture is None for b in model.blocks)
    with capture_residual_stream(model):
        with pytest.raises(RuntimeError, match="already"):
            with capture_residual_stream(model):
                pass


def test_collecting_statistics_does_not_change_the_losses():
    args = runner.parse_args(hidden_stats.STUDY, ["--batch-size", "4", "--eval-every", "2"])
    data = runner.options.load_data(args)
    cfg = GPTConfig(vocab_size=48, block_size=8, n_layers=2, n_heads=2, d_model=16)
    entries = [runner.train_one(runner.Run(runner.Variant("ln", {"norm": "ln"}), cfg, 0, 6, args,
                                           data, "ln", probe=probe))
               for probe in (None, hidden_stats.probe)]
    plain, instrumented = entries
    for k in ("loss_curve", "grad_norms", "val_curve", "train_loss", "val_loss",
              "train_loss_one_batch", "val_loss_one_batch"):
        assert plain[k] == instrumented[k], k
    rows = instrumented["extra"]["rows"]
    assert [r["step"] for r in rows] == [s for s in (0, 2, 4, 6) for _ in range(4)]
    assert plain["extra"] is None


# ---------------------------------------------------------------- the command


def main(args):
    """The command as ``python -m`` runs it: its exit status."""
    with pytest.raises(SystemExit) as ei, cli.errors(hidden_stats.STUDY.prog):
        sys.exit(runner.run(hidden_stats.STUDY, args))
    return ei.value.code



@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("hs") / "out"
    return main(TINY + ["--seeds", "2", "--output-dir", str(out)]), out


@pytest.mark.slow
def test_command_writes_table_csv_and_plot(small_run):
    rc, out = small_run
    assert rc == 0
    names = {p.name for p in out.iterdir()}
    assert {"run_log.txt", "results.json", "curves.csv", "hidden_stats.csv"} <= names
    with open(out / "hidden_stats.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    sites = ["blocks.0.pre_attn", "blocks.0.pre_mlp", "blocks.1.pre_attn", "blocks.1.pre_mlp"]
    keys = [(r["variant"], int(r["seed"]), int(r["step"]), r["site"]) for r in rows]
    assert keys == [(v, s, st, site) for v in ("ln", "rms") for s in (0, 1)
                    for st in (0, 2, 4) for site in sites]
    for r in rows:
        vals = {k: float(r[k]) for k in ("mean", "var", "min", "max", "kurtosis")}
        assert all(math.isfinite(v) for v in vals.values())
        assert vals["min"] <= vals["mean"] <= vals["max"] and vals["var"] >= 0
        assert 1.0 - 1e-9 <= vals["kurtosis"]          # a kurtosis is never below 1
    # step 0, block 0's input is the embedding: the same for LN and RMS (same seed, same init)
    first = {(r["variant"], r["seed"]): r for r in rows
             if r["step"] == "0" and r["site"] == "blocks.0.pre_attn"}
    assert first[("ln", "0")]["var"] == first[("rms", "0")]["var"]
    res = json.loads((out / "results.json").read_text())
    assert res["experiment"] == "hidden_stats"
    assert len(res["runs"][0]["extra"]["rows"]) == 12
    log = (out / "run_log.txt").read_text()
    assert "Residual stream entering each block's attention" in log
    assert "ln        blocks.1.pre_mlp" in log and "Paired differences from ln" in log
    if runner.figures.available():
        assert (out / "hidden_stats.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_jobs_2_gives_the_same_statistics(small_run, tmp_path):
    _, out = small_run
    out2 = tmp_path / "out2"
    assert main(TINY + ["--seeds", "2", "--jobs", "2", "--no-plots",
                                     "--output-dir", str(out2)]) == 0
    assert (out2 / "hidden_stats.csv").read_text() == (out / "hidden_stats.csv").read_text()
    assert not (out2 / "hidden_stats.png").exists()


@pytest.mark.slow
def test_one_seed_prints_the_statistics_table(tmp_path, capsys):
    assert main(TINY + ["--steps", "2", "--no-plots", "--output-dir",
                                     str(tmp_path / "o")]) == 0
    out = capsys.readouterr().out
    assert "Residual stream entering each block's attention" in out
    assert "rms       blocks.1.pre_mlp        2" in out


@pytest.mark.parametrize("args, needle", [
    (["--eval-every", "0"], "--eval-every"),
    (["--corpus", "/nonexistent/corpus.txt"], "not found"),
    (["--steps", "x"], "--steps"),
])
def test_bad_input_is_one_line_exit_2(args, needle, tmp_path, capsys):
    code = main(TINY + args + ["--output-dir", str(tmp_path / "o")])
    cap = capsys.readouterr()
    assert code == 2 and cap.out == ""
    assert len(cap.err.strip().splitlines()) == 1 and needle in cap.err
    assert not (tmp_path / "o").exists()
