"""The commands at the edges (issue 11): a large corpus, Ctrl-C at every stage, special files, a
full disk or closed stdout, long runs without a terminal, stale files in an output folder and
``--help``; for every command, at tiny sizes."""
from __future__ import annotations

import argparse
import importlib
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # runs the commands as subprocesses; leave out with -m "not slow"

from experiments import cli, four_variants
from gpt import GPT, GPTConfig
from gpt.checkpoint import load_checkpoint, save_checkpoint
from gpt.data import CharTokenizer, eval_windows, load_corpus

REPO = Path(__file__).resolve().parents[1]
TINY = ["--n-layers", "1", "--d-model", "16", "--n-heads", "2", "--block-size", "16",
        "--batch-size", "4", "--no-plots"]
STUDIES = ["experiments.four_variants", "experiments.break_it", "experiments.activations",
           "experiments.positions", "experiments.hidden_stats"]
COMMANDS = STUDIES + ["experiments.norm_cost", "experiments.break_backward",
                      "experiments.gradcheck_report", "experiments.generate"]


def _env():
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _run(args, cwd, timeout=120, **kw):
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=_env(),
                          capture_output=True, text=True, timeout=timeout, **kw)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny checkpoint with its vocabulary, for experiments.generate."""
    text = load_corpus()
    tok = CharTokenizer(text)
    model = GPT(GPTConfig(vocab_size=tok.vocab_size, block_size=8, n_layers=1, n_heads=2,
                          d_model=8), seed=0)
    path = tmp_path_factory.mktemp("ckpt") / "m.npz"
    save_checkpoint(model, path, tokenizer=tok, run_id="test-run")
    return path


def _tiny_args(module, tmp_path, checkpoint):
    if module in STUDIES:
        return ["--steps", "1", *TINY, "--output-dir", str(tmp_path / "out")]
    return {"experiments.norm_cost": ["--tiny", "--repeats", "1", "--output-dir",
                                      str(tmp_path / "out")],
            "experiments.gradcheck_report": ["--fast"],
            "experiments.break_backward": [],
            "experiments.generate": ["--checkpoint", str(checkpoint), "--prompt", "It is",
                             "--max-new-tokens", "5"]}[module]


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
    assert four_variants.EVAL_TOKENS > n_train - 1   # every train and val position is evaluated
    p = four_variants.build_parser(four_variants.STUDY)
    assert p.parse_args([]).eval_tokens == four_variants.EVAL_TOKENS


# ---------------------------------------------------------------- 2. interrupts, special files


def test_a_fifo_or_device_as_corpus_is_refused_at_once(tmp_path):
    fifo = tmp_path / "corpus.fifo"
    os.mkfifo(fifo)
    for path in (fifo, Path("/dev/zero")):
        r = _run(["experiments.positions", "--corpus", str(path), "--output-dir",
                  str(tmp_path / "out")], tmp_path, timeout=60)   # must not wait on the FIFO
        err = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(err) == 1 and "regular file" in err[0], r.stderr
    assert not (tmp_path / "out").exists()


def test_an_output_path_that_is_a_fifo_is_refused_and_left_alone(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / "results.json")
    os.mkfifo(tmp_path / "rows.json")
    for args in (["experiments.four_variants", "--steps", "1", *TINY, "--output-dir", str(out)],
                 ["experiments.norm_cost", "--tiny", "--repeats", "1", "--output-dir", str(out)],
                 ["experiments.gradcheck_report", "--fast", "--json", "rows.json"]):
        r = _run(args, tmp_path, timeout=60)
        err = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(err) == 1 and "not a regular file" in err[0], r.stderr
    assert stat.S_ISFIFO(os.lstat(out / "results.json").st_mode)   # still a FIFO
    assert stat.S_ISFIFO(os.lstat(tmp_path / "rows.json").st_mode)
    assert sorted(p.name for p in out.iterdir()) == ["results.json"]
    with pytest.raises((OSError, cli.UsageError), match="not a regular file"):
        cli.write_json(out / "results.json", {})


STAGES = {  # stage -> (module, attribute) raising KeyboardInterrupt there
    "reading": ("experiments.four_variants", "load_corpus"),
    "tokenising": ("gpt.data", "CharTokenizer.encode"),
    "training": ("experiments.four_variants", "train_all"),   # the workers: a real SIGINT below
    "drawing": ("experiments._plots", "add_figures"),
    "writing": ("experiments.four_variants", "save_checkpoint"),
}


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_ctrl_c_at_every_stage_is_one_line_130_and_no_file_half_written(stage, tmp_path,
                                                                        monkeypatch, capsys):
    module, attr = STAGES[stage]
    obj = importlib.import_module(module)
    if "." in attr:
        cls, attr = attr.split(".")
        obj = getattr(obj, cls)

    def interrupt(*a, **k):
        if stage == "writing":
            Path(a[1]).write_bytes(b"half")   # the checkpoint's temporary file, half written
        raise KeyboardInterrupt

    monkeypatch.setattr(obj, attr, interrupt)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as ei:
        cli.main(four_variants.PROG, four_variants.run,
                 ["--steps", "2", *TINY[:-1], "--save-checkpoints", "--output-dir", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert ei.value.code == 130
    assert err[-1] == f"{four_variants.PROG}: interrupted"
    assert not any("Traceback" in line for line in err)
    assert not out.exists() or list(out.iterdir()) == []


OTHER_STAGES = {  # command -> (function raising KeyboardInterrupt, arguments)
    "experiments.norm_cost": ("measure_shape", ["--tiny", "--repeats", "1"]),
    "experiments.gradcheck_report": ("run_cases", ["--fast", "--json", "rows.json"]),
    "experiments.break_backward": ("run_cases", ["--json", "rows.json"]),
    "experiments.generate": ("load_checkpoint", ["--prompt", "It"]),
    "experiments.bench": ("in_fresh_process", ["--sizes", "tiny", "--no-reference", "--json",
                                               "b.json"]),
}


@pytest.mark.parametrize("module", sorted(OTHER_STAGES))
def test_ctrl_c_in_the_other_commands_is_one_line_130_and_nothing_written(
        module, tmp_path, monkeypatch, capsys, checkpoint):
    from experiments import cli
    mod = importlib.import_module(module)
    attr, args = OTHER_STAGES[module]

    def interrupt(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(mod, attr, interrupt)
    monkeypatch.chdir(tmp_path)
    if module == "experiments.generate":
        args = args + ["--checkpoint", str(checkpoint)]
    elif module == "experiments.norm_cost":
        args = args + ["--output-dir", str(tmp_path / "out")]
    with pytest.raises(SystemExit) as e:
        cli.main(mod.PROG, mod.run, args)
    assert e.value.code == 130
    assert capsys.readouterr().err.splitlines()[-1] == f"{mod.PROG}: interrupted"
    # no file written (norm_cost made its output folder, empty, when it checked it)
    assert [p for p in tmp_path.rglob("*") if not p.is_dir()] == []


def test_ctrl_c_in_generate_is_one_line_130(checkpoint, monkeypatch, capsys):
    from experiments import cli
    import experiments.generate as g

    def interrupt(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(g, "generate", interrupt)
    with pytest.raises(SystemExit) as e:
        cli.main(g.PROG, g.run, ["--checkpoint", str(checkpoint), "--prompt", "It"])
    cap = capsys.readouterr()
    assert e.value.code == 130 and cap.out == ""
    assert cap.err.splitlines() == [f"{g.PROG}: interrupted"]


def test_a_real_sigint_during_training_is_one_line_130(tmp_path):
    out = tmp_path / "out"
    r = subprocess.run(["timeout", "--preserve-status", "-s", "INT", "4", sys.executable, "-m",
                        "experiments.four_variants", "--steps", "100000", *TINY,
                        "--output-dir", str(out)], cwd=tmp_path, env=_env(),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 130, r.stderr
    # multiprocessing's resource tracker, a process of Python's own that outlives ours, may
    # warn about a semaphore of a terminated worker after our last line: not our output
    err = [ln for ln in r.stderr.strip().splitlines() if "resource_tracker" not in ln]
    assert err[-1] == "python -m experiments.four_variants: interrupted", r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""
    assert not out.exists()


# ---------------------------------------------------------------- 3. a full disk


@pytest.mark.parametrize("module", COMMANDS)
def test_stdout_to_dev_full_is_one_line_and_exit_2(module, tmp_path, checkpoint):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", module,
                            *_tiny_args(module, tmp_path, checkpoint)], cwd=tmp_path,
                           env=_env(), stdout=full, stderr=subprocess.PIPE, text=True,
                           timeout=180)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2, r.stderr
    assert err[-1].endswith("error: cannot write to stdout: No space left on device")
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("module", ["experiments.generate", "experiments.norm_cost"])
def test_a_closed_pipe_is_quiet_and_status_141_as_for_cat(module, tmp_path, checkpoint):
    proc = subprocess.Popen([sys.executable, "-m", module,
                             *_tiny_args(module, tmp_path, checkpoint)], cwd=tmp_path,
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader went away (like `| head -0`)
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 128 + 13, err   # 128 + SIGPIPE, what the shell says of cat
    assert "Traceback" not in err and "error" not in err


@pytest.mark.parametrize("steps", ["0", "1"])
def test_stderr_to_dev_full_is_status_2_not_diverged(steps, tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "experiments.four_variants", "--steps", steps,
                            *TINY, "--output-dir", str(tmp_path / "out")], cwd=tmp_path,
                           env=_env(), stdout=subprocess.PIPE, stderr=full, timeout=120)
    assert r.returncode == 2 and r.stdout == b""   # bad input, or the first progress line
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------- 4. long runs, no terminal


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


# ---------------------------------------------------------------- 5. stale files


def test_a_run_removes_nothing_it_did_not_write(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "ln_gelu.npz").write_bytes(b"the user's own")     # a name a run could write
    (out / "deltas.png").write_bytes(b"the user's figure")
    (out / "notes.txt").write_text("mine")
    args = ["--steps", "1", *TINY, "--output-dir", str(out)]
    with pytest.raises(SystemExit) as ei:
        cli.main(four_variants.PROG, four_variants.run, args + ["--save-checkpoints"])
    assert ei.value.code == 0
    first = json.loads((out / "results.json").read_text())
    assert load_checkpoint(out / "ln_gelu.npz").run_id == first["run_id"]   # rewritten by it
    assert "ln_gelu.npz" in first["files"] and "rms_swiglu.npz" in first["files"]
    with pytest.raises(SystemExit) as ei:
        cli.main(four_variants.PROG, four_variants.run, args)   # no checkpoints this time
    second = json.loads((out / "results.json").read_text())
    assert set(second["files"]) == {"results.json", "run_log.txt", "curves.csv"}
    assert (out / "deltas.png").read_bytes() == b"the user's figure"   # --no-plots: untouched
    assert (out / "notes.txt").read_text() == "mine"
    assert {"ln_gelu.npz", "rms_swiglu.npz"} <= {p.name for p in out.iterdir()}   # not removed
    assert not [p for p in out.iterdir() if p.name.startswith(".tmp-")]


def test_a_checkpoint_without_a_run_id_loads_with_none(tmp_path):
    model = GPT(GPTConfig(vocab_size=5, block_size=4, n_layers=1, n_heads=1, d_model=4), seed=0)
    save_checkpoint(model, tmp_path / "a.npz")
    assert load_checkpoint(tmp_path / "a.npz").run_id is None
    with pytest.raises(TypeError):
        save_checkpoint(model, tmp_path / "b.npz", run_id=3)


# ---------------------------------------------------------------- 6. --help


def _parser(module):
    mod = importlib.import_module(module)
    return four_variants.build_parser(mod.STUDY)


@pytest.mark.parametrize("module", STUDIES)
def test_every_option_shows_its_help_and_default(module):
    p = _parser(module)
    fmt = p._get_formatter()
    for action in p._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        text = fmt._get_help_string(action)
        words = text.replace("(default: none)", "").replace("(default: off)", "")
        assert len(words.strip()) > 10, (module, action.option_strings)   # real help text
        assert "default" in text.lower() or "(required)" in text, (module, action.option_strings)


@pytest.mark.parametrize("module", ["experiments.norm_cost", "experiments.bench",
                                    "experiments.break_backward", "experiments.gradcheck_report",
                                    "experiments.generate"])
def test_help_of_the_other_commands_explains_every_option(module, tmp_path):
    r = _run([module, "--help"], tmp_path)
    assert r.returncode == 0 and r.stderr == "" and r.stdout.startswith(f"usage: python -m {module}")
    entries = r.stdout.split("\n  -")[2:]    # after the usage and -h: one entry an option
    assert len(entries) >= 2
    for entry in entries:
        words = " ".join(entry.split()[1:])
        assert len(words) > 20 and ("default" in words or "required" in words), entry


def test_help_of_a_study_shows_the_model_sizes_with_their_defaults(tmp_path):
    r = _run(["experiments.four_variants", "--help"], tmp_path)
    assert r.returncode == 0
    flat = " ".join(r.stdout.split())
    for opt, default in (("--batch-size B", 32), ("--block-size T", 32), ("--n-layers L", 2),
                         ("--n-heads H", 4), ("--d-model C", 64),
                         ("--eval-tokens N", four_variants.EVAL_TOKENS)):
        # argparse heads the list "options:" from Python 3.10, "optional arguments:" before
        i = flat.index(opt, flat.index("options:" if "options:" in flat else "optional arguments:"))
        assert f"(default: {default}" in flat[i:i + 200], opt
