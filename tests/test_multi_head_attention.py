"""Multi-head attention on a packed (B, T, 3C) projection (layers/attention.py,
``multi_head_attention``): central differences, a per-head loop in float64, the same graph in
separate nodes bit for bit, and bad input."""
import numpy as np
import pytest

import minigrad
from minigrad import Tensor
from layers.functional import multi_head_attention, scaled_dot_product_attention

RNG = np.random.default_rng(77)


def _separate_nodes(qkv, H, is_causal):
    """The same computation as reshape, transpose, three indexings, the attention node and a
    transpose and reshape back (the layout the GPT used before the fused node)."""
    B, T, W = qkv.shape
    s = qkv.reshape(B, T, 3, H, W // (3 * H)).transpose(2, 0, 3, 1, 4)
    y = scaled_dot_product_attention(s[0], s[1], s[2], is_causal=is_causal)
    return y.transpose(0, 2, 1, 3).reshape(B, T, W // 3)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("B,T,H,hs", [(1, 1, 1, 2), (2, 4, 2, 3), (3, 5, 3, 1)])
def test_gradcheck(B, T, H, hs, causal):
    qkv = Tensor(RNG.standard_normal((B, T, 3 * H * hs)), requires_grad=True)
    assert minigrad.gradcheck(lambda a: multi_head_attention(a, H, is_causal=causal), [qkv])


@pytest.mark.parametrize("causal", [False, True])
def test_forward_per_head_loop(causal):
    B, T, H, hs = 2, 5, 3, 4
    C = H * hs
    a = RNG.standard_normal((B, T, 3 * C))
    want = np.empty((B, T, C))
    for b in range(B):
        for h in range(H):
            cols = slice(h * hs, (h + 1) * hs)
            q, k, v = (a[b, :, i * C:(i + 1) * C][:, cols] for i in range(3))
            s = q @ k.T / np.sqrt(hs)
            if causal:
                s[np.triu_indices(T, 1)] = -np.inf
            p = np.exp(s - s.max(axis=1, keepdims=True))
            want[b, :, cols] = (p / p.sum(axis=1, keepdims=True)) @ v
    got = multi_head_attention(Tensor(a), H, is_causal=causal).data
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_same_as_separate_nodes_bit_for_bit(dtype):
    B, T, H, hs = 3, 6, 2, 4
    a = RNG.standard_normal((B, T, 3 * H * hs)).astype(dtype)
    g = RNG.standard_normal((B, T, H * hs)).astype(dtype)
    x1, x2 = Tensor(a.copy(), requires_grad=True), Tensor(a.copy(), requires_grad=True)
    y1 = multi_head_attention(x1, H, is_causal=True)
    y2 = _separate_nodes(x2, H, True)
    y1.backward(g)
    y2.backward(g)
    assert y1.dtype == dtype and x1.grad.dtype == dtype
    assert np.array_equal(y1.data, y2.data)
    assert np.array_equal(x1.grad, x2.grad)


def test_errors():
    a = Tensor(np.zeros((2, 3, 12)))
    with pytest.raises(TypeError, match="qkv"):
        multi_head_attention(Tensor(np.zeros((2, 3, 12), dtype=np.int64)), 2)
    with pytest.raises(ValueError, match=r"qkv must be 3-D \(B, T, 3C\), got shape \(3, 12\)"):
        multi_head_attention(Tensor(np.zeros((3, 12))), 2)
    with pytest.raises(ValueError, match="qkv's last axis 10 is not a multiple of 3"):
        multi_head_attention(Tensor(np.zeros((2, 3, 10))), 2)
    with pytest.raises(ValueError, match="qkv has an empty axis"):
        multi_head_attention(Tensor(np.zeros((2, 0, 12))), 2)
    with pytest.raises(ValueError, match="n_heads=3 does not divide"):
        multi_head_attention(a, 3)
    with pytest.raises(ValueError, match="n_heads"):
        multi_head_attention(a, 0)
    with pytest.raises(TypeError):
        multi_head_attention(a, 2, is_causal="yes")
