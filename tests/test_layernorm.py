"""LayerNorm, proven three ways: central differences, the engine's composite, a closed form."""
import numpy as np
import pytest

import minigrad
from minigrad import Function, Tensor, gradcheck
from layers.functional import layer_norm
from layers.layernorm import LayerNormFunction, layernorm_backward, layernorm_forward

from composite_norms import grads_of, layer_norm_ref


def _params(rng, C, dtype=np.float64):
    """Random non-unit gain and non-zero bias (unit gains hide mistakes)."""
    w = (1.0 + 0.5 * rng.standard_normal(C)).astype(dtype)
    b = (0.3 * rng.standard_normal(C)).astype(dtype)
    return w, b


def _leaves(*arrays):
    return [Tensor(np.array(a, dtype=np.float64), requires_grad=True) for a in arrays]


def _closed_form(x, w, b, eps):
    """LayerNorm written directly from its definition, in the dtype of x."""
    mu = np.mean(x, axis=-1, keepdims=True)
    sigma2 = np.mean((x - mu) ** 2, axis=-1, keepdims=True)
    return w * (x - mu) / np.sqrt(sigma2 + eps) + b


# ----------------------------------------------------------------------- 1. central differences
# gradcheck projects the output on a fixed-seed random direction G and compares d<G, out>/dinput
# with central differences, for x, weight and bias.

@pytest.mark.parametrize("shape", [(1, 7), (2, 3, 5)])
def test_gradcheck_shapes(shape):
    rng = np.random.default_rng(0)
    x, (w, b) = rng.standard_normal(shape), _params(rng, shape[-1])
    assert gradcheck(lambda x, w, b: layer_norm(x, w.shape, w, b), _leaves(x, w, b),
                     eps=1e-6, atol=1e-7, rtol=1e-5)


def test_gradcheck_non_contiguous_inputs():
    rng = np.random.default_rng(1)
    w, b = _params(rng, 4)
    # transposed: the leaf is (C, T); the layer sees a (T, C) view with strides (8, 32)
    xt = rng.standard_normal((4, 6))
    fn = lambda x, w, b: layer_norm(x.T, w.shape, w, b)  # noqa: E731
    assert not xt.T.flags.c_contiguous
    assert gradcheck(fn, _leaves(xt, w, b), eps=1e-6, atol=1e-7, rtol=1e-5)
    # a non-contiguous leaf itself (a transposed array handed straight to the layer)
    leaf = _leaves(xt)[0].data.T
    assert not leaf.flags.c_contiguous
    inputs = [Tensor(leaf, requires_grad=True)] + _leaves(w, b)
    assert gradcheck(lambda x, *p: layer_norm(x, x.shape[-1], *p), inputs, eps=1e-6, atol=1e-7, rtol=1e-5)
    # strided: every other column of a (2, 3, 8) leaf
    xs = rng.standard_normal((2, 3, 8))
    assert gradcheck(lambda x, w, b: layer_norm(x[:, :, ::2], w.shape, w, b), _leaves(xs, w, b),
                     eps=1e-6, atol=1e-7, rtol=1e-5)


def test_d_equals_1_gives_exactly_zero_dx():
    # With C = 1, xhat = x - x = 0 for every input: out = bias, and d out / dx is exactly 0.
    rng = np.random.default_rng(2)
    x, (w, b) = rng.standard_normal((3, 4, 1)), _params(rng, 1)
    assert gradcheck(lambda x, w, b: layer_norm(x, w.shape, w, b), _leaves(x, w, b), atol=1e-8, rtol=1e-6)
    xt, wt, bt = _leaves(x, w, b)
    layer_norm(xt, wt.shape, wt, bt).backward(rng.standard_normal(x.shape))
    assert np.all(xt.grad == 0.0)
    assert np.all(wt.grad == 0.0)          # dweight = sum(dout * xhat) with xhat = 0
    assert np.any(bt.grad != 0.0)


# Near-constant rows (spread 1e-3, so var ~ 1e-7 << eps = 1e-5): the output is dominated by eps,
# rstd ~ 1/sqrt(eps) ~ 316 and the gradients reach ~1e3. The curvature grows like rstd^3, so the
# step is kept at 1e-6 (truncation error ~ h^2 f''' stays ~1e-6) and atol is scaled to the
# gradient's size (1e-4 against entries of ~1e2-1e3), rtol 1e-5. A backward without eps is
# wrong by a factor of ~10 here (1/sqrt(var) vs 1/sqrt(var + eps)), far outside these tolerances.
NEAR_CONST_TOL = dict(eps=1e-6, atol=1e-4, rtol=1e-5)


def _near_constant(rng, shape, level=0.7):
    return level + 1e-3 * rng.standard_normal(shape)


def test_gradcheck_near_constant_rows():
    rng = np.random.default_rng(3)
    x, (w, b) = _near_constant(rng, (2, 3, 6)), _params(rng, 6)
    assert gradcheck(lambda x, w, b: layer_norm(x, w.shape, w, b), _leaves(x, w, b), **NEAR_CONST_TOL)


def test_gradcheck_exactly_constant_rows():
    # var = 0 (up to the rounding of the mean): the function is smooth there because eps > 0.
    rng = np.random.default_rng(4)
    x = np.repeat(rng.standard_normal((2, 3, 1)), 6, axis=-1)
    w, b = _params(rng, 6)
    assert gradcheck(lambda x, w, b: layer_norm(x, w.shape, w, b), _leaves(x, w, b), **NEAR_CONST_TOL)


class _LayerNormForgetsEps(Function):
    """A deliberately wrong LayerNorm: right forward, backward uses 1/sqrt(var) (no eps)."""

    @staticmethod
    def forward(ctx, x, weight, bias, eps=1e-5):
        out, cache = layernorm_forward(x, weight, bias, eps)
        ctx.save_for_backward(x, weight, cache[0])
        return out

    @staticmethod
    def backward(ctx, dout):
        x, weight, xhat_right = ctx.saved_tensors
        C = x.shape[-1]
        xc = x - x.mean(axis=-1, keepdims=True)
        rstd = 1.0 / np.sqrt(np.mean(xc * xc, axis=-1, keepdims=True))  # BUG: + eps forgotten
        xhat = xc * rstd
        dxhat = dout * weight
        dx = rstd * (dxhat - dxhat.mean(-1, keepdims=True)
                     - xhat * np.mean(dxhat * xhat, -1, keepdims=True))
        return dx, (dout * xhat_right).reshape(-1, C).sum(0), dout.reshape(-1, C).sum(0)


def test_backward_without_eps_fails_on_near_constant_rows():
    rng = np.random.default_rng(3)
    x, (w, b) = _near_constant(rng, (2, 3, 6)), _params(rng, 6)
    wrong = lambda x, w, b: _LayerNormForgetsEps.apply(x, w, b, eps=1e-5)  # noqa: E731
    with pytest.raises(minigrad.GradcheckError):
        gradcheck(wrong, _leaves(x, w, b), **NEAR_CONST_TOL)
    # ... while on ordinary rows (var ~ 1 >> eps) the same mistake is invisible at these
    # tolerances: the edge case is what catches it.
    x = rng.standard_normal((2, 3, 6))
    assert gradcheck(wrong, _leaves(x, w, b), eps=1e-6, atol=1e-4, rtol=1e-4)


def test_gradcheck_rows_offset_by_1e6():
    # x = 1e6 + N(0, 1). In float64 the ulp of 1e6 is 1.2e-10, so a step of 1e-6 is itself
    # rounded by ~1e-4 relative; a step of 1e-4 keeps that below 1e-6 while the truncation
    # error (curvature ~1 at unit spread) stays ~1e-8.
    rng = np.random.default_rng(5)
    x, (w, b) = 1e6 + rng.standard_normal((2, 3, 6)), _params(rng, 6)
    assert gradcheck(lambda x, w, b: layer_norm(x, w.shape, w, b), _leaves(x, w, b),
                     eps=1e-4, atol=1e-6, rtol=1e-4)


def test_gradcheck_magnitude_1e4():
    # x ~ 1e4 N(0, 1): dx scales like 1/1e4 and the curvature like 1/1e8, so the step scales up
    # to 1e-2 and atol down to 1e-10 (the gradients are ~1e-4).
    rng = np.random.default_rng(6)
    x, (w, b) = 1e4 * rng.standard_normal((2, 3, 6)), _params(rng, 6)
    assert gradcheck(lambda x, w, b: layer_norm(x, w.shape, w, b), _leaves(x, w, b),
                     eps=1e-2, atol=1e-10, rtol=1e-5)


# ---------------------------------------------------------------- 2. against the composite
@pytest.mark.parametrize("case", ["normal", "near_constant", "offset", "big"])
def test_backward_equals_engine_composite(case):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 4, 8))
    x = {"normal": x, "near_constant": 0.7 + 1e-3 * x, "offset": 1e6 + x, "big": 1e4 * x}[case]
    w, b = _params(rng, 8)
    G = rng.standard_normal(x.shape)
    out_f, g_f = grads_of(lambda x, w, b: layer_norm(x, w.shape, w, b), (x, w, b), G)
    out_c, g_c = grads_of(lambda x, w, b: layer_norm_ref(x, w, b, 1e-5), (x, w, b), G)
    np.testing.assert_allclose(out_f, out_c, rtol=0, atol=1e-10)
    for gf, gc in zip(g_f, g_c):
        # absolute 1e-10 on the gradient scaled to unit size (near-constant rows reach ~1e3)
        np.testing.assert_allclose(gf, gc, rtol=0, atol=1e-10 * max(1.0, np.abs(gc).max()))


def test_numpy_pair_matches_function_adapter():
    rng = np.random.default_rng(8)
    x, (w, b) = rng.standard_normal((2, 5, 6)), _params(rng, 6)
    G = rng.standard_normal(x.shape)
    out, cache = layernorm_forward(x, w, b, 1e-5)
    dx, dw, db = layernorm_backward(G, cache)
    out_t, (gx, gw, gb) = grads_of(lambda x, w, b: LayerNormFunction.apply(x, w, b, eps=1e-5),
                                   (x, w, b), G)
    np.testing.assert_array_equal(out, out_t)
    np.testing.assert_array_equal(dx, gx)
    np.testing.assert_array_equal(dw, gw)
    np.testing.assert_array_equal(db, gb)


# ------------------------------------------------------------------ 3. forward, closed form
@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 2e-6)])
def test_forward_closed_form_and_dtypes(dtype, tol):
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 3, 16)).astype(dtype)
    w, b = _params(rng, 16, dtype)
    xt, wt, bt = (Tensor(a, requires_grad=True) for a in (x, w, b))
    out = layer_norm(xt, wt.shape, wt, bt)
    assert isinstance(out, Tensor) and out.dtype == dtype and out.shape == x.shape
    ref = _closed_form(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), 1e-5)
    np.testing.assert_allclose(out.data, ref, rtol=tol, atol=tol)
    out.backward(rng.standard_normal(x.shape).astype(dtype))
    for t in (xt, wt, bt):
        assert t.grad.dtype == dtype and t.grad.shape == t.shape


def test_normalized_rows_have_zero_mean_unit_variance():
    # Independent of the formula's code: with weight 1, bias 0 every row has mean 0, var ~ 1.
    rng = np.random.default_rng(10)
    x = 3.0 + 5.0 * rng.standard_normal((4, 32))
    y = layer_norm(Tensor(x), 32, np.ones(32), np.zeros(32), eps=0.0).data
    np.testing.assert_allclose(y.mean(-1), 0.0, atol=1e-12)
    np.testing.assert_allclose(y.var(-1), 1.0, rtol=1e-12)


def test_offset_rows_two_pass_variance():
    # LayerNorm is shift invariant, so rows offset by 1e6 must normalize like the original rows.
    # The one-pass E[x^2] - E[x]^2 cancels catastrophically there (1e12 - 1e12 in float64).
    rng = np.random.default_rng(11)
    x = rng.standard_normal((4, 16))
    w, b = _params(rng, 16)
    y0 = layer_norm(Tensor(x), w.shape, w, b).data
    y1 = layer_norm(Tensor(x + 1e6), w.shape, w, b).data
    np.testing.assert_allclose(y1, y0, atol=1e-8)
    xo = x + 1e6
    naive_var = np.mean(xo * xo, -1, keepdims=True) - np.mean(xo, -1, keepdims=True) ** 2
    true_var = np.var(x, -1, keepdims=True)
    assert np.abs(naive_var - true_var).max() > 1e-4  # the formula the layer must not use


def test_plain_arrays_are_constants():
    rng = np.random.default_rng(12)
    x, (w, b) = rng.standard_normal((3, 4)), _params(rng, 4)
    xt = Tensor(x, requires_grad=True)
    out = layer_norm(xt, w.shape, w, b)
    assert isinstance(out, Tensor) and out.requires_grad
    out.backward(rng.standard_normal(out.shape))
    assert xt.grad is not None and xt.grad.shape == x.shape
    assert not layer_norm(x, w.shape, w, b).requires_grad


def test_bad_inputs_raise():
    x = Tensor(np.zeros((2, 4)))
    w, b = np.ones(4), np.zeros(4)
    with pytest.raises(ValueError, match="weight"):
        layer_norm(x, x.shape[-1], np.ones(3), b)
    with pytest.raises(ValueError, match="bias"):
        layer_norm(x, w.shape, w, np.zeros((1, 4)))
    with pytest.raises(TypeError, match="floating"):
        layer_norm(Tensor(np.zeros((2, 4), dtype=np.int64)), w.shape, w, b)
    with pytest.raises(TypeError, match="dtype"):
        layer_norm(x, x.shape[-1], w.astype(np.float32), b)
    with pytest.raises(ValueError, match="eps"):
        layer_norm(x, w.shape, w, b, eps=-1.0)
    with pytest.raises(ValueError, match=r"normalized_shape \(1,\) must be the last axes"):
        layer_norm(Tensor(np.float64(1.0)), 1)
