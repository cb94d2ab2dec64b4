"""Tests of the study commands built on the runner: break_it, activations, positions, and the
small gpt additions they need (norm="none", norm="ln_rms", frozen parameters).

Every run is tiny (1-2 layers, d_model 16, a few steps, 2 seeds) so the file takes seconds.
"""
import csv
import json
import math
import sys

import numpy as np
import pytest

import minigrad
from gpt import GPT, GPTConfig, load_checkpoint
from gpt.train import train
from layers.modules import Identity, LayerNorm, RMSNorm

from experiments import activations, break_it, cli, positions, runner


def main(module, args):
    """The study as ``python -m`` runs it: its exit status."""
    with pytest.raises(SystemExit) as ei, cli.errors(module.STUDY.prog):
        sys.exit(runner.run(module.STUDY, args))
    return ei.value.code

TINY = ["--steps", "3", "--n-layers", "2", "--d-model", "16", "--n-heads", "2",
        "--block-size", "8", "--eval-every", "3", "--seeds", "2", "--no-plots"]


def _load(out):
    res = json.loads((out / "results.json").read_text())
    with open(out / "curves.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return res, rows, (out / "run_log.txt").read_text()


def _check_structure(out, names, steps=3, seeds=(0, 1)):
    res, rows, log = _load(out)
    assert [v["name"] for v in res["variants"]] == names
    assert [(r["name"], r["seed"]) for r in res["runs"]] == [(n, s) for n in names for s in seeds]
    assert len(rows) == len(names) * len(seeds) * steps
    for r in res["runs"]:
        assert r["status"] == "ok" and math.isfinite(r["val_loss"]) and r["val_loss"] > 0
    for r in rows:
        assert math.isfinite(float(r["train_loss"])) and math.isfinite(float(r["grad_norm"]))
    for v in res["variants"][1:]:
        d = v["difference_from_baseline"]["val_loss"]
        assert d["n"] == len(seeds) and d["low"] <= d["mean"] <= d["high"]
    return res, rows, log


# ------------------------------------------------------------------ gpt additions


def test_norm_none_and_ln_rms_build_the_chapter_models():
    none = GPT(GPTConfig(vocab_size=10, n_layers=2, d_model=8, n_heads=2, norm="none"))
    assert not [n for n, _ in none.named_parameters() if "ln" in n]
    assert all(isinstance(m, Identity) for b in none.blocks for m in (b.ln1, b.ln2))
    mixed = GPT(GPTConfig(vocab_size=10, n_layers=4, d_model=8, n_heads=2, norm="ln_rms"))
    kinds = [type(b.ln1) for b in mixed.blocks]
    assert kinds == [LayerNorm, LayerNorm, RMSNorm, RMSNorm]  # i < n_layers // 2: LayerNorm
    assert [type(b.ln2) for b in mixed.blocks] == kinds and isinstance(mixed.ln_f, LayerNorm)
    # same seed, same draws: the norms draw nothing, so the other weights are identical
    ln = GPT(GPTConfig(vocab_size=10, n_layers=4, d_model=8, n_heads=2), seed=3)
    mixed = GPT(GPTConfig(vocab_size=10, n_layers=4, d_model=8, n_heads=2, norm="ln_rms"), seed=3)
    np.testing.assert_array_equal(ln.blocks[3].mlp.c_fc.weight.data,
                                  mixed.blocks[3].mlp.c_fc.weight.data)


def test_a_frozen_parameter_gets_no_gradient_and_no_update():
    model = GPT(GPTConfig(vocab_size=10, n_layers=1, d_model=8, n_heads=2, block_size=4))
    w = model.blocks[0].ln1.weight
    with minigrad.no_grad():
        w.mul_(0.5)
    w.requires_grad = False
    before = w.data.copy()
    other = model.blocks[0].ln1.bias.data.copy()
    data = np.random.default_rng(0).integers(0, 10, 100)
    train(model, data, steps=3, batch_size=4)
    assert w.grad is None
    np.testing.assert_array_equal(w.data, before)      # no gradient step, no weight decay
    assert not np.array_equal(model.blocks[0].ln1.bias.data, other)  # the rest trains


# ------------------------------------------------------------------ break_it


@pytest.fixture(scope="module")
def break_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("break") / "out"
    rc = main(break_it, TINY + ["--output-dir", str(out), "--save-checkpoints"])
    return rc, out


def test_break_it_runs_every_variant_beside_the_baseline(break_run):
    rc, out = break_run
    assert rc == 0
    res, _, log = _check_structure(out, ["ln", "ln_rms", "none", "ln_gain0"])
    p = {v["name"]: v["params"] for v in res["variants"]}
    C, L = 16, 2
    assert p["ln"] - p["none"] == (2 * L + 1) * 2 * C       # every LayerNorm's weight and bias
    assert p["ln"] - p["ln_rms"] == 2 * C                   # block 1's two norms lose a bias
    assert p["ln_gain0"] == p["ln"]                         # frozen, still counted
    for word in ("Paired differences from ln", "Gradient norm before clipping", "Divergence: none"):
        assert word in log


def test_break_it_zero_gains_stay_zero(break_run):
    _, out = break_run
    for seed in (0, 1):
        model = load_checkpoint(out / f"ln_gain0_seed{seed}.npz")
        gains = [m.weight.data for m in model.modules() if isinstance(m, LayerNorm)]
        assert len(gains) == 5 and all(not g.any() for g in gains)
        biases = [m.bias.data for m in model.modules() if isinstance(m, LayerNorm)]
        assert any(b.any() for b in biases)  # the biases trained


def test_unigram_loss_by_hand():
    # fit targets [0, 0, 1, 1] (counts 2, 2): p = 1/2 each; every target costs ln 2
    assert break_it.unigram_loss([9, 0, 0, 1, 1], [5, 1, 0]) == pytest.approx(math.log(2))
    assert break_it.unigram_loss([9, 0, 0], [5, 1]) == math.inf


def test_break_it_divergence_is_a_finding_not_a_crash(tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(break_it, TINY + ["--steps", "6", "--lr", "1e6", "--output-dir", str(out)])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err
    res, rows, log = _load(out)
    findings = log[log.index("Divergence"):].splitlines()[1:]
    diverged = [r for r in res["runs"] if r["status"] == "diverged"]
    assert diverged
    for r in diverged:
        at = r["diverged_at"]
        line = f"  {r['name']} seed {r['seed']}: {at['what']} became {at['value']} at step " \
               f"{at['step']}"
        assert line in findings
        assert len(r["loss_curve"]) == at["step"] - 1 == r["steps_completed"]
    assert all(math.isfinite(float(x["train_loss"])) for x in rows)


# ------------------------------------------------------------------ activations, positions


def test_activations(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(activations, TINY + ["--output-dir", str(out)]) == 0
    res, _, log = _check_structure(out, ["gelu", "relu2", "swiglu"])
    p = {v["name"]: v["params"] for v in res["variants"]}
    C, L = 16, 2
    hidden = int(C * 8 / 3)  # 42
    # per layer: GELU/ReLU² MLP 2 (4C C) + 4C + C; SwiGLU 3 hidden C, no biases
    assert p["relu2"] == p["gelu"]
    assert p["gelu"] - p["swiglu"] == L * (8 * C * C + 5 * C - 3 * hidden * C)
    assert f"swiglu {p['swiglu'] - p['gelu']:+d}" in log
    assert "Paired differences from gelu" in capsys.readouterr().out


def test_positions(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(positions, TINY + ["--output-dir", str(out)]) == 0
    res, _, log = _check_structure(out, ["learned", "rope"])
    p = {v["name"]: v["params"] for v in res["variants"]}
    assert p["learned"] - p["rope"] == 8 * 16  # the block_size x d_model table
    assert "rope -128" in log


@pytest.mark.parametrize("module, args, needle", [
    (break_it, ["--norm", "rms"], "--norm"),       # break_it's variants set the norm
    (positions, ["--pos", "rope"], "--pos"),
    (activations, ["--mlp", "gelu"], "--mlp"),
    (positions, ["--pos-typo"], "--pos-typo"),
    (positions, ["--d-model", "12", "--n-heads", "4"], "head_dim"),  # RoPE needs an even one
])
def test_bad_input_is_one_line_and_exit_2(module, args, needle, tmp_path, capsys):
    code = main(module, TINY + args + ["--output-dir", str(tmp_path / "out")])
    cap = capsys.readouterr()
    assert code == 2 and cap.out == ""
    assert len(cap.err.strip().splitlines()) == 1 and needle in cap.err
    assert "Traceback" not in cap.err and not (tmp_path / "out").exists()
