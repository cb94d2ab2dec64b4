"""Tests of ``python -m experiments.train_gpt``: presets, --resume against an uninterrupted run,
the outputs, and bad input (one line, exit 2). The runs are tiny (a few steps)."""
import csv
import sys

import numpy as np
import pytest

from experiments import cli, figures, four_variants, runner, train_gpt
from experiments.options import PRESETS

pytestmark = pytest.mark.slow  # every test here trains or runs a command

TINY = ["--n-layers", "1", "--d-model", "16", "--n-heads", "2", "--block-size", "8",
        "--batch-size", "4", "--eval-interval", "3", "--eval-iters", "2", "--no-plots"]
# a schedule that does not depend on --max-iters, so a run can be continued past it
SCHEDULE = ["--warmup-iters", "2", "--lr-decay-iters", "10", "--min-lr", "1e-4", "--lr", "1e-3",
            "--decay-on", "2d", "--beta2", "0.99", "--weight-decay", "0.1", "--init", "gpt2"]


def main(args):
    with pytest.raises(SystemExit) as ei, cli.errors(train_gpt.PROG):
        sys.exit(train_gpt.run(args))
    return ei.value.code


def parsed(argv):
    """experiments.train_gpt's options after the preset, as run() resolves them."""
    return train_gpt.parse_args(argv)[0]


# ---------------------------------------------------------------- presets

def test_the_preset_is_nanogpts_cpu_run():
    a = parsed(["--preset", "shakespeare-cpu"])
    assert (a.corpus, a.n_layers, a.n_heads, a.d_model, a.block_size, a.batch_size) == \
        ("shakespeare", 4, 4, 128, 64, 12)
    assert (a.max_iters, a.lr, a.min_lr, a.beta2, a.warmup_iters, a.lr_decay_iters) == \
        (2000, 1e-3, 1e-4, 0.99, 100, 2000)
    assert (a.weight_decay, a.decay_on, a.grad_clip, a.eval_iters, a.eval_interval, a.init) == \
        (0.1, "2d", 1.0, 20, 250, "gpt2")
    assert a.bias is False and parsed(["--preset", "shakespeare-cpu", "--bias"]).bias is True


def test_an_option_given_wins_over_the_preset_even_at_its_default():
    a = parsed(["--preset", "shakespeare-cpu", "--lr", "5e-4", "--n-layers", "2",
                "--corpus", "pride"])
    assert (a.lr, a.n_layers, a.corpus) == (5e-4, 2, "pride")   # 2 is also the default
    assert (a.d_model, a.min_lr, a.max_iters) == (128, 1e-4, 2000)   # the rest: the preset's
    b = parsed([])
    assert (b.lr, b.n_layers, b.min_lr, b.init, b.corpus) == (3e-3, 2, None, "pytorch", None)


def test_the_studies_take_the_same_preset():
    for study in (four_variants.STUDY, __import__("experiments.activations").activations.STUDY,
                  __import__("experiments.positions").positions.STUDY):
        a = runner.parse_args(study, ["--preset", "shakespeare-cpu", "--seeds", "5"])
        assert (a.steps, a.eval_every, a.d_model, a.block_size, a.batch_size, a.lr_decay_iters,
                a.init, a.decay_on, a.seeds) == (2000, 250, 128, 64, 12, 2000, "gpt2", "2d", 5)
        assert runner.parse_args(study, ["--preset", "shakespeare-cpu", "--steps", "7"]
                                        ).steps == 7
        tiny = runner.parse_args(study, ["--preset", "shakespeare-cpu", "--tiny"])
        assert tiny.steps == 200 and tiny.d_model == 128


def test_every_preset_key_is_an_option_of_a_command():
    dests = set(vars(parsed([]))) | set(vars(runner.parse_args(four_variants.STUDY, [])))
    for preset in PRESETS.values():
        assert set(preset) <= dests


# ---------------------------------------------------------------- a run, and its resumption

@pytest.mark.slow
def test_resume_gives_the_numbers_of_an_uninterrupted_run(tmp_path, capfd):
    """6 steps, then --resume to 10 == 10 steps at once: every step's loss and lr, every
    estimate, the checkpoint's weights and AdamW moments, bit for bit."""
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert main(TINY + SCHEDULE + ["--max-iters", "10", "--output-dir", str(whole)]) == 0
    assert main(TINY + SCHEDULE + ["--max-iters", "6", "--output-dir", str(part)]) == 0
    first = (part / "curves.csv").read_text()
    assert main(["--resume", "--max-iters", "10", "--output-dir", str(part)]) == 0
    out = capfd.readouterr().out
    assert "resuming at step" in out
    assert (whole / "curves.csv").read_text() == (part / "curves.csv").read_text()
    assert (part / "curves.csv").read_text().startswith(first)   # the first run's rows, then on
    a, b = np.load(whole / "ckpt.npz"), np.load(part / "ckpt.npz")
    assert sorted(a.files) == sorted(b.files)
    assert any(k.startswith("__optimizer__.") for k in a.files)
    for k in a.files:
        if k != "__minigrad_gpt__":
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)
    rows = list(csv.DictReader(open(whole / "curves.csv")))
    assert [r["step"] for r in rows] == [str(s) for s in range(11)]
    from gpt.train import get_lr
    assert [float(r["lr"]) for r in rows[1:]] == [get_lr(s, 1e-3, 1e-4, 2, 10) for s in range(10)]
    assert [r["step"] for r in rows if r["val_loss_estimate"]] == ["0", "3", "6", "9", "10"]


@pytest.mark.slow
def test_a_run_writes_its_files_and_prints_a_sample(tmp_path, capfd):
    out = tmp_path / "o"
    args = [a for a in TINY if a != "--no-plots"]
    assert main(args + ["--max-iters", "4", "--output-dir", str(out), "--sample-chars", "40",
                        "--corpus", "pride"]) == 0
    cap = capfd.readouterr()
    names = {"ckpt.npz", "curves.csv", "run_log.txt"} | ({"loss.png"} if
                                                          figures.available() else set())
    assert {p.name for p in out.iterdir()} == names
    lines = cap.out.splitlines()
    assert lines[0].startswith("step 0: train loss ") and ", val loss " in lines[0]
    assert any(line.startswith("checkpoint ") and "over the whole val split" in line
               for line in lines)
    sample = cap.out.split("sample (temperature 0.8):\n", 1)[1]
    assert len(sample.rstrip("\n")) >= 40 - sample.count("\n")
    assert "corpus: pride (683934 characters, vocab 74)" in cap.err
    log = (out / "run_log.txt").read_text()
    assert lines[0] in log and '"corpus": "pride"' in log
    from gpt.checkpoint import load_checkpoint, load_tokenizer
    assert load_tokenizer(out / "ckpt.npz").vocab_size == load_checkpoint(
        out / "ckpt.npz").config.vocab_size == 74


@pytest.mark.skipif(not figures.available(), reason="matplotlib is not installed")
def test_an_earlier_runs_loss_png_is_kept_and_named_by_a_run_that_draws_none(tmp_path, capsys):
    args = TINY + ["--max-iters", "3", "--output-dir", str(tmp_path), "--sample-chars", "0"]
    assert main([a for a in args if a != "--no-plots"]) == 0
    png = (tmp_path / "loss.png").read_bytes()
    capsys.readouterr()
    assert main(args) == 0
    line = "also in the folder, not written by this run (an earlier run's, left as it was): loss.png"
    assert line in capsys.readouterr().out.splitlines()
    assert line in (tmp_path / "run_log.txt").read_text().splitlines()
    assert (tmp_path / "loss.png").read_bytes() == png


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("args, needle", [
    (["--resume"], "ckpt.npz"),
    (["--warmup-iters", "10", "--max-iters", "10"], "--warmup-iters (10) must be less than"),
    (["--beta2", "1"], "--beta2 must be below 1"),
    (["--preset", "gpu"], "invalid choice"),
    (["--corpus", "nope.txt"], "not found"),
    (["--corpus", "shakespear"], "the corpora by name: shakespeare, pride"),
    (["--lr", "1e-3", "--min-lr", "1e-2"], "--min-lr (0.01) must not exceed --lr (0.001)"),
    (["--max-iters", "2000000"], "maximum"),
    (["--sample-chars", "100000000"], "100000000 is more than the maximum of 1,000,000 characters"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle, tmp_path, capfd):
    assert main(args + ["--output-dir", str(tmp_path / "o")]) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0] and err[0].startswith(train_gpt.PROG)
    assert not (tmp_path / "o").exists()


@pytest.mark.slow
def test_resume_refuses_a_changed_model_and_a_finished_run(tmp_path, capfd):
    out = str(tmp_path / "o")
    assert main(TINY + ["--max-iters", "3", "--output-dir", out, "--sample-chars", "0"]) == 0
    capfd.readouterr()
    for args, needle in ((["--n-layers", "2", "--max-iters", "6"], "--n-layers 1"),
                         ([], "give a larger --max-iters")):
        assert main(["--resume", "--output-dir", out] + args) == 2
        err = capfd.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0]
