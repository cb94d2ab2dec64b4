"""One row per layer (``experiments/exercises/catalogue.py``): a layer file, its section in
docs/derivations.md, its faces in layers/functional.py and layers/modules.py, its line in
docs/exercises.md and its row go together; none without the others."""
import re
from pathlib import Path

import pytest

import layers.functional
import layers.modules
from experiments.exercises import catalogue
from experiments.exercises.catalogue import EXERCISES, Exercise

REPO = Path(__file__).resolve().parents[1]
NOT_LAYERS = {"__init__", "_erf", "checks", "functional", "modules"}


def anchors(markdown):
    """The anchors of the headings of ``markdown``, as the docs link them (ASCII letters and
    digits, hyphens for spaces)."""
    return {re.sub(r"[^a-z0-9\- ]", "", h.strip().lower()).replace(" ", "-")
            for h in re.findall(r"^#+ (.*)$", markdown, re.M)}


def test_every_layer_file_has_a_row_and_every_row_a_layer_file():
    files = {p.stem for p in (REPO / "layers").glob("*.py")} - NOT_LAYERS
    assert files == set(EXERCISES)


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_a_rows_section_and_faces_exist(name):
    ex = EXERCISES[name]
    assert ex.section in anchors((REPO / "docs" / "derivations.md").read_text()), ex.section
    assert f"(derivations.md#{ex.section})" in (REPO / "docs" / "exercises.md").read_text()
    assert f"| `{name}` |" in (REPO / "docs" / "exercises.md").read_text()
    assert ex.functional in layers.functional.__all__
    assert ex.module_class is None or ex.module_class in layers.modules.__all__
    assert callable(ex.forward) and callable(ex.backward)     # layers.<name>.<name>_forward, ...
    for grad, term, factor in ex.breaks:
        assert grad in ex.grads and term >= 1 and factor in (0, -1)


def test_a_row_without_a_face_is_refused_when_it_is_made():
    row = dict(vars(EXERCISES["relu2"]))
    for face in catalogue.REQUIRED:
        with pytest.raises(TypeError, match=f"exercise relu2: its row has no {face}"):
            Exercise(**{**row, face: type(row[face])()})
