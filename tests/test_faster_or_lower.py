"""Tests of ``tools/faster_or_lower.py`` on results.json files in the studies' format, with
numbers made by hand so that every figure it prints is known."""
import importlib.util
import json
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("fol", ROOT / "tools" / "faster_or_lower.py")
fol = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fol)


def study(folder, steps, lr, vals, norm="ln"):
    """A results.json: ``vals[name][seed] = (final val, [(step, val), ...])``; the train loss is
    the val loss minus 0.1."""
    runs = [{"name": n, "seed": s, "status": "ok", "val_loss": v, "train_loss": v - 0.1,
             "val_curve": [list(p) for p in c]}
            for n, by_seed in vals.items() for s, (v, c) in by_seed.items()]
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps({"config": {
        "steps": steps, "optimizer": {"lr": lr}, "model": {"norm": norm, "d_model": 128},
        "baseline": next(iter(vals))}, "runs": runs}))
    return folder


def one(v):
    return v, [(1000, v)]


def test_gaps_steps_to_target_and_best_rates(tmp_path):
    base = lambda v: (v, [(500, v + 0.5), (1000, v)])   # noqa: E731
    a = study(tmp_path / "a", 1000, 1e-3, {
        "gelu": {0: base(2.0), 1: base(2.2), 2: base(2.1)},
        "swiglu": {0: (1.9, [(500, 1.95), (1000, 1.9)]), 1: (2.1, [(500, 2.3), (1000, 2.1)]),
                   2: (2.0, [(500, 2.05), (1000, 2.0)])}})
    b = study(tmp_path / "b", 1000, 2e-3, {
        "gelu": {s: base(v) for s, v in ((0, 1.9), (1, 2.1), (2, 2.0))},
        "swiglu": {s: base(v) for s, v in ((0, 2.0), (1, 2.2), (2, 2.1))}})
    cells, baseline = fol.read([a, b])
    assert baseline == "gelu"
    d = fol.gap(cells[1000, 1e-3], "swiglu", cells[1000, 1e-3], "gelu")
    assert d["n"] == 3 and d["mean"] == pytest.approx(-0.1) and d["std"] == pytest.approx(0)
    # seeds 0 and 2 reach gelu's final val at step 500, seed 1 at step 1000: the median is 500
    assert fol.steps_to_target(cells[1000, 1e-3], "swiglu", cells[1000, 1e-3], "gelu") == 500
    lines = fol.lr_table(cells, 1000, "gelu")
    # two rates only: neither best has a worse rate on both sides
    assert "best lr 0.002 (not bracketed)" in lines[1] and "best lr 0.001 (not bracketed)" in lines[2]
    # swiglu at 1e-3 (1.9, 2.1, 2.0) against gelu at 2e-3 (1.9, 2.1, 2.0): a gap of 0
    assert "swiglu (lr 0.001) - gelu (lr 0.002) = +0.0000 [+0.0000, +0.0000] val" in lines[3]
    assert "-0.1000" in fol.lengths_table(cells, 1e-3, 1000, "gelu")[1]
    # each at its best rate: swiglu at 1e-3 against gelu at 2e-3, the same numbers
    assert "+0.0000" in fol.lengths_table(cells, None, 1000, "gelu")[1]


def test_a_bracketed_best_and_two_norms_put_together_best_against_best(tmp_path):
    # ln: gelu best at 2e-3 between 1e-3 and 4e-3; rms: swiglu only at 2e-3 and 4e-3
    folders = [study(tmp_path / f"ln{r}", 1000, r, {"gelu": {0: one(v), 1: one(v + 0.1)}})
               for r, v in ((1e-3, 2.0), (2e-3, 1.8), (4e-3, 1.9))]
    folders += [study(tmp_path / f"rms{r}", 1000, r, {"gelu": {0: one(v + 0.05)},
                                                       "swiglu": {0: one(v), 1: one(v + 0.1)}},
                      norm="rms") for r, v in ((2e-3, 1.75), (4e-3, 1.7))]
    cells, baseline = fol.read(folders)
    assert baseline == "ln+gelu"
    best = fol.best_rates(cells, 1000, baseline)
    assert best["ln+gelu"] == (2e-3, True) and best["rms+swiglu"] == (4e-3, False)
    lines = fol.lr_table(cells, 1000, baseline)
    # rms+swiglu at 4e-3 (1.7, 1.8) minus ln+gelu at 2e-3 (1.8, 1.9): -0.1 on both seeds
    assert any("rms+swiglu (lr 0.004) - ln+gelu (lr 0.002) = -0.1000" in line for line in lines)


def test_more_seeds_from_another_folder_join_the_cell_and_a_run_twice_is_refused(tmp_path):
    a = study(tmp_path / "a", 1000, 1e-3, {"gelu": {0: one(2.0), 1: one(2.1)}})
    b = study(tmp_path / "b", 1000, 1e-3, {"gelu": {3: one(2.2), 4: one(2.3)}})
    cells, _ = fol.read([a, b])
    assert fol.val(cells[1000, 1e-3], "gelu")["n"] == 4
    c = study(tmp_path / "c", 1000, 1e-3, {"gelu": {1: one(2.1)}})
    with pytest.raises(fol.cli.UsageError, match="a second run of gelu seed 1"):
        fol.read([a, c])


def test_the_figures_are_written(tmp_path):
    pytest.importorskip("matplotlib")
    vals = {"gelu": {0: (2.0, [(1000, 2.0)]), 1: (2.1, [(1000, 2.1)])},
            "relu2": {0: (1.9, [(1000, 1.9)]), 1: (2.05, [(1000, 2.05)])}}
    more = dict(vals, swiglu={0: (1.8, [(1000, 1.8)]), 1: (2.0, [(1000, 2.0)])})
    # the longer run trains fewer variants (as a sweep cut for time would)
    cells, base = fol.read([study(tmp_path / "a", 1000, 1e-3, more),
                            study(tmp_path / "b", 2000, 1e-3, vals)])
    fol.cli.write_outputs(tmp_path, fol.figures(cells, None, 1000, base))
    for name in ("gap_vs_length.png", "val_vs_lr.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
    assert math.isfinite(fol.gap(cells[2000, 1e-3], "relu2", cells[2000, 1e-3], "gelu")["mean"])


def test_a_variant_missing_at_one_rate_or_a_diverged_baseline_is_left_out_not_fatal(tmp_path):
    a = study(tmp_path / "a", 1000, 1e-3, {"gelu": {0: one(2.0), 1: one(2.1)},
                                           "relu2": {0: one(1.9), 1: one(2.0)}})
    b = study(tmp_path / "b", 1000, 5e-4, {"gelu": {0: one(2.2), 1: one(2.3)}})
    c = study(tmp_path / "c", 2000, 1e-3, {"gelu": {}, "relu2": {0: one(1.8)}})  # gelu diverged
    cells, base = fol.read([a, b, c])
    lines = fol.lr_table(cells, 1000, base)
    # relu2 trained only at 1e-3 (not at the lowest rate): still in the table, its best is 1e-3
    assert any(line.startswith("  relu2") and "best lr 0.001" in line for line in lines)
    assert "relu2 (lr 0.001) - gelu (lr 0.001) = -0.1000" in lines[-1]
    table = fol.lengths_table(cells, 1e-3, 1000, base)
    assert "2000 steps  relu2       -" in table[2]
    assert table[-1] == ("  steps-to-target: the median over the seeds of the first evaluation "
                         "step at which the variant's val loss is at or below gelu's final val "
                         "of the same seed; -: some seed never gets there")
    if importlib.util.find_spec("matplotlib"):
        assert set(fol.figures(cells, 1e-3, 1000, base)) == {"gap_vs_length.png", "val_vs_lr.png"}


@pytest.mark.parametrize("bad", ["same run", "other corpus", "not a study", "a list",
                                 "no such lr", "no such baseline", "other study", "not JSON",
                                 "a study of norms first"])
def test_bad_input_is_one_line_and_no_folder(tmp_path, bad):
    vals = {"gelu": {0: (2.0, [(1000, 2.0)])}, "relu2": {0: (1.9, [(1000, 1.9)])}}
    a = study(tmp_path / "a", 1000, 1e-3, vals)
    b = study(tmp_path / "b", 1000, 1e-3 if bad == "same run" else 2e-3, vals)
    if bad == "other corpus":
        res = json.loads((b / "results.json").read_text())
        res["config"]["corpus"] = "shakespeare"
        (b / "results.json").write_text(json.dumps(res))
    if bad == "other study":
        res = json.loads((b / "results.json").read_text())
        res["experiment"] = "four_variants"
        (b / "results.json").write_text(json.dumps(res))
    if bad == "a study of norms first":   # four_variants varies the norm: its model has none
        res = json.loads((a / "results.json").read_text())
        res["experiment"] = "four_variants"
        del res["config"]["model"]["norm"]
        (a / "results.json").write_text(json.dumps(res))
    if bad in ("not a study", "a list", "not JSON"):
        (b / "results.json").write_text({"a list": "[]", "not a study": "{}"}.get(bad, "{x"))
    argv = [str(a), str(b), "--steps", "1000", "--output-dir", str(tmp_path / "out")]
    extra = {"no such lr": ["--lr", "3e-3"], "no such baseline": ["--baseline", "swiglu"]}
    with pytest.raises(fol.cli.UsageError, match={
            "same run": "a second run of gelu seed 0", "other corpus": "its corpus differs",
            "not a study": "not a study's", "a list": "not a study's",
            "other study": "its experiment differs",
            "a study of norms first": f"{b}: its experiment differs from {a}'s",
            "not JSON": f"{b}: cannot read its results.json",
            "no such lr": "no study at --lr 0.003",
            "no such baseline": "no variant 'swiglu'"}[bad]):
        fol.run(argv + extra.get(bad, []))
    assert not (tmp_path / "out").exists()


def test_a_variant_without_runs_at_a_length_has_no_row_there(tmp_path):
    # relu2 trained at 1000 steps only: the 4000-step rows are gelu's partner swiglu's alone
    a = study(tmp_path / "a", 1000, 1e-3, {"gelu": {0: one(2.0)}, "relu2": {0: one(1.9)},
                                           "swiglu": {0: one(1.8)}})
    b = study(tmp_path / "b", 4000, 1e-3, {"gelu": {0: one(1.5)}, "swiglu": {0: one(1.5)}})
    cells, base = fol.read([a, b])
    rows = fol.lengths_table(cells, 1e-3, 1000, base)[1:-1]
    assert [r.split()[:3] for r in rows] == [["1000", "steps", "relu2"], ["1000", "steps", "swiglu"],
                                             ["4000", "steps", "swiglu"]]
