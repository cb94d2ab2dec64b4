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


def study(folder, steps, lr, vals):
    """A results.json: ``vals[name][seed] = (final val, [(step, val), ...])``."""
    runs = [{"name": n, "seed": s, "status": "ok", "val_loss": v, "val_curve": [list(p) for p in c]}
            for n, by_seed in vals.items() for s, (v, c) in by_seed.items()]
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps({"config": {
        "steps": steps, "optimizer": {"lr": lr}, "baseline": next(iter(vals))}, "runs": runs}))
    return folder


def test_gaps_steps_to_target_and_best_rates(tmp_path, capsys):
    base = lambda v: (v, [(500, v + 0.5), (1000, v)])   # noqa: E731
    a = study(tmp_path / "a", 1000, 1e-3, {
        "gelu": {0: base(2.0), 1: base(2.2), 2: base(2.1)},
        "swiglu": {0: (1.9, [(500, 1.95), (1000, 1.9)]), 1: (2.1, [(500, 2.3), (1000, 2.1)]),
                   2: (2.0, [(500, 2.05), (1000, 2.0)])}})
    b = study(tmp_path / "b", 1000, 2e-3, {
        "gelu": {s: base(v) for s, v in ((0, 1.9), (1, 2.1), (2, 2.0))},
        "swiglu": {s: base(v) for s, v in ((0, 2.0), (1, 2.2), (2, 2.1))}})
    cells = fol.read([a, b])
    d = fol.gap(cells[1000, 1e-3], "swiglu")
    assert d["n"] == 3 and d["mean"] == pytest.approx(-0.1) and d["std"] == pytest.approx(0)
    # seeds 0 and 2 reach gelu's final val at step 500, seed 1 at step 1000: the median is 500
    assert fol.steps_to_target(cells[1000, 1e-3], "swiglu") == 500
    lines = fol.lr_table(cells, 1000)
    assert "best lr 0.002" in lines[1] and "best lr 0.001" in lines[2]   # gelu, swiglu
    # swiglu at 1e-3 (1.9, 2.1, 2.0) against gelu at 2e-3 (1.9, 2.1, 2.0): a gap of 0
    assert "swiglu (lr 0.001) - gelu (lr 0.002) = +0.0000" in lines[3]
    assert "-0.1000" in fol.lengths_table(cells, 1e-3)[1]


def test_the_figures_are_written(tmp_path):
    pytest.importorskip("matplotlib")
    vals = {"gelu": {0: (2.0, [(1000, 2.0)]), 1: (2.1, [(1000, 2.1)])},
            "relu2": {0: (1.9, [(1000, 1.9)]), 1: (2.05, [(1000, 2.05)])}}
    more = dict(vals, swiglu={0: (1.8, [(1000, 1.8)]), 1: (2.0, [(1000, 2.0)])})
    # the longer run trains fewer variants (as a sweep cut for time would)
    cells = fol.read([study(tmp_path / "a", 1000, 1e-3, more),
                      study(tmp_path / "b", 2000, 1e-3, vals)])
    fol.cli.write_outputs(tmp_path, fol.figures(cells, 1e-3, 1000))
    for name in ("gap_vs_length.png", "val_vs_lr.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG"
    assert math.isfinite(fol.gap(cells[2000, 1e-3], "relu2")["mean"])


def test_a_variant_missing_at_one_rate_or_a_diverged_baseline_is_left_out_not_fatal(tmp_path):
    one = lambda v: (v, [(1000, v)])   # noqa: E731
    a = study(tmp_path / "a", 1000, 1e-3, {"gelu": {0: one(2.0), 1: one(2.1)},
                                           "relu2": {0: one(1.9), 1: one(2.0)}})
    b = study(tmp_path / "b", 1000, 5e-4, {"gelu": {0: one(2.2), 1: one(2.3)}})
    c = study(tmp_path / "c", 2000, 1e-3, {"gelu": {}, "relu2": {0: one(1.8)}})  # gelu diverged
    cells = fol.read([a, b, c])
    lines = fol.lr_table(cells, 1000)
    # relu2 trained only at 1e-3 (not at the lowest rate): still in the table, its best is 1e-3
    assert any(line.startswith("  relu2") and "best lr 0.001" in line for line in lines)
    assert "relu2 (lr 0.001) - gelu (lr 0.001) = -0.1000" in lines[-1]
    assert "2000 steps  relu2      -" in fol.lengths_table(cells, 1e-3)[2]   # no pair there
    if importlib.util.find_spec("matplotlib"):
        assert set(fol.figures(cells, 1e-3, 1000)) == {"gap_vs_length.png", "val_vs_lr.png"}


@pytest.mark.parametrize("bad", ["same cell", "other corpus", "not a study", "no such lr"])
def test_bad_input_is_one_line_and_no_folder(tmp_path, bad):
    vals = {"gelu": {0: (2.0, [(1000, 2.0)])}, "relu2": {0: (1.9, [(1000, 1.9)])}}
    a = study(tmp_path / "a", 1000, 1e-3, vals)
    b = study(tmp_path / "b", 1000, 1e-3 if bad == "same cell" else 2e-3, vals)
    if bad == "other corpus":
        res = json.loads((b / "results.json").read_text())
        res["config"]["corpus"] = "shakespeare"
        (b / "results.json").write_text(json.dumps(res))
    if bad == "not a study":
        (b / "results.json").write_text("[]")
    argv = [str(a), str(b), "--steps", "1000", "--output-dir", str(tmp_path / "out")]
    with pytest.raises(fol.cli.UsageError, match={"same cell": "a second study of 1000 steps",
                                                  "other corpus": "its corpus differs",
                                                  "not a study": "cannot read",
                                                  "no such lr": "no study at --lr 0.003"}[bad]):
        fol.run(argv + (["--lr", "3e-3"] if bad == "no such lr" else []))
    assert not (tmp_path / "out").exists()
