"""GELU (tanh), ReLU² and SiLU, each proven three ways: central differences, the engine's
composite, a closed form."""
import functools
import math

import numpy as np
import pytest

import minigrad
from minigrad import Function, Tensor, gradcheck
from layers.functional import gelu, relu2, silu
from layers.gelu import GELUFunction, gelu_backward, gelu_forward
from layers.relu2 import relu2_backward, relu2_forward
from layers.silu import silu_backward, silu_forward

from composite_norms import gelu_ref, grads_of, relu2_ref, silu_ref

LAYERS = {"gelu": functools.partial(gelu, approximate="tanh"), "relu2": relu2, "silu": silu}
REFS = {"gelu": gelu_ref, "relu2": relu2_ref, "silu": silu_ref}
PAIRS = {"gelu": (gelu_forward, gelu_backward), "relu2": (relu2_forward, relu2_backward),
         "silu": (silu_forward, silu_backward)}
TOL = dict(eps=1e-6, atol=1e-8, rtol=1e-5)


def _leaf(a):
    return Tensor(np.array(a, dtype=np.float64), requires_grad=True)


def _away_from_zero(x, margin=1e-2):
    """Move points within ``margin`` of ReLU²'s join at 0 (kept for their own test)."""
    return np.where(np.abs(x) < margin, x + 2 * margin, x)


def _closed(name, x):
    """Each activation written straight from its definition."""
    if name == "gelu":
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    if name == "relu2":
        return np.where(x > 0, x * x, 0 * x)
    return x / (1 + np.exp(-x))


# ----------------------------------------------------------------------- 1. central differences
@pytest.mark.parametrize("name", list(LAYERS))
@pytest.mark.parametrize("shape", [(1, 7), (2, 3, 5)])
def test_gradcheck_shapes(name, shape):
    rng = np.random.default_rng(0)
    x = _away_from_zero(2.0 * rng.standard_normal(shape))
    assert gradcheck(LAYERS[name], [_leaf(x)], **TOL)


@pytest.mark.parametrize("name", list(LAYERS))
def test_gradcheck_non_contiguous(name):
    rng = np.random.default_rng(1)
    fn = LAYERS[name]
    xt = _away_from_zero(rng.standard_normal((5, 4)))
    assert gradcheck(lambda x: fn(x.T), [_leaf(xt)], **TOL)              # transposed view
    xs = _away_from_zero(rng.standard_normal((2, 3, 8)))
    assert gradcheck(lambda x: fn(x[:, ::2, 1::3]), [_leaf(xs)], **TOL)  # strided view


@pytest.mark.parametrize("name", list(LAYERS))
def test_gradcheck_d_equals_1(name):
    x = np.array([[0.7], [-1.3], [2.1]])
    assert gradcheck(LAYERS[name], [_leaf(x)], **TOL)


@pytest.mark.parametrize("name", ["gelu", "silu"])
def test_gradcheck_saturated_at_30(name):
    # At |x| = 30 tanh and the sigmoid are saturated: the gradients are 1 (x > 0) and ~0 (x < 0).
    x = np.array([[-30.0, -29.5, 29.5, 30.0], [-30.0, 0.25, -0.25, 30.0]])
    assert gradcheck(LAYERS[name], [_leaf(x)], **TOL)
    xt = _leaf(x)
    LAYERS[name](xt).backward(np.ones(x.shape))
    np.testing.assert_allclose(xt.grad[x >= 29.5], 1.0, atol=1e-10)
    np.testing.assert_allclose(xt.grad[x <= -29.5], 0.0, atol=1e-10)


@pytest.mark.parametrize("name", list(LAYERS))
def test_gradcheck_magnitude_1e4(name):
    # |x| ~ 1e4: GELU/SiLU are x or 0 there (gradient 1 or 0), ReLU²'s gradient is 2x ~ 2e4.
    # The outputs reach 1e8, so the rounding error of a difference quotient is ~1e-16 * 1e8 / h;
    # a step of 1e-3 keeps it ~1e-5, against an atol of 1e-4 (ReLU² is a parabola: its central
    # difference has no truncation error).
    rng = np.random.default_rng(2)
    x = 1e4 * np.sign(rng.standard_normal((2, 5))) * (1 + rng.random((2, 5)))
    assert gradcheck(LAYERS[name], [_leaf(x)], eps=1e-3, atol=1e-4, rtol=1e-8)


def test_silu_float32_at_minus_100_does_not_overflow():
    x = np.array([-100.0, -88.8, -50.0, -20.0, 0.0, 20.0, 50.0, 88.8, 100.0], dtype=np.float32)
    xt = Tensor(x, requires_grad=True)
    G = np.linspace(-1, 1, x.size).astype(np.float32)
    with np.errstate(over="raise", invalid="raise"):
        out = silu(xt)
        out.backward(G)
    assert out.dtype == np.float32 and xt.grad.dtype == np.float32
    assert np.all(np.isfinite(out.data)) and np.all(np.isfinite(xt.grad))
    x64 = x.astype(np.float64)
    s64 = np.exp(-np.logaddexp(0.0, -x64))                    # sigmoid via logaddexp (float64)
    ref_out = x64 * s64
    ref_dx = G * s64 * (1 + x64 * (1 - s64))
    # sigmoid(-100) = 3.7e-44 is a float32 subnormal (spacing 1.4e-45, so ~27 steps: 2%
    # relative precision left); times |x| = 100 that is an absolute error up to ~1e-43 in out
    # and dx, hence atol 2e-43. Everywhere else float32's relative precision holds.
    np.testing.assert_allclose(out.data, ref_out, rtol=1e-6, atol=2e-43)
    np.testing.assert_allclose(xt.grad, ref_dx, rtol=1e-5, atol=2e-43)
    assert out.data[0] < 0  # silu(-100) = -3.7e-42, not flushed to 0


def test_relu2_at_and_near_the_join():
    # relu(x)^2 is continuously differentiable: its derivative 2 max(x, 0) is 0 at 0 from both
    # sides, so a central difference across 0 is exact up to h/2 and gradcheck passes there too.
    x = np.array([[0.0, 1e-8, -1e-8, 1e-3, -1e-3]])
    assert gradcheck(relu2, [_leaf(x)], eps=1e-6, atol=1e-6, rtol=1e-5)
    xt = _leaf(x)
    relu2(xt).backward(np.full(x.shape, 3.0))
    np.testing.assert_array_equal(xt.grad, 3.0 * 2 * np.maximum(x, 0))
    assert xt.grad[0, 0] == 0.0 and xt.grad[0, 2] == 0.0


def test_known_derivative_values():
    # gelu'(0) = 0.5, silu'(0) = 0.5 (s(0) = 1/2), relu2'(x) = 2x for x > 0.
    for fn, x, expected in ((gelu, [0.0], [0.5]), (silu, [0.0], [0.5]), (relu2, [1.5], [3.0])):
        xt = _leaf(x)
        fn(xt).backward(np.ones(1))
        np.testing.assert_allclose(xt.grad, expected, rtol=1e-15)


class _GELUNoTanhPrime(Function):
    """A deliberately wrong GELU backward: the tanh' term is dropped."""

    @staticmethod
    def forward(ctx, x):
        out, (x, t) = gelu_forward(x)
        ctx.save_for_backward(t)
        return out

    @staticmethod
    def backward(ctx, dout):
        (t,) = ctx.saved_tensors
        return dout * 0.5 * (1 + t)


def test_gradcheck_catches_gelu_without_tanh_prime():
    x = np.random.default_rng(3).standard_normal((2, 5))
    with pytest.raises(minigrad.GradcheckError):
        gradcheck(lambda x: _GELUNoTanhPrime.apply(x), [_leaf(x)], **TOL)


# ---------------------------------------------------------------- 2. against the composite
@pytest.mark.parametrize("name", list(LAYERS))
@pytest.mark.parametrize("scale", [1.0, 30.0])
def test_backward_equals_engine_composite(name, scale):
    rng = np.random.default_rng(4)
    x = scale * rng.standard_normal((3, 4, 6))
    G = rng.standard_normal(x.shape)
    out_f, (g_f,) = grads_of(LAYERS[name], (x,), G)
    out_c, (g_c,) = grads_of(REFS[name], (x,), G)
    s = max(1.0, np.abs(out_c).max())
    np.testing.assert_allclose(out_f, out_c, rtol=0, atol=1e-10 * s)
    np.testing.assert_allclose(g_f, g_c, rtol=0, atol=1e-10 * max(1.0, np.abs(g_c).max()))


@pytest.mark.parametrize("name", list(LAYERS))
def test_numpy_pair_matches_function_adapter(name):
    rng = np.random.default_rng(5)
    x, G = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 3, 4))
    fwd, bwd = PAIRS[name]
    out, cache = fwd(x)
    dx = bwd(G, cache)
    out_t, (gx,) = grads_of(LAYERS[name], (x,), G)
    np.testing.assert_array_equal(out, out_t)
    np.testing.assert_array_equal(dx, gx)


# ------------------------------------------------------------------ 3. forward, closed form
@pytest.mark.parametrize("name", list(LAYERS))
@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-13), (np.float32, 1e-6)])
def test_forward_closed_form_and_dtypes(name, dtype, tol):
    rng = np.random.default_rng(6)
    x = (3.0 * rng.standard_normal((2, 3, 16))).astype(dtype)
    xt = Tensor(x, requires_grad=True)
    out = LAYERS[name](xt)
    assert isinstance(out, Tensor) and out.dtype == dtype and out.shape == x.shape
    ref = _closed(name, x.astype(np.float64))
    np.testing.assert_allclose(out.data, ref, rtol=tol, atol=tol)
    out.backward(rng.standard_normal(x.shape).astype(dtype))
    assert xt.grad.dtype == dtype and xt.grad.shape == x.shape


def test_gelu_tanh_is_close_to_exact_erf_gelu():
    # An independent reference: the exact GELU x Phi(x) with math.erf. The tanh form is known to
    # stay within ~5e-4 of it (Hendrycks & Gimpel 2016); a wrong constant would not.
    x = np.linspace(-6, 6, 97)
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x])
    diff = np.abs(gelu(Tensor(x), approximate="tanh").data - exact)
    assert diff.max() < 5e-4 and diff.max() > 0


def test_bad_inputs_raise():
    for fn in LAYERS.values():
        with pytest.raises(TypeError, match="floating"):
            fn(Tensor(np.arange(4)))
    with pytest.raises(ValueError, match="approximate"):
        gelu(Tensor(np.zeros(3)), approximate="fast")
    for fn in LAYERS.values():
        assert not fn(np.ones(3)).requires_grad
