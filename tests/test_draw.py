"""minigrad.to_dot / draw_dot: the graph that made a Tensor, as Graphviz DOT and as a picture."""
import importlib.util
import re
import shutil
import sys

import numpy as np
import pytest

import minigrad
from minigrad import Tensor
from layers import functional as F

RNG = np.random.default_rng(0)


def _expression():
    x = Tensor(RNG.standard_normal((2, 4)), requires_grad=True)
    w = Tensor(RNG.standard_normal(4), requires_grad=True)
    c = Tensor(np.ones((4, 3)))                              # a constant
    out = (F.rms_norm(x, (4,), w).tanh() @ c).sum()
    return out, {"x": x, "w": w}


def _nodes_and_edges(dot):
    nodes = dict(re.findall(r'^  (n\d+) \[label="([^"]*)"', dot, re.M))
    edges = re.findall(r"^  (n\d+) -> (n\d+)(?: \[label=\"\d+\"\])?;", dot, re.M)
    return nodes, edges


def test_one_node_per_op_and_leaf_with_shapes_names_and_edges_in_forward_order():
    out, names = _expression()
    nodes, edges = _nodes_and_edges(minigrad.to_dot(out, names=names))
    labels = sorted(nodes.values())
    assert labels == sorted([
        "Sum\\nscalar", "MatMul\\n(2, 3)", "Tanh\\n(2, 4)", "RMSNormFunction\\n(2, 4)",
        "x\\n(2, 4) float64\\nrequires grad", "w\\n(4,) float64\\nrequires grad",
        "(4, 3) float64\\nconstant"])
    by_label = {v.split("\\n")[0]: k for k, v in nodes.items()}
    assert (by_label["x"], by_label["RMSNormFunction"]) in edges          # input -> its op
    assert (by_label["MatMul"], by_label["Sum"]) in edges
    assert len(edges) == 6


def test_the_arrows_into_an_op_of_two_inputs_are_numbered_by_argument_position():
    a, b = Tensor(np.ones(2), requires_grad=True), Tensor(np.ones(2), requires_grad=True)
    for out, first in ((a - b, "a"), (b - a, "b")):
        dot = minigrad.to_dot(out, names={"a": a, "b": b})
        nodes = {v.split("\\n")[0]: k for k, v in _nodes_and_edges(dot)[0].items()}
        zero = re.findall(r'^  (n\d+) -> n\d+ \[label="0"\];', dot, re.M)
        assert zero == [nodes[first]]


def test_the_graph_is_still_drawn_after_backward():
    out, names = _expression()
    before = minigrad.to_dot(out, names=names)
    out.backward()
    assert minigrad.to_dot(out, names=names) == before


def test_a_graph_larger_than_max_nodes_is_refused_with_the_way_out():
    x = Tensor(np.ones(3), requires_grad=True)
    y = x
    for _ in range(300):
        y = y * 1.0
    with pytest.raises(ValueError, match=r"301 nodes.*max_nodes=None"):
        minigrad.to_dot(y)
    assert minigrad.to_dot(y, max_nodes=None).count("Mul") == 300
    with pytest.raises(TypeError, match="expected a Tensor"):
        minigrad.to_dot(np.ones(3))
    with pytest.raises(TypeError, match="names is a list; give a dict"):
        minigrad.to_dot(x * 2.0, names=[x])


def test_draw_dot_without_graphviz_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "graphviz", None)        # import graphviz fails
    out, _ = _expression()
    with pytest.raises(RuntimeError, match="pip install graphviz"):
        minigrad.draw_dot(out, tmp_path / "g.png")
    with pytest.raises(ValueError, match="no suffix"):
        minigrad.draw_dot(out, tmp_path / "g")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_draw_dot_writes_a_png():
    pytest.importorskip("graphviz")
    import tempfile
    import pathlib
    out, names = _expression()
    with tempfile.TemporaryDirectory() as d:
        path = pathlib.Path(d) / "graph.png"
        minigrad.draw_dot(out, path, names=names)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert [p.name for p in pathlib.Path(d).iterdir()] == ["graph.png"]   # no leftovers


def test_draw_dot_names_the_file_asked_for_and_refuses_a_folder(tmp_path):
    out, _ = _expression()
    with pytest.raises(ValueError, match="is a folder"):
        minigrad.draw_dot(out, tmp_path)
    if shutil.which("dot") and importlib.util.find_spec("graphviz"):
        with pytest.raises(FileNotFoundError) as err:
            minigrad.draw_dot(out, tmp_path / "missing" / "g.png")
        assert err.value.filename == str(tmp_path / "missing" / "g.png")


def test_a_small_graph_runs_left_to_right_and_a_deep_one_top_to_bottom():
    x = minigrad.Tensor(np.ones(3), requires_grad=True)
    assert "rankdir=LR;" in minigrad.to_dot((x * 2).sum())
    y = x
    for _ in range(12):             # 24 operations: more than 20 nodes
        y = y * 1.5 + 1.0
    assert "rankdir=TB;" in minigrad.to_dot(y.sum())


def test_gradchecks_float32_hint_works_when_followed():
    x = minigrad.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match=r"x\.double\(\)\.detach\(\)\.requires_grad_\(\)"):
        minigrad.gradcheck(lambda a: a * a, [x])
    assert minigrad.gradcheck(lambda a: a * a, [x.double().detach().requires_grad_()])
