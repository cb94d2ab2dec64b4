"""The studies' figures (experiments/figures.py) as a reader sees them: every point inside the
axes and clear of the legend, diverged runs drawn in the red the titles name, a row without a
comparison saying why, a single step drawn, step tick labels under every column.

The reports are built from hand-made runs (no training), so each case is exactly the one named.
"""
import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("matplotlib")
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from experiments import activations, figures, four_variants, positions, report as rp  # noqa: E402
from experiments.runner import Study, Variant  # noqa: E402

RED, BLUE = to_rgba("tab:red"), to_rgba("tab:blue")


def run(name, seed, losses, final=None, diverged_at=None):
    """A run entry as ``runner.train_one`` makes it: ``final`` = (train, val) loss."""
    train, val = final if final is not None else (losses[-1], losses[-1] + 0.5)
    steps = len(losses)
    return {"name": name, "seed": seed, "params": 1000, "status": "diverged" if diverged_at
            else "ok", "diverged_at": diverged_at and {"step": diverged_at, "what": "loss",
                                                       "value": "nan"},
            "train_loss": None if diverged_at else train, "val_loss": None if diverged_at else val,
            "loss_curve": list(losses), "grad_norms": [2.0 / (i + 1) for i in range(steps)],
            "val_curve": [] if diverged_at else [[s, val] for s in range(1, steps + 1)]}


def report(study, runs, eval_tokens=None, split_tokens=(200, 30)):
    seeds = sorted({e["seed"] for e in runs})
    data = SimpleNamespace(tokenizer=SimpleNamespace(vocab_size=48),
                           train=np.zeros(split_tokens[0], np.int64),
                           val=np.zeros(split_tokens[1], np.int64))
    args = SimpleNamespace(block_size=8, init="gpt2", eval_tokens=eval_tokens, backward=None,
                           steps=max(len(e["loss_curve"]) for e in runs))
    return rp.Report(study, args, data, seeds, runs, "test")


def drawn(fig):
    """The figure laid out and drawn as ``save`` does, so extents and tick labels are final."""
    FigureCanvasAgg(fig)
    fig.tight_layout()
    fig.canvas.draw()
    return fig


def texts_inside(fig):
    """True when everything drawn (titles, labels, tick labels, legends, notes) lies within the
    figure, to half a pixel."""
    renderer = fig.canvas.get_renderer()
    boxes = [ax.get_tightbbox(renderer) for ax in fig.axes if ax.get_visible()]
    boxes += [a.get_window_extent(renderer) for a in [fig._suptitle, *fig.legends] if a]
    b = fig.bbox
    return all(e.x0 >= b.x0 - 0.5 and e.x1 <= b.x1 + 0.5 and e.y0 >= b.y0 - 0.5
               and e.y1 <= b.y1 + 0.5 for e in boxes)


def curve(losses, drift=0.0):
    return [4.0 - 2.0 * k / len(losses) + drift for k in range(len(losses))]


def markers(ax):
    """(display x, display y, radius in pixels) of every marker drawn on ``ax``."""
    out = []
    for line in ax.get_lines():
        if line.get_marker() in ("None", "", " ", None):
            continue
        r = line.get_markersize() / 72 * ax.figure.dpi / 2
        xy = np.column_stack([np.asarray(d, dtype=float) for d in line.get_data()])
        for x, y in ax.transData.transform(xy):   # matplotlib 3.5 gives errorbars as objects
            out.append((x, y, r))
    return out


@pytest.mark.parametrize("study, seeds", [(positions.STUDY, 1), (positions.STUDY, 3),
                                          (activations.STUDY, 1), (activations.STUDY, 3)])
def test_deltas_keep_every_point_and_interval_inside_the_axes_and_clear_of_the_legend(study,
                                                                                       seeds):
    rng = np.random.default_rng(1)
    runs = [run(v.name, s, curve(range(10)), final=(2.0 + rng.normal(0, 0.5) - 1.2 * (i > 0),
                                                    3.0 + rng.normal(0, 0.5) + 2.0 * (i > 0)))
            for i, v in enumerate(study.variants) for s in range(seeds)]
    rep = report(study, runs)
    fig = drawn(figures.deltas(rep))
    ax = fig.axes[0]
    box = ax.get_window_extent()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["val", "train"]
    legend = ax.get_legend().get_window_extent()
    points = markers(ax)
    dots = [line for line in ax.get_lines() if line.get_marker() == "o"]
    assert len(dots) == 2 * (len(study.variants) - 1)   # val and train of every variant
    for x, y, r in points:
        assert box.x0 + r <= x <= box.x1 - r and box.y0 + r <= y <= box.y1 - r
        assert not (legend.x0 - r < x < legend.x1 + r and legend.y0 - r < y < legend.y1 + r)
    lo, hi = ax.get_xlim()
    for v in study.variants[1:]:
        for d in rep.summaries[v.name]["difference_from_baseline"].values():
            assert lo < min(d["mean"], d["low"] if d["low"] is not None else d["mean"])
            assert max(d["mean"], d["high"] if d["high"] is not None else d["mean"]) < hi


@pytest.mark.parametrize("seeds", [1, 3])
def test_deltas_say_why_a_variant_has_no_point(seeds):
    study = four_variants.STUDY
    runs = [run(v.name, s, curve(range(3)), diverged_at=3 if i != 2 else None)
            for i, v in enumerate(study.variants) for s in range(seeds)]
    fig = drawn(figures.deltas(report(study, runs)))
    ax = fig.axes[0]
    assert markers(ax) == []
    texts = [t.get_text() for t in ax.texts]
    of = f"{seeds} of {seeds} seed{'s' if seeds > 1 else ''}"
    assert texts == [   # one a row: every row lacks a pair (the baseline diverged)
        f"no seed where both trained; diverged: rms+gelu in {seeds} of {seeds}, ln+gelu in {of}",
        f"no seed where both trained; diverged: ln+gelu in {of}",
        f"no seed where both trained; diverged: rms+swiglu in {seeds} of {seeds}, ln+gelu in {of}"]
    assert ax.get_xlim()[0] < 0 < ax.get_xlim()[1]   # the zero line inside the axes
    assert texts_inside(fig)


@pytest.mark.parametrize("seeds", [1, 3])
def test_loss_curves_draw_diverged_runs_red_and_the_others_blue(seeds):
    study = four_variants.STUDY
    runs = [run(v.name, s, curve(range(5 if i % 2 == 0 or s else 2)),
                diverged_at=3 if i % 2 and s == 0 else None)
            for i, v in enumerate(study.variants) for s in range(seeds)]
    fig = drawn(figures.loss_curves(report(study, runs)))
    for ax, v in zip(fig.axes, study.variants):
        lines = {tuple(line.get_ydata()): to_rgba(line.get_color()) for line in ax.get_lines()}
        diverged = [e for e in runs if e["name"] == v.name and e["status"] != "ok"]
        for e in runs:
            if e["name"] == v.name:
                assert lines[tuple(e["loss_curve"])][:3] == (RED if e in diverged else BLUE)[:3]
        assert ("diverged, red" in ax.get_title()) == bool(diverged)
        stops = [line for line in ax.get_lines() if to_rgba(line.get_color()) == RED
                 and set(line.get_xdata()) == {3}]
        assert len(stops) == len(diverged)   # the dashed line at the step it stopped
    assert texts_inside(fig)


@pytest.mark.parametrize("study", [positions.STUDY, four_variants.STUDY])
def test_one_step_is_drawn_as_a_dot(study):
    runs = [run(v.name, 0, [40.0 + i]) for i, v in enumerate(study.variants)]
    rep = report(study, runs)
    for fig in (figures.loss_curves(rep), figures.grad_norms(rep)):
        drawn(fig)
        single = [line for ax in fig.axes for line in ax.get_lines()
                  if len(line.get_xdata()) == 1]
        assert single   # the training losses (and gradient norms) of the one step
        assert all(line.get_marker() not in ("None", "", " ", None) for line in single)
        for ax in fig.axes:   # inside the axes, and the step ticks are whole steps
            ticks = ax.get_xticks()
            assert 1 in ticks and all(t == int(t) for t in ticks)
            box = ax.get_window_extent()
            for x, y, r in markers(ax):
                assert box.x0 <= x <= box.x1 and box.y0 <= y <= box.y1


@pytest.mark.parametrize("n", [2, 3, 5, 7])
def test_the_lowest_panel_of_every_column_has_step_tick_labels(n):
    study = dataclasses.replace(activations.STUDY,
                                variants=tuple(Variant(f"v{i}") for i in range(n)))
    fig = drawn(figures.loss_curves(report(study, [run(f"v{i}", 0, curve(range(30)))
                                                  for i in range(n)])))
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == n
    columns = {}
    for ax in visible:
        columns.setdefault(round(ax.get_position().x0, 3), []).append(ax)
    for col in columns.values():
        lowest = min(col, key=lambda ax: ax.get_position().y0)
        labels = [t.label1.get_text() for t in lowest.xaxis.get_major_ticks()
                  if t.label1.get_visible()]
        assert labels and all(text.lstrip("−-").isdigit() for text in labels if text)
        assert lowest.get_xlabel() == "step"


def test_the_val_legend_says_how_many_positions_it_averages():
    study = positions.STUDY
    runs = [run(v.name, 0, curve(range(10))) for v in study.variants]
    whole = drawn(figures.loss_curves(report(study, runs)))
    assert "val (all 29 positions), mean" in whole.axes[0].get_legend_handles_labels()[1]
    part = drawn(figures.loss_curves(report(study, runs, eval_tokens=20)))
    assert "val (16 of 29 positions), mean" in part.axes[0].get_legend_handles_labels()[1]


@pytest.mark.parametrize("val", [3.0, 1.0])   # above the training curves' ends, and below
def test_loss_curves_keep_every_val_point_and_the_last_steps_on_the_axis(val):
    study = activations.STUDY
    runs = [run(v.name, s, [42.0] + curve(range(60), drift=0.1 * i), final=(2.0, val + i))
            for i, v in enumerate(study.variants) for s in range(2)]
    fig = drawn(figures.loss_curves(report(study, runs)))
    lo, hi = fig.axes[0].get_ylim()
    for e in runs:
        assert all(lo < v < hi for _, v in e["val_curve"])
        assert all(lo < v < hi for v in e["loss_curve"][-6:])
    assert "the first steps (loss up to 42) are above the axis" in fig._suptitle.get_text()
    assert ", init gpt2;" in fig._suptitle.get_text()   # the plan's --init
    assert texts_inside(fig)


def test_a_gradient_norm_of_zero_is_drawn_below_the_others_and_said():
    study = positions.STUDY
    runs = [run(v.name, 0, [42.0, 3.9], diverged_at=3) for v in study.variants]
    runs[0]["grad_norms"] = [9.6, 0.96]
    runs[1]["grad_norms"] = [9.6, 0.0]   # a model that collapsed to the uniform prediction
    fig = drawn(figures.grad_norms(report(study, runs)))
    ax = fig.axes[0]
    assert "a norm of 0 is drawn at 0.096" in ax.get_title()   # a decade below 0.96
    assert texts_inside(fig)
    crosses = [line for line in ax.get_lines() if line.get_marker() == "x"]
    assert len(crosses) == 2   # both runs' last step before divergence
    assert sorted(line.get_ydata()[0] for line in crosses) == pytest.approx([0.096, 0.96])
    assert ax.get_ylim()[0] < 0.096 * 0.6   # the mark inside the axes, clear of the edge


def test_hidden_stats_draw_a_single_recorded_step_and_name_the_runs_that_diverged():
    from experiments import hidden_stats
    study = hidden_stats.STUDY
    stats = {"mean": 0.0, "var": 2.0, "min": -4.0, "max": 4.0, "kurtosis": 2.9}
    runs = []
    for v in study.variants:   # both diverged at step 3, before the first evaluation at 10
        e = run(v.name, 0, [42.0, 30.0], diverged_at=3)
        e["extra"] = {"rows": [dict(step=0, site=site, **stats)
                               for site in ("blocks.0.pre_attn", "blocks.0.pre_mlp")]}
        runs.append(e)
    rep = report(study, runs)
    fig = drawn(figures.hidden_stats(rep, hidden_stats.mean_stats(rep)))
    lines = [line for ax in fig.axes for line in ax.get_lines() if len(line.get_xdata()) == 1]
    assert len(lines) == 3 * 2 * 2   # three panels, two variants, two sites
    assert all(line.get_marker() not in ("None", "", " ", None) for line in lines)
    for ax in fig.axes:   # a whole step, not -0.04 .. 0.04
        lo, hi = ax.get_xlim()
        assert [t for t in ax.get_xticks() if lo <= t <= hi] == [0]
    assert fig._suptitle.get_text().endswith(
        "diverged, recorded until they stopped: ln seed 0 at step 3, rms seed 0 at step 3")
    fig.tight_layout(rect=(0, 0.12, 1, 0.95))   # as extra_outputs saves it
    fig.canvas.draw()
    assert texts_inside(fig)


def labelled_y_ticks(ax):
    """The y tick labels shown inside the axes, as drawn."""
    lo, hi = ax.get_ylim()
    return [t.get_text() for t, v in zip(ax.get_yticklabels(), ax.get_yticks())
            if lo <= v <= hi and t.get_text()]


@pytest.mark.parametrize("norms, wanted", [
    ([5000.0, 0.2], ["0.2", "0.5", "1", "2", "5000"]),   # values under 1 labelled
    ([3.0, 1.5], ["1", "1.5", "2", "2.5", "3"]),           # within a decade: evenly spaced
    ([1e6, 1e-8], ["1e-08", "1", "1e+06"])])             # many decades: the powers
def test_log_axes_label_their_ticks_as_plain_decimals(norms, wanted):
    study = positions.STUDY
    runs = [run(v.name, 0, [42.0, 3.9]) for v in study.variants]
    for e in runs:
        e["grad_norms"] = norms
    ax = drawn(figures.grad_norms(report(study, runs))).axes[0]
    labels = labelled_y_ticks(ax)
    assert set(wanted) <= set(labels) and len(labels) <= 20, labels
    assert all(float(t) > 0 and "times" not in t and "^" not in t for t in labels)
    blown = [run(v.name, 0, [40.0, 30.0, 20.0, 10.0]) for v in study.variants]   # log scale
    ax = drawn(figures.loss_curves(report(study, blown))).axes[0]
    assert ax.get_yscale() == "log" and "10" in labelled_y_ticks(ax)
    assert all("times" not in t and "^" not in t for t in labelled_y_ticks(ax))


@pytest.mark.parametrize("status", ["wrong", "right"])
def test_every_figure_of_a_run_with_the_learners_backward_says_so(status, tmp_path,
                                                                   monkeypatch):
    from experiments import hidden_stats
    from experiments.exercises.learner import Swap
    study = four_variants.STUDY
    runs = [dict(run(v.name, 0, curve(range(20))), extra={"rows": []},
                 backward_called=["rmsnorm"] if v.name.startswith("rms") else [])
            for v in study.variants]
    rep = report(study, runs)
    rep.args.backward, rep.args.no_plots = (Swap("rmsnorm", "mine/rmsnorm.py", status),), False
    note = figures.backward_note(rep)
    said = "Trained with your backward passes: rmsnorm_backward"
    assert note == ((said + "; the check failed for rmsnorm_backward (in rms+gelu, rms+swiglu): "
                     "these losses are not the model's", "tab:red") if status == "wrong" else
                    (said, "black"))
    for draw in (figures.loss_curves, figures.deltas, figures.grad_norms):
        fig = draw(rep)
        FigureCanvasAgg(fig)
        figures.save(fig, tmp_path / "x.png", note)
        drawn_note = [t for t in fig.texts if t.get_text().replace("\n", " ") == note[0]]
        assert len(drawn_note) == 1 and to_rgba(drawn_note[0].get_color()) == to_rgba(note[1])
        renderer = fig.canvas.get_renderer()
        box = drawn_note[0].get_window_extent(renderer)
        assert box.y1 <= fig.bbox.y1 + 0.5 and box.x0 >= -0.5 and box.x1 <= fig.bbox.x1 + 0.5
        below = [a.get_window_extent(renderer) for a in fig.axes] + (
            [fig._suptitle.get_window_extent(renderer)] if fig._suptitle else [])
        assert all(b.y1 <= box.y0 for b in below)   # above every panel and the title
    seen = []   # figures.add and hidden_stats' figure pass the note to every figure they save
    monkeypatch.setattr(figures, "save", lambda fig, path, note=None, **kw: seen.append(note))
    files = {}
    figures.add(rep, files)
    files.update(hidden_stats.files(rep))
    for name, write in files.items():
        if name.endswith(".png"):
            write(tmp_path / name)
    assert len(seen) == 4 and all(n == note for n in seen)
