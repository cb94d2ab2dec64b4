"""Tests of ``tools/val_curves.py`` on curves.csv files in the studies' format
(``experiments.report``: variant, seed, step, train_loss, val_loss, grad_norm)."""
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("val_curves", ROOT / "tools" / "val_curves.py")
val_curves = importlib.util.module_from_spec(spec)
spec.loader.exec_module(val_curves)


def _study(folder, runs):
    """A study folder whose curves.csv holds ``runs``: {(variant, seed): {step: val}}; every
    step has a training row, val_loss only at the steps given."""
    lines = ["variant,seed,step,train_loss,val_loss,grad_norm"]
    for (name, seed), vals in runs.items():
        lines += [f"{name},{seed},{s},2.5,{vals.get(s, '')},0.9" for s in range(1, 5)]
    folder.mkdir()
    (folder / "curves.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def test_a_baseline_two_studies_share_is_read_once_under_both_names(tmp_path):
    base = {("ln+gelu", 0): {2: 2.1, 4: 1.9}, ("ln+gelu", 1): {2: 2.3, 4: 2.0}}
    a = _study(tmp_path / "a", {**base, ("rms+gelu", 0): {2: 2.0, 4: 1.8}})
    b = _study(tmp_path / "b", {("gelu", s): v for (_, s), v in base.items()})
    curves = val_curves.read_val([a, b])
    assert list(curves) == ["ln+gelu = gelu", "rms+gelu"]
    assert curves["ln+gelu = gelu"] == {2: [2.1, 2.3], 4: [1.9, 2.0]}   # the seeds, by step
    assert curves["rms+gelu"] == {2: [2.0], 4: [1.8]}


@pytest.mark.slow
def test_the_command_writes_the_png(tmp_path):
    pytest.importorskip("matplotlib")
    a = _study(tmp_path / "a", {("ln+gelu", 0): {2: 2.1, 4: 1.9}})
    out = tmp_path / "v.png"
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "val_curves.py"), str(a),
                        "--output", str(out), "--from-step", "0"], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
