"""Scaled dot-product attention (layers/attention.py) proven three ways: central differences, the
composite reference, and a direct per-(b, h) NumPy loop; plus the causal mask's exact zeros."""
import numpy as np
import pytest

import minigrad
from minigrad import Tensor
from layers.functional import scaled_dot_product_attention as sdpa
from composite_core import attention_composite

RNG = np.random.default_rng(2024)


def loop_reference(q, k, v, is_causal):
    """Attention computed head by head in float64 with an explicit -inf mask."""
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    lead = q.shape[:-2]
    out = np.empty(lead + (q.shape[-2], v.shape[-1]))
    for idx in np.ndindex(*lead):
        s = q[idx] @ k[idx].T / np.sqrt(q.shape[-1])
        if is_causal:
            for i in range(s.shape[0]):
                s[i, i + 1:] = -np.inf
        p = np.exp(s - s.max(axis=1, keepdims=True))
        out[idx] = (p / p.sum(axis=1, keepdims=True)) @ v[idx]
    return out


def _rand(*shape):
    return RNG.standard_normal(shape)


def _grads(fn, arrays, G):
    ts = [Tensor(a.copy(), requires_grad=True) for a in arrays]
    fn(*ts).backward(G)
    return [t.grad for t in ts]


# ---------------------------------------------------------------- 1. central differences
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("qs,ks,vs", [
    ((1, 1, 1, 2), (1, 1, 1, 2), (1, 1, 1, 2)),
    ((2, 2, 4, 3), (2, 2, 4, 3), (2, 2, 4, 3)),
    ((3, 5, 2), (3, 5, 2), (3, 5, 4)),                 # 3-d, hv != hs
    ((2, 1, 2, 3, 2), (2, 1, 2, 3, 2), (2, 1, 2, 3, 2)),  # two leading batch dims
    ((1, 2, 3, 2), (1, 2, 5, 2), (1, 2, 5, 3)),         # Tq != Tk
])
def test_gradcheck(qs, ks, vs, causal):
    q, k, v = (Tensor(_rand(*s), requires_grad=True) for s in (qs, ks, vs))
    assert minigrad.gradcheck(lambda q, k, v: sdpa(q, k, v, is_causal=causal), [q, k, v])


def test_gradcheck_non_contiguous_from_qkv_split():
    # The GPT's path: x (B, T, 3C) -> split -> (B, T, H, hs) -> transpose -> (B, H, T, hs) views.
    B, T, H, hs = 2, 4, 2, 3
    qkv = Tensor(_rand(B, T, 3 * H * hs), requires_grad=True)

    def fn(qkv):
        q, k, v = qkv.split(3, axis=2)
        q, k, v = (t.reshape(B, T, H, hs).transpose(0, 2, 1, 3) for t in (q, k, v))
        assert not q.data.flags["C_CONTIGUOUS"]
        return sdpa(q, k, v, is_causal=True)

    assert minigrad.gradcheck(fn, [qkv])


def test_gradcheck_large_scores():
    q = Tensor(_rand(1, 2, 4, 3) * 30, requires_grad=True)   # scores of order 1e3, near-one-hot P
    k = Tensor(_rand(1, 2, 4, 3) * 30, requires_grad=True)
    v = Tensor(_rand(1, 2, 4, 3), requires_grad=True)
    assert minigrad.gradcheck(lambda q, k, v: sdpa(q, k, v, is_causal=True), [q, k, v])


# ---------------------------------------------------------------- the causal mask, exactly
def test_first_row_sees_only_position_0():
    q, k, v = (Tensor(_rand(2, 3, 5, 4), requires_grad=True) for _ in range(3))
    out = sdpa(q, k, v, is_causal=True)
    np.testing.assert_array_equal(out.data[..., 0, :], v.data[..., 0, :])  # P[0] = (1, 0, ...)
    G = np.zeros(out.shape)
    G[..., 0, :] = _rand(2, 3, 4)  # only row 0 receives gradient
    out.backward(G)
    assert np.all(q.grad == 0.0)                   # one visible score: softmax gradient is 0
    assert np.all(k.grad == 0.0)
    np.testing.assert_allclose(v.grad[..., 0, :], G[..., 0, :], rtol=0, atol=0)
    assert np.all(v.grad[..., 1:, :] == 0.0)


@pytest.mark.parametrize("t0", [0, 2, 4])
def test_no_gradient_to_future_positions(t0):
    B, H, T, hs = 2, 2, 6, 4
    qa, ka, va = _rand(B, H, T, hs), _rand(B, H, T, hs), _rand(B, H, T, hs)
    G = _rand(B, H, T, hs)
    G[..., t0 + 1:, :] = 0.0          # upstream gradient only on rows <= t0
    dq, dk, dv = _grads(lambda q, k, v: sdpa(q, k, v, is_causal=True), [qa, ka, va], G)
    for d in (dq, dk, dv):
        assert np.all(d[..., t0 + 1:, :] == 0.0)   # exactly 0, not 1e-17
    # perturbing future tokens changes nothing at or before t0, bit for bit
    qb, kb, vb = qa.copy(), ka.copy(), va.copy()
    for a in (qb, kb, vb):
        a[..., t0 + 1:, :] += 10 * _rand(B, H, T - t0 - 1, hs)
    out_a = sdpa(Tensor(qa), Tensor(ka), Tensor(va), is_causal=True).data
    out_b = sdpa(Tensor(qb), Tensor(kb), Tensor(vb), is_causal=True).data
    np.testing.assert_array_equal(out_a[..., :t0 + 1, :], out_b[..., :t0 + 1, :])
    dq2, dk2, dv2 = _grads(lambda q, k, v: sdpa(q, k, v, is_causal=True), [qb, kb, vb], G)
    np.testing.assert_array_equal(dq2[..., :t0 + 1, :], dq[..., :t0 + 1, :])
    np.testing.assert_array_equal(dk2[..., :t0 + 1, :], dk[..., :t0 + 1, :])
    np.testing.assert_array_equal(dv2[..., :t0 + 1, :], dv[..., :t0 + 1, :])


def test_no_nan_with_huge_scores_float32():
    q = Tensor((_rand(2, 2, 8, 4) * 1e4).astype(np.float32), requires_grad=True)
    k = Tensor((_rand(2, 2, 8, 4) * 1e4).astype(np.float32), requires_grad=True)
    v = Tensor(_rand(2, 2, 8, 4).astype(np.float32), requires_grad=True)
    with np.errstate(over="raise", invalid="raise"):
        out = sdpa(q, k, v, is_causal=True)
        out.backward(_rand(2, 2, 8, 4).astype(np.float32))
    for a in (out.data, q.grad, k.grad, v.grad):
        assert np.all(np.isfinite(a))


# ---------------------------------------------------------------- 2. composite reference
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("shape", [(2, 3, 6, 4), (3, 1, 5)])
def test_matches_composite(shape, causal):
    q, k, v = _rand(*shape), _rand(*shape), _rand(*shape)
    G = _rand(*shape)
    got = _grads(lambda q, k, v: sdpa(q, k, v, is_causal=causal), [q, k, v], G)
    ref = _grads(lambda q, k, v: attention_composite(q, k, v, is_causal=causal), [q, k, v], G)
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-10)
    np.testing.assert_allclose(
        sdpa(Tensor(q), Tensor(k), Tensor(v), is_causal=causal).data,
        attention_composite(Tensor(q), Tensor(k), Tensor(v), is_causal=causal).data,
        rtol=0, atol=1e-12)


# ---------------------------------------------------------------- 3. closed form, dtypes
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_forward_per_head_loop(dtype, tol, causal):
    q, k, v = (_rand(2, 3, 7, 8).astype(dtype) for _ in range(3))
    v2 = _rand(2, 3, 7, 5).astype(dtype)
    qt, kt, vt = (Tensor(a, requires_grad=True) for a in (q, k, v2))
    out = sdpa(qt, kt, vt, is_causal=causal)
    assert out.dtype == dtype and out.shape == (2, 3, 7, 5)
    np.testing.assert_allclose(out.data, loop_reference(q, k, v2, causal), rtol=0, atol=tol)
    out.backward(np.ones(out.shape, dtype=dtype))
    assert qt.grad.dtype == kt.grad.dtype == vt.grad.dtype == dtype


def test_constants_and_partial_grads():
    q = Tensor(_rand(1, 2, 3, 4), requires_grad=True)
    k, v = _rand(1, 2, 3, 4), _rand(1, 2, 3, 4)     # plain arrays: constants
    out = sdpa(q, k, v, is_causal=True)
    out.backward(_rand(1, 2, 3, 4))
    assert q.grad is not None and q.grad.shape == (1, 2, 3, 4)
    assert not sdpa(k, k, v).requires_grad


def test_errors():
    a = Tensor(np.zeros((1, 2, 3, 4)))
    with pytest.raises(TypeError, match="dtype"):
        sdpa(a, Tensor(np.zeros((1, 2, 3, 4), dtype=np.float32)), a)
    with pytest.raises(TypeError):
        sdpa(Tensor(np.zeros((1, 2, 3, 4), dtype=np.int64)), a, a)
    with pytest.raises(ValueError, match="leading"):
        sdpa(a, Tensor(np.zeros((1, 3, 3, 4))), a)
    with pytest.raises(ValueError, match="head sizes"):
        sdpa(a, Tensor(np.zeros((1, 2, 3, 5))), a)
    with pytest.raises(ValueError, match="lengths"):
        sdpa(a, a, Tensor(np.zeros((1, 2, 4, 4))))
    with pytest.raises(TypeError):
        sdpa(a, a, a, is_causal="yes")
    with pytest.raises(ValueError):
        sdpa(Tensor(np.zeros(4)), a, a)
