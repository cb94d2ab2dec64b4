"""In-place arithmetic with PyTorch's semantics: the same array is updated, the version counter
is bumped (a backward that saved the old values raises), and a leaf that requires grad is
refused while grad mode is on. Expected values are NumPy's in-place results; the torch test
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


def test_refused_where_pytorch_would_record_a_graph():
    w = _leaf(3)
    y = w * 2.0
    with pytest.raises(RuntimeError, match="non-leaf.*Mul.*out of place"):
        y += 1.0
    acc = Tensor(np.zeros(3))
    with pytest.raises(RuntimeError, match="operand that requires grad"):
        acc += w                                         # would silently drop w's gradient
    acc = acc + w                                        # out of place works
    assert acc.grad_fn is not None
    with mg.no_grad():                                   # no graph: allowed
        y += 1.0
        plain = Tensor(np.zeros(3))
        plain += w
    np.testing.assert_array_equal(plain.data, w.data)


def test_saved_array_changed_in_place_is_caught_at_backward():
    w, x = _leaf(3), Tensor(RNG.standard_normal(3))
    loss = (w * x).sum()                                 # Mul saves w and x
    x += 1.0                                             # x needs no grad: allowed, bumped
    with pytest.raises(RuntimeError, match="Mul.*modified by an in-place operation"):
        loss.backward()
    loss = (w * 3.0).sum()
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
