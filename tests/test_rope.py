"""RoPE (layers/rope.py) proven three ways: central differences, the composite reference, and an
explicit 2x2 rotation of every pair."""
import numpy as np
import pytest

import minigrad
from minigrad import Function, Tensor
from layers.functional import apply_rope, build_rope_cache
from layers.rope import rope_backward, rope_forward
from composite_core import rope_composite

RNG = np.random.default_rng(1234)


def explicit_rotation(x, base, positions):
    """Rotate each pair (x[2i], x[2i+1]) at position p by p * base^(-2i/hs), element by element
    with the 2x2 matrix [[c, -s], [s, c]]; x (..., T, hs), positions (T,). float64 angles."""
    hs = x.shape[-1]
    out = np.empty_like(x)
    for t, p in enumerate(positions):
        for i in range(hs // 2):
            a = float(p) * float(base) ** (-2.0 * i / hs)
            c, s = np.cos(a), np.sin(a)
            x0, x1 = x[..., t, 2 * i], x[..., t, 2 * i + 1]
            out[..., t, 2 * i] = c * x0 - s * x1
            out[..., t, 2 * i + 1] = s * x0 + c * x1
    return out


def _grads(fn, arrays, G):
    ts = [Tensor(a.copy(), requires_grad=True) for a in arrays]
    fn(*ts).backward(G)
    return [t.grad for t in ts]


# ---------------------------------------------------------------- build_rope_cache
def test_cache_shape_dtype_and_pairs():
    cos, sin = build_rope_cache(7, 8)
    assert cos.shape == sin.shape == (1, 1, 7, 8)
    assert cos.dtype == sin.dtype == np.float32
    np.testing.assert_array_equal(cos[..., 0::2], cos[..., 1::2])  # each angle repeated for its pair
    np.testing.assert_array_equal(sin[..., 0::2], sin[..., 1::2])
    cos64, sin64 = build_rope_cache(7, 8, base=500.0, dtype=np.float64)
    assert cos64.dtype == np.float64
    pos, i = np.arange(7)[:, None], np.arange(4)[None, :]
    ang = pos * 500.0 ** (-2.0 * i / 8)
    np.testing.assert_allclose(cos64[0, 0, :, 0::2], np.cos(ang), rtol=0, atol=1e-15)
    np.testing.assert_allclose(sin64[0, 0, :, 1::2], np.sin(ang), rtol=0, atol=1e-15)


def test_cache_angles_in_float64_past_1000():
    # Position 4000 of pair 0: angle 4000 rad. A float32 angle would be off by up to ~2e-4 rad.
    cos, sin = build_rope_cache(4001, 4, dtype=np.float32)
    assert abs(float(cos[0, 0, 4000, 0]) - np.cos(4000.0)) < 1e-7
    assert abs(float(sin[0, 0, 4000, 0]) - np.sin(4000.0)) < 1e-7


@pytest.mark.parametrize("hd", [3, 7, 1, 0])
def test_cache_odd_head_dim_is_an_error(hd):
    with pytest.raises(ValueError, match="even"):
        build_rope_cache(4, hd)


def test_cache_bad_args():
    with pytest.raises(ValueError):
        build_rope_cache(0, 4)
    with pytest.raises(TypeError):
        build_rope_cache(4.0, 4)
    with pytest.raises(ValueError):
        build_rope_cache(4, 4, base=0)
    with pytest.raises(TypeError):
        build_rope_cache(4, 4, dtype=np.int32)


# ---------------------------------------------------------------- 1. central differences
@pytest.mark.parametrize("shape", [(1, 1, 1, 2), (2, 3, 5, 4), (1, 2, 3, 8)])
def test_gradcheck(shape):
    x = Tensor(RNG.standard_normal(shape), requires_grad=True)
    cos, sin = build_rope_cache(shape[2], shape[3], dtype=np.float64)
    assert minigrad.gradcheck(lambda x: apply_rope(x, cos, sin), [x])


def test_gradcheck_non_contiguous():
    # x built as a transposed view (B, T, H, hs) -> (B, H, T, hs) inside the graph.
    base = Tensor(RNG.standard_normal((2, 4, 3, 6)), requires_grad=True)
    cos, sin = build_rope_cache(4, 6, dtype=np.float64)

    def fn(b):
        x = b.transpose(0, 2, 1, 3)
        assert not x.data.flags["C_CONTIGUOUS"]
        return apply_rope(x, cos, sin)

    assert minigrad.gradcheck(fn, [base])


def test_gradcheck_positions_past_1000():
    cos, sin = build_rope_cache(1030, 8, dtype=np.float64)
    cos, sin = cos[:, :, 1020:], sin[:, :, 1020:]
    x = Tensor(RNG.standard_normal((2, 2, 10, 8)), requires_grad=True)
    assert minigrad.gradcheck(lambda x: apply_rope(x, cos, sin), [x])


def test_gradcheck_catches_rotation_the_wrong_way():
    class WrongRoPE(Function):
        @staticmethod
        def forward(ctx, x, cos, sin):
            out, ctx.cache = rope_forward(x, cos, sin)
            return out

        @staticmethod
        def backward(ctx, dout):
            cos, sin = ctx.cache
            return rope_backward(dout, (cos, -sin)), None, None  # rotation by +theta

    cos, sin = build_rope_cache(4, 4, dtype=np.float64)
    x = Tensor(RNG.standard_normal((1, 2, 4, 4)), requires_grad=True)
    with pytest.raises(minigrad.GradcheckError):
        minigrad.gradcheck(lambda x: WrongRoPE.apply(x, cos, sin), [x])


# ---------------------------------------------------------------- 2. composite reference
@pytest.mark.parametrize("shape,start", [((2, 3, 6, 8), 0), ((1, 2, 5, 4), 1500)])
def test_matches_composite(shape, start):
    T, hs = shape[2], shape[3]
    cos, sin = build_rope_cache(start + T, hs, base=777, dtype=np.float64)
    cos, sin = cos[:, :, start:], sin[:, :, start:]
    x = RNG.standard_normal(shape)
    G = RNG.standard_normal(shape)
    (dx,) = _grads(lambda x: apply_rope(x, cos, sin), [x], G)
    (dx_ref,) = _grads(lambda x: rope_composite(x, cos, sin), [x], G)
    np.testing.assert_allclose(dx, dx_ref, rtol=0, atol=1e-10)
    out = apply_rope(Tensor(x), cos, sin).data
    np.testing.assert_allclose(out, rope_composite(Tensor(x), cos, sin).data, rtol=0, atol=1e-10)


# ---------------------------------------------------------------- 3. closed form, dtypes
@pytest.mark.parametrize("dtype,tol", [(np.float64, 1e-12), (np.float32, 2e-6)])
def test_forward_is_the_2x2_rotation(dtype, tol):
    start, T, hs = 1000, 6, 8
    cos, sin = build_rope_cache(start + T, hs, dtype=dtype)
    x = RNG.standard_normal((2, 3, T, hs)).astype(dtype)
    out = apply_rope(Tensor(x, requires_grad=True), cos[:, :, start:], sin[:, :, start:])
    assert out.dtype == dtype
    ref = explicit_rotation(x.astype(np.float64), 10000, np.arange(start, start + T))
    np.testing.assert_allclose(out.data, ref, rtol=0, atol=tol * 4)


def test_backward_is_rotation_by_minus_theta_and_preserves_norm():
    # The rotation is orthogonal: dx is dout rotated back (explicit rotation with -positions).
    T, hs = 5, 6
    cos, sin = build_rope_cache(T, hs, dtype=np.float64)
    G = RNG.standard_normal((1, 2, T, hs))
    x = Tensor(RNG.standard_normal((1, 2, T, hs)), requires_grad=True)
    apply_rope(x, cos, sin).backward(G)
    np.testing.assert_allclose(x.grad, explicit_rotation(G, 10000, -np.arange(T)), atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(x.grad), np.linalg.norm(G), rtol=1e-12)


def test_float32_in_float32_out_and_grad():
    cos, sin = build_rope_cache(4, 4)  # float32
    x = Tensor(RNG.standard_normal((2, 2, 4, 4)).astype(np.float32), requires_grad=True)
    out = apply_rope(x, cos, sin)
    out.backward(np.ones(out.shape, dtype=np.float32))
    assert out.dtype == np.float32 and x.grad.dtype == np.float32
    # float64 x with the float32 default cache computes in float64
    x64 = Tensor(RNG.standard_normal((2, 2, 4, 4)), requires_grad=True)
    assert apply_rope(x64, cos, sin).dtype == np.float64


def test_plain_array_is_constant_and_tensor_tables_accepted():
    cos, sin = build_rope_cache(3, 4, dtype=np.float64)
    x = RNG.standard_normal((1, 1, 3, 4))
    out = apply_rope(x, Tensor(cos), Tensor(sin))
    assert isinstance(out, Tensor) and not out.requires_grad


# ---------------------------------------------------------------- errors
def test_errors():
    cos, sin = build_rope_cache(8, 4, dtype=np.float64)
    x = Tensor(RNG.standard_normal((1, 1, 4, 4)), requires_grad=True)
    with pytest.raises(ValueError, match="broadcast"):
        apply_rope(x, cos, sin)  # cache longer than T, not sliced
    with pytest.raises(ValueError, match="even"):
        apply_rope(Tensor(np.zeros((1, 1, 4, 3))), cos[..., :3], sin[..., :3])
    with pytest.raises(TypeError):
        apply_rope(Tensor(np.zeros((1, 1, 4, 4), dtype=np.int64)), cos[:, :, :4], sin[:, :, :4])
    with pytest.raises(ValueError, match="constant"):
        apply_rope(x, Tensor(cos[:, :, :4], requires_grad=True), sin[:, :, :4])
