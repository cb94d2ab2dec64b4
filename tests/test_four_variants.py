"""Tests of `python -m experiments.four_variants`: outputs, determinism, bad input, divergence.

The runs here use a few steps; the full --tiny run (200 steps per variant) is CI's main job.
"""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from experiments import _runner, four_variants
from experiments._atomic import atomic_write_text
from experiments._cli import check_output_dir, UsageError

REPO = Path(__file__).resolve().parents[1]
# The chapter's run_log (chapter "The Details That Matter"), 48-character vocabulary.
CHAPTER_PARAMS = {("ln", "gelu"): 105216, ("rms", "gelu"): 104896,
               ("ln", "swiglu"): 104320, ("rms", "swiglu"): 104000}


PNGS = {"loss_curves.png", "deltas.png", "grad_norms.png"}  # written when matplotlib is installed


def run_cli(args, cwd):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "experiments.four_variants", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def all_files(root):
    return sorted(str(p.relative_to(root)) for p in Path(root).rglob("*"))


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
    i = lines.index(four_variants.table_header())
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
    assert log[1:5] == ["steps: 3", "uniform baseline: 3.8712", "", four_variants.table_header()]
    assert [ln.split()[:3] for ln in log[5:9]] == [[n, m, str(p)] for (n, m), p in
                                                  CHAPTER_PARAMS.items()]
    assert any(ln.startswith("Lessons") for ln in log)  # the chapter's lessons, checked

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


def _strip_times(res):
    res.pop("run_id")  # unique to each run by design (issue 11)
    for v in res["runs"]:
        v.pop("seconds"), v.pop("steps_per_second", None), v.pop("eval_seconds", None)
    return res


@pytest.mark.slow
def test_same_arguments_same_numbers(tmp_path, capsys):
    args = ["--steps", "2", "--n-layers", "1", "--d-model", "32", "--block-size", "16"]
    for name in ("a", "b"):
        assert four_variants.main(args + ["--output-dir", str(tmp_path / name)]) == 0
    a = _strip_times(json.loads((tmp_path / "a" / "results.json").read_text()))
    b = _strip_times(json.loads((tmp_path / "b" / "results.json").read_text()))
    assert a == b
    assert (tmp_path / "a" / "run_log.txt").read_text() == (tmp_path / "b" /
                                                             "run_log.txt").read_text()
    assert four_variants.main(args + ["--seed", "1", "--output-dir", str(tmp_path / "c")]) == 0
    c = _strip_times(json.loads((tmp_path / "c" / "results.json").read_text()))
    assert c["runs"][0]["loss_curve"] != a["runs"][0]["loss_curve"]


def test_divergence_stops_the_variant_and_still_writes_everything(tmp_path, capsys):
    out = tmp_path / "out"
    rc = four_variants.main(["--steps", "30", "--lr", "1e30", "--n-layers", "1",
                             "--d-model", "32", "--block-size", "16", "--output-dir", str(out)])
    cap = capsys.readouterr()
    assert rc == four_variants.EXIT_DIVERGED == 1
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
    with pytest.raises(SystemExit) as ei:
        four_variants.main(args + ["--output-dir", str(out)])
    cap = capsys.readouterr()
    _assert_one_line_error(ei.value.code, cap.out, cap.err, needle)
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
    with pytest.raises(SystemExit) as ei:
        four_variants.main(["--corpus", path, "--output-dir", str(out)])
    cap = capsys.readouterr()
    _assert_one_line_error(ei.value.code, cap.out, cap.err, needle)
    assert not out.exists()


def test_unwritable_output_dir(tmp_path, capsys):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    for target in (blocker, blocker / "sub"):
        with pytest.raises(SystemExit) as ei:
            four_variants.main(["--steps", "1", "--output-dir", str(target)])
        cap = capsys.readouterr()
        _assert_one_line_error(ei.value.code, cap.out, cap.err, "not a directory")
    assert all_files(tmp_path) == ["a_file"]
    if os.geteuid() != 0:  # root writes anywhere; the permission case only bites for users
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        with pytest.raises(SystemExit) as ei:
            four_variants.main(["--steps", "1", "--output-dir", str(ro / "out")])
        cap = capsys.readouterr()
        _assert_one_line_error(ei.value.code, cap.out, cap.err, "not writable")


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
    rc = four_variants.main(["--corpus", path, "--steps", "1", "--n-layers", "1", "--d-model",
                             "16", "--block-size", "8", "--output-dir", str(out)])
    assert rc == 0
    res = json.loads((out / "results.json").read_text())
    assert res["config"]["corpus"]["vocab_size"] == len(set(text.decode()))
    assert res["uniform_baseline"] == pytest.approx(math.log(len(set(text.decode()))))


# ---------------------------------------------------------------- helpers


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path):
    p = tmp_path / "f.txt"
    atomic_write_text(p, "one\n")
    atomic_write_text(p, "two\n")
    assert p.read_text() == "two\n"
    assert all_files(tmp_path) == ["f.txt"]


def test_check_output_dir_creates_nothing(tmp_path):
    target = tmp_path / "x" / "y"
    assert check_output_dir(target) == target
    assert all_files(tmp_path) == []
    f = tmp_path / "f"
    f.write_text("")
    with pytest.raises(UsageError, match="not a directory"):
        check_output_dir(f / "y")


def test_one_diverging_variant_does_not_stop_the_others(tmp_path, capsys, monkeypatch):
    import gpt.train

    real_train = gpt.train.train

    def train_with_bad_lr_for_ln_swiglu(model, data, **kw):
        if (model.config.norm, model.config.mlp) == ("ln", "swiglu"):
            kw["lr"] = 1e30
        return real_train(model, data, **kw)

    monkeypatch.setattr(gpt.train, "train", train_with_bad_lr_for_ln_swiglu)
    out = tmp_path / "out"
    rc = four_variants.main(["--steps", "4", "--n-layers", "1", "--d-model", "32",
                             "--block-size", "16", "--output-dir", str(out)])
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
    with pytest.raises(SystemExit) as ei:
        four_variants.main(args)
    cap = capsys.readouterr()
    _assert_one_line_error(ei.value.code, cap.out, cap.err, "empty path")
    assert all_files(tmp_path) == []


def test_an_output_name_taken_by_a_directory_is_bad_input(tmp_path, capsys):
    (tmp_path / "results.json").mkdir()
    with pytest.raises(SystemExit) as ei:
        four_variants.main(SMALL + ["--output-dir", str(tmp_path)])
    cap = capsys.readouterr()
    _assert_one_line_error(ei.value.code, cap.out, cap.err, "is a directory")
    assert all_files(tmp_path) == ["results.json"]


def test_a_failed_write_leaves_no_file_and_one_line(tmp_path, capsys, monkeypatch):
    """The outputs are one atomic step: a failure while writing the third file leaves none."""
    calls = []

    def failing_save(model, path, tokenizer=None, run_id=None):
        calls.append(path)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        Path(path).write_bytes(b"x")

    monkeypatch.setattr(_runner, "save_checkpoint", failing_save)
    out = tmp_path / "new" / "out"  # directories the run creates are removed again
    with pytest.raises(SystemExit) as ei:
        four_variants.main(SMALL + ["--output-dir", str(out), "--save-checkpoints"])
    err = capsys.readouterr().err.strip().splitlines()
    assert ei.value.code == 2
    assert "No space left on device" in err[-1] and "nothing written" in err[-1]
    assert "Traceback" not in "\n".join(err)
    assert all_files(tmp_path) == []


def test_a_model_too_large_for_memory_is_refused_before_training(tmp_path, capsys):
    with pytest.raises(SystemExit) as ei:
        four_variants.main(["--d-model", "16384", "--n-heads", "1", "--steps", "1",
                            "--output-dir", str(tmp_path / "out")])
    cap = capsys.readouterr()
    _assert_one_line_error(ei.value.code, cap.out, cap.err, "GiB of memory")
    assert all_files(tmp_path) == []


def test_memory_lower_bound_counts_the_weights_four_times():
    cfg = four_variants.GPTConfig(vocab_size=10, block_size=4, n_layers=1, n_heads=1,
                                  d_model=8, dtype="float64")
    # 4 x (V C + 12 C^2) weights/grads/moments, 1 layer of B T (18 C + H T), 2 B T V logits
    expected = (4 * (10 * 8 + 12 * 64) + 2 * 4 * (18 * 8 + 4) + 2 * 2 * 4 * 10) * 8
    assert _runner.memory_lower_bound(cfg, batch_size=2) == expected


def test_out_of_memory_is_one_line(tmp_path, capsys, monkeypatch):
    def oom(spec):
        raise MemoryError("Unable to allocate 96.0 GiB")

    monkeypatch.setattr(_runner, "run_job", oom)
    with pytest.raises(SystemExit) as ei:
        four_variants.main(SMALL + ["--output-dir", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert ei.value.code == 2 and "out of memory" in err[-1]
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
    assert proc.wait(timeout=300) == 0, err
    assert "Traceback" not in err
    assert set(all_files(out)) - PNGS == {"curves.csv", "results.json", "run_log.txt"}
