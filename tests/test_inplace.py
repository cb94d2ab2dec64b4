"""In-place arithmetic with PyTorch's semantics: the same array is updated, the version counter
is bumped (a backward that saved the old values raises), a leaf that requires grad is
refused while grad mode is on, and an op on a non-leaf is recorded in the graph (PyTorch). Expected values are NumPy's in-place results; the torch test
replays the same operations on torch."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import Tensor

RNG = np.random.default_rng(0)


def _leaf(*shape):
    return Tensor(RNG.standard_normal(shape), requires_grad=True)


def test_hand_written_sgd_step_trains():
    # y = x @ w_true; minimise mean squared error with p -= lr * p.grad inside no_grad().
    x = RNG.standard_normal((16, 3))
    y = x @ np.array([[1.5], [-2.0], [0.5]])
    w = Tensor(np.zeros((3, 1)), requires_grad=True)
    w_np = np.zeros((3, 1))                              # the same steps in plain NumPy
    buf = w.data
    lr, losses = 0.1, []
    for _ in range(20):
        w.grad = None
        loss = ((Tensor(x) @ w - y) ** 2).mean()
        loss.backward()
        with mg.no_grad():
            w -= lr * w.grad
        losses.append(loss.item())
        w_np -= lr * (2 / 16) * x.T @ (x @ w_np - y)     # d/dw mean((xw - y)^2)
    assert w.data is buf and w.requires_grad and w.is_leaf
    assert losses[-1] < 0.05 * losses[0]
    np.testing.assert_allclose(w.data, w_np, rtol=1e-12, atol=1e-12)


def test_sgd_on_a_module_updates_its_parameters():
    # A two-layer MLP (float32 Modules) on a fixed batch, plain SGD written by hand.
    from layers.functional import cross_entropy
    from layers.modules import Linear
    rng = np.random.default_rng(1)

    class TinyMLP(mg.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = Linear(4, 16, rng=rng), Linear(16, 3, rng=rng)

        def forward(self, x):
            return self.fc2(self.fc1(x).relu())

    model = TinyMLP()
    x = Tensor(rng.standard_normal((32, 4)).astype(np.float32))
    y = rng.integers(0, 3, 32)
    params = list(model.parameters())
    before = [p.data.copy() for p in params]
    losses = []
    for _ in range(40):
        model.zero_grad()
        loss = cross_entropy(model(x), y)
        loss.backward()
        with mg.no_grad():
            for p in params:
                p -= 0.5 * p.grad
        losses.append(loss.item())
    assert losses[-1] < 0.8 * losses[0]
    assert all(p.dtype == np.float32 and p.is_leaf and p.requires_grad for p in params)
    assert all(not np.array_equal(p.data, b) for p, b in zip(params, before))


@pytest.mark.parametrize("op, ref", [
    ("t += o", lambda a, o: a + o), ("t -= o", lambda a, o: a - o),
    ("t *= o", lambda a, o: a * o), ("t /= o", lambda a, o: a / o),
    ("t.add_(o)", lambda a, o: a + o), ("t.add_(o, alpha=-0.5)", lambda a, o: a - 0.5 * o),
    ("t.sub_(o)", lambda a, o: a - o), ("t.sub_(o, alpha=2.0)", lambda a, o: a - 2 * o),
    ("t.mul_(o)", lambda a, o: a * o), ("t.div_(o)", lambda a, o: a / o),
    ("t **= o", lambda a, o: np.abs(a) ** o), ("t.copy_(o)", lambda a, o: np.broadcast_to(o, a.shape)),
    ("t.zero_()", lambda a, o: np.zeros_like(a)),
])
@pytest.mark.parametrize("other", ["tensor", "array", "scalar"])
def test_in_place_values_same_array_and_version(op, ref, other):
    t = _leaf(2, 3)
    before, buf, v0 = t.data.copy(), t.data, t._vc.value
    o = {"tensor": Tensor(RNG.uniform(0.5, 2, 3)), "array": RNG.uniform(0.5, 2, (2, 3)),
         "scalar": 1.7}[other]
    if "**" in op:
        t.data[...] = np.abs(t.data)                     # a real power of a positive base
        before = t.data.copy()
    with mg.no_grad():
        ns = {"t": t, "o": o}
        exec(op, ns)
    assert ns["t"] is t and t.data is buf                 # same Tensor, same array
    np.testing.assert_array_equal(t.data, ref(before, o.data if isinstance(o, Tensor) else o))
    assert t._vc.value == v0 + 1 and t.requires_grad and t.grad_fn is None


def test_python_scalar_keeps_float32():
    t = Tensor(np.ones(3, np.float32))
    t *= 0.1
    t += 1e-3
    assert t.dtype == np.float32
    np.testing.assert_array_equal(t.data, np.float32(1) * np.float32(0.1) + np.float32(1e-3))


def test_refused_on_a_leaf_that_requires_grad_in_grad_mode():
    w = _leaf(3)
    msg = "a leaf Variable that requires grad is being used in an in-place operation"
    for f in (lambda: w.__iadd__(1.0), lambda: w.mul_(2.0), lambda: w.zero_(),
              lambda: w.copy_(np.zeros(3)), lambda: w.__setitem__(0, 1.0)):
        before = w.data.copy()
        with pytest.raises(RuntimeError, match=msg):
            f()
        np.testing.assert_array_equal(w.data, before)     # nothing written
    assert w._vc.value == 0


def _micrograd_more_ops(a, b, inplace):
    """micrograd's test/test_engine.py::test_more_ops, with += or written out of place."""
    c = a + b
    d = a * b + b**3
    if inplace:
        c += c + 1
        c += 1 + c + (-a)
        d += d * 2 + (b + a).relu()
        d += 3 * d + (b - a).relu()
    else:
        c = c + c + 1
        c = c + 1 + c + (-a)
        d = d + d * 2 + max(b + a, 0.0)
        d = d + 3 * d + max(b - a, 0.0)
    e = c - d
    f = e**2
    g = f / 2.0
    if inplace:
        g += 10.0 / f
    else:
        g = g + 10.0 / f
    return g


def test_micrograds_more_ops_with_in_place_operators_on_non_leaves():
    # PyTorch records y += z on a non-leaf in the graph; micrograd's own test relies on it.
    # Expected: central differences of the same computation on plain floats (float64), and the
    # values micrograd's README prints (24.7041, 138.8338, 645.5773).
    a = Tensor(np.float64(-4.0), requires_grad=True)
    b = Tensor(np.float64(2.0), requires_grad=True)
    g = _micrograd_more_ops(a, b, inplace=True)
    g.backward()
    f = lambda x, y: _micrograd_more_ops(x, y, inplace=False)
    h = 1e-6
    da = (f(-4.0 + h, 2.0) - f(-4.0 - h, 2.0)) / (2 * h)
    db = (f(-4.0, 2.0 + h) - f(-4.0, 2.0 - h)) / (2 * h)
    assert g.item() == pytest.approx(f(-4.0, 2.0), rel=1e-14)
    assert a.grad == pytest.approx(da, rel=1e-7) and b.grad == pytest.approx(db, rel=1e-7)
    assert (round(g.item(), 4), round(float(a.grad), 4), round(float(b.grad), 4)) == \
        (24.7041, 138.8338, 645.5773)


def test_every_in_place_operator_on_a_non_leaf_against_central_differences():
    def f(x, u):
        y = x * 1.5
        y += u
        y -= x * u
        y *= u
        y /= x
        y **= 2
        y.add_(u, alpha=0.5)
        y.sub_(x, alpha=2.0)
        y.mul_(x)
        y.div_(u)
        return y

    x = Tensor(RNG.uniform(0.5, 2.0, (2, 3)), requires_grad=True)
    u = Tensor(RNG.uniform(0.5, 2.0, (3,)), requires_grad=True)
    assert mg.gradcheck(f, [x, u])


def test_a_node_recorded_before_the_in_place_op_keeps_the_old_history():
    # L = sum(r1 * z) + sum(r2 * y) with z = 2x + 1 taken before y *= x (y = 2x, then 2x * x):
    # dL/dx = 2 r1 + 4 x r2 (closed form).
    x = _leaf(4)
    r1, r2 = RNG.standard_normal(4), RNG.standard_normal(4)
    y = x * 2.0
    z = y + 1.0                                          # Add saves nothing of y
    y *= x
    assert y.grad_fn is not None and not y.is_leaf
    np.testing.assert_allclose(y.data, 2 * x.data ** 2, rtol=1e-15)
    ((z * r1).sum() + (y * r2).sum()).backward()
    np.testing.assert_allclose(x.grad, 2 * r1 + 4 * x.data * r2, rtol=1e-13)


def test_an_operand_that_requires_grad_makes_a_plain_tensor_part_of_the_graph():
    w, u = _leaf(3), _leaf(3)
    r = RNG.standard_normal(3)
    acc = Tensor(np.zeros(3))
    early = acc * 1.0                                    # recorded before: no gradient path
    acc += w
    acc += w * w
    acc.sub_(u, alpha=0.5)
    assert acc.requires_grad and not early.requires_grad
    (acc * r).sum().backward()
    np.testing.assert_allclose(w.grad, r * (1 + 2 * w.data), rtol=1e-14)
    np.testing.assert_allclose(u.grad, -0.5 * r, rtol=1e-15)


def test_zero_fill_copy_and_setitem_are_recorded():
    r = RNG.standard_normal(3)
    w, s, u = _leaf(3), Tensor(np.float64(0.7), requires_grad=True), _leaf(3)
    for op, dw in (("setitem", 3 * r * [0, 1, 1]), ("zero_", 0 * r), ("fill_", 0 * r),
                   ("copy_", 0 * r)):
        w.grad = s.grad = u.grad = None
        y = w * 3.0
        if op == "setitem":
            y[0] = 5.0
        elif op == "zero_":
            y.zero_()
        elif op == "fill_":
            y.fill_(s)
        else:
            y.copy_(u)
        (y * r).sum().backward()
        np.testing.assert_allclose(w.grad, dw, rtol=1e-15)
    assert s.grad is None and np.allclose(u.grad, r)     # the last two: fill_(s), copy_(u)
    y = w * 3.0
    y.fill_(s)
    (y * r).sum().backward()
    assert s.grad == pytest.approx(r.sum(), rel=1e-14)
    with pytest.raises(RuntimeError, match="where"):
        y[1] = s


def test_a_saved_value_overwritten_by_a_recorded_op_is_caught_at_backward():
    w = _leaf(3)
    y = w.exp()                                          # Exp saves its output, y
    y += 1.0                                             # recorded; y's old values are gone
    with pytest.raises(RuntimeError, match="Exp.*modified by an in-place operation"):
        y.sum().backward()


def test_a_recorded_in_place_op_on_memory_shared_with_another_tensor_is_refused():
    w = _leaf(2, 3)
    y = w * 2.0
    v = y[0]                                             # a view of y
    for t in (v, y):                                     # the other's graph would not see it
        with pytest.raises(RuntimeError, match="shares its memory"):
            t += 1.0
    d = (w * 2.0).detach()
    with pytest.raises(RuntimeError, match="shares its memory"):
        d += w
    with mg.no_grad():                                   # no graph: allowed
        y += 1.0
        v += 1.0


def test_saved_array_changed_in_place_is_caught_at_backward():
    w, x = _leaf(3), Tensor(RNG.standard_normal(3))
    loss = (w * x).sum()                                 # Mul saves w and x
    x += 1.0                                             # x needs no grad: allowed, bumped
    with pytest.raises(RuntimeError, match="Mul.*modified by an in-place operation"):
        loss.backward()
    loss = (w * w).sum()                                 # (w * 3.0 would save only the 3.0)
    with mg.no_grad():
        w -= 0.1
    with pytest.raises(RuntimeError, match="Mul.*version 1, expected version 0"):
        loss.backward()


def test_bad_operands_give_clear_errors():
    i = Tensor(np.arange(3))
    with pytest.raises(TypeError, match="can't be cast"):
        i += 1.5
    with pytest.raises(TypeError, match="can't be cast"):
        i /= 2
    i += 2
    np.testing.assert_array_equal(i.data, [2, 3, 4])
    t = Tensor(np.ones(3))
    with pytest.raises(ValueError, match=r"shape \(3,\) doesn't match the broadcast shape \(2, 3\)"):
        t += np.ones((2, 3))
    assert t._vc.value == 0


def test_requires_grad_():
    t = Tensor(np.ones(2))
    assert t.requires_grad_() is t and t.requires_grad
    assert t.requires_grad_(False) is t and not t.requires_grad
    with pytest.raises(RuntimeError, match="non-leaf"):
        (_leaf(2) * 2.0).requires_grad_(False)
    with pytest.raises(TypeError, match="floating"):
        Tensor(np.arange(2)).requires_grad_()


def test_detach_shares_data_and_version():
    w = _leaf(3)
    d = w.detach()
    assert d.data is w.data and not d.requires_grad and d.is_leaf
    loss = (w * w).sum()
    d += 1.0                                             # allowed: d does not require grad
    with pytest.raises(RuntimeError, match="in-place"):
        loss.backward()


@pytest.mark.slow  # runs PyTorch; leave out with -m "not slow"
def test_same_operations_on_torch():
    torch = pytest.importorskip("torch")
    a = RNG.standard_normal((2, 3))
    o = RNG.uniform(0.5, 2, 3)
    t, m = torch.tensor(a, requires_grad=True), Tensor(a.copy(), requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        t += 1.0
    with torch.no_grad(), mg.no_grad():
        for x, other in ((t, torch.tensor(o)), (m, Tensor(o))):
            x += other
            x *= 2.0
            x.sub_(other, alpha=0.5)
            x /= 3.0
    np.testing.assert_allclose(m.data, t.detach().numpy(), rtol=1e-15)
    assert m._vc.value == t._version == 4
