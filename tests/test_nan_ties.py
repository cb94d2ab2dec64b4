"""NaN, +-inf, ties and 0 in ops whose backward uses a comparison or an equality mask.

The non-torch tests assert values worked out by hand from PyTorch's documented rules (each
stated next to its test); ``test_parity_with_torch`` replays every case on torch and compares
values and gradients, NaN for NaN (skipped without torch).
"""
import numpy as np
import pytest

import minigrad as mg
from minigrad import Tensor
from layers import functional as F

NAN, INF = np.nan, np.inf
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # inf - inf, 0 * inf


def _grad(fn, x, g=None):
    t = Tensor(np.asarray(x, dtype=np.float64), requires_grad=True)
    y = fn(t)
    y = y.values if hasattr(y, "values") else y
    y.backward(np.ones(y.shape) if g is None else g)
    return y.data, t.grad


def _assert_same(a, b):
    np.testing.assert_array_equal(np.asarray(a, dtype=float), np.asarray(b, dtype=float))


# --------------------------------------------------------------- hand-worked expected values
def test_max_full_reduction_nan_and_ties():
    # torch.max(x): NaN propagates and the gradient goes (evenly) to the NaN entries;
    # tied maxima share it evenly.
    v, g = _grad(lambda t: t.max(), [1., NAN, 2.])
    assert np.isnan(v)
    _assert_same(g, [0, 1, 0])
    _assert_same(_grad(lambda t: t.max(), [1., NAN, NAN])[1], [0, .5, .5])
    _assert_same(_grad(lambda t: t.max(), [2., 1., 2.])[1], [.5, 0, .5])
    _assert_same(_grad(lambda t: t.min(), [INF, -INF, -INF, 0.])[1], [0, .5, .5, 0])
    _assert_same(_grad(lambda t: t.max(axis=1), [[1., NAN], [3., 3.]], g=np.array([2., 4.]))[1],
        [[0, 2], [2, 2]])


def test_amax_amin_nan_gives_nan_gradient_and_ties_split():
    # torch.amax: mask = (x == result); a NaN slice matches nothing, so dc * 0 / 0 = NaN.
    v, g = _grad(lambda t: t.amax(), [1., NAN, 2.])
    assert np.isnan(v) and np.isnan(g).all()
    v, g = _grad(lambda t: t.amax(dim=1), [[1., NAN, 2.], [3., 1., 3.]])
    assert np.isnan(g[0]).all()
    _assert_same(g[1], [.5, 0, .5])
    _assert_same(_grad(lambda t: t.amin(dim=0, keepdim=True), [[0., 1.], [0., 2.]])[1], [[.5, 1], [.5, 0]])


def test_max_with_dim_values_indices_first_occurrence():
    x = Tensor([[1., NAN, 2.], [3., 1., 3.], [-INF, -INF, -INF]])
    r = x.max(dim=1)
    _assert_same(r.values.data, [NAN, 3, -INF])
    _assert_same(r.indices.data, [1, 0, 0])
    assert r.indices.dtype == np.int64
    r = x.min(dim=0, keepdim=True)
    _assert_same(r.values.data, [[-INF, NAN, -INF]])
    _assert_same(r.indices.data, [[2, 0, 2]])
    _assert_same(_grad(lambda t: t.max(dim=1), [[3., 1., 3.]])[1], [[1, 0, 0]])   # first of the ties
    _assert_same(x.argmax(dim=1).data, [1, 0, 0])
    assert x.argmax().item() == 1 and x.argmin().item() == 1      # flattened; NaN wins both
    with pytest.raises(TypeError, match="both axis= and dim="):
        x.max(axis=0, dim=0)


@pytest.mark.parametrize("name, fn, x, value, grad", [
    # relu: gradient 0 where x <= 0 (also x = 0), 1 elsewhere, NaN included (PyTorch's
    # threshold_backward keeps dc unless x <= 0).
    ("relu", lambda t: t.relu(), [NAN, INF, -INF, 0., 1.], [NAN, INF, 0, 0, 1], [1, 1, 0, 0, 1]),
    # relu^2: d/dx relu(x)^2 = 2 relu(x): NaN at NaN, inf at inf, 0 at 0.
    ("relu2", F.relu2, [NAN, INF, -INF, 0., 1.5], [NAN, INF, 0, 0, 2.25], [NAN, INF, 0, 0, 3]),
    # abs: gradient sign(x), 0 at 0 and at NaN.
    ("abs", lambda t: t.abs(), [NAN, INF, -INF, 0., -2.], [NAN, INF, INF, 0, 2], [0, 1, -1, 0, -1]),
    # clamp(-1, 1): gradient 1 on the open interval (-1, 1), 0 at the bounds, outside and at
    # NaN (PyTorch 2.14's clamp_backward; 2.13 passed it at the bounds).
    ("clamp", lambda t: t.clamp(-1, 1), [NAN, INF, -INF, -1., 1., 0., 2.],
     [NAN, 1, -1, -1, 1, 0, 1], [0, 0, 0, 0, 0, 1, 0]),
    ("clamp(min=0)", lambda t: t.clamp(min=0), [NAN, 0., -1., 3.], [NAN, 0, 0, 3], [0, 0, 0, 1]),
    # maximum/minimum of two Tensors: a tie shares the gradient evenly, NaN propagates and
    # passes the gradient to both sides (PyTorch's maximum backward: dc/2 at a == b, 0 where
    # the side loses).
    ("maximum", lambda t: mg.maximum(t, Tensor(np.array([0., 0., 0., 0., 1.]))),
     [NAN, 0., -1., 3., 1.], [NAN, 0, 0, 3, 1], [1, .5, 0, 1, .5]),
    ("minimum", lambda t: t.minimum(Tensor(np.array([0., 0., 0., NAN]))),
     [NAN, 0., -1., 3.], [NAN, 0, -1, NAN], [1, .5, 1, 1]),
    # sigmoid: s(1 - s) is 0 at +-inf and 1/4 at 0.
    ("sigmoid", lambda t: t.sigmoid(), [NAN, INF, -INF, 0.], [NAN, 1, 0, .5], [NAN, 0, 0, .25]),
    # x sigma(x) and x Phi(x) at -inf are -inf * 0 = NaN in IEEE arithmetic (PyTorch too); at 0
    # both derivatives are 1/2 (sigma(0) = Phi(0) = 1/2, the x-term vanishes).
    ("silu", F.silu, [NAN, -INF, 0.], [NAN, NAN, 0], [NAN, NAN, .5]),
    ("gelu", F.gelu, [NAN, -INF, 0.], [NAN, NAN, 0], [NAN, NAN, .5]),
])
def test_elementwise_masks(name, fn, x, value, grad):
    v, g = _grad(fn, x)
    _assert_same(v, value)
    _assert_same(g, grad)


# --------------------------------------------------------------- against torch
CASES = {
    "relu": (lambda t: t.relu(), lambda t, torch: torch.relu(t)),
    "relu2": (F.relu2, lambda t, torch: torch.relu(t) ** 2),
    "abs": (lambda t: t.abs(), lambda t, torch: t.abs()),
    "clamp": (lambda t: t.clamp(-1.0, 1.0), lambda t, torch: t.clamp(-1.0, 1.0)),
    "clamp(min=0)": (lambda t: t.clamp(min=0.0), lambda t, torch: t.clamp(min=0.0)),
    "clamp(max=0)": (lambda t: t.clamp(max=0.0), lambda t, torch: t.clamp(max=0.0)),
    "maximum": (lambda t: mg.maximum(t, Tensor(np.array([2., 0., 1.]))),
                lambda t, torch: torch.maximum(t, torch.tensor([2., 0., 1.], dtype=t.dtype))),
    "minimum": (lambda t: t.minimum(Tensor(np.array([[2.], [0.]]))),
                lambda t, torch: t.minimum(torch.tensor([[2.], [0.]], dtype=t.dtype))),
    "max": (lambda t: t.max(), lambda t, torch: t.max()),
    "min": (lambda t: t.min(), lambda t, torch: t.min()),
    "amax": (lambda t: t.amax(), lambda t, torch: t.amax()),
    "amin": (lambda t: t.amin(), lambda t, torch: t.amin()),
    "amax(dim=1)": (lambda t: t.amax(dim=1), lambda t, torch: t.amax(dim=1)),
    "max(dim=1)": (lambda t: t.max(dim=1).values, lambda t, torch: t.max(dim=1).values),
    "min(dim=0)": (lambda t: t.min(dim=0).values, lambda t, torch: t.min(dim=0).values),
    "sigmoid": (lambda t: t.sigmoid(), lambda t, torch: torch.sigmoid(t)),
    "tanh": (lambda t: t.tanh(), lambda t, torch: torch.tanh(t)),
    "silu": (F.silu, lambda t, torch: torch.nn.functional.silu(t)),
    "gelu(tanh)": (lambda t: F.gelu(t, approximate="tanh"), lambda t, torch: torch.nn.functional.gelu(t, approximate="tanh")),
    "gelu(none)": (F.gelu, lambda t, torch: torch.nn.functional.gelu(t)),
    "softmax": (lambda t: F.softmax(t, dim=-1), lambda t, torch: torch.softmax(t, dim=-1)),
}
# The bounds of each clamp case: PyTorch before 2.14 passed the gradient there, 2.14 gives 0.
CLAMP_BOUNDS = {"clamp": (-1.0, 1.0), "clamp(min=0)": (0.0,), "clamp(max=0)": (0.0,)}
POINTS = {
    "nan": [[1., NAN, 2.], [0., -1., 3.]],
    "inf": [[INF, 1., -INF], [-INF, -INF, 0.]],
    "ties": [[2., 1., 2.], [-3., -3., 5.]],
    "zeros": [[0., -0., 0.], [0., 1., -1.]],
    "bounds": [[-1., 1., 1.], [-1., 0.5, -1.]],
}


@pytest.mark.parametrize("point", sorted(POINTS))
@pytest.mark.parametrize("op", sorted(CASES))
@pytest.mark.slow  # runs PyTorch; leave out with -m "not slow"
def test_parity_with_torch(op, point):
    torch = pytest.importorskip("torch")
    ours, theirs = CASES[op]
    x = np.array(POINTS[point])
    g_rng = np.random.default_rng(1)
    v, _ = _grad(ours, x)
    dout = g_rng.standard_normal(np.shape(v))
    v, g = _grad(ours, x, dout)
    tx = torch.tensor(x, requires_grad=True)
    ty = theirs(tx, torch)
    ty.backward(torch.tensor(dout))
    np.testing.assert_allclose(v, ty.detach().numpy(), rtol=1e-12, atol=1e-300, equal_nan=True)
    expected = tx.grad.numpy()
    if op in CLAMP_BOUNDS and tuple(map(int, torch.__version__.split(".")[:2])) < (2, 14):
        expected = np.where(np.isin(x, CLAMP_BOUNDS[op]), 0.0, expected)   # the 2.14 rule
    if op == "gelu(tanh)" and point == "inf":   # torch: 0 * inf = NaN; ours: the limits 1 and 0
        expected = np.where(np.isposinf(x), dout, np.where(np.isneginf(x), 0.0, expected))
    np.testing.assert_allclose(g, expected, rtol=1e-12, atol=1e-300, equal_nan=True)
