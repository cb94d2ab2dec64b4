"""The notebooks run top to bottom from a fresh kernel (nbclient, the test extra), so none goes
stale; what a learner sees in them reads as intended.

A notebook that trains takes its size from a cell tagged ``parameters`` (papermill's
convention): the test adds a cell after it that sets smaller values, as ``papermill -p`` would,
and runs every cell. Each runs in a folder ``notebooks/`` of its own temporary copy of the
layout, so that what a notebook writes into ``../outputs/`` (the repository's ``outputs/`` when
a learner runs it) is seen and left behind in no checkout."""
import re
from pathlib import Path

import pytest

nbclient = pytest.importorskip("nbclient")
nbformat = pytest.importorskip("nbformat")

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
PARAMETERS = {"1_four_variants": {"steps": 20}}   # 200 steps a variant take 20 s, 20 take 2


def _run(path, folder, parameters=None):
    """The notebook at ``path`` executed with its working folder ``folder``, with a cell that
    sets ``parameters`` after its cell tagged ``parameters``."""
    nb = nbformat.read(path, as_version=4)
    if parameters:
        tagged = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
        assert len(tagged) == 1, f"{path.name}: no single cell tagged 'parameters'"
        nb.cells.insert(tagged[0] + 1, nbformat.v4.new_code_cell(
            "\n".join(f"{k} = {v!r}" for k, v in parameters.items()),
            metadata={"tags": ["injected-parameters"]}))
    folder.mkdir(parents=True, exist_ok=True)
    nbclient.NotebookClient(nb, timeout=180, kernel_name="python3",
                            resources={"metadata": {"path": str(folder)}}).execute()
    return nb


def _text(cell):
    return "".join(o.get("text", "") + str(o.get("data", {}).get("text/plain", ""))
                   for o in cell.get("outputs", []))


def _words(cells):
    """The text a notebook's code cells print, its numbers and spacing left out: what a change
    of a heading or a message changes, and a last digit of another machine's BLAS does not."""
    text = "\n".join(_text(c) for c in cells if c.cell_type == "code")
    return re.sub(r"\s+", " ", re.sub(r"[-+]?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?", "#", text)).strip()


def test_there_are_the_three_a_learner_opens_first():
    assert [p.name for p in NOTEBOOKS] == ["1_four_variants.ipynb", "2_rmsnorm_backward.ipynb",
                                           "3_your_own_backward.ipynb"]


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_each_notebook_runs_top_to_bottom(path, tmp_path):
    nb = _run(path, tmp_path / "notebooks", PARAMETERS.get(path.stem))
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert errors == []
    text = "\n".join(_text(c) for c in nb.cells if c.cell_type == "code")
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.png"))
    if path.stem.startswith("1_"):
        assert "4 runs x 20 steps" in text and "rms     swiglu" in text
        assert sum("image/png" in o.get("data", {}) for c in nb.cells
                   for o in c.get("outputs", [])) == 3
        assert written == [f"outputs/notebook_four_variants/{n}.png"
                           for n in ("deltas", "grad_norms", "loss_curves")]
    if path.stem.startswith("2_"):
        assert "central differences" in text and "gradcheck failed" in text
        assert "without term 2" in text                 # the check names the missing term
        assert written == ["outputs/notebook_rmsnorm_backward/jacobians.png"]
    if path.stem.startswith("3_"):
        assert "<Verdict: wrong (dx wrong, dweight right, dbias right)>" in text
        assert "raised AxisError at Cell In[" in text and "ipykernel" not in text
        assert "('right', {'dx': 'right', 'dweight': 'right', 'dbias': 'right'})" in text
        assert written == []
    if path.stem in ("2_rmsnorm_backward", "3_your_own_backward"):   # no training, no timing
        stored = nbformat.read(path, as_version=4)
        assert _words(stored.cells) == _words(nb.cells), (
            f"{path.name}'s stored outputs are not what it prints now: run it again and save "
            f"it (with the notebooks extra: jupyter nbconvert --to notebook --execute --inplace "
            f"notebooks/{path.name})")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_stored_output_holds_an_absolute_path_of_the_machine_it_ran_on(path):
    nb = nbformat.read(path, as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                   for o in c.get("outputs", []))
    assert not re.search(r"(?<![\w.])/(tmp|root|home|work|Users)/", text), path.name
