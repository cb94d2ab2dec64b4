"""layers.modules: parameter names, shapes, PyTorch-default init, forward values, errors."""
import math
import re

import numpy as np
import pytest

from minigrad import Tensor, gradcheck
from layers.functional import layer_norm
from layers.modules import (MLP, CausalSelfAttention, Embedding, LayerNorm, Linear, RMSNorm,
                            SwiGLU)


def names_shapes(m):
    return [(n, p.shape) for n, p in m.named_parameters()]


def test_norms_init_and_names():
    ln = LayerNorm(6)
    assert names_shapes(ln) == [("weight", (6,)), ("bias", (6,))]
    assert np.all(ln.weight.data == 1) and np.all(ln.bias.data == 0) and ln.eps == 1e-5
    rms = RMSNorm(5, dtype=np.float64)
    assert names_shapes(rms) == [("weight", (5,))]
    assert rms.weight.dtype == np.float64 and rms.eps is None and (  # torch.nn.RMSNorm's eps=None
            np.all(rms.weight.data == 1))
    assert ln.weight.dtype == np.float32


def test_norm_forward_values():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 6)) * 3 + 1
    ln = LayerNorm(6, dtype=np.float64)
    ln.weight.data[...] = rng.standard_normal(6)
    ln.bias.data[...] = rng.standard_normal(6)
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    expect = (x - mu) / np.sqrt(var + 1e-5) * ln.weight.data + ln.bias.data
    np.testing.assert_allclose(ln(Tensor(x)).data, expect, rtol=1e-12, atol=1e-12)
    rms = RMSNorm(6, eps=1e-6, dtype=np.float64)
    rms.weight.data[...] = rng.standard_normal(6)
    expect = x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-6) * rms.weight.data
    np.testing.assert_allclose(rms(Tensor(x)).data, expect, rtol=1e-12, atol=1e-12)


def test_layernorm_without_bias_is_torchs_bias_false():
    # torch.nn.LayerNorm(C, bias=False) (PyTorch >= 2.1): no bias parameter, a shift of 0
    rng = np.random.default_rng(9)
    for shape in (6, (3, 6)):
        ln = LayerNorm(shape, bias=False, dtype=np.float64)
        assert ln.bias is None and [n for n, _ in ln.named_parameters()] == ["weight"]
        ln.weight.data[...] = rng.standard_normal(ln.weight.shape)
        x = Tensor(rng.standard_normal((2, 3, 6)), requires_grad=True)
        assert gradcheck(lambda x, w: ln(x), [x, ln.weight])
        ref = layer_norm(x, shape, ln.weight)
        np.testing.assert_array_equal(ln(x).data, ref.data)


def test_linear_init_follows_pytorch_bounds_and_layout():
    rng = np.random.default_rng(1)
    lin = Linear(200, 300, rng=rng)
    assert names_shapes(lin) == [("weight", (300, 200)), ("bias", (300,))]
    assert lin.weight.dtype == np.float32 and lin.bias.dtype == np.float32
    bound = 1 / math.sqrt(200)
    w = lin.weight.data.astype(np.float64)
    assert np.abs(w).max() <= bound and np.abs(lin.bias.data).max() <= bound
    # U(-b, b): mean 0, variance b^2 / 3 (60000 draws: standard error of the std ~ 0.2%)
    assert abs(w.mean()) < 0.01 * bound
    assert w.std() == pytest.approx(bound / math.sqrt(3), rel=0.02)
    assert np.abs(w).max() > 0.99 * bound  # the whole range is used
    nob = Linear(4, 3, bias=False, rng=rng)
    assert names_shapes(nob) == [("weight", (3, 4))] and nob.bias is None


def test_linear_draws_weight_then_bias_from_the_generator():
    lin = Linear(3, 2, rng=np.random.default_rng(7), dtype=np.float64)
    ref = np.random.default_rng(7)
    b = 1 / math.sqrt(3)
    np.testing.assert_array_equal(lin.weight.data, ref.uniform(-b, b, (2, 3)))
    np.testing.assert_array_equal(lin.bias.data, ref.uniform(-b, b, 2))


def test_linear_forward():
    rng = np.random.default_rng(2)
    lin = Linear(4, 3, rng=rng, dtype=np.float64)
    x = rng.standard_normal((2, 5, 4))
    np.testing.assert_allclose(lin(Tensor(x)).data, x @ lin.weight.data.T + lin.bias.data,
                               rtol=1e-13)


def test_embedding_init_and_forward():
    rng = np.random.default_rng(3)
    emb = Embedding(500, 64, rng=rng)
    assert names_shapes(emb) == [("weight", (500, 64))]
    w = emb.weight.data.astype(np.float64)
    assert abs(w.mean()) < 0.02 and w.std() == pytest.approx(1.0, rel=0.02)
    idx = np.array([[1, 499, 1], [0, 2, 3]])
    out = emb(idx)
    assert out.shape == (2, 3, 64) and out.dtype == np.float32
    np.testing.assert_array_equal(out.data, emb.weight.data[idx])


def test_swiglu_names_hidden_width_and_forward():
    rng = np.random.default_rng(4)
    m = SwiGLU(64, rng=rng)
    assert m.hidden == 170  # int(64 * 8/3)
    assert names_shapes(m) == [("gate_proj.weight", (170, 64)), ("up_proj.weight", (170, 64)),
                               ("down_proj.weight", (64, 170))]
    assert m.num_parameters() == 3 * 64 * 170
    m = SwiGLU(6, hidden_mult=2.0, rng=rng, dtype=np.float64)
    x = rng.standard_normal((2, 3, 6))
    g = x @ m.gate_proj.weight.data.T
    u = x @ m.up_proj.weight.data.T
    expect = (g / (1 + np.exp(-g)) * u) @ m.down_proj.weight.data.T
    np.testing.assert_allclose(m(Tensor(x)).data, expect, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("activation", ["gelu", "relu2"])
def test_mlp_names_and_forward(activation):
    rng = np.random.default_rng(5)
    m = MLP(6, activation=activation, rng=rng, dtype=np.float64)
    assert names_shapes(m) == [("c_fc.weight", (24, 6)), ("c_fc.bias", (24,)),
                               ("c_proj.weight", (6, 24)), ("c_proj.bias", (6,))]
    x = rng.standard_normal((2, 3, 6))
    h = x @ m.c_fc.weight.data.T + m.c_fc.bias.data
    if activation == "gelu":
        h = 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))
    else:
        h = np.maximum(h, 0) ** 2
    expect = h @ m.c_proj.weight.data.T + m.c_proj.bias.data
    np.testing.assert_allclose(m(Tensor(x)).data, expect, rtol=1e-12, atol=1e-14)


def reference_attention(x, m, rope=False):
    """nanoGPT's attention written out in NumPy (mask with -inf, softmax, weighted sum)."""
    B, T, C = x.shape
    H, hs = m.n_heads, C // m.n_heads
    qkv = x @ m.c_attn.weight.data.T + m.c_attn.bias.data
    q, k, v = (a.reshape(B, T, H, hs).transpose(0, 2, 1, 3) for a in np.split(qkv, 3, axis=-1))
    if rope:
        pos = np.arange(T)[:, None]
        inv = 10000.0 ** (-np.arange(0, hs, 2) / hs)
        ang = np.repeat(pos * inv, 2, axis=-1)
        cos, sin = np.cos(ang), np.sin(ang)

        def rot(a):
            r = np.empty_like(a)
            r[..., 0::2], r[..., 1::2] = -a[..., 1::2], a[..., 0::2]
            return a * cos + r * sin
        q, k = rot(q), rot(k)
    att = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hs)
    att = np.where(np.tril(np.ones((T, T), bool)), att, -np.inf)
    att = np.exp(att - att.max(-1, keepdims=True))
    att /= att.sum(-1, keepdims=True)
    y = (att @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
    return y @ m.c_proj.weight.data.T + m.c_proj.bias.data


@pytest.mark.parametrize("rope", [False, True])
def test_attention_names_and_forward(rope):
    rng = np.random.default_rng(6)
    m = CausalSelfAttention(8, 2, rope=rope, block_size=5, rng=rng, dtype=np.float64)
    assert names_shapes(m) == [("c_attn.weight", (24, 8)), ("c_attn.bias", (24,)),
                               ("c_proj.weight", (8, 8)), ("c_proj.bias", (8,))]
    x = rng.standard_normal((2, 5, 8))
    np.testing.assert_allclose(m(Tensor(x)).data, reference_attention(x, m, rope),
                               rtol=1e-11, atol=1e-13)
    # shorter sequences use the first rows of the RoPE table
    np.testing.assert_allclose(m(Tensor(x[:, :3])).data, reference_attention(x[:, :3], m, rope),
                               rtol=1e-11, atol=1e-13)


def test_attention_float32_and_errors():
    rng = np.random.default_rng(7)
    m = CausalSelfAttention(8, 2, rope=True, block_size=4, rng=rng)
    y = m(Tensor(rng.standard_normal((1, 4, 8)).astype(np.float32)))
    assert y.dtype == np.float32
    with pytest.raises(ValueError, match="block_size"):
        m(Tensor(np.zeros((1, 5, 8), np.float32)))
    with pytest.raises(ValueError, match="divide"):
        CausalSelfAttention(10, 4)
    with pytest.raises(ValueError, match="even head_dim"):
        CausalSelfAttention(6, 2, rope=True)


def test_constructor_errors():
    with pytest.raises(ValueError):
        Linear(0, 3)
    with pytest.raises(TypeError):
        Linear(2.5, 3)
    with pytest.raises(TypeError):
        Embedding(3, 2, rng=42)
    with pytest.raises(ValueError, match="activation"):
        MLP(4, activation="tanh")
    with pytest.raises(TypeError):
        LayerNorm(4, dtype=np.int32)


def test_module_gradients_reach_every_parameter():
    rng = np.random.default_rng(8)
    m = CausalSelfAttention(8, 2, rng=rng, dtype=np.float64)
    x = Tensor(rng.standard_normal((2, 3, 8)), requires_grad=True)
    m(x).backward(rng.standard_normal((2, 3, 8)))
    for name, p in m.named_parameters():
        assert p.grad is not None and p.grad.shape == p.shape and np.any(p.grad != 0), name
    assert x.grad is not None


MODULES = [(lambda: Linear(8, 4), "Linear"), (lambda: LayerNorm(8), "LayerNorm"),
           (lambda: RMSNorm(8), "RMSNorm"), (lambda: SwiGLU(8), "SwiGLU"),
           (lambda: LayerNorm((2, 8)), "LayerNorm")]


@pytest.mark.parametrize("make, fn", MODULES, ids=[f for _, f in MODULES])
def test_a_module_refuses_an_input_of_another_dtype_or_width_at_its_boundary(make, fn):
    # before the check, float64 went through and backward failed inside the layer's node
    m = make()
    width = m.normalized_shape if isinstance(m, (LayerNorm, RMSNorm)) else (8,)
    shown = ", ".join(map(str, width))
    with pytest.raises(TypeError, match=f"^{fn}: input is float64 but weight is float32; "
                                        f"use one dtype$"):
        m(Tensor(np.zeros((2,) + width), requires_grad=True))
    with pytest.raises(TypeError, match=f"^{fn}: input must have a floating dtype, got int64$"):
        m(np.zeros((2,) + width, np.int64))
    for shape in ((2, 7), (8,)[:0], (2,) + width[:-1] + (9,)):
        with pytest.raises(ValueError, match=rf"^{fn}: input has shape {re.escape(str(shape))}, "
                                             rf"expected \(\*, {shown}\)$"):
            m(Tensor(np.zeros(shape, np.float32)))
    y = m(Tensor(np.ones((3,) + width, np.float32), requires_grad=True))
    assert y.dtype == np.float32


def test_a_norm_without_parameters_takes_either_float_dtype():
    for m in (LayerNorm(8, elementwise_affine=False), RMSNorm(8, elementwise_affine=False)):
        for dt in (np.float32, np.float64):
            assert m(Tensor(np.ones((2, 8), dt))).dtype == dt


REPRS = [  # (module, its repr: PyTorch 2.13's for the same constructor call)
    (lambda nn: nn.Linear(8, 4), "Linear(in_features=8, out_features=4, bias=True)"),
    (lambda nn: nn.Linear(8, 4, bias=False), "Linear(in_features=8, out_features=4, bias=False)"),
    (lambda nn: nn.LayerNorm(8), "LayerNorm((8,), eps=1e-05, elementwise_affine=True, bias=True)"),
    (lambda nn: nn.LayerNorm((2, 8), 1e-6, False),
     "LayerNorm((2, 8), eps=1e-06, elementwise_affine=False, bias=False)"),
    (lambda nn: nn.RMSNorm(8), "RMSNorm((8,), eps=None, elementwise_affine=True)"),
    (lambda nn: nn.BatchNorm1d(4),
     "BatchNorm1d(4, eps=1e-05, momentum=0.1, affine=True, bias=True, track_running_stats=True)"),
    (lambda nn: nn.BatchNorm1d(4, 1e-3, None, False, False),
     "BatchNorm1d(4, eps=0.001, momentum=None, affine=False, bias=False, "
     "track_running_stats=False)"),
    (lambda nn: nn.BatchNorm1d(4, bias=False),
     "BatchNorm1d(4, eps=1e-05, momentum=0.1, affine=True, bias=False, track_running_stats=True)"),
    (lambda nn: nn.Embedding(10, 3), "Embedding(10, 3)"),
    (lambda nn: nn.Identity(), "Identity()"),
    (lambda nn: nn.Sequential(nn.Linear(4, 16), nn.Identity()),
     "Sequential(\n  (0): Linear(in_features=4, out_features=16, bias=True)\n  (1): Identity()\n)"),
]


@pytest.mark.parametrize("make, text", REPRS, ids=[t.split("(")[0] + str(i)
                                                   for i, (_, t) in enumerate(REPRS)])
def test_a_module_repr_shows_its_settings_as_pytorchs(make, text):
    import types

    from minigrad import Sequential
    import layers.modules as m
    ours = types.SimpleNamespace(**{n: getattr(m, n) for n in m.__all__}, Sequential=Sequential)
    assert repr(make(ours)) == text


@pytest.mark.slow
@pytest.mark.parametrize("make, text", REPRS, ids=[t.split("(")[0] + str(i)
                                                   for i, (_, t) in enumerate(REPRS)])
def test_the_reprs_are_the_installed_pytorchs(make, text):
    torch = pytest.importorskip("torch")
    assert repr(make(torch.nn)) == text
