"""Tests of `python -m experiments.four_variants` and the runner every study shares: the table,
outputs, determinism, --jobs 2 against a serial run, statistics recomputed independently, the
closing block against the table, divergence, bad input, and a folder's other files left alone.

The runs are tiny (a few steps); the full --tiny run (200 steps per variant) is CI's main job.
"""
import csv
import dataclasses
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from experiments import _plots, cli, four_variants

REPO = Path(__file__).resolve().parents[1]
# The chapter's run_log (chapter "The Details That Matter"), 48-character vocabulary.
CHAPTER_PARAMS = {("ln", "gelu"): 105216, ("rms", "gelu"): 104896,
                  ("ln", "swiglu"): 104320, ("rms", "swiglu"): 104000}
PNGS = {"loss_curves.png", "deltas.png", "grad_norms.png"}  # written when matplotlib is installed
TINY = ["--steps", "4", "--n-layers", "1", "--d-model", "16", "--n-heads", "2",
        "--block-size", "8", "--eval-every", "2"]
NAMES = ["ln+gelu", "rms+gelu", "ln+swiglu", "rms+swiglu"]
HEADER = "norm    mlp           params     train       val"


def main(args, study=four_variants.STUDY):
    """The command as ``python -m`` runs it (``cli.main``): its exit status."""
    with pytest.raises(SystemExit) as ei:
        cli.main(study.prog, lambda argv: four_variants.run_study(study, argv), args)
    return ei.value.code


def _poison(model):
    """Every weight NaN: the variant's loss is NaN at step 1 (module level: runs in a worker)."""
    for p in model.parameters():
        p.data[...] = np.nan


def diverging(name):
    """four_variants with variant ``name`` poisoned."""
    return dataclasses.replace(four_variants.STUDY, variants=tuple(
        dataclasses.replace(v, modify=_poison) if v.name == name else v
        for v in four_variants.STUDY.variants))


def run_cli(args, cwd):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "experiments.four_variants", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def all_files(root):
    return sorted(str(p.relative_to(root)) for p in Path(root).rglob("*"))


def _load(out):
    res = json.loads((out / "results.json").read_text())
    with open(out / "curves.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return res, rows, (out / "run_log.txt").read_text()


def _strip_times(res):
    res.pop("run_id")  # unique to each run by design
    for r in res["runs"]:
        r.pop("seconds")
    return res


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """One real invocation with the chapter's model, 3 steps, checkpoints on."""
    cwd = tmp_path_factory.mktemp("run")
    out = cwd / "out"
    proc = run_cli(["--steps", "3", "--output-dir", str(out), "--save-checkpoints", "--no-plots"],
                   cwd)
    return proc, out


def test_cli_prints_the_chapter_table(small_run):
    proc, out = small_run
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "Uniform baseline: 3.8712" in lines
    i = lines.index(HEADER)
    assert lines[i].split() == ["norm", "mlp", "params", "train", "val"]
    assert lines[i + 1] == "-" * 50
    rows = [ln.split() for ln in lines[i + 2:i + 6]]
    assert [(r[0], r[1]) for r in rows] == list(CHAPTER_PARAMS)  # the chapter's order
    for r in rows:
        assert int(r[2]) == CHAPTER_PARAMS[(r[0], r[1])]
        train, val = float(r[3]), float(r[4])
        assert math.isfinite(train) and math.isfinite(val) and train > 0 and val > 0
    # the table shows the full-split means recorded in results.json
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    for r, v in zip(rows, res["runs"]):
        assert r[3] == f"{v['train_loss']:.4f}" and r[4] == f"{v['val_loss']:.4f}"
    assert "Traceback" not in proc.stderr
    # one progress line per variant on stderr, with steps/s and the current loss
    progress = [ln for ln in proc.stderr.splitlines() if "steps/s" in ln]
    assert len(progress) == 4 and all("loss" in ln and "3/3" in ln for ln in progress)


def test_cli_writes_run_log_results_and_checkpoints(small_run):
    proc, out = small_run
    assert proc.returncode == 0, proc.stderr
    assert all_files(out) == ["curves.csv", "ln_gelu.npz", "ln_swiglu.npz", "results.json",
                              "rms_gelu.npz", "rms_swiglu.npz", "run_log.txt"]
    log = (out / "run_log.txt").read_text(encoding="utf-8").splitlines()
    assert log[1:5] == ["steps: 3", "uniform baseline: 3.8712", "", HEADER]
    assert [ln.split()[:3] for ln in log[5:9]] == [[n, m, str(p)] for (n, m), p in
                                                  CHAPTER_PARAMS.items()]
    assert any(ln.startswith("Lessons") for ln in log)  # the chapter's lessons, checked
    # the chapter's recipe: PyTorch's init, AdamW(lr=3e-3) at weight_decay 0.01 on everything
    assert ("- init pytorch, AdamW lr 0.003 constant, weight decay 0.01 on every parameter."
            in log)

    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert {"config", "versions", "variants", "uniform_baseline", "status"} <= set(res)
    assert res["status"] == "ok"
    assert res["uniform_baseline"] == pytest.approx(math.log(48))
    cfg = res["config"]
    assert cfg["steps"] == 3 and cfg["seed"] == 0 and cfg["batch_size"] == 32
    assert cfg["optimizer"]["lr"] == 3e-3 and cfg["clip_grad_norm"] == 1.0
    assert cfg["model"]["block_size"] == 32 and cfg["model"]["n_layers"] == 2
    assert cfg["model"]["n_heads"] == 4 and cfg["model"]["d_model"] == 64
    assert cfg["corpus"]["vocab_size"] == 48
    assert cfg["corpus"]["train_tokens"] + cfg["corpus"]["val_tokens"] == cfg["corpus"][
        "characters"]
    assert {"python", "numpy", "minigrad-gpt"} <= set(res["versions"])
    assert [(v["norm"], v["mlp"]) for v in res["runs"]] == list(CHAPTER_PARAMS)
    for v in res["runs"]:
        assert v["status"] == "ok" and v["params"] == CHAPTER_PARAMS[(v["norm"], v["mlp"])]
        assert len(v["loss_curve"]) == 3 and v["steps_completed"] == 3
        for k in ("train_loss", "val_loss", "train_loss_one_batch", "val_loss_one_batch"):
            assert math.isfinite(v[k])
        assert v["seconds"] >= 0 and v["checkpoint"] == f"{v['norm']}_{v['mlp']}.npz"


def test_cli_checkpoint_reproduces_the_reported_loss(small_run):
    from gpt import load_checkpoint
    from gpt.data import CharTokenizer, load_corpus, train_val_split
    from gpt.train import evaluate

    proc, out = small_run
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    text = load_corpus()
    tr, va = train_val_split(CharTokenizer(text).encode(text))
    for v in res["runs"]:
        model = load_checkpoint(out / v["checkpoint"])
        assert (model.config.norm, model.config.mlp) == (v["norm"], v["mlp"])
        assert model.num_parameters() == v["params"]
        assert evaluate(model, va) == v["val_loss"]
        assert evaluate(model, tr) == v["train_loss"]
        with np.load(out / v["checkpoint"], allow_pickle=False) as z:
            assert "token_embedding.weight" in z.files


@pytest.mark.slow
def test_same_arguments_same_numbers(tmp_path, capsys):
    args = ["--steps", "2", "--n-layers", "1", "--d-model", "32", "--block-size", "16"]
    for name in ("a", "b"):
        assert main(args + ["--output-dir", str(tmp_path / name)]) == 0
    a = _strip_times(json.loads((tmp_path / "a" / "results.json").read_text()))
    b = _strip_times(json.loads((tmp_path / "b" / "results.json").read_text()))
    assert a == b
    assert (tmp_path / "a" / "run_log.txt").read_text() == (tmp_path / "b" /
                                                             "run_log.txt").read_text()
    assert main(args + ["--seed", "1", "--output-dir", str(tmp_path / "c")]) == 0
    c = _strip_times(json.loads((tmp_path / "c" / "results.json").read_text()))
    assert c["runs"][0]["loss_curve"] != a["runs"][0]["loss_curve"]


def test_divergence_stops_the_variant_and_still_writes_everything(tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["--steps", "30", "--lr", "1e30", "--n-layers", "1",
                             "--d-model", "32", "--block-size", "16", "--output-dir", str(out)])
    cap = capsys.readouterr()
    assert rc == cli.EXIT_DIVERGED == 1
    assert set(all_files(out)) - PNGS == {"curves.csv", "results.json", "run_log.txt"}
    res = json.loads((out / "results.json").read_text())
    assert res["status"] == "diverged"
    assert len(res["runs"]) == 4  # every variant still ran
    for v in res["runs"]:
        assert v["status"] == "diverged"
        assert f"at step {v['steps_completed'] + 1}" in v["message"]
        assert len(v["loss_curve"]) == v["steps_completed"]
        assert v["train_loss"] is None
    assert "diverged" in (out / "run_log.txt").read_text()
    assert "diverged" in cap.err and "Traceback" not in cap.err


# ---------------------------------------------------------------- bad input


def _corpus(tmp_path, name, content):
    p = tmp_path / name
    p.write_bytes(content)
    return str(p)


BAD_ARGS = {
    "steps zero": (["--steps", "0"], "--steps"),
    "steps negative": (["--steps", "-5"], "--steps"),
    "steps non-integer": (["--steps", "1.5"], "--steps"),
    "steps text": (["--steps", "ten"], "--steps"),
    "steps exponent": (["--steps", "1e3"], "--steps"),
    "seed negative": (["--seed", "-1"], "--seed"),
    "seed non-integer": (["--seed", "0.5"], "--seed"),
    "batch zero": (["--batch-size", "0"], "--batch-size"),
    "block negative": (["--block-size", "-32"], "--block-size"),
    "lr negative": (["--lr", "-0.1"], "--lr"),
    "lr nan": (["--lr", "nan"], "--lr"),
    "tiny and full": (["--tiny", "--full"], "--full"),
    "unknown option": (["--bogus"], "--bogus"),
    "heads do not divide d_model": (["--n-heads", "3"], "n_heads=3"),
    "odd head_dim with rope": (["--pos", "rope", "--d-model", "12", "--n-heads", "4"],
                               "head_dim"),
}


def _assert_one_line_error(rc, out, err, needle):
    assert rc == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err and "usage" not in err.lower()
    assert needle in lines[0]


@pytest.mark.parametrize("case", sorted(BAD_ARGS))
def test_bad_arguments(case, tmp_path, capsys):
    args, needle = BAD_ARGS[case]
    out = tmp_path / "out"
    code = main(args + ["--output-dir", str(out)])
    cap = capsys.readouterr()
    _assert_one_line_error(code, cap.out, cap.err, needle)
    assert not out.exists()


@pytest.mark.parametrize("case, content, needle", [
    ("missing", None, "not found"),
    ("empty", b"", "empty"),
    ("non-utf8", b"caf\xe9 au lait " * 20, "UTF-8"),
    ("too short", b"abcdefghij" * 20, "too short"),  # 200 chars: val split 20 < 33
    ("directory", "dir", "directory"),
])
def test_bad_corpus(case, content, needle, tmp_path, capsys):
    if content is None:
        path = str(tmp_path / "nope.txt")
    elif content == "dir":
        path = str(tmp_path)
    else:
        path = _corpus(tmp_path, "c.txt", content)
    out = tmp_path / "out"
    code = main(["--corpus", path, "--output-dir", str(out)])
    cap = capsys.readouterr()
    _assert_one_line_error(code, cap.out, cap.err, needle)
    assert not out.exists()


def test_unwritable_output_dir(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    for target in (blocker, blocker / "sub"):
        code = main(["--steps", "1", "--output-dir", str(target)])
        cap = capsys.readouterr()
        _assert_one_line_error(code, cap.out, cap.err, "not a directory")
    assert all_files(tmp_path) == ["a_file"]
    if os.geteuid() != 0:  # root writes anywhere; the permission case only bites for users
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        code = main(["--steps", "1", "--output-dir", str(ro / "out")])
        cap = capsys.readouterr()
        _assert_one_line_error(code, cap.out, cap.err, "not writable")


@pytest.mark.parametrize("args, needle", [
    (["--steps", "0"], "--steps"),
    (["--corpus", "/nonexistent/corpus.txt"], "not found"),
])
def test_bad_input_via_subprocess_has_no_traceback(args, needle, tmp_path):
    out = tmp_path / "out"
    proc = run_cli(args + ["--output-dir", str(out)], tmp_path)
    _assert_one_line_error(proc.returncode, proc.stdout, proc.stderr, needle)
    assert all_files(tmp_path) == []


def test_custom_corpus_runs(tmp_path, capsys):
    text = ("the quick brown fox jumps over the lazy dog. " * 12).encode("utf-8")
    path = _corpus(tmp_path, "fox.txt", text)
    out = tmp_path / "out"
    rc = main(["--corpus", path, "--steps", "1", "--n-layers", "1", "--d-model",
                             "16", "--block-size", "8", "--output-dir", str(out)])
    assert rc == 0
    res = json.loads((out / "results.json").read_text())
    assert res["config"]["corpus"]["vocab_size"] == len(set(text.decode()))
    assert res["uniform_baseline"] == pytest.approx(math.log(len(set(text.decode()))))


# ---------------------------------------------------------------- helpers


def test_one_diverging_variant_does_not_stop_the_others(tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["--steps", "4", "--n-layers", "1", "--d-model", "32", "--block-size", "16",
               "--output-dir", str(out)], diverging("ln+swiglu"))
    cap = capsys.readouterr()
    assert rc == 1
    res = json.loads((out / "results.json").read_text())
    status = {v["name"]: v["status"] for v in res["runs"]}
    assert status == {"ln+gelu": "ok", "rms+gelu": "ok", "ln+swiglu": "diverged",
                      "rms+swiglu": "ok"}
    bad = res["runs"][2]
    assert bad["message"].startswith("loss became nan at step")
    for v in res["runs"]:
        if v["status"] == "ok":
            assert len(v["loss_curve"]) == 4 and math.isfinite(v["val_loss"])
    log = (out / "run_log.txt").read_text().splitlines()
    assert log[7].startswith("ln      swiglu") and "diverged: loss became nan at step" in log[7]
    assert "ln+swiglu" in cap.err.splitlines()[-1]


SMALL = ["--steps", "2", "--n-layers", "1", "--d-model", "16", "--n-heads", "2",
         "--block-size", "8"]


@pytest.mark.parametrize("flag", ["--output-dir", "--corpus"])
def test_empty_paths_are_rejected(flag, tmp_path, capsys):
    args = SMALL + ([flag, ""] if flag == "--output-dir" else
                    [flag, "", "--output-dir", str(tmp_path / "out")])
    code = main(args)
    cap = capsys.readouterr()
    _assert_one_line_error(code, cap.out, cap.err, "empty path")
    assert all_files(tmp_path) == []


def test_an_output_name_taken_by_a_directory_is_bad_input(tmp_path, capsys):
    (tmp_path / "results.json").mkdir()
    code = main(SMALL + ["--output-dir", str(tmp_path)])
    cap = capsys.readouterr()
    _assert_one_line_error(code, cap.out, cap.err, "not a regular file")
    assert all_files(tmp_path) == ["results.json"]


def test_a_failed_write_leaves_that_file_absent_and_one_line(tmp_path, capsys, monkeypatch):
    """The files are written one by one, each complete or absent: a failure while writing the
    third checkpoint leaves the two before it, no temporary file, and one line."""
    calls = []

    def failing_save(model, path, tokenizer=None, run_id=None):
        calls.append(path)
        Path(path).write_bytes(b"half")
        if len(calls) == 3:
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(four_variants, "save_checkpoint", failing_save)
    out = tmp_path / "out"
    code = main(SMALL + ["--output-dir", str(out), "--save-checkpoints"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1].endswith(f"{out / 'ln_swiglu.npz'}: No space left on device")
    assert "Traceback" not in "\n".join(err)
    assert all_files(out) == ["ln_gelu.npz", "rms_gelu.npz"]


def test_a_model_too_large_for_memory_is_refused_before_training(tmp_path, capsys):
    code = main(["--d-model", "16384", "--n-heads", "1", "--steps", "1",
                            "--output-dir", str(tmp_path / "out")])
    cap = capsys.readouterr()
    _assert_one_line_error(code, cap.out, cap.err, "GiB of memory")
    assert all_files(tmp_path) == []


def test_memory_lower_bound_counts_the_weights_four_times():
    cfg = four_variants.GPTConfig(vocab_size=10, block_size=4, n_layers=1, n_heads=1,
                                  d_model=8, dtype="float64")
    # 4 x (V C + 12 C^2) weights/grads/moments, 1 layer of B T (18 C + H T), 2 B T V logits
    expected = (4 * (10 * 8 + 12 * 64) + 2 * 4 * (18 * 8 + 4) + 2 * 2 * 4 * 10) * 8
    assert four_variants.memory_lower_bound(cfg, batch_size=2) == expected


def test_out_of_memory_is_one_line(tmp_path, capsys, monkeypatch):
    def oom(jobs, workers, client=None):
        raise MemoryError("Unable to allocate 96.0 GiB")

    monkeypatch.setattr(four_variants, "train_all", oom)
    code = main(SMALL + ["--output-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "out of memory" in err[-1]
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_closed_stdout_still_writes_the_outputs(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen([sys.executable, "-m", "experiments.four_variants", *SMALL,
                             "--output-dir", str(out)], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader went away before the first line (like `| head -0`)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == cli.EXIT_BROKEN_PIPE, err
    assert "Traceback" not in err
    assert set(all_files(out)) - PNGS == {"curves.csv", "results.json", "run_log.txt"}


@pytest.fixture(scope="module")
def two_seeds(tmp_path_factory):
    """Two seeds, serial and with --jobs 2."""
    root = tmp_path_factory.mktemp("runner")
    rcs = []
    for name, extra in (("serial", []), ("jobs2", ["--jobs", "2"])):
        rcs.append(main(TINY + ["--seeds", "2", "--no-plots", "--output-dir",
                                              str(root / name)] + extra))
    return rcs, root


def test_jobs_2_gives_the_numbers_of_a_serial_run(two_seeds):
    rcs, root = two_seeds
    assert rcs == [0, 0]
    a, b = root / "serial", root / "jobs2"
    assert (a / "curves.csv").read_bytes() == (b / "curves.csv").read_bytes()
    assert _strip_times(_load(a)[0]) == _strip_times(_load(b)[0])
    assert (a / "run_log.txt").read_text() == (b / "run_log.txt").read_text()



def test_multi_seed_table_rows_have_no_trailing_whitespace(two_seeds):
    _, root = two_seeds
    lines = (root / "serial" / "run_log.txt").read_text().splitlines()
    rows = [ln for ln in lines if "2/2" in ln]          # the table's "seeds ok" column
    assert len(rows) == 4                                # one row a variant
    assert [ln for ln in lines if ln != ln.rstrip()] == []

def test_curves_csv_has_every_step_of_every_run(two_seeds):
    _, root = two_seeds
    res, rows, _ = _load(root / "serial")
    assert list(rows[0]) == ["variant", "seed", "step", "train_loss", "val_loss", "grad_norm"]
    assert len(rows) == 4 * 2 * 4
    keys = [(r["variant"], int(r["seed"]), int(r["step"])) for r in rows]
    assert keys == [(n, s, t) for n in NAMES for s in (0, 1) for t in (1, 2, 3, 4)]
    for r in rows:
        assert math.isfinite(float(r["train_loss"])) and float(r["grad_norm"]) > 0
        assert (r["val_loss"] != "") == (int(r["step"]) in (2, 4))  # --eval-every 2
    # the last val point is the final val loss of the run
    for run in res["runs"]:
        last = [r for r in rows if r["variant"] == run["name"] and int(r["seed"]) == run["seed"]]
        assert float(last[-1]["val_loss"]) == run["val_loss"]
        assert [float(r["train_loss"]) for r in last] == run["loss_curve"]


def test_seeds_differ_and_pair(two_seeds):
    _, root = two_seeds
    res, _, _ = _load(root / "serial")
    runs = {(r["name"], r["seed"]): r for r in res["runs"]}
    assert runs[("ln+gelu", 0)]["loss_curve"] != runs[("ln+gelu", 1)]["loss_curve"]
    # seed 0 of the two-seed run is the one-seed run of seed 0 (same batches, same init)
    assert res["config"]["seeds"] == [0, 1]


def test_statistics_recomputed_independently(two_seeds):
    _, root = two_seeds
    res, _, log = _load(root / "serial")
    runs = {(r["name"], r["seed"]): r for r in res["runs"]}
    t1 = math.tan(math.pi * 0.475)  # t(0.975, 1 df), closed form (Cauchy)
    for v in res["variants"]:
        vals = np.array([runs[(v["name"], s)]["val_loss"] for s in (0, 1)])
        assert v["val_loss"]["mean"] == pytest.approx(vals.mean(), rel=1e-12)
        assert v["val_loss"]["std"] == pytest.approx(vals.std(ddof=1), rel=1e-12)
        row = next(ln for ln in log.splitlines() if ln.startswith(
            f"{v['norm']:6s}  {v['mlp']:10s}"))
        assert f"{vals.mean():.4f} ± {vals.std(ddof=1):.4f}" in row and "2/2" in row
        if v["name"] == "ln+gelu":
            assert v["difference_from_baseline"] is None
            continue
        base = np.array([runs[("ln+gelu", s)]["val_loss"] for s in (0, 1)])
        d = vals - base
        half = t1 * d.std(ddof=1) / math.sqrt(2)
        got = v["difference_from_baseline"]["val_loss"]
        assert got["mean"] == pytest.approx(d.mean(), rel=1e-12)
        assert got["low"] == pytest.approx(d.mean() - half, rel=1e-9)
        assert got["high"] == pytest.approx(d.mean() + half, rel=1e-9)
        assert got["excludes_zero"] == (got["low"] > 0 or got["high"] < 0)


def _lesson_lines(log):
    return log[log.index("Lessons"):].splitlines()


def test_closing_block_agrees_with_the_table(two_seeds):
    _, root = two_seeds
    res, _, log = _load(root / "serial")
    summ = {v["name"]: v for v in res["variants"]}
    lines = _lesson_lines(log)
    assert any('"RMSNorm: same regularization effect as LayerNorm, ~half the FLOPs."' in ln
               for ln in lines)
    assert any("time: not measured in this run" in ln for ln in lines)
    # FLOPs counted at the run's shape (B 32, T 8, C 16), against the hand count of
    # docs/derivations.md's LayerNorm and RMSNorm passes: forward 7E + 3N against 4E + 3N,
    # backward 11E - 2C against 8E - C (E = B*T*C elements, N = B*T rows).
    C = 16
    N = 32 * 8
    E = N * C
    fwd = (4 * E + 3 * N) / (7 * E + 3 * N)
    fb = (4 * E + 3 * N + 8 * E - C) / (7 * E + 3 * N + 11 * E - 2 * C)
    flops = next(ln for ln in lines if "FLOPs RMSNorm/LayerNorm counted" in ln)
    assert f"at 32x8x16: forward {fwd:.2f}" in flops
    assert f"forward+backward {fb:.2f}" in flops
    for norm in ("ln", "rms"):
        delta = summ[f"{norm}+swiglu"]["params"] - summ[f"{norm}+gelu"]["params"]
        ln = next(x for x in lines if f"{norm}+swiglu - {norm}+gelu = {delta:+d}" in x)
        assert ("fewer" in ln) == (delta < 0) and ("more" in ln) == (delta > 0)
        assert ("contrary to the chapter" in ln) == (delta <= 0)
    runs = {(r["name"], r["seed"]): r for r in res["runs"]}
    for a, b in (("rms+gelu", "ln+gelu"), ("rms+swiglu", "ln+swiglu"),
                 ("ln+swiglu", "ln+gelu"), ("rms+swiglu", "rms+gelu")):
        d = np.array([runs[(a, s)]["val_loss"] - runs[(b, s)]["val_loss"] for s in (0, 1)])
        ln = next(x for x in lines if f"{a} - {b} = " in x and "nats" in x)
        m = re.search(r"= ([+-]\d+\.\d{4}) \[([+-]\d+\.\d{4}), ([+-]\d+\.\d{4})\]", ln)
        assert m and float(m.group(1)) == pytest.approx(d.mean(), abs=5e-5)
        lo, hi = float(m.group(2)), float(m.group(3))
        if lo > 0 or hi < 0:
            assert "excludes zero" in ln
        else:
            assert "cannot be told apart from zero with 2 seeds" in ln


def test_a_forced_divergence_is_named_in_the_closing_block(tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(TINY + ["--steps", "6", "--seeds", "2", "--no-plots", "--output-dir", str(out)],
              diverging("rms+gelu"))
    assert rc == 1
    res, rows, log = _load(out)
    bad = next(v for v in res["variants"] if v["name"] == "rms+gelu")
    assert bad["seeds_ok"] == [] and len(bad["diverged"]) == 2
    step = bad["diverged"][0]["step"]
    row = next(ln for ln in log.splitlines() if ln.startswith("rms     gelu"))
    assert "diverged in every seed" in row and f"at step {step}" in row
    lines = _lesson_lines(log)
    gelu = next(x for x in lines if x.strip().startswith("with GELU:"))
    assert "no comparison" in gelu and "rms+gelu seed 0" in gelu and "nats" not in gelu
    swiglu = next(x for x in lines if x.strip().startswith("with SwiGLU:"))
    assert "rms+swiglu - ln+swiglu = " in swiglu  # the other comparison is unaffected
    # the diverged runs' curves stop before the failing step; every value written is finite
    assert {int(r["step"]) for r in rows if r["variant"] == "rms+gelu"} <= set(range(1, step))
    assert all(math.isfinite(float(r["train_loss"])) for r in rows)
    assert "rms+gelu" in capsys.readouterr().err


def test_without_matplotlib_one_line_says_how_to_install_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(_plots, "available", lambda: False)
    out = tmp_path / "out"
    assert main(TINY + ["--steps", "2", "--output-dir", str(out)]) == 0
    err = capsys.readouterr().err.splitlines()
    hint = [ln for ln in err if "matplotlib" in ln]
    assert len(hint) == 1 and 'pip install -e ".[plot]"' in hint[0]
    assert sorted(p.name for p in out.iterdir()) == ["curves.csv", "results.json", "run_log.txt"]


@pytest.mark.parametrize("cap", [None, 1])
def test_the_run_log_says_how_many_positions_each_loss_is_the_mean_over(cap, tmp_path, capsys):
    from gpt.data import CharTokenizer, load_corpus
    text = load_corpus()
    n = len(CharTokenizer(text).encode(text))
    train, val = int(0.9 * n) - 1, n - int(0.9 * n) - 1   # target positions of each split
    out = tmp_path / "out"
    extra = [] if cap is None else ["--eval-tokens", str(cap)]
    assert main(TINY + ["--steps", "2", "--no-plots", "--output-dir", str(out)] + extra) == 0
    log = " ".join((out / "run_log.txt").read_text().split())
    if cap is None:
        said = f"all {train:,} positions of the training split and all {val:,} positions"
    else:   # one window of block_size 8: fewer than 8 positions cannot be evaluated
        said = f"8 of {train:,} positions of the training split and 8 of {val:,} positions"
    assert f"- train/val: mean loss over {said} of the validation split" in log
    ev = json.loads((out / "results.json").read_text())["config"]["evaluation"]
    assert ev["train_loss_tokens"] == (train if cap is None else 8)


def test_figures_are_pngs(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "out"
    assert main(TINY + ["--steps", "3", "--seeds", "2", "--output-dir",
                                      str(out)]) == 0
    for name in ("loss_curves.png", "deltas.png", "grad_norms.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args, needle", [
    (["--seeds", "0"], "--seeds"),
    (["--jobs", "0"], "--jobs"),
    (["--eval-every", "-1"], "--eval-every"),
    (["--seeds", "two"], "--seeds"),
    (["--seeds", "2", "--jobs", "2", "--threads", "2"], "more BLAS threads than the 2 CPUs"),
])
def test_bad_runner_options(args, needle, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(four_variants.cli, "available_cpus", lambda: 2)
    code = main(TINY + args + ["--output-dir", str(tmp_path / "out")])
    cap = capsys.readouterr()
    assert code == 2 and cap.out == ""
    assert len(cap.err.strip().splitlines()) == 1 and needle in cap.err
    assert not (tmp_path / "out").exists()


def test_norm_cost_results_are_cited(tmp_path, capsys):
    claim = {"quote": "q", "flops_ratio": {"forward": 0.5, "forward_backward": 0.6},
             "time_ratio": {"shape": "32x32x64", "forward": 0.4321, "forward_backward": 0.8765},
             "verdict": []}
    nc = tmp_path / "nc.json"
    nc.write_text(json.dumps({"experiment": "norm_cost", "schema_version": 1, "claim": claim}))
    out = tmp_path / "out"
    assert main(TINY + ["--no-plots", "--norm-cost", str(nc),
                                      "--output-dir", str(out)]) == 0
    log = (out / "run_log.txt").read_text()
    assert "time RMSNorm/LayerNorm at 32x32x64: forward 0.43, forward+backward 0.88" in log
    assert "not measured in this run" not in log
    capsys.readouterr()
    for bad, needle in (({"experiment": "four_variants"}, "not a norm_cost results.json"),
                        (None, "cannot read")):
        path = tmp_path / "bad.json"
        if bad is not None:
            path.write_text(json.dumps(bad))
        else:
            path = tmp_path / "missing.json"
        code = main(TINY + ["--norm-cost", str(path),
                                       "--output-dir", str(tmp_path / "o2")])
        err = capsys.readouterr().err
        assert code == 2 and len(err.strip().splitlines()) == 1 and needle in err
        assert not (tmp_path / "o2").exists()


def test_help_shows_the_defaults(capsys):
    code = main(["--help"])
    text = capsys.readouterr().out
    assert code == 0
    for word in ("--seeds", "--jobs", "--eval-every", "(default: 64)", "(default: 0.003"):
        assert word in text
    # the variants set --norm and --mlp (--norm-cost is another option)
    assert not re.search(r"--norm(?!-cost)", text) and "--mlp" not in text
    assert four_variants.TINY_STEPS == 200


def test_interrupted_writes_nothing(tmp_path, capsys, monkeypatch):
    def interrupted(jobs, workers, client=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(four_variants, "train_all", interrupted)
    out = tmp_path / "out"
    assert main(TINY + ["--output-dir", str(out)]) == 130
    assert capsys.readouterr().err.splitlines()[-1] == f"{four_variants.PROG}: interrupted"
    assert not out.exists()


class _CountSteps:
    """An instrument that records the steps it is called at and reads the model only."""

    def __init__(self, job):
        self.steps = []

    def __call__(self, step, model):
        self.steps.append(step)
        with __import__("minigrad").no_grad():
            model(np.zeros((1, 4), dtype=np.int64))  # a forward pass must not change training

    def result(self):
        return {"steps": self.steps}


def test_the_hooks_of_a_new_study(tmp_path, capsys):
    plain = four_variants.Study(name="demo", prog="demo", description="d",
                          variants=(four_variants.Variant("ln", {"norm": "ln"}),
                                    four_variants.Variant("rms", {"norm": "rms"})))
    hooked = four_variants.Study(name="demo", prog="demo", description="d", variants=plain.variants,
                           instrument=_CountSteps,
                           extra_outputs=lambda r: {"extra.csv": f"runs,{len(r.runs)}\n"})
    args = TINY + ["--no-plots", "--steps", "5"]
    assert four_variants.run_study(plain, args + ["--output-dir", str(tmp_path / "a")]) == 0
    assert four_variants.run_study(hooked, args + ["--output-dir", str(tmp_path / "b")]) == 0
    a, b = _load(tmp_path / "a")[0], _load(tmp_path / "b")[0]
    for ra, rb in zip(a["runs"], b["runs"]):
        assert ra["loss_curve"] == rb["loss_curve"] and ra["val_loss"] == rb["val_loss"]
        assert ra["extra"] is None and rb["extra"] == {"steps": [0, 2, 4, 5]}
    assert (tmp_path / "b" / "extra.csv").read_text() == "runs,2\n"
    assert (tmp_path / "a" / "curves.csv").read_text() == (tmp_path / "b" / "curves.csv").read_text()


def test_a_model_broken_by_its_last_update_is_reported_as_diverged(monkeypatch):
    import gpt.train
    monkeypatch.setattr(gpt.train, "evaluate", lambda *a, **k: float("nan"))
    args = four_variants.build_parser(four_variants.STUDY).parse_args(TINY + ["--steps", "2"])
    plan = four_variants.plan_study(four_variants.STUDY, args)
    v = four_variants.STUDY.variants[0]
    r = four_variants.train_one(four_variants.Job(v, plan.configs[v.name], 0, 2, args,
                                                  plan.train_data, plan.val_data, "ln+gelu"))
    assert r["status"] == "diverged" and r["steps_completed"] == 2
    assert r["message"].startswith("final loss (evaluated after the last update) became nan")
    assert r["val_loss"] is None and len(r["loss_curve"]) == 2
