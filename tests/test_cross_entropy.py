"""Cross-entropy (layers/cross_entropy.py) proven three ways: central differences, the composite
reference, and the closed form mean(log(sum(exp(x))) - x[target])."""
import math

import numpy as np
import pytest

import minigrad
from minigrad import Function, Tensor
from layers.cross_entropy import cross_entropy_forward
from layers.functional import cross_entropy
from composite_core import cross_entropy_composite

RNG = np.random.default_rng(7)


def closed_form(x, t):
    """x (N, C) or (N, C, d1, ...), the class axis second (PyTorch's layout)."""
    x = np.moveaxis(x.astype(np.float64), 1, -1).reshape(-1, x.shape[1])
    t = t.reshape(-1)
    return np.mean(np.log(np.exp(x).sum(-1)) - x[np.arange(len(t)), t])


def _grads(fn, arrays, G):
    ts = [Tensor(a.copy(), requires_grad=True) for a in arrays]
    fn(*ts).backward(G)
    return [t.grad for t in ts]


# ---------------------------------------------------------------- 1. central differences
@pytest.mark.parametrize("shape", [(1, 5), (6, 4), (2, 5, 3), (3, 1), (2, 4, 3, 2)])
def test_gradcheck(shape):   # (N, C, d1, ...): the class axis second
    x = Tensor(RNG.standard_normal(shape) * 2, requires_grad=True)
    t = RNG.integers(0, shape[1], size=shape[:1] + shape[2:])
    assert minigrad.gradcheck(lambda x: cross_entropy(x, t), [x])


def test_gradcheck_non_contiguous_and_duplicate_targets():
    base = Tensor(RNG.standard_normal((5, 6)), requires_grad=True)
    t = np.array([2, 2, 0, 4, 2, 4])

    def fn(b):
        x = b.T  # (6, 5) transposed view
        assert not x.data.flags["C_CONTIGUOUS"]
        return cross_entropy(x, t)

    assert minigrad.gradcheck(fn, [base])


def test_gradcheck_logits_of_1e4():
    x = np.concatenate([1e4 + RNG.standard_normal((3, 5)), -1e4 + RNG.standard_normal((3, 5))])
    x[0, 1] = -1e4   # a saturated class in a +1e4 row
    x[4, 2] = 1e4    # one dominant class in a -1e4 row
    t = np.array([0, 1, 2, 3, 2, 0])  # row 1: target is ordinary; row 4: target is the dominant one
    xt = Tensor(x, requires_grad=True)
    assert minigrad.gradcheck(lambda x: cross_entropy(x, t), [xt])


def test_gradcheck_catches_a_missing_one_hot():
    class Wrong(Function):
        @staticmethod
        def forward(ctx, x, t):
            loss, ctx.cache = cross_entropy_forward(x, t)
            return loss

        @staticmethod
        def backward(ctx, dloss):
            probs = ctx.cache[0]
            return probs * dloss / probs.shape[0], None  # forgets - onehot

    x = Tensor(RNG.standard_normal((4, 3)), requires_grad=True)
    t = np.array([0, 2, 1, 1])
    with pytest.raises(minigrad.GradcheckError):
        minigrad.gradcheck(lambda x: Wrong.apply(x, t), [x])


# ---------------------------------------------------------------- 2. composite reference
@pytest.mark.parametrize("N,V,scale", [(16, 7, 1.0), (8, 48, 5.0), (6, 5, 1e4)])
def test_matches_composite(N, V, scale):
    x = RNG.standard_normal((N, V)) * scale
    t = RNG.integers(0, V, size=N)
    G = np.asarray(RNG.standard_normal())  # random upstream scalar
    (dx,) = _grads(lambda x: cross_entropy(x, t), [x], G)
    (dx_ref,) = _grads(lambda x: cross_entropy_composite(x, t), [x], G)
    np.testing.assert_allclose(dx, dx_ref, rtol=0, atol=1e-10)
    np.testing.assert_allclose(cross_entropy(Tensor(x), t).data,
                               cross_entropy_composite(Tensor(x), t).data, rtol=1e-13)


# ---------------------------------------------------------------- 3. closed form, dtypes, edges
@pytest.mark.parametrize("dtype,rtol", [(np.float64, 1e-13), (np.float32, 2e-6)])
def test_forward_closed_form(dtype, rtol):
    x = (RNG.standard_normal((4, 9, 3)) * 3).astype(dtype)     # (N, C, d1)
    t = RNG.integers(0, 9, size=(4, 3))
    xt = Tensor(x, requires_grad=True)
    loss = cross_entropy(xt, t)
    assert loss.shape == () and loss.dtype == dtype
    np.testing.assert_allclose(loss.data, closed_form(x, t), rtol=rtol)
    loss.backward()
    assert xt.grad.dtype == dtype and xt.grad.shape == x.shape
    # the gradient of the mean loss is (softmax - onehot) / N, closed form
    x64 = np.moveaxis(x.astype(np.float64), 1, -1).reshape(-1, 9)
    p = np.exp(x64) / np.exp(x64).sum(-1, keepdims=True)
    p[np.arange(12), t.reshape(-1)] -= 1
    grad = np.moveaxis(xt.grad, 1, -1).reshape(-1, 9)
    np.testing.assert_allclose(grad, p / 12, rtol=0, atol=10 * rtol / 12)


def test_float32_logits_of_1e8():
    x = Tensor(np.array([[1e8, 1e8], [1e8, -1e8]], dtype=np.float32), requires_grad=True)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        loss = cross_entropy(x[0:1], np.array([0]))
    assert loss.dtype == np.float32
    assert abs(float(loss.data) - math.log(2)) < 1e-7        # ln 2, not 0 and not inf
    loss.backward()
    np.testing.assert_array_equal(x.grad[0], np.array([-0.5, 0.5], dtype=np.float32))
    # a confident right answer costs 0, a confident wrong one costs the logit gap, finite
    assert float(cross_entropy(Tensor(x.data[1:]), np.array([0])).data) == 0.0
    assert float(cross_entropy(Tensor(x.data[1:]), np.array([1])).data) == np.float32(2e8)


def test_targets_as_int_tensor_and_unsigned():
    x = RNG.standard_normal((3, 4))
    t = np.array([3, 0, 1])
    a = cross_entropy(Tensor(x), Tensor(t)).data
    b = cross_entropy(Tensor(x), t.astype(np.uint8)).data
    assert a == b
    np.testing.assert_allclose(a, closed_form(x, t), rtol=1e-13)


def test_errors():
    x = Tensor(np.zeros((3, 4)), requires_grad=True)
    with pytest.raises(IndexError, match="out of range"):    # PyTorch: IndexError too
        cross_entropy(x, np.array([0, 4, 1]))
    with pytest.raises(IndexError, match="out of range"):
        cross_entropy(x, np.array([0, -1, 1]))
    with pytest.raises(ValueError, match="class probabilities"):  # floats: probabilities
        cross_entropy(x, np.array([0.0, 1.0, 2.0]))
    with pytest.raises(TypeError, match="integer"):
        cross_entropy(x, np.array([True, False, True]))
    with pytest.raises(ValueError, match="shape"):
        cross_entropy(x, np.array([0, 1]))
    with pytest.raises(TypeError):
        cross_entropy(Tensor(np.zeros((3, 4), dtype=np.int32)), np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="no classes"):
        cross_entropy(Tensor(np.zeros((3, 0))), np.zeros((3,), dtype=np.int64))
