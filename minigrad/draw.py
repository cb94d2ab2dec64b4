"""The graph that made a Tensor, drawn: ``to_dot`` writes Graphviz's DOT language (standard
library only), ``draw_dot`` renders it with the ``graphviz`` package (micrograd's ``draw_dot``).

One node per recorded operation, labelled with its Function's name and output shape (a fused
layer of ``layers/`` is one node, named for its pair: ``RMSNormFunction``); one box per leaf
Tensor, with its shape, dtype and whether it requires grad (a name where ``names`` gives one).
Arrows run from inputs to the operation that used them, in the direction of the forward pass
(``backward`` walks them the other way), numbered by argument position where an operation has
more than one input: in ``a - b`` the arrow from ``a`` is 0, from ``b`` 1. A small graph runs
left to right (micrograd's picture); one of more than 20 nodes, a model's, top to bottom, so that
it reads as a page (the tiny GPT's loss: a 921 x 3112 PNG, where left to right gave 6234 x 360).
"""
from __future__ import annotations

import os
from pathlib import Path

from .engine import Tensor

MAX_NODES = 200


def _graph(root: Tensor):
    """The Tensors that made ``root`` (recorded nodes and the leaves they read), outputs first,
    and the edges ``(input, output, argument position)`` between them."""
    order, edges, seen, stack = [], [], {id(root)}, [root]
    while stack:
        t = stack.pop()
        order.append(t)
        inputs = t._ctx.inputs if t._ctx is not None else ()
        for pos, inp in enumerate(inputs):
            if isinstance(inp, Tensor):
                edges.append((inp, t, pos if len(inputs) > 1 else None))
                if id(inp) not in seen:
                    seen.add(id(inp))
                    stack.append(inp)
    return order, edges


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(tensor: Tensor, names=None, max_nodes: int = MAX_NODES) -> str:
    """Graphviz DOT source of the graph that produced ``tensor``.

    Args:
        tensor (Tensor): the output whose graph is drawn (recorded in grad mode; after a
            ``backward`` without ``retain_graph`` the graph is still drawn, its saved arrays
            are not needed).
        names (dict[str, Tensor] | None): labels for leaves, e.g. ``dict(model.named_parameters())``
            or ``{"x": x, "w": w}``.
        max_nodes (int | None): refuse a graph larger than this (default 200). A fused layer is one
            node, so a GPT's whole graph is small (the tiny GPT's loss: 55 nodes, 22 more a
            layer); an expression of the primitive ops grows fast: draw one part, or pass
            ``max_nodes=None`` to draw it all.

    Returns:
        str: DOT source (``digraph``), left to right, for ``dot -Tpng``.

    Raises:
        TypeError: ``tensor`` is not a Tensor, or ``names`` not a dict.
        ValueError: the graph has more than ``max_nodes`` nodes.
    """
    if not isinstance(tensor, Tensor):
        raise TypeError(f"to_dot: expected a Tensor, got {type(tensor).__name__}")
    if names is not None and not isinstance(names, dict):
        raise TypeError(f"to_dot: names is a {type(names).__name__}; give a dict of label: "
                        f"Tensor, e.g. {{'x': x}}")
    order, edges = _graph(tensor)
    if max_nodes is not None and len(order) > max_nodes:
        raise ValueError(f"to_dot: the graph has {len(order)} nodes, more than max_nodes="
                         f"{max_nodes}; draw a smaller part of it (one block's output) or pass "
                         f"max_nodes=None")
    label = {id(t): n for n, t in (names or {}).items()}
    key = {id(t): f"n{k}" for k, t in enumerate(order)}
    rankdir = "LR" if len(order) <= 20 else "TB"   # a deep graph top to bottom, as a page reads
    lines = ["digraph {", f"  rankdir={rankdir};", '  node [fontname="Helvetica", fontsize=10];',
             '  edge [fontname="Helvetica", fontsize=9];']
    for t in order:
        shape = str(t.shape) if t.shape else "scalar"
        if t._ctx is None:      # a leaf
            text = (f"{label[id(t)]}\n" if id(t) in label else "") + f"{shape} {t.dtype}\n" + \
                ("requires grad" if t.requires_grad else "constant")
            style = "shape=box, style=filled, fillcolor=" + (
                '"#dbe8f6"' if t.requires_grad else '"#eeeeee"')
        else:
            text, style = f"{t._ctx.fn_cls.__name__}\n{shape}", "shape=ellipse"
        lines.append(f"  {key[id(t)]} [label={_quote(text)}, {style}];")
    lines += [f"  {key[id(a)]} -> {key[id(b)]}" + (f' [label="{pos}"]' if pos is not None else "")
              + ";" for a, b, pos in edges]
    return "\n".join(lines + ["}"]) + "\n"


def draw_dot(tensor: Tensor, path, names=None, max_nodes: int = MAX_NODES) -> None:
    """Render ``to_dot(tensor, names, max_nodes)`` to ``path`` (its suffix gives the format:
    ``.png``, ``.svg``, ``.pdf``), complete or absent. Needs the ``graphviz`` package and its
    ``dot`` program (the ``graph`` extra: ``pip install -e ".[graph]"``, then Graphviz itself:
    ``apt install graphviz``, ``brew install graphviz``, or graphviz.org).

    Raises:
        RuntimeError: ``graphviz`` or ``dot`` is not installed (one line saying what to install).
        ValueError: as ``to_dot``, a path with no suffix, or a folder.
        OSError: ``path`` cannot be written (its folder missing, no permission), naming it.
    """
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"draw_dot: {path} is a folder; give a file name, e.g. {path / 'graph.png'}")
    fmt = path.suffix.lstrip(".").lower()
    if not fmt:
        raise ValueError(f"draw_dot: {path} has no suffix (.png, .svg, .pdf) to give the format")
    source = to_dot(tensor, names, max_nodes)
    try:
        import graphviz
    except ImportError:
        raise RuntimeError("draw_dot needs the graphviz package: pip install graphviz, and "
                           "Graphviz's dot program (apt install graphviz, brew install graphviz); "
                           "to_dot gives the DOT source without them") from None
    try:
        image = graphviz.Source(source).pipe(format=fmt)
    except graphviz.ExecutableNotFound:
        raise RuntimeError("draw_dot needs Graphviz's dot program on the PATH: apt install "
                           "graphviz, brew install graphviz, or graphviz.org/download") from None
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")    # then moved into place: whole
    try:
        tmp.write_bytes(image)
        os.replace(tmp, path)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if isinstance(e, OSError):
            e.filename = str(path)      # the file asked for, not the temporary one
        raise
