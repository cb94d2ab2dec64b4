"""Tests of the study runner (experiments._runner, _report, _plots) through four_variants:
several seeds, --jobs 2 against a serial run, curves.csv, the statistics in results.json
recomputed independently, the closing block against the table (including a forced
divergence), the figures with and without matplotlib, and bad input.

Every run is tiny (1 layer, d_model 16, a few steps) so the whole file takes seconds.
"""
import csv
import json
import math
import re

import numpy as np
import pytest

from experiments import _plots, _runner, four_variants

TINY = ["--steps", "4", "--n-layers", "1", "--d-model", "16", "--n-heads", "2",
        "--block-size", "8", "--eval-every", "2"]
NAMES = ["ln+gelu", "rms+gelu", "ln+swiglu", "rms+swiglu"]


def _load(out):
    res = json.loads((out / "results.json").read_text())
    with open(out / "curves.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return res, rows, (out / "run_log.txt").read_text()


@pytest.fixture(scope="module")
def two_seeds(tmp_path_factory):
    """Two seeds, serial and with --jobs 2."""
    root = tmp_path_factory.mktemp("runner")
    rcs = []
    for name, extra in (("serial", []), ("jobs2", ["--jobs", "2"])):
        rcs.append(four_variants.main(TINY + ["--seeds", "2", "--no-plots", "--output-dir",
                                              str(root / name)] + extra))
    return rcs, root


def _strip_times(res):
    res.pop("run_id")  # unique to each run by design
    for r in res["runs"]:
        r.pop("seconds"), r.pop("steps_per_second"), r.pop("eval_seconds", None)
    return res


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


def test_a_forced_divergence_is_named_in_the_closing_block(tmp_path, capsys, monkeypatch):
    import gpt.train

    real_train = gpt.train.train

    def rms_gelu_diverges(model, data, **kw):
        if (model.config.norm, model.config.mlp) == ("rms", "gelu"):
            kw["lr"] = 1e30
        return real_train(model, data, **kw)

    monkeypatch.setattr(gpt.train, "train", rms_gelu_diverges)
    out = tmp_path / "out"
    rc = four_variants.main(TINY + ["--steps", "6", "--seeds", "2", "--no-plots",
                                    "--output-dir", str(out)])
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
    monkeypatch.setattr(_plots, "_pyplot", lambda: None)
    out = tmp_path / "out"
    assert four_variants.main(TINY + ["--steps", "2", "--output-dir", str(out)]) == 0
    err = capsys.readouterr().err.splitlines()
    hint = [ln for ln in err if "matplotlib" in ln]
    assert len(hint) == 1 and 'pip install -e ".[plot]"' in hint[0]
    assert sorted(p.name for p in out.iterdir()) == ["curves.csv", "results.json", "run_log.txt"]


def test_figures_are_pngs(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    out = tmp_path / "out"
    assert four_variants.main(TINY + ["--steps", "3", "--seeds", "2", "--output-dir",
                                      str(out)]) == 0
    for name in ("loss_curves.png", "deltas.png", "grad_norms.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args, needle", [
    (["--seeds", "0"], "--seeds"),
    (["--jobs", "0"], "--jobs"),
    (["--eval-every", "-1"], "--eval-every"),
    (["--seeds", "two"], "--seeds"),
])
def test_bad_runner_options(args, needle, tmp_path, capsys):
    with pytest.raises(SystemExit) as ei:
        four_variants.main(TINY + args + ["--output-dir", str(tmp_path / "out")])
    cap = capsys.readouterr()
    assert ei.value.code == 2 and cap.out == ""
    assert len(cap.err.strip().splitlines()) == 1 and needle in cap.err
    assert not (tmp_path / "out").exists()


def test_norm_cost_results_are_cited(tmp_path, capsys):
    claim = {"quote": "q", "flops_ratio": {"forward": 0.5, "forward_backward": 0.6},
             "time_ratio": {"shape": "32x32x64", "forward": 0.4321, "forward_backward": 0.8765},
             "verdict": []}
    nc = tmp_path / "nc.json"
    nc.write_text(json.dumps({"experiment": "norm_cost", "schema_version": 1, "claim": claim}))
    out = tmp_path / "out"
    assert four_variants.main(TINY + ["--no-plots", "--norm-cost", str(nc),
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
        with pytest.raises(SystemExit) as ei:
            four_variants.main(TINY + ["--norm-cost", str(path),
                                       "--output-dir", str(tmp_path / "o2")])
        err = capsys.readouterr().err
        assert ei.value.code == 2 and len(err.strip().splitlines()) == 1 and needle in err
        assert not (tmp_path / "o2").exists()


def test_help_shows_the_defaults(capsys):
    with pytest.raises(SystemExit) as ei:
        four_variants.main(["--help"])
    text = capsys.readouterr().out
    assert ei.value.code == 0
    for word in ("--seeds", "--jobs", "--eval-every", "(default 64)", "(default 3e-3"):
        assert word in text
    # the variants set --norm and --mlp (--norm-cost is another option)
    assert not re.search(r"--norm(?!-cost)", text) and "--mlp" not in text
    assert _runner.TINY_STEPS == 200


def test_interrupted_writes_nothing(tmp_path, capsys, monkeypatch):
    def interrupted(spec):
        raise KeyboardInterrupt

    monkeypatch.setattr(_runner, "run_job", interrupted)
    out = tmp_path / "out"
    assert four_variants.main(TINY + ["--output-dir", str(out)]) == 130
    assert "interrupted; nothing written" in capsys.readouterr().err
    assert not out.exists()


class _CountSteps:
    """An instrument that records the steps it is called at and reads the model only."""

    def __init__(self, model, variant, seed):
        self.steps = []

    def __call__(self, step, model):
        self.steps.append(step)
        with __import__("minigrad").no_grad():
            model(np.zeros((1, 4), dtype=np.int64))  # a forward pass must not change training

    def result(self):
        return {"steps": self.steps}


def test_the_hooks_of_a_new_study(tmp_path, capsys):
    plain = _runner.Study(name="demo", prog="demo", description="d",
                          variants=(_runner.Variant("ln", {"norm": "ln"}),
                                    _runner.Variant("rms", {"norm": "rms"})))
    hooked = _runner.Study(name="demo", prog="demo", description="d", variants=plain.variants,
                           instrument=_CountSteps,
                           extra_outputs=lambda r: {"extra.csv": f"runs,{len(r.runs)}\n"})
    args = TINY + ["--no-plots", "--steps", "5"]
    assert _runner.run_study(plain, args + ["--output-dir", str(tmp_path / "a")]) == 0
    assert _runner.run_study(hooked, args + ["--output-dir", str(tmp_path / "b")]) == 0
    a, b = _load(tmp_path / "a")[0], _load(tmp_path / "b")[0]
    for ra, rb in zip(a["runs"], b["runs"]):
        assert ra["loss_curve"] == rb["loss_curve"] and ra["val_loss"] == rb["val_loss"]
        assert ra["extra"] is None and rb["extra"] == {"steps": [0, 2, 4, 5]}
    assert (tmp_path / "b" / "extra.csv").read_text() == "runs,2\n"
    assert (tmp_path / "a" / "curves.csv").read_text() == (tmp_path / "b" / "curves.csv").read_text()


def test_a_model_broken_by_its_last_update_is_reported_as_diverged(tmp_path, capsys,
                                                                   monkeypatch):
    monkeypatch.setattr(_runner, "evaluate", lambda *a, **k: float("nan"))
    out = tmp_path / "out"
    assert four_variants.main(TINY + ["--steps", "2", "--no-plots", "--output-dir",
                                      str(out)]) == 1
    res = json.loads((out / "results.json").read_text())
    for r in res["runs"]:
        assert r["status"] == "diverged" and r["steps_completed"] == 2
        assert r["message"] == "final loss (evaluated after the last update) became nan"
        assert r["val_loss"] is None and len(r["loss_curve"]) == 2


def test_default_jobs_is_the_usable_cpus_at_most_the_runs(monkeypatch):
    from experiments import _runner
    monkeypatch.setattr(_runner.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5, 6, 7},
                        raising=False)
    assert _runner.default_jobs(4, 200) == 4            # 8 CPUs, 4 runs
    assert _runner.default_jobs(20, 200) == 8           # 8 CPUs, 20 runs
    assert _runner.default_jobs(4, _runner.MIN_STEPS_FOR_PROCESSES - 1) == 1   # short runs
    assert _runner.default_jobs(4, 200, threads=2) == 4  # 8 CPUs, 2 BLAS threads a process
    assert _runner.default_jobs(4, 200, threads=3) == 2
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    assert _runner.default_jobs(4, 200) == 2            # the environment's BLAS threads
    monkeypatch.setattr(_runner.os, "sched_getaffinity", lambda pid: {3}, raising=False)
    assert _runner.default_jobs(4, 200) == 1            # one CPU
    assert _runner.default_jobs(4, 200, threads=1) == 1


def test_no_jobs_option_gives_the_numbers_of_jobs_1(tmp_path):
    """Without --jobs, a run long enough for worker processes (on a machine with 2+ CPUs) writes
    the curves and log of --jobs 1."""
    from experiments import _runner, four_variants
    args = ["--steps", str(_runner.MIN_STEPS_FOR_PROCESSES), "--n-layers", "1", "--d-model", "16",
            "--n-heads", "2", "--block-size", "8", "--batch-size", "4", "--no-plots"]
    for name, extra in (("default", []), ("serial", ["--jobs", "1"])):
        assert four_variants.main(args + extra + ["--output-dir", str(tmp_path / name)]) == 0
    for f in ("curves.csv", "run_log.txt"):
        assert (tmp_path / "default" / f).read_text() == (tmp_path / "serial" / f).read_text()


def test_run_lines_are_printed_in_the_plans_order_whatever_order_runs_finish(
        tmp_path, monkeypatch, capsys):
    """Workers may finish in any order; stdout lists the runs as --jobs 1 does."""
    from experiments import _runner, four_variants
    real = _runner.run_jobs

    def reversed_finish(plan, jobs=1, on_done=None):
        runs = real(plan, 1)                    # train serially, report the last run first
        for e in reversed(runs):
            on_done(e)
        return runs

    monkeypatch.setattr(_runner, "run_jobs", reversed_finish)
    assert four_variants.main(TINY + ["--no-plots", "--output-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    names = [line.split()[0] + "+" + line.split()[2] for line in out[:4]]
    assert names == ["ln+gelu", "rms+gelu", "ln+swiglu", "rms+swiglu"], out[:4]
