"""Tests of `python -m experiments.four_variants` and the runner every study shares: the table,
the outputs, determinism, runs in this process, --jobs 2 against a serial run, statistics
recomputed independently, divergence, bad input, Ctrl-C, and a folder's other files left alone.

The runs are tiny (a few steps); the full --tiny run (200 steps per variant) is CI's main job.
"""
import csv
import json
import math
import os
import runpy
import statistics
import subprocess
import sys
import traceback
from pathlib import Path

import numpy as np
import pytest

import gpt.train
from experiments import cli, figures, four_variants, runner

pytestmark = pytest.mark.slow  # every test here trains or runs a command

REPO = Path(__file__).resolve().parents[1]
# The chapter's run_log (chapter "The Details That Matter"), 48-character vocabulary.
CHAPTER_PARAMS = {("ln", "gelu"): 105216, ("rms", "gelu"): 104896,
                  ("ln", "swiglu"): 104320, ("rms", "swiglu"): 104000}
PNGS = {"loss_curves.png", "deltas.png", "grad_norms.png"}
SMALL = ["--steps", "4", "--n-layers", "1", "--d-model", "16", "--n-heads", "2",
         "--block-size", "8", "--eval-every", "2", "--no-plots"]
HEADER = "norm    mlp           params     train       val"


def main(args, study=four_variants.STUDY):
    """The command as ``python -m`` runs it: its exit status."""
    with pytest.raises(SystemExit) as e, cli.errors(study.prog):
        sys.exit(runner.run(study, args))
    return e.value.code


def load(out):
    res = json.loads((out / "results.json").read_text())
    with open(out / "curves.csv", newline="") as f:
        return res, list(csv.DictReader(f)), (out / "run_log.txt").read_text()


def numbers(res):
    """results.json without what differs between two runs of the same numbers."""
    res = dict(res, run_id=None)
    res["runs"] = [dict(r, seconds=None) for r in res["runs"]]
    return res


@pytest.fixture(scope="module")
def chapter_run(tmp_path_factory):
    """The chapter's model, 3 steps, checkpoints on, as a user runs it."""
    out = tmp_path_factory.mktemp("run") / "out"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "experiments.four_variants", "--steps", "3",
                           "--output-dir", str(out), "--save-checkpoints", "--no-plots"],
                          env=env, capture_output=True, text=True, timeout=300)
    return proc, out


def test_the_chapter_table_and_its_files(chapter_run):
    proc, out = chapter_run
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "Uniform baseline: 3.8712" in lines   # ln 48
    i = lines.index(HEADER)
    assert lines[i + 1] == "-" * 50
    rows = [ln.split() for ln in lines[i + 2:i + 6]]
    assert [(r[0], r[1], int(r[2])) for r in rows] == [(*k, p) for k, p in CHAPTER_PARAMS.items()]
    res, curves, log = load(out)
    for r, v in zip(rows, res["runs"]):   # the table shows the means results.json records
        assert r[3] == f"{v['train_loss']:.4f}" and r[4] == f"{v['val_loss']:.4f}"
    assert lines[i + 6:] == ["", f"Outputs written to {out}"]   # one seed: the table
    assert "Lessons" in log and "Traceback" not in proc.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(res["files"]) == [
        "curves.csv", "ln_gelu.npz", "ln_swiglu.npz", "results.json", "rms_gelu.npz",
        "rms_swiglu.npz", "run_log.txt"]
    assert len(curves) == 4 * 3 and res["status"] == "ok"
    assert res["config"]["model"]["d_model"] == 64 and res["config"]["optimizer"]["lr"] == 3e-3
    assert "- init pytorch, AdamW lr 0.003 constant, weight decay 0.01 on every parameter." \
        in log.splitlines()
    progress = [ln for ln in proc.stderr.splitlines() if "steps/s" in ln]
    assert len(progress) == 4 and all("3/3" in ln for ln in progress)


def test_a_checkpoint_reproduces_the_reported_loss(chapter_run):
    from gpt import load_checkpoint
    _, out = chapter_run
    res, _, _ = load(out)
    data = runner.options.load_data(runner.parse_args(four_variants.STUDY, []))
    for v in res["runs"]:
        model = load_checkpoint(out / v["checkpoint"])
        assert model.num_parameters() == v["params"]
        assert gpt.train.evaluate(model, data.val) == v["val_loss"]


def test_runs_train_in_this_process_in_order_down_a_stack_that_never_comes_back(
        tmp_path, capsys, monkeypatch):
    seen, stacks = [], []
    real = gpt.train.train

    def spy(model, *a, **k):   # what a breakpoint() in a backward sees: this process
        seen.append((os.getpid(), model.config.norm, model.config.mlp))
        stacks.append([Path(f.filename).relative_to(REPO).with_suffix("").as_posix()
                       for f in traceback.extract_stack() if f.filename.startswith(
                           str(REPO / "experiments"))])
        return real(model, *a, **k)
    monkeypatch.setattr(gpt.train, "train", spy)
    monkeypatch.setattr(sys, "argv", ["four_variants", *SMALL, "--output-dir", str(tmp_path)])
    with pytest.raises(SystemExit) as e:   # as python -m runs it: the study's own __main__
        runpy.run_path(four_variants.__file__, run_name="__main__")
    assert e.value.code == 0
    assert seen == [(os.getpid(), n, m) for n, m in CHAPTER_PARAMS]
    modules = [m for i, m in enumerate(stacks[0]) if i == 0 or stacks[0][i - 1] != m]
    assert modules == ["experiments/four_variants", "experiments/runner"], stacks[0]


@pytest.fixture(scope="module")
def two_seeds(tmp_path_factory):
    root = tmp_path_factory.mktemp("seeds")
    with pytest.MonkeyPatch.context() as m:
        m.setattr(sys, "stdout", open(os.devnull, "w"))
        assert main(SMALL + ["--seeds", "3", "--output-dir", str(root / "serial")]) == 0
        assert main(SMALL + ["--seeds", "3", "--jobs", "2",
                             "--output-dir", str(root / "jobs")]) == 0
    return load(root / "serial"), load(root / "jobs")


@pytest.mark.slow
def test_jobs_2_gives_the_numbers_of_a_serial_run(two_seeds):
    (a, ca, la), (b, cb, lb) = two_seeds
    assert numbers(a) == numbers(b) and ca == cb and la == lb


def test_statistics_recomputed_independently(two_seeds):
    (res, curves, log), _ = two_seeds
    runs = {(r["name"], r["seed"]): r for r in res["runs"]}
    assert len(curves) == 4 * 3 * 4   # every step of every run
    for v in res["variants"][1:]:
        d = [runs[v["name"], s]["val_loss"] - runs["ln+gelu", s]["val_loss"] for s in (0, 1, 2)]
        got = v["difference_from_baseline"]["val_loss"]
        half = 4.302652729749464 * statistics.stdev(d) / math.sqrt(3)   # t(0.975, 2)
        assert got["mean"] == pytest.approx(statistics.mean(d), abs=1e-15)
        assert got["low"] == pytest.approx(statistics.mean(d) - half, rel=1e-9)
        assert f"{v['name']}" in log and v["val_loss"]["n"] == 3
    assert len({runs["ln+gelu", s]["val_loss"] for s in (0, 1, 2)}) == 3   # seeds differ
    assert all(ln == ln.rstrip() for ln in log.splitlines())


def test_variants_can_be_chosen(tmp_path, capsys):
    assert main(SMALL + ["--variants", "rms+swiglu,ln+gelu", "--output-dir", str(tmp_path)]) == 0
    res, _, log = load(tmp_path)
    assert [v["name"] for v in res["variants"]] == ["rms+swiglu", "ln+gelu"]
    assert res["config"]["baseline"] == "rms+swiglu" and "Parameters minus rms+swiglu" in log
    for bad in ("ln+gelu,ln+gelu", "ln+relu"):
        assert main(SMALL + ["--variants", bad, "--output-dir", str(tmp_path / "x")]) == 2


@pytest.mark.parametrize("seeds", ["1", "2"])
def test_the_baseline_alone_has_nothing_to_compare_and_says_so_in_one_line(seeds, tmp_path,
                                                                           capsys):
    args = [a for a in SMALL if a != "--no-plots"] if figures.available() else SMALL
    assert main(args + ["--variants", "ln+gelu", "--seeds", seeds,
                        "--output-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    res, _, log = load(tmp_path)
    line = ("Only the baseline ln+gelu was trained (--variants): nothing to compare it with, "
            "so no differences and no deltas.png.")
    for text in (out, log):
        assert text.count(line) == 1
        assert "Paired differences" not in text and "Parameters minus" not in text
    assert not (tmp_path / "deltas.png").exists() and "deltas.png" not in res["files"]
    assert not figures.available() or (tmp_path / "loss_curves.png").exists()


def poison(model):
    """Every weight NaN: the loss is NaN at step 1."""
    for p in model.parameters():
        p.data[...] = np.nan


def test_a_diverging_variant_stops_alone_and_everything_is_written(tmp_path, capsys):
    study = runner.Study(**{**vars(four_variants.STUDY), "variants": (
        four_variants.STUDY.variants[0], runner.Variant("bad", modify=poison))})
    assert main(SMALL + ["--seeds", "2", "--output-dir", str(tmp_path)], study) == 1
    res, curves, log = load(tmp_path)
    assert [r["status"] for r in res["runs"]] == ["ok", "ok", "diverged", "diverged"]
    assert res["runs"][2]["message"] == "loss became nan at step 1"
    assert "bad seed 0: loss became nan at step 1" in log and res["status"] == "diverged"
    assert "diverged" in capsys.readouterr().err


BAD = {"steps zero": (["--steps", "0"], "--steps"), "seeds": (["--seeds", "5000"], "maximum"),
       "lr nan": (["--lr", "nan"], "--lr"), "tiny and full": (["--tiny", "--full"], "--full"),
       "unknown": (["--bogus"], "--bogus"), "heads": (["--n-heads", "3"], "n_heads=3"),
       "warmup": (["--warmup-iters", "10", "--steps", "5"], "--warmup-iters"),
       "min lr": (["--min-lr", "1", "--lr", "0.1"], "--min-lr"),
       "corpus": (["--corpus", "no/such/file.txt"], "not found"),
       "short corpus": (["--corpus", "SHORT", "--block-size", "32"], "too short"),
       "jobs and scheduler": (["--jobs", "2", "--scheduler", "tcp://x:1"], "not allowed"),
       "empty scheduler": (["--scheduler", ""], "empty"),
       "bias and no bias": (["--bias", "--no-bias"], "--no-bias: not allowed with argument --bias"),
       "backward with scheduler": (["--backward", "x", "--scheduler", "tcp://x:1"], "--backward"),
       "model too wide": (["--d-model", "100000000"], "GiB of memory"),
       "batch too large": (["--batch-size", "100000000"], "GiB of memory"),
       "threads": (["--threads", str(cli.cpus() + 1)], "the CPUs this process may use"),
       "jobs": (["--jobs", str(cli.cpus() + 1)], "the CPUs this process may use")}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_line_exit_2_and_nothing_written(case, tmp_path, capsys):
    args, needle = BAD[case]
    short = tmp_path / "short.txt"
    short.write_text("abcdefghij" * 3)
    args = [str(short) if a == "SHORT" else a for a in args]
    assert main(args + ["--output-dir", str(tmp_path / "out")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and needle in err, err
    assert not (tmp_path / "out").exists()


def test_more_jobs_than_runs_is_as_many_jobs_as_runs_and_says_so(tmp_path, capsys):
    assert main(SMALL + ["--variants", "ln+gelu", "--jobs", str(cli.cpus()),
                         "--output-dir", str(tmp_path)]) == 0
    header = capsys.readouterr().err.splitlines()[0]
    assert "1 run x 4 steps" in header and "in this process" in header, header


def test_ctrl_c_is_one_line_130_and_writes_no_file(tmp_path, capsys, monkeypatch):
    def interrupted(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(gpt.train, "train", interrupted)
    (tmp_path / "notes.txt").write_text("mine")
    assert main(SMALL + ["--output-dir", str(tmp_path)]) == 130
    assert capsys.readouterr().err.splitlines()[-1] == \
        "python -m experiments.four_variants: interrupted"
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
    assert main(SMALL + ["--output-dir", str(tmp_path / "new" / "out")]) == 130
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]   # the folders it made: gone


LEARNER_BREAKPOINT = """import numpy as np


def rmsnorm_backward(dout, cache):
    xhat, weight, rstd = cache
    dweight = np.einsum("nc,nc->c", dout.reshape(-1, xhat.shape[-1]),
                        xhat.reshape(-1, xhat.shape[-1]))
    dxhat = dout * weight
    dx = rstd * (dxhat - xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True))
    if dout.size > 1000:   # in training, not in the check's small cases
        breakpoint()
    return dx, dweight
"""


def test_q_at_a_breakpoint_in_a_backward_ends_as_ctrl_c_does(tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "rmsnorm.py").write_text(LEARNER_BREAKPOINT)
    out = tmp_path / "new" / "out"
    r = subprocess.run([sys.executable, "-m", "experiments.four_variants", *SMALL,
                        "--batch-size", "32", "--block-size", "16", "--d-model", "16",
                        "--backward", str(tmp_path / "mine"), "--output-dir", str(out)],
                       cwd=REPO, input="q\n", capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONBREAKPOINT": "pdb.set_trace"})
    assert "(Pdb)" in r.stdout   # it stopped in the learner's backward, during training
    assert r.returncode == 130 and "Traceback" not in r.stderr
    assert r.stderr.splitlines()[-1] == "python -m experiments.four_variants: interrupted"
    kept = json.loads((out / "results.json").read_text())   # the runs before RMSNorm's: kept
    assert [p.name for p in out.iterdir()] == ["results.json"]
    assert kept["status"] == "incomplete"
    assert kept["runs"] and all(e["norm"] == "ln" for e in kept["runs"])


@pytest.mark.parametrize("call", ["breakpoint()", "import pdb; pdb.set_trace()"])
def test_a_breakpoint_in_a_backward_is_refused_with_jobs_2_before_any_check(call, tmp_path,
                                                                            capsys):
    """A worker process has no terminal: its debugger prompt would end the run as Ctrl-C."""
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "rmsnorm.py").write_text(LEARNER_BREAKPOINT.replace("breakpoint()", call))
    assert main(SMALL + ["--jobs", "2", "--backward", str(mine),
                         "--output-dir", str(tmp_path / "out")]) == 2
    out, err = capsys.readouterr()
    name = call.split(".")[-1]
    assert out == "" and err.splitlines() == [
        f"python -m experiments.four_variants: error: --backward {mine}: rmsnorm.py line 11 "
        f"calls {name}, which stops only with --jobs 1 (the runs train in this process); "
        f"--jobs 2 trains in worker processes, where the debugger has no terminal"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mine"]


def test_a_run_keeps_the_users_files_and_replaces_its_own(tmp_path, capsys):
    (tmp_path / "ln_gelu.npz").write_text("mine")   # a name a run with checkpoints would write
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "results.json").write_text("old")
    assert main(SMALL + ["--output-dir", str(tmp_path)]) == 0
    assert (tmp_path / "ln_gelu.npz").read_text() == (tmp_path / "notes.txt").read_text() == "mine"
    assert json.loads((tmp_path / "results.json").read_text())["status"] == "ok"


@pytest.mark.skipif(not figures.available(), reason="matplotlib is not installed")
def test_an_earlier_runs_figures_are_kept_and_named_by_a_run_that_draws_none(tmp_path, capsys):
    assert main([a for a in SMALL if a != "--no-plots"] + ["--output-dir", str(tmp_path)]) == 0
    before = {name: (tmp_path / name).read_bytes() for name in PNGS}
    capsys.readouterr()
    assert main(SMALL + ["--output-dir", str(tmp_path)]) == 0   # --no-plots
    line = ("Also in the folder, not written by this run (an earlier run's, left as they were): "
            "deltas.png, grad_norms.png, loss_curves.png")
    assert capsys.readouterr().out.splitlines()[-1] == line
    res, _, log = load(tmp_path)
    assert f"- {line}." in log.splitlines() and not PNGS & set(res["files"])
    assert all((tmp_path / name).read_bytes() == png for name, png in before.items())


@pytest.mark.skipif(not figures.available(), reason="matplotlib is not installed")
def test_the_figures_are_pngs(tmp_path, capsys):
    assert main([a for a in SMALL if a != "--no-plots"] + ["--output-dir", str(tmp_path)]) == 0
    for name in PNGS:
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
