"""RMSNorm, proven three ways: central differences, the engine's composite, a closed form."""
import numpy as np
import pytest

import minigrad
from minigrad import Function, Tensor, gradcheck
from layers.functional import rms_norm
from layers.rmsnorm import RMSNormFunction, rmsnorm_backward, rmsnorm_forward

from composite_norms import grads_of, rms_norm_ref


def _weight(rng, C, dtype=np.float64):
    """A random non-unit gain (unit gains hide mistakes)."""
    return (1.0 + 0.5 * rng.standard_normal(C)).astype(dtype)


def _leaves(*arrays):
    return [Tensor(np.array(a, dtype=np.float64), requires_grad=True) for a in arrays]


def _fn(x, w):
    return rms_norm(x, w.shape, w, eps=1e-6)


TOL = dict(eps=1e-6, atol=1e-7, rtol=1e-5)


# ----------------------------------------------------------------------- 1. central differences
@pytest.mark.parametrize("shape", [(1, 7), (2, 3, 5)])
def test_gradcheck_shapes(shape):
    rng = np.random.default_rng(0)
    assert gradcheck(_fn, _leaves(rng.standard_normal(shape), _weight(rng, shape[-1])), **TOL)


def test_gradcheck_non_contiguous_inputs():
    rng = np.random.default_rng(1)
    w = _weight(rng, 4)
    xt = rng.standard_normal((4, 6))                  # leaf (C, T); the layer sees a (T, C) view
    assert gradcheck(lambda x, w: rms_norm(x.T, w.shape, w, eps=1e-6), _leaves(xt, w), **TOL)
    # a non-contiguous leaf itself (a transposed array handed straight to the layer)
    leaf = _leaves(xt)[0].data.T
    assert not leaf.flags.c_contiguous
    inputs = [Tensor(leaf, requires_grad=True)] + _leaves(w)
    assert gradcheck(lambda x, *p: rms_norm(x, x.shape[-1], *p, eps=1e-6), inputs, eps=1e-6, atol=1e-7, rtol=1e-5)
    xs = rng.standard_normal((2, 3, 8))               # every other column
    assert gradcheck(lambda x, w: rms_norm(x[:, :, ::2], w.shape, w, eps=1e-6), _leaves(xs, w), **TOL)


def test_gradcheck_d_equals_1():
    # C = 1: out = w x / sqrt(x^2 + eps) ~ w sign(x); dx = w eps / (x^2 + eps)^1.5 is tiny
    # (~1e-5) but not zero, so atol goes down to 1e-11 and the step to 1e-4 (error ~1e-13).
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 4, 1))
    assert gradcheck(_fn, _leaves(x, _weight(rng, 1)), eps=1e-4, atol=1e-11, rtol=1e-5)
    xt, wt = _leaves(x, _weight(rng, 1))
    rms_norm(xt, wt.shape, wt, eps=1e-6).backward(np.ones(x.shape))
    expected = wt.data * 1e-6 / (x ** 2 + 1e-6) ** 1.5        # d/dx of x / sqrt(x^2 + eps)
    # the backward forms dxhat (1 - xhat^2) with xhat^2 = x^2 / (x^2 + eps) ~ 1 - 1e-7: the
    # cancellation costs ~7 digits of float64's 16, hence rtol 1e-7
    np.testing.assert_allclose(xt.grad, expected, rtol=1e-7)


def test_gradcheck_all_zero_row():
    # A zero row sits where eps dominates (|x| << sqrt(eps) = 1e-3): rstd = 1/sqrt(eps) = 1e3, the
    # gradients reach ~1e3 and the curvature ~rstd^3, so the step must be << 1e-3: 1e-7 keeps the
    # truncation error ~1e-6 and the rounding error ~1e-8. atol 1e-4 is 1e-7 of the gradient.
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 6))
    x[0, 1] = 0.0
    x[1, 2] = 0.0
    w = _weight(rng, 6)
    assert gradcheck(_fn, _leaves(x, w), eps=1e-7, atol=1e-4, rtol=1e-5)
    xt, wt = _leaves(x, w)
    G = rng.standard_normal(x.shape)
    rms_norm(xt, wt.shape, wt, eps=1e-6).backward(G)
    np.testing.assert_allclose(xt.grad[0, 1], G[0, 1] * w / np.sqrt(1e-6), rtol=1e-12)
    assert np.all(rms_norm(Tensor(x), w.shape, w, eps=1e-6).data[0, 1] == 0.0)


def test_gradcheck_rows_offset_by_1e6():
    # Gradients are ~1e-6 (rstd ~ 1e-6): atol 1e-10. Step 1e-4: the ulp of 1e6 (1.2e-10) makes a
    # 1e-6 step inexact by 1e-4 relative.
    rng = np.random.default_rng(4)
    x = 1e6 + rng.standard_normal((2, 3, 6))
    assert gradcheck(_fn, _leaves(x, _weight(rng, 6)), eps=1e-4, atol=1e-10, rtol=1e-5)


def test_gradcheck_magnitude_1e4():
    # dx ~ 1e-4 and curvature ~ 1e-8: step 1e-2, atol 1e-12.
    rng = np.random.default_rng(5)
    x = 1e4 * rng.standard_normal((2, 3, 6))
    assert gradcheck(_fn, _leaves(x, _weight(rng, 6)), eps=1e-2, atol=1e-12, rtol=1e-5)


class _RMSNormNoProjection(Function):
    """A deliberately wrong RMSNorm backward: the projection term is dropped."""

    @staticmethod
    def forward(ctx, x, weight):
        out, cache = rmsnorm_forward(x, weight, 1e-6)
        ctx.save_for_backward(*cache)
        return out

    @staticmethod
    def backward(ctx, dout):
        xhat, weight, rstd = ctx.saved_tensors
        dw = (dout * xhat).reshape(-1, xhat.shape[-1]).sum(0)
        return rstd * dout * weight, dw


def test_gradcheck_catches_missing_projection_term():
    rng = np.random.default_rng(6)
    x, w = rng.standard_normal((2, 3, 5)), _weight(rng, 5)
    with pytest.raises(minigrad.GradcheckError):
        gradcheck(lambda x, w: _RMSNormNoProjection.apply(x, w), _leaves(x, w), **TOL)


# ---------------------------------------------------------------- 2. against the composite
@pytest.mark.parametrize("case", ["normal", "zero_row", "offset", "big"])
def test_backward_equals_engine_composite(case):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 4, 8))
    if case == "zero_row":
        x[1, 2] = 0.0
    x = {"offset": 1e6 + x, "big": 1e4 * x}.get(case, x)
    w = _weight(rng, 8)
    G = rng.standard_normal(x.shape)
    out_f, g_f = grads_of(_fn, (x, w), G)
    out_c, g_c = grads_of(lambda x, w: rms_norm_ref(x, w, 1e-6), (x, w), G)
    np.testing.assert_allclose(out_f, out_c, rtol=0, atol=1e-10)
    for gf, gc in zip(g_f, g_c):
        np.testing.assert_allclose(gf, gc, rtol=0, atol=1e-10 * max(1.0, np.abs(gc).max()))


def test_numpy_pair_matches_function_adapter():
    rng = np.random.default_rng(8)
    x, w = rng.standard_normal((2, 5, 6)), _weight(rng, 6)
    G = rng.standard_normal(x.shape)
    out, cache = rmsnorm_forward(x, w, 1e-6)
    dx, dw = rmsnorm_backward(G, cache)
    out_t, (gx, gw) = grads_of(lambda x, w: RMSNormFunction.apply(x, w, eps=1e-6), (x, w), G)
    np.testing.assert_array_equal(out, out_t)
    np.testing.assert_array_equal(dx, gx)
    np.testing.assert_array_equal(dw, gw)


# ------------------------------------------------------------------ 3. forward, closed form
@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 2e-6)])
def test_forward_closed_form_and_dtypes(dtype, tol):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 3, 16)).astype(dtype)
    w = _weight(rng, 16, dtype)
    xt, wt = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)
    out = rms_norm(xt, wt.shape, wt, eps=1e-6)
    assert isinstance(out, Tensor) and out.dtype == dtype and out.shape == x.shape
    x64 = x.astype(np.float64)
    ref = w.astype(np.float64) * x64 / np.sqrt(np.mean(x64 ** 2, axis=-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(out.data, ref, rtol=tol, atol=tol)
    out.backward(rng.standard_normal(x.shape).astype(dtype))
    for t in (xt, wt):
        assert t.grad.dtype == dtype and t.grad.shape == t.shape


def test_unit_rms_and_scale_invariance():
    # With weight 1 and eps 0 every row has root-mean-square 1, and scaling x changes nothing.
    rng = np.random.default_rng(10)
    x = 3.0 + 5.0 * rng.standard_normal((4, 32))
    y = rms_norm(Tensor(x), 32, np.ones(32), eps=0.0).data
    np.testing.assert_allclose(np.sqrt(np.mean(y ** 2, -1)), 1.0, rtol=1e-12)
    np.testing.assert_allclose(rms_norm(Tensor(7.5 * x), 32, np.ones(32), eps=0.0).data, y, rtol=1e-12)


def test_bad_inputs_raise():
    x = Tensor(np.zeros((2, 4)))
    with pytest.raises(ValueError, match="weight"):
        rms_norm(x, x.shape[-1], np.ones(5), eps=1e-6)
    with pytest.raises(TypeError, match="floating"):
        rms_norm(Tensor(np.zeros((2, 4), dtype=np.int32)), 4, np.ones(4))
    with pytest.raises(TypeError, match="dtype"):
        rms_norm(x, x.shape[-1], np.ones(4, dtype=np.float32), eps=1e-6)
    with pytest.raises(ValueError, match="eps"):
        rms_norm(x, x.shape[-1], np.ones(4), eps=float("nan"))
    assert not rms_norm(np.zeros((2, 4)), 4, np.ones(4)).requires_grad
