"""SwiGLU, proven three ways: central differences, the engine's composite, a closed form."""
import numpy as np
import pytest

import minigrad
from minigrad import Function, Tensor, gradcheck
from layers.functional import swiglu
from layers.swiglu import SwiGLUFunction, swiglu_backward, swiglu_forward

from composite_norms import grads_of, swiglu_ref

TOL = dict(eps=1e-6, atol=1e-8, rtol=1e-5)


def _weights(rng, C, H, O=None, dtype=np.float64, scale=1.0):
    """Random (H, C), (H, C), (O, H) weights in PyTorch Linear layout."""
    O = C if O is None else O
    return [(scale * rng.standard_normal(s) / np.sqrt(s[1])).astype(dtype)
            for s in ((H, C), (H, C), (O, H))]


def _leaves(*arrays):
    return [Tensor(np.array(a, dtype=np.float64), requires_grad=True) for a in arrays]


def _closed(x, wg, wu, wd):
    """The chapter's step 6 in NumPy: w3(silu(w1 x) * w2 x)."""
    a = x @ wg.T
    return ((a / (1 + np.exp(-a))) * (x @ wu.T)) @ wd.T


# ----------------------------------------------------------------------- 1. central differences
@pytest.mark.parametrize("shape, H, O", [((1, 4), 6, 4), ((2, 3, 4), 5, 4), ((2, 3, 4), 5, 3)])
def test_gradcheck_every_input_and_weight(shape, H, O):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    assert gradcheck(swiglu, _leaves(x, *_weights(rng, shape[-1], H, O, scale=2.0)), **TOL)


def test_gradcheck_non_contiguous_inputs():
    rng = np.random.default_rng(1)
    ws = _weights(rng, 4, 5, scale=2.0)
    xt = rng.standard_normal((4, 3))            # leaf (C, T); the layer sees the (T, C) view
    assert gradcheck(lambda x, *w: swiglu(x.T, *w), _leaves(xt, *ws), **TOL)
    xs = rng.standard_normal((2, 3, 8))         # every other feature
    assert gradcheck(lambda x, *w: swiglu(x[:, :, ::2], *w), _leaves(xs, *ws), **TOL)
    # transposed weights: Wg given as the transpose of an (C, H) leaf
    wg_t = ws[0].T.copy()
    assert gradcheck(lambda x, wgt, wu, wd: swiglu(x, wgt.T, wu, wd),
                     _leaves(rng.standard_normal((3, 4)), wg_t, ws[1], ws[2]), **TOL)


def test_gradcheck_d_equals_1_and_h_equals_1():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 1))
    assert gradcheck(swiglu, _leaves(x, *_weights(rng, 1, 1, scale=2.0)), **TOL)


def test_gradcheck_saturated_gate():
    # Gate pre-activations of about +-30 (silu ~ a or ~ 0), weights kept random and non-unit.
    # Outputs grow to ~1e2, so atol 1e-7 on gradients of ~1e1-1e2.
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 4))
    wg, wu, wd = _weights(rng, 4, 5)
    wg = 30.0 * wg / np.abs(x @ wg.T).min()
    assert np.abs(x @ wg.T).min() >= 29.9
    assert gradcheck(swiglu, _leaves(x, wg, wu, wd), eps=1e-6, atol=1e-7, rtol=1e-5)


class _SwiGLUNoSiluPrime(Function):
    """A deliberately wrong SwiGLU backward: silu'(a) is dropped (da = dg)."""

    @staticmethod
    def forward(ctx, x, w_gate, w_up, w_down):
        out, cache = swiglu_forward(x, w_gate, w_up, w_down)
        ctx.cache = cache
        return out

    @staticmethod
    def backward(ctx, dout):
        x2, a, s, u, g, wg, wu, wd = ctx.cache
        dh = dout @ wd
        du, da = dh * g, dh * u                 # BUG: da should be dh * u * silu'(a)
        return da @ wg + du @ wu, da.T @ x2, du.T @ x2, dout.T @ (g * u)


def test_gradcheck_catches_missing_silu_prime():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 4))
    with pytest.raises(minigrad.GradcheckError):
        gradcheck(lambda *t: _SwiGLUNoSiluPrime.apply(*t),
                  _leaves(x, *_weights(rng, 4, 5, scale=2.0)), **TOL)


# ---------------------------------------------------------------- 2. against the composite
@pytest.mark.parametrize("scale", [1.0, 10.0])
def test_backward_equals_engine_composite(scale):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 5, 8))
    ws = _weights(rng, 8, 21, scale=scale)
    G = rng.standard_normal((2, 5, 8))
    out_f, g_f = grads_of(swiglu, (x, *ws), G)
    out_c, g_c = grads_of(swiglu_ref, (x, *ws), G)
    np.testing.assert_allclose(out_f, out_c, rtol=0, atol=1e-10 * max(1.0, np.abs(out_c).max()))
    for gf, gc in zip(g_f, g_c):
        np.testing.assert_allclose(gf, gc, rtol=0, atol=1e-10 * max(1.0, np.abs(gc).max()))


def test_numpy_pair_matches_function_adapter():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 3, 4))
    ws = _weights(rng, 4, 6)
    G = rng.standard_normal((2, 3, 4))
    out, cache = swiglu_forward(x, *ws)
    grads = swiglu_backward(G, cache)
    out_t, grads_t = grads_of(lambda *t: SwiGLUFunction.apply(*t), (x, *ws), G)
    np.testing.assert_array_equal(out, out_t)
    for g, gt in zip(grads, grads_t):
        np.testing.assert_array_equal(g, gt)


def test_is_one_node():
    rng = np.random.default_rng(7)
    x = Tensor(rng.standard_normal((2, 4)), requires_grad=True)
    out = swiglu(x, *_weights(rng, 4, 6))
    assert out.grad_fn is SwiGLUFunction


# ------------------------------------------------------------------ 3. forward, closed form
@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_forward_closed_form_and_dtypes(dtype, tol):
    rng = np.random.default_rng(8)
    C, H = 12, int(12 * 8 / 3)
    x = rng.standard_normal((2, 3, C)).astype(dtype)
    ws = _weights(rng, C, H, dtype=dtype, scale=2.0)
    xt = Tensor(x, requires_grad=True)
    wts = [Tensor(w, requires_grad=True) for w in ws]
    out = swiglu(xt, *wts)
    assert isinstance(out, Tensor) and out.dtype == dtype and out.shape == (2, 3, C)
    ref = _closed(x.astype(np.float64), *(w.astype(np.float64) for w in ws))
    np.testing.assert_allclose(out.data, ref, rtol=tol, atol=tol)
    out.backward(rng.standard_normal(out.shape).astype(dtype))
    for t in (xt, *wts):
        assert t.grad.dtype == dtype and t.grad.shape == t.shape


def test_bad_inputs_raise():
    rng = np.random.default_rng(9)
    x = Tensor(rng.standard_normal((2, 4)))
    wg, wu, wd = _weights(rng, 4, 6)
    with pytest.raises(ValueError, match="w_gate"):
        swiglu(x, wg[:, :3], wu, wd)
    with pytest.raises(ValueError, match="w_up"):
        swiglu(x, wg, wu[:5], wd)
    with pytest.raises(ValueError, match="w_down"):
        swiglu(x, wg, wu, wd[:, :5])
    with pytest.raises(ValueError, match="2-D"):
        swiglu(x, wg[None], wu, wd)
    with pytest.raises(TypeError, match="dtype"):
        swiglu(x, wg.astype(np.float32), wu, wd)
    with pytest.raises(TypeError, match="floating"):
        swiglu(Tensor(np.ones((2, 4), dtype=np.int64)), wg, wu, wd)
