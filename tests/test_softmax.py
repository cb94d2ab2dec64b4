"""Softmax (layers/softmax.py) proven three ways: central differences, the composite reference,
and the closed form exp(x) / sum(exp(x))."""
import numpy as np
import pytest

import minigrad
from minigrad import Function, Tensor
from layers.functional import softmax
from layers.softmax import softmax_forward
from composite_core import softmax_composite

RNG = np.random.default_rng(99)


def _grads(fn, arrays, G):
    ts = [Tensor(a.copy(), requires_grad=True) for a in arrays]
    fn(*ts).backward(G)
    return [t.grad for t in ts]


# ---------------------------------------------------------------- 1. central differences
@pytest.mark.parametrize("shape,axis", [((1, 5), -1), ((2, 3, 4), -1), ((2, 3, 4), 1),
                                        ((4, 3), 0), ((1, 1), -1), ((6,), 0)])
def test_gradcheck(shape, axis):
    x = Tensor(RNG.standard_normal(shape) * 2, requires_grad=True)
    assert minigrad.gradcheck(lambda x: softmax(x, axis=axis), [x])


def test_gradcheck_non_contiguous():
    base = Tensor(RNG.standard_normal((5, 2, 3)), requires_grad=True)

    def fn(b):
        x = b.transpose(1, 2, 0)[:, ::2]  # (2, 2, 5), strided
        assert not x.data.flags["C_CONTIGUOUS"]
        return softmax(x, axis=-1)

    assert minigrad.gradcheck(fn, [base])


def test_gradcheck_logits_of_1e4():
    # Rows at +-1e4 with O(1) spread (not saturated) and rows mixing +1e4 and -1e4 (saturated).
    x = np.concatenate([1e4 + RNG.standard_normal((2, 5)),
                        -1e4 + RNG.standard_normal((2, 5)),
                        np.where(RNG.random((2, 5)) < 0.5, 1e4, -1e4) + RNG.standard_normal((2, 5))])
    x[4, 0], x[5, 0] = 1e4, -1e4  # each mixed row has at least one of each
    x[4, 1], x[5, 1] = -1e4, 1e4
    xt = Tensor(x, requires_grad=True)
    assert minigrad.gradcheck(lambda x: softmax(x), [xt])


def test_gradcheck_catches_missing_subtracted_sum():
    class Wrong(Function):
        @staticmethod
        def forward(ctx, x):
            y, ctx.cache = softmax_forward(x)
            return y

        @staticmethod
        def backward(ctx, dy):
            y, _ = ctx.cache
            return dy * y  # forgets - y * sum(dy * y)

    x = Tensor(RNG.standard_normal((3, 4)), requires_grad=True)
    with pytest.raises(minigrad.GradcheckError):
        minigrad.gradcheck(lambda x: Wrong.apply(x), [x])


# ---------------------------------------------------------------- 2. composite reference
@pytest.mark.parametrize("shape,axis,scale", [((4, 3, 7), -1, 1.0), ((4, 3, 7), 0, 3.0),
                                              ((2, 9), -1, 1e4)])
def test_matches_composite(shape, axis, scale):
    x = RNG.standard_normal(shape) * scale
    G = RNG.standard_normal(shape)
    (dx,) = _grads(lambda x: softmax(x, axis=axis), [x], G)
    (dx_ref,) = _grads(lambda x: softmax_composite(x, axis=axis), [x], G)
    np.testing.assert_allclose(dx, dx_ref, rtol=0, atol=1e-10)


# ---------------------------------------------------------------- 3. closed form, dtypes, edges
@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-13), (np.float32, 2e-6)])
def test_forward_closed_form(dtype, rtol):
    x = (RNG.standard_normal((3, 4, 6)) * 3).astype(dtype)
    y = softmax(Tensor(x, requires_grad=True), axis=1)
    assert y.dtype == dtype
    x64 = x.astype(np.float64)
    ref = np.exp(x64) / np.exp(x64).sum(axis=1, keepdims=True)  # naive form is exact enough here
    np.testing.assert_allclose(y.data, ref, rtol=rtol, atol=0)


def test_float32_grads_and_large_logits_do_not_overflow():
    x = Tensor((RNG.standard_normal((4, 5)) * 1e4).astype(np.float32), requires_grad=True)
    with np.errstate(over="raise", invalid="raise"):
        y = softmax(x)
        y.backward(RNG.standard_normal((4, 5)).astype(np.float32))
    assert y.dtype == x.grad.dtype == np.float32
    assert np.all(np.isfinite(y.data)) and np.all(np.isfinite(x.grad))
    np.testing.assert_allclose(y.data.sum(-1), 1.0, rtol=1e-6)
    # two equal huge logits share the mass exactly
    y2 = softmax(Tensor(np.array([[1e8, 1e8, -1e8]], dtype=np.float32)))
    np.testing.assert_array_equal(y2.data, np.array([[0.5, 0.5, 0.0]], dtype=np.float32))


def test_minus_inf_entries_give_exact_zeros_and_finite_grads():
    x = Tensor(np.array([[0.3, -np.inf, 1.2], [-np.inf, -np.inf, 2.0]]), requires_grad=True)
    y = softmax(x)
    y.backward(RNG.standard_normal((2, 3)))
    assert y.data[0, 1] == 0.0 and y.data[1, 0] == 0.0 and y.data[1, 2] == 1.0
    assert np.all(np.isfinite(x.grad))
    assert x.grad[0, 1] == 0.0 and np.all(x.grad[1] == 0.0)  # one live entry: gradient exactly 0


def test_errors():
    with pytest.raises(TypeError):
        softmax(Tensor(np.arange(3)))
    with pytest.raises(IndexError, match="out of range"):       # PyTorch: IndexError too
        softmax(Tensor(np.zeros((2, 3))), axis=2)
    with pytest.raises(IndexError, match="out of range"):       # a 0-d input has dims 0, -1
        softmax(Tensor(np.float64(1.0)), 1)
    with pytest.raises(TypeError):
        softmax(Tensor(np.zeros((2, 3))), axis=1.0)
