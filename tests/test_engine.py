"""Reverse mode: reuse and depth, accumulation, graph freeing, the Function API contract,
the version counter, and grad mode."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import Function, Tensor, gradcheck

RNG = np.random.default_rng(0)


def _t(*shape):
    return Tensor(RNG.standard_normal(shape), requires_grad=True)


def test_x_times_x_and_x_plus_x():
    x = _t(3)
    dout = RNG.standard_normal(3)
    (x * x).backward(dout)
    np.testing.assert_allclose(x.grad, 2 * x.data * dout, rtol=1e-15)
    y = _t(3)
    (y + y).backward(dout)
    np.testing.assert_array_equal(y.grad, 2 * dout)
    assert gradcheck(lambda x: x * x + x * 0.5, [_t(2, 2)])


def test_shared_weight_gets_sum_of_both_uses():
    w, x = _t(3, 3), Tensor(RNG.standard_normal((2, 3)))
    dout = RNG.standard_normal((2, 3))
    ((x @ w).tanh() @ w).backward(dout)
    h = np.tanh(x.data @ w.data)
    dh = dout @ w.data.T
    expected = x.data.T @ (dh * (1 - h ** 2)) + h.T @ dout
    np.testing.assert_allclose(w.grad, expected, rtol=1e-12)
    assert gradcheck(lambda w: (x @ w).tanh() @ w, [w])


@pytest.mark.slow
def test_chain_of_100000_ops():
    x = Tensor(np.array([1.5, -2.0]), requires_grad=True)
    y = x
    for _ in range(50_000):
        y = y * 1.0001
        y = y - 0.5
    y.backward(np.array([2.0, -1.0]))
    np.testing.assert_allclose(x.grad, np.array([2.0, -1.0]) * 1.0001 ** 50_000, rtol=1e-9)
    del y  # tearing the chain down must not recurse either


def test_accumulation_over_two_backward_calls_and_retain_graph():
    x = _t(2, 3)
    dout = RNG.standard_normal((2, 3))
    y = x.exp()
    y.backward(dout, retain_graph=True)
    y.backward(dout)
    np.testing.assert_allclose(x.grad, 2 * np.exp(x.data) * dout, rtol=1e-14)
    x.grad = None
    x.exp().backward(dout)
    np.testing.assert_allclose(x.grad, np.exp(x.data) * dout, rtol=1e-14)


def test_second_backward_through_freed_graph_is_an_error():
    x = _t(3)
    y = (x * 2.0).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()


def test_non_scalar_root_needs_grad():
    with pytest.raises(RuntimeError, match="implicitly"):
        (_t(2, 2) * 2.0).backward()
    with pytest.raises(ValueError, match="shape"):
        (_t(2, 2) * 2.0).backward(np.ones(3))
    with pytest.raises(RuntimeError, match="does not require grad"):
        Tensor(np.ones(2)).sum().backward()


def test_retain_grad_on_non_leaf():
    x = _t(3)
    h = x * 3.0
    h.retain_grad()
    dout = RNG.standard_normal(3)
    h.tanh().backward(dout)
    np.testing.assert_allclose(h.grad, dout * (1 - np.tanh(h.data) ** 2), rtol=1e-14)


def test_node_recorded_only_with_grad_mode_and_grad_inputs():
    x = _t(2)
    assert (x * 2.0).grad_fn is not None
    assert Tensor(np.ones(2)).exp().requires_grad is False
    with mg.no_grad():
        y = x * 2.0
    assert y.requires_grad is False and y.grad_fn is None


def test_no_grad_decorator_forms_and_nesting():
    @mg.no_grad()
    def f():
        return mg.is_grad_enabled()

    @mg.no_grad
    def g():
        return mg.is_grad_enabled()
    assert f() is False and g() is False and mg.is_grad_enabled() is True
    with mg.no_grad():
        with mg.enable_grad():
            assert mg.is_grad_enabled()
        assert not mg.is_grad_enabled()
    with mg.set_grad_enabled(False):
        assert not mg.is_grad_enabled()
    assert mg.is_grad_enabled()
    with pytest.raises(TypeError):
        mg.set_grad_enabled(1)

    @mg.no_grad()
    def rec(n):
        return rec(n - 1) if n else mg.is_grad_enabled()
    assert rec(3) is False and mg.is_grad_enabled()


# --------------------------------------------------------------------------- Function API
class Square(Function):
    """c = a**2.   da = 2 a dc."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * a

    @staticmethod
    def backward(ctx, dc):
        (a,) = ctx.saved_tensors
        return 2 * a * dc


def test_function_api_roundtrip():
    x = _t(2, 3)
    assert gradcheck(lambda x: Square.apply(x), [x])
    y = Square.apply(x)
    assert y.grad_fn is Square


class WrongShape(Function):
    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, dc):
        return dc, dc  # b is (3, 1): missing reduction


class WrongDtype(Function):
    @staticmethod
    def forward(ctx, a):
        return a * 2

    @staticmethod
    def backward(ctx, dc):
        return (dc * 2).astype(np.float64)


class WrongCount(Function):
    @staticmethod
    def forward(ctx, a, b):
        return a * b

    @staticmethod
    def backward(ctx, dc):
        return dc


def test_engine_rejects_bad_backward_naming_the_function():
    with pytest.raises(RuntimeError, match=r"WrongShape.*shape \(3, 4\).*input 1"):
        WrongShape.apply(_t(3, 4), _t(3, 1)).backward(np.ones((3, 4)))
    x32 = Tensor(np.ones(3, np.float32), requires_grad=True)
    with pytest.raises(RuntimeError, match="WrongDtype.*dtype float64"):
        WrongDtype.apply(x32).backward(np.ones(3, np.float32))
    with pytest.raises(RuntimeError, match="WrongCount.*1 gradient"):
        WrongCount.apply(_t(2), _t(2)).backward(np.ones(2))


def test_needs_input_grad_and_constants():
    seen = {}

    class Probe(Function):
        @staticmethod
        def forward(ctx, a, b, k):
            seen["needs"] = ctx.needs_input_grad
            return a * b * k

        @staticmethod
        def backward(ctx, dc):
            return None, dc, None
    x = _t(2)
    Probe.apply(Tensor(np.ones(2)), x, 3.0).backward(np.ones(2))
    assert seen["needs"] == (False, True, False)
    np.testing.assert_array_equal(x.grad, np.ones(2))


# --------------------------------------------------------------------------- from_pair
def scaled_product_forward(x, w, idx, k=1.0):
    """out = k * x[idx] * w: two differentiable inputs, a constant index and a keyword."""
    xi = x[idx]
    return k * xi * w, (x.shape, idx, xi, w, k)


def scaled_product_backward(dout, cache):
    shape, idx, xi, w, k = cache
    dx = np.zeros(shape)
    np.add.at(dx, idx, k * dout * w)                 # scatter-add back through the gather
    return dx, (k * dout * xi).sum(axis=0)           # dx, dw: the constant idx gets none


ScaledProduct = mg.from_pair(scaled_product_forward, scaled_product_backward, "ScaledProduct",
                             wrt=("x", "w"))


def test_from_pair_gradcheck_kwargs_and_constants():
    x, w, idx = _t(4, 3), _t(3), np.array([0, 2, 2, 1, 0])
    out = ScaledProduct.apply(x, w, idx, k=1.7)
    assert out.grad_fn is ScaledProduct and out.shape == (5, 3) and ScaledProduct.wrt == ("x", "w")
    np.testing.assert_array_equal(out.data, 1.7 * x.data[idx] * w.data)
    assert gradcheck(lambda x, w: ScaledProduct.apply(x, w, idx, k=1.7), [x, w])
    # the default name is the backward's, the default wrt the parameters without a default;
    # one bare gradient for one input
    Square = mg.from_pair(lambda a, k=2: (a * a, a), lambda dout, a: 2 * a * dout)
    assert Square.__name__ == "<lambda>" and Square.wrt == ("a",)
    assert gradcheck(Square.apply, [_t(2, 3)])


def _layernorm_pair(backward):
    from layers.layernorm import LayerNormFunction, layernorm_forward
    return mg.from_pair(layernorm_forward, backward, "LayerNormFunction",
                        wrt=LayerNormFunction.wrt)


@pytest.mark.parametrize("returned, message", [
    (lambda dx, dw, db: (dx, dw), r"returned 2 gradient\(s\) \(an array \(3, 4\), an array "
                                  r"\(4,\)\); expected 3: dx, dweight, dbias"),
    (lambda dx, dw, db: (dx, dw, db, db), r"returned 4 gradient\(s\).*expected 3"),
    (lambda dx, dw, db: dx, r"returned 1 gradient\(s\)"),
    (lambda dx, dw, db: (dx, dw, None), r"returned None for dbias; expected its gradient"),
])
def test_from_pair_refuses_a_backward_that_returns_other_gradients_than_it_declares(
        returned, message):
    # a LayerNorm backward that leaves out dbias would leave bias.grad None with no error, and a
    # fourth gradient would vanish: each is an error naming the pair and what was expected
    from layers.layernorm import layernorm_backward
    F = _layernorm_pair(lambda dout, cache: returned(*layernorm_backward(dout, cache)))
    x, w, b = _t(3, 4), _t(4), _t(4)
    out = F.apply(x, w, b, eps=1e-5)
    with pytest.raises(RuntimeError, match=r"LayerNormFunction \(<lambda>\) " + message):
        out.backward(RNG.standard_normal(out.shape))


def test_from_pair_takes_none_for_an_input_without_gradient_and_refuses_unknown_names():
    from layers.layernorm import layernorm_backward, layernorm_forward
    F = _layernorm_pair(lambda dout, cache: layernorm_backward(dout, cache)[:2] + (None,))
    x, w = _t(3, 4), _t(4)
    F.apply(x, w, np.zeros(4), eps=1e-5).backward(RNG.standard_normal((3, 4)))  # a constant bias
    assert x.grad.shape == (3, 4) and w.grad.shape == (4,)
    with pytest.raises(ValueError, match=r"wrt names \['bias2'\], not parameters of "
                                         r"layernorm_forward"):
        mg.from_pair(layernorm_forward, layernorm_backward, wrt=("x", "bias2"))


def test_from_pair_calls_a_pair_once_per_node_on_whole_arrays():
    from layers.gelu import GELUFunction, gelu_backward, gelu_forward
    calls = []

    def gelu_backward_counted(dout, cache):
        calls.append(dout.shape)
        return gelu_backward(dout, cache)
    F = mg.from_pair(gelu_forward, gelu_backward_counted, wrt=GELUFunction.wrt)
    x = mg.Tensor(RNG.standard_normal((32, 32, 256)).astype(np.float32), requires_grad=True)
    F.apply(x).backward(np.ones((32, 32, 256), np.float32))
    assert calls == [(32, 32, 256)]


def test_from_pair_guards_the_cached_arrays():
    x, w, idx = _t(4, 3), _t(3), np.array([0, 2])
    out = ScaledProduct.apply(x, w, idx, k=2.0)      # the cache holds w itself
    with mg.no_grad():
        w.add_(1.0)
    with pytest.raises(RuntimeError, match="ScaledProduct.*modified by an in-place operation"):
        out.backward(RNG.standard_normal(out.shape))
    out = ScaledProduct.apply(x, w, idx, k=2.0)
    out.backward(RNG.standard_normal(out.shape))
    with pytest.raises(RuntimeError, match="second time"):   # the cache was freed
        out.backward(RNG.standard_normal(out.shape))


# --------------------------------------------------------------------------- version counter
def test_version_counter_error_names_the_op():
    w = _t(3)
    y = (w * w).sum()
    with mg.no_grad():
        w.add_(1.0)
    with pytest.raises(RuntimeError, match="Mul.*in-place"):
        y.backward()


@pytest.mark.parametrize("how", ["data_isub", "copy_", "setitem", "zero_", "mul_"])
def test_in_place_updates_bump_the_version(how):
    w = _t(3)
    y = w.exp()  # Exp saves its output
    z = (w.tanh() * 2.0).sum()  # Tanh saves its output; Mul saves tanh(w) and the scalar
    lw = (w * w).sum()  # Mul saves w itself (w * 3.0 would not: as PyTorch, only the 3.0)
    with mg.no_grad():
        if how == "data_isub":
            w.data -= 0.1
        elif how == "copy_":
            w.copy_(np.zeros(3))
        elif how == "setitem":
            w[0] = 5.0
        elif how == "zero_":
            w.zero_()
        else:
            w.mul_(2.0)
    with pytest.raises(RuntimeError, match="Mul"):
        lw.backward()
    y.backward(np.ones(3))   # Exp's saved output was not touched
    z.backward()


def test_views_share_the_version_counter():
    w = _t(2, 3)
    v = w[0]
    loss = (v * v).sum()
    with mg.no_grad():
        w.add_(1.0)
    with pytest.raises(RuntimeError, match="modified by an in-place operation"):
        loss.backward()


def test_in_place_on_grad_tensor_needs_no_grad():
    w = _t(3)
    with pytest.raises(RuntimeError, match="no_grad"):
        w.add_(1.0)
    with mg.no_grad():
        w.add_(1.0)


def test_assigning_a_new_array_does_not_bump():
    w = _t(3)
    old = w.data.copy()
    loss = (w * w).sum()
    w.data = np.zeros(3)
    loss.backward()  # the saved array is the old one, untouched
    np.testing.assert_allclose(w.grad, 2 * old)


def test_the_engine_files_stand_alone_and_minigrad_has_no_import_circle():
    # engine.py is read alone and ops.py after it: the engine imports nothing else of minigrad
    # (PyTorch's rules reach it through engine.hooks); the modules of minigrad import one another
    # in one direction only (a circle would need a late import to load).
    import ast
    import pathlib
    pkg = pathlib.Path(mg.__file__).parent
    imports = {}
    for path in pkg.rglob("*.py"):
        mod = ".".join(path.relative_to(pkg).with_suffix("").parts)
        base = mod.rsplit(".", 1)[0] if "." in mod else ""
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                parent = ".".join(([base] if base and node.level == 1 else [])
                                  + [p for p in [node.module] if p]).strip(".")
                names.update([parent] if node.module else [a.name for a in node.names])
        imports[mod] = names
    assert imports["engine"] == set() and imports["ops"] == {"engine"}

    def reaches(a, b, seen=()):
        return any(m == b or (m not in seen and reaches(m, b, seen + (m,)))
                   for m in imports.get(a, ()))
    assert [m for m in imports if not m.endswith("__init__") and reaches(m, m)] == []


def test_the_wing_adds_to_tensor_and_never_replaces_or_wraps_the_engine():
    # what a learner reads in ops.py is what runs: each method Tensor has from ops.py is ops.py's
    # own, each primitive's forward and backward the ones written in its class
    import ast
    import inspect
    import pathlib
    from minigrad import engine, ops
    for name, value in vars(ops.TensorOps).items():
        if not name.startswith("__") or name in {"__add__", "__neg__", "__matmul__"}:
            assert vars(mg.Tensor)[name] is value, name
    functions = [c for c in vars(ops).values()
                 if isinstance(c, type) and issubclass(c, mg.Function) and c is not mg.Function]
    assert len(functions) > 20
    for cls in functions:
        for method in ("forward", "backward"):
            f = getattr(cls, method)
            assert inspect.getmodule(f) is ops and "<locals>" not in f.__qualname__, (cls, method)
    with pytest.raises(TypeError, match="Tensor already defines exp"):
        @ops.attach_to_tensor
        class Again:
            def exp(self):
                return None

    # nothing outside the wing calls a private name that only the wing defines
    pkg = pathlib.Path(mg.__file__).parent
    tensor_class = next(n for n in ast.parse((pkg / "engine.py").read_text()).body
                        if isinstance(n, ast.ClassDef) and n.name == "Tensor")
    core = {n.name for n in tensor_class.body if isinstance(n, ast.FunctionDef)} | \
        set(vars(ops.TensorOps))
    wing_private = [n for n in vars(mg.Tensor)
                    if n.startswith("_") and not n.startswith("__") and n not in core]
    assert "_bump" in wing_private and "_vc" in wing_private
    root = pkg.parent
    for path in [*pkg.glob("*.py"), *(root / "layers").glob("*.py"), *(root / "gpt").glob("*.py"),
                 *(root / "experiments").rglob("*.py")]:
        text = path.read_text()
        assert not [n for n in wing_private if f".{n}" in text], path
    assert engine.Hooks.modified and engine.Hooks.forward_error   # the declared seams
