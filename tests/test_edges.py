"""The commands at the edges: a large corpus, a closed stdout, long runs without a terminal,
stale files in an output folder and ``--help``; at tiny sizes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # runs the commands as subprocesses; leave out with -m "not slow"

from experiments import cli, four_variants, runner

from gpt.checkpoint import load_checkpoint
from gpt.data import CharTokenizer, eval_windows, load_corpus

REPO = Path(__file__).resolve().parents[1]
TINY = ["--n-layers", "1", "--d-model", "16", "--n-heads", "2", "--block-size", "16",
        "--batch-size", "4", "--no-plots"]
STUDIES = ["experiments.four_variants", "experiments.break_it", "experiments.activations",
           "experiments.positions", "experiments.hidden_stats"]


def _env():
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _run(args, cwd, timeout=120, **kw):
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=timeout, **kw)


# ---------------------------------------------------------------- 1. a large corpus


def test_tokenizer_ids_use_the_smallest_integer_type_and_match_a_dict_lookup():
    rng = np.random.default_rng(0)
    for n_chars, dtype in ((40, np.uint8), (256, np.uint8), (257, np.uint16), (300, np.uint16)):
        alphabet = [chr(0x20 + i) if i < 90 else chr(0x400 + i) for i in range(n_chars)]
        text = "".join(rng.choice(alphabet, size=3000)) + "".join(alphabet)
        tok = CharTokenizer(text)
        ids = tok.encode(text)
        assert tok.chars == sorted(set(text)) and ids.dtype == dtype
        stoi = {c: i for i, c in enumerate(sorted(set(text)))}
        ref = np.array([stoi[c] for c in text])
        assert np.array_equal(ids.astype(np.int64), ref) and tok.decode(ids) == text
    with pytest.raises(ValueError, match="position 2 .*2 unknown"):
        CharTokenizer("abc").encode("abzbz")


def test_capped_evaluation_spreads_disjoint_windows_and_counts_what_it_covers():
    data = np.arange(10_001) % 7
    T = 16
    x, y, mask = eval_windows(data, T, max_tokens=1000)
    assert x.shape == (1000 // T, T) and int(mask.sum()) == (1000 // T) * T
    xa, _, _ = eval_windows(np.arange(10_001), T, max_tokens=1000)  # positions as values
    starts = xa[:, 0]
    assert starts[0] == 0 and starts[-1] == 10_001 - T - 1          # first and last window
    assert np.all(np.diff(starts) >= T)                              # disjoint
    assert np.array_equal(y, (xa + 1) % 7)                          # targets shifted by one
    # at or above the split's size the cap changes nothing (every position once)
    full = eval_windows(data[:200], T)
    capped = eval_windows(data[:200], T, max_tokens=199)
    assert all(np.array_equal(a, b) for a, b in zip(full, capped))


def test_a_large_corpus_is_evaluated_on_the_capped_tokens_said_in_results_json(tmp_path):
    # ~3 MB of text with 300 distinct characters (ids need uint16)
    rng = np.random.default_rng(1)
    alphabet = np.array([chr(0x41 + i) if i < 60 else chr(0x4E00 + i) for i in range(300)])
    text = "".join(rng.choice(alphabet, size=1_000_000).tolist())
    corpus = tmp_path / "big.txt"
    corpus.write_text(text, encoding="utf-8")
    assert corpus.stat().st_size > 2_500_000
    r = _run(["experiments.four_variants", "--corpus", str(corpus), "--steps", "2", *TINY,
              "--eval-tokens", "1000", "--output-dir", str(tmp_path / "out")], tmp_path)
    assert r.returncode == 0, r.stderr
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    ev = res["config"]["evaluation"]
    assert ev["eval_tokens"] == 1000
    assert ev["train_loss_tokens"] == ev["val_loss_tokens"] == (1000 // 16) * 16
    assert res["config"]["corpus"]["vocab_size"] == 300


def test_the_default_cap_leaves_the_built_in_corpus_evaluated_whole():
    text = load_corpus()
    ids = CharTokenizer(text).encode(text)
    n_train = int(0.9 * len(ids))
    assert runner.EVAL_TOKENS > n_train - 1   # every train and val position is evaluated
    assert runner.parse_args(four_variants.STUDY, []).eval_tokens == runner.EVAL_TOKENS


# ---------------------------------------------------------------- a closed pipe, no terminal


def test_a_closed_stdout_is_quiet_and_status_141_as_for_cat(tmp_path):
    p = subprocess.Popen([sys.executable, "-m", "experiments.four_variants", "--steps", "1",
                          *TINY, "--output-dir", str(tmp_path / "out")], cwd=tmp_path, env=_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()   # the reader went away, as `| head -0` does
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141 and "Traceback" not in err
    assert json.loads((tmp_path / "out" / "results.json").read_text())["status"] == "ok"


def test_the_first_line_of_stdout_is_the_first_line_of_content(tmp_path):
    r = _run(["experiments.four_variants", "--steps", "1", *TINY,
              "--output-dir", str(tmp_path / "out")], tmp_path)
    assert r.returncode == 0 and r.stdout.splitlines()[0].startswith("Uniform baseline: ")


def test_without_a_terminal_progress_lines_come_at_the_interval(tmp_path):
    r = _run(["experiments.positions", "--steps", "60", *TINY, "--progress-interval", "0.05",
              "--output-dir", str(tmp_path / "out")], tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if "ETA" in ln]
    assert len(lines) >= 2   # several lines per run, not one at its end
    assert all("steps/s" in ln and "loss" in ln and "step " in ln for ln in lines)
    assert "\r" not in r.stderr   # no in-place redraw in a log file


def test_an_absurd_step_count_is_refused_before_anything_runs(tmp_path):
    r = _run(["experiments.break_it", "--steps", "99999999999999999999",
              "--output-dir", str(tmp_path / "out")], tmp_path)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(err) == 1 and "maximum of 1,000,000" in err[0]
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- stale files


def test_a_run_removes_nothing_it_did_not_write(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "ln_gelu.npz").write_bytes(b"the user's own")     # a name a run could write
    (out / "deltas.png").write_bytes(b"the user's figure")
    (out / "notes.txt").write_text("mine")
    args = ["--steps", "1", *TINY, "--output-dir", str(out)]
    with pytest.raises(SystemExit) as ei, cli.errors(four_variants.STUDY.prog):
        sys.exit(runner.run(four_variants.STUDY, args + ["--save-checkpoints"]))
    assert ei.value.code == 0
    first = json.loads((out / "results.json").read_text())
    assert load_checkpoint(out / "ln_gelu.npz").run_id == first["run_id"]   # rewritten by it
    assert "ln_gelu.npz" in first["files"] and "rms_swiglu.npz" in first["files"]
    with pytest.raises(SystemExit) as ei, cli.errors(four_variants.STUDY.prog):
        sys.exit(runner.run(four_variants.STUDY, args))   # no checkpoints this time
    second = json.loads((out / "results.json").read_text())
    assert set(second["files"]) == {"results.json", "run_log.txt", "curves.csv"}
    assert (out / "deltas.png").read_bytes() == b"the user's figure"   # --no-plots: untouched
    assert (out / "notes.txt").read_text() == "mine"
    assert {"ln_gelu.npz", "rms_swiglu.npz"} <= {p.name for p in out.iterdir()}   # not removed
    assert not [p for p in out.iterdir() if p.name.startswith(".tmp-")]


# ---------------------------------------------------------------- --help


@pytest.mark.parametrize("module", STUDIES + ["experiments.train_gpt"])
def test_every_option_of_a_training_command_has_help_and_a_default(module, tmp_path):
    r = _run([module, "--help"], tmp_path)
    assert r.returncode == 0 and r.stderr == "" and r.stdout.startswith(f"usage: python -m {module}")
    entries = r.stdout.split("\n  -")[2:]    # after the usage and -h: one entry an option
    assert len(entries) >= 10
    for entry in entries:
        head, words = entry.split(), " ".join(entry.split()[1:])
        takes_value = head[1].isupper() or head[1].startswith("{")   # a metavar, not a flag
        assert len(words) > 10, entry
        assert not takes_value or "default" in words or "none" in words.lower(), entry
    flat = " ".join(r.stdout.split())
    for opt, default in (("--batch-size B", 32), ("--block-size T", 32), ("--d-model C", 64)):
        assert f"(default: {default})" in flat[flat.rindex(opt):flat.rindex(opt) + 200], opt


# ---------------------------------------------------------------- a stopped sweep continues

def test_a_stopped_sweep_keeps_its_finished_runs_and_the_same_command_continues_it(
        tmp_path, monkeypatch):
    out, calls, train_one = tmp_path / "out", [], runner.train_one
    stop = [3]   # the third run is stopped (Ctrl-C), once
    args = ["--steps", "3", "--seeds", "2", *TINY, "--output-dir", str(out)]

    def stopped_at_the_third(run):
        calls.append((run.variant.name, run.seed))
        if len(calls) == stop[0]:
            stop[0] = None
            raise KeyboardInterrupt
        return train_one(run)

    monkeypatch.setattr(runner, "train_one", stopped_at_the_third)
    with pytest.raises(SystemExit) as ei, cli.errors(four_variants.STUDY.prog):
        sys.exit(runner.run(four_variants.STUDY, args))
    assert ei.value.code == 130
    kept = json.loads((out / "results.json").read_text())
    assert kept["status"] == "incomplete"
    assert [(e["name"], e["seed"]) for e in kept["runs"]] == calls[:2]

    calls.clear()
    with pytest.raises(SystemExit) as ei, cli.errors(four_variants.STUDY.prog):
        sys.exit(runner.run(four_variants.STUDY, args))   # the same command: the rest only
    assert ei.value.code == 0 and len(calls) == 8 - 2
    whole = json.loads((out / "results.json").read_text())
    assert whole["status"] == "ok" and whole["run_id"] == kept["run_id"]

    monkeypatch.setattr(runner, "train_one", train_one)   # one sweep, never stopped
    with pytest.raises(SystemExit), cli.errors(four_variants.STUDY.prog):
        sys.exit(runner.run(four_variants.STUDY, args[:-1] + [str(tmp_path / "once")]))
    once = json.loads((tmp_path / "once" / "results.json").read_text())
    untimed = [[{k: v for k, v in e.items() if k != "seconds"} for e in r["runs"]]
               for r in (whole, once)]
    assert untimed[0] == untimed[1] and whole["variants"] == once["variants"]
    assert (out / "curves.csv").read_text() == (tmp_path / "once" / "curves.csv").read_text()


def test_a_stopped_sweep_is_not_written_over_by_a_command_of_other_options(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    stopped = json.dumps({"experiment": "four_variants", "status": "incomplete", "run_id": "x",
                          "config": {"steps": 5}, "runs": []})
    (out / "results.json").write_text(stopped)
    with pytest.raises(SystemExit) as ei, cli.errors(four_variants.STUDY.prog):
        sys.exit(runner.run(four_variants.STUDY, ["--steps", "3", *TINY, "--output-dir",
                                                  str(out)]))
    assert ei.value.code == 2
    assert "holds a stopped sweep of other options" in capsys.readouterr().err
    assert (out / "results.json").read_text() == stopped


def test_a_folder_named_results_json_is_refused_before_training(tmp_path, capsys):
    (tmp_path / "out" / "results.json").mkdir(parents=True)
    with pytest.raises(SystemExit) as ei, cli.errors(four_variants.STUDY.prog):
        sys.exit(runner.run(four_variants.STUDY, ["--steps", "3", *TINY, "--output-dir",
                                                  str(tmp_path / "out")]))
    assert ei.value.code == 2 and "results.json is a folder" in capsys.readouterr().err
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["results.json"]


def test_another_experiments_stopped_sweep_is_named_as_such(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.json").write_text(json.dumps({"experiment": "activations", "status":
                                                  "incomplete", "config": {}, "runs": []}))
    with pytest.raises(SystemExit) as ei, cli.errors(four_variants.STUDY.prog):
        sys.exit(runner.run(four_variants.STUDY, ["--steps", "3", *TINY, "--output-dir", str(out)]))
    assert ei.value.code == 2
    assert "holds a stopped sweep of python -m experiments.activations" in capsys.readouterr().err
