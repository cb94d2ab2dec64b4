"""The notebooks run top to bottom from a fresh kernel (nbclient, the test extra), so none goes
stale; what a learner sees in them reads as intended."""
from pathlib import Path

import pytest

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def _run(path, folder):
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(nb, timeout=180, kernel_name="python3",
                            resources={"metadata": {"path": str(folder)}}).execute()
    return nb


def _text(cell):
    return "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
                   for o in cell.get("outputs", []))


def test_there_are_the_three_a_learner_opens_first():
    assert [p.name for p in NOTEBOOKS] == ["1_four_variants.ipynb", "2_rmsnorm_backward.ipynb",
                                           "3_your_own_backward.ipynb"]


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_notebook_runs_top_to_bottom(path, tmp_path):
    nb = _run(path, tmp_path)
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors == []
    text = "\n".join(_text(c) for c in nb.cells if c.cell_type == "code")
    if path.stem.startswith("1_"):
        assert "rms     swiglu" in text and (tmp_path / "outputs").is_dir()
        assert sum("image/png" in o.get("data", {}) for c in nb.cells
                   for o in c.get("outputs", [])) == 3
    if path.stem.startswith("2_"):
        assert "central differences" in text and "gradcheck failed" in text
        assert "without term 2" in text                 # the check names the missing term
    if path.stem.startswith("3_"):
        assert "<Verdict: wrong (dx wrong, dweight right, dbias right)>" in text
        assert "raised AxisError at Cell In[" in text and "ipykernel" not in text
        assert "('right', {'dx': 'right', 'dweight': 'right', 'dbias': 'right'})" in text
