"""Linear and embedding (layers/linear.py, layers/embedding.py) proven three ways: central
differences, the composite reference, and closed-form NumPy (x @ W.T + b; W[idx] and a
per-row loop for the scatter-add)."""
import numpy as np
import pytest

import minigrad
from minigrad import Tensor
from layers.functional import embedding, linear
from composite_core import embedding_composite, linear_composite

RNG = np.random.default_rng(31)


def _t(*shape, scale=1.0):
    return Tensor(RNG.standard_normal(shape) * scale, requires_grad=True)


def _grads(fn, arrays, G):
    ts = [Tensor(a.copy(), requires_grad=True) for a in arrays]
    fn(*ts).backward(G)
    return [t.grad for t in ts]


# ================================================================ linear
# ---------------------------------------------------------------- 1. central differences
@pytest.mark.parametrize("xshape", [(1, 4), (2, 3, 4), (4,), (2, 1, 2, 4)])
@pytest.mark.parametrize("with_bias", [True, False])
def test_linear_gradcheck(xshape, with_bias):
    x, w = _t(*xshape), _t(3, 4, scale=0.7)
    if with_bias:
        b = _t(3)
        assert minigrad.gradcheck(lambda x, w, b: linear(x, w, b), [x, w, b])
    else:
        assert minigrad.gradcheck(lambda x, w: linear(x, w), [x, w])


def test_linear_gradcheck_non_contiguous():
    xb, wb, b = _t(4, 2, 5), _t(5, 3), _t(3)

    def fn(xb, wb, b):
        x, w = xb.transpose(1, 0, 2), wb.T   # x (2, 4, 5) strided, weight (3, 5) transposed
        assert not x.data.flags["C_CONTIGUOUS"] and not w.data.flags["C_CONTIGUOUS"]
        return linear(x, w, b)

    assert minigrad.gradcheck(fn, [xb, wb, b])


def test_linear_gradcheck_large_magnitudes():
    x, w, b = _t(2, 3, 4, scale=1e4), _t(2, 4), _t(2, scale=1e4)
    assert minigrad.gradcheck(lambda x, w, b: linear(x, w, b), [x, w, b], rtol=1e-5, atol=1e-3)


# ---------------------------------------------------------------- 2. composite reference
@pytest.mark.parametrize("with_bias", [True, False])
def test_linear_matches_composite(with_bias):
    x, w, b = RNG.standard_normal((3, 5, 6)), RNG.standard_normal((4, 6)), RNG.standard_normal(4)
    G = RNG.standard_normal((3, 5, 4))
    arrays = [x, w, b] if with_bias else [x, w]
    got = _grads(lambda *a: linear(*a), arrays, G)
    ref = _grads(lambda *a: linear_composite(*a), arrays, G)
    assert len(got) == len(arrays)
    for a, r in zip(got, ref):
        np.testing.assert_allclose(a, r, rtol=0, atol=1e-10)


# ---------------------------------------------------------------- 3. closed form, dtypes
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_linear_closed_form(dtype, tol):
    x = RNG.standard_normal((2, 3, 6)).astype(dtype)
    w = RNG.standard_normal((5, 6)).astype(dtype)
    b = RNG.standard_normal(5).astype(dtype)
    xt, wt, bt = (Tensor(a, requires_grad=True) for a in (x, w, b))
    out = linear(xt, wt, bt)
    assert out.dtype == dtype and out.shape == (2, 3, 5)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    ref = np.einsum("btc,oc->bto", x64, w64) + b
    np.testing.assert_allclose(out.data, ref, rtol=0, atol=tol)
    G = RNG.standard_normal((2, 3, 5)).astype(dtype)
    out.backward(G)
    assert xt.grad.dtype == wt.grad.dtype == bt.grad.dtype == dtype
    G64 = G.astype(np.float64)
    np.testing.assert_allclose(xt.grad, np.einsum("bto,oc->btc", G64, w64), atol=tol)
    np.testing.assert_allclose(wt.grad, np.einsum("bto,btc->oc", G64, x64), atol=tol * 10)
    np.testing.assert_allclose(bt.grad, G64.sum((0, 1)), atol=tol * 10)


def test_linear_constant_weight_and_partial_grads():
    x = _t(2, 3)
    w = RNG.standard_normal((4, 3))             # plain array: a constant
    out = linear(x, w)
    out.backward(RNG.standard_normal((2, 4)))
    assert x.grad.shape == (2, 3)
    wt = _t(4, 3)
    linear(RNG.standard_normal((2, 3)), wt, RNG.standard_normal(4)).backward(np.ones((2, 4)))
    assert wt.grad.shape == (4, 3)


def test_linear_errors():
    x, w = Tensor(np.zeros((2, 3))), Tensor(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="in_features"):
        linear(x, Tensor(np.zeros((3, 4))))
    with pytest.raises(ValueError, match="bias"):
        linear(x, w, Tensor(np.zeros(3)))
    with pytest.raises(TypeError, match="dtype"):
        linear(x, Tensor(np.zeros((4, 3), dtype=np.float32)))
    with pytest.raises(TypeError):
        linear(Tensor(np.zeros((2, 3), dtype=np.int64)), w)
    with pytest.raises(ValueError):
        linear(x, Tensor(np.zeros(3)))


# ================================================================ embedding
def scatter_loop(idx, dout, V):
    """dW by an explicit loop over positions (the closed form of the scatter-add)."""
    dW = np.zeros((V, dout.shape[-1]))
    for n, v in enumerate(idx.reshape(-1)):
        dW[v] += dout.reshape(-1, dout.shape[-1])[n]
    return dW


# ---------------------------------------------------------------- 1. central differences
@pytest.mark.parametrize("idx", [np.array([3]), np.array([[0, 2, 2], [5, 2, 0]]),
                                 np.array([[[1, 1], [1, 1]]]), np.array(4)])
def test_embedding_gradcheck(idx):
    w = _t(6, 3)
    assert minigrad.gradcheck(lambda w: embedding(idx, w), [w])


def test_embedding_gradcheck_non_contiguous():
    wb = _t(3, 7)
    idx = np.array([[6, 0], [6, 6]])

    def fn(wb):
        w = wb.T  # (7, 3) transposed view
        assert not w.data.flags["C_CONTIGUOUS"]
        return embedding(idx, w)

    assert minigrad.gradcheck(fn, [wb])


def test_embedding_duplicates_accumulate_and_unused_rows_are_exactly_zero():
    V, C = 8, 4
    idx = np.array([[1, 3, 1, 1], [6, 3, 1, 0]])   # 1 used four times; 2, 4, 5, 7 unused
    G = RNG.standard_normal((2, 4, C))
    w = _t(V, C)
    embedding(idx, w).backward(G)
    np.testing.assert_allclose(w.grad, scatter_loop(idx, G, V), rtol=0, atol=1e-14)
    np.testing.assert_allclose(w.grad[1], G[0, 0] + G[0, 2] + G[0, 3] + G[1, 2], atol=1e-14)
    for r in (2, 4, 5, 7):
        assert np.all(w.grad[r] == 0.0)
    # gradients accumulate across calls (a tied weight used twice)
    embedding(idx, w).backward(G)
    np.testing.assert_allclose(w.grad, 2 * scatter_loop(idx, G, V), atol=1e-13)


# ---------------------------------------------------------------- 2. composite reference
def test_embedding_matches_composite():
    V, C = 11, 5
    idx = RNG.integers(0, V, size=(4, 7))
    idx[0, :3] = 2
    w = RNG.standard_normal((V, C))
    G = RNG.standard_normal((4, 7, C))
    (got,) = _grads(lambda w: embedding(idx, w), [w], G)
    (ref,) = _grads(lambda w: embedding_composite(idx, w), [w], G)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-10)


# ---------------------------------------------------------------- 3. closed form, dtypes
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("idx_dtype", [np.int64, np.int32, np.uint8])
def test_embedding_closed_form(dtype, idx_dtype):
    V, C = 9, 4
    w = RNG.standard_normal((V, C)).astype(dtype)
    idx = RNG.integers(0, V, size=(3, 5)).astype(idx_dtype)
    wt = Tensor(w, requires_grad=True)
    out = embedding(Tensor(idx), wt)
    assert out.dtype == dtype and out.shape == (3, 5, C)
    np.testing.assert_array_equal(out.data, np.stack([[w[i] for i in row] for row in idx]))
    G = RNG.standard_normal((3, 5, C)).astype(dtype)
    out.backward(G)
    assert wt.grad.dtype == dtype
    np.testing.assert_allclose(wt.grad, scatter_loop(idx, G.astype(np.float64), V),
                               rtol=0, atol=1e-5 if dtype == np.float32 else 1e-14)


def test_embedding_cache_is_independent_of_a_reused_index_buffer():
    w = _t(5, 2)
    idx = np.array([0, 1, 2])
    out = embedding(idx, w)
    idx[:] = 4                                    # caller refills its buffer before backward
    out.backward(np.ones((3, 2)))
    np.testing.assert_array_equal(w.grad, np.array([[1, 1], [1, 1], [1, 1], [0, 0], [0, 0.]]))


def test_embedding_empty_idx():
    w = _t(4, 3)
    out = embedding(np.zeros((2, 0), dtype=np.int64), w)
    assert out.shape == (2, 0, 3)
    out.backward(np.zeros((2, 0, 3)))
    assert np.all(w.grad == 0.0)


def test_embedding_errors():
    w = Tensor(np.zeros((5, 3)), requires_grad=True)
    with pytest.raises(IndexError, match="5"):
        embedding(np.array([0, 5]), w)
    with pytest.raises(IndexError, match="-1"):
        embedding(np.array([-1, 2]), w)
    with pytest.raises(TypeError, match="integer"):
        embedding(np.array([0.0, 1.0]), w)
    with pytest.raises(TypeError, match="integer"):
        embedding(Tensor(np.array([0.0, 1.0])), w)
    with pytest.raises(TypeError, match="integer"):
        embedding(np.array([True, False]), w)
    with pytest.raises(ValueError):
        embedding(np.array([0]), Tensor(np.zeros(5)))
    with pytest.raises(TypeError):
        embedding(np.array([0]), Tensor(np.zeros((5, 3), dtype=np.int64)))
