"""gpt.GPTConfig and gpt.GPT: parameter counts and names, shapes, tying, causality, dtypes,
errors, and a whole-model gradient check of every variant."""
import itertools
import math

import numpy as np
import pytest

import minigrad
from minigrad import Tensor
from gpt import GPT, GPTConfig
from layers.functional import cross_entropy, embedding, linear


# ---------------------------------------------------------------- config
def test_config_defaults_are_the_chapters_tiny_model():
    c = GPTConfig(vocab_size=48)
    assert (c.block_size, c.n_layers, c.n_heads, c.d_model) == (32, 2, 4, 64)
    assert (c.norm, c.mlp, c.pos, c.dtype) == ("ln", "gelu", "learned", "float32")
    assert c.head_dim == 16


def test_config_round_trips_through_a_dict():
    c = GPTConfig(vocab_size=7, block_size=4, n_layers=1, n_heads=2, d_model=8, norm="rms",
                  mlp="swiglu", pos="rope", dtype="float64")
    d = c.to_dict()
    assert d["norm"] == "rms" and d["vocab_size"] == 7
    assert GPTConfig.from_dict(d) == c
    with pytest.raises(ValueError, match="unknown field"):
        GPTConfig.from_dict({**d, "dropout": 0.1})


@pytest.mark.parametrize("kwargs, word", [
    ({"vocab_size": 0}, "vocab_size"),
    ({"vocab_size": 5, "block_size": -1}, "block_size"),
    ({"vocab_size": 5, "n_layers": 0}, "n_layers"),
    ({"vocab_size": 5, "n_heads": 3}, "divide"),
    ({"vocab_size": 5, "d_model": 12, "n_heads": 4, "pos": "rope"}, "even head_dim"),
    ({"vocab_size": 5, "norm": "batch"}, "norm"),
    ({"vocab_size": 5, "mlp": "tanh"}, "mlp"),
    ({"vocab_size": 5, "pos": "alibi"}, "pos"),
    ({"vocab_size": 5, "dtype": "float16"}, "dtype"),
])
def test_config_rejects_bad_values(kwargs, word):
    with pytest.raises(ValueError, match=word):
        GPTConfig(**kwargs)


def test_config_rejects_non_integers():
    with pytest.raises(TypeError, match="d_model"):
        GPTConfig(vocab_size=5, d_model=64.0)
    with pytest.raises(TypeError, match="n_layers"):
        GPTConfig(vocab_size=5, n_layers=True)


# ---------------------------------------------------------------- structure
@pytest.mark.parametrize("norm, mlp, count", [
    ("ln", "gelu", 105216), ("rms", "gelu", 104896),
    ("ln", "swiglu", 104320), ("rms", "swiglu", 104000),
])
def test_parameter_counts_match_the_chapters_run_log(norm, mlp, count):
    # counts printed by the chapter's PyTorch build.py for a 48-character vocabulary
    model = GPT(GPTConfig(vocab_size=48, norm=norm, mlp=mlp))
    assert model.num_parameters() == count
    assert sum(a.size for a in model.state_dict().values()) == count


def test_parameter_names_and_shapes():
    m = GPT(GPTConfig(vocab_size=10, block_size=6, n_layers=2, n_heads=2, d_model=8))
    expect = [("token_embedding.weight", (10, 8)), ("position_embedding.weight", (6, 8))]
    for i in range(2):
        b = f"blocks.{i}."
        expect += [(b + "ln1.weight", (8,)), (b + "ln1.bias", (8,)),
                   (b + "attn.c_attn.weight", (24, 8)), (b + "attn.c_attn.bias", (24,)),
                   (b + "attn.c_proj.weight", (8, 8)), (b + "attn.c_proj.bias", (8,)),
                   (b + "ln2.weight", (8,)), (b + "ln2.bias", (8,)),
                   (b + "mlp.c_fc.weight", (32, 8)), (b + "mlp.c_fc.bias", (32,)),
                   (b + "mlp.c_proj.weight", (8, 32)), (b + "mlp.c_proj.bias", (8,))]
    expect += [("ln_f.weight", (8,)), ("ln_f.bias", (8,))]
    assert [(n, p.shape) for n, p in m.named_parameters()] == expect
    assert list(m.state_dict()) == [n for n, _ in expect]


def test_parameter_names_rms_swiglu_rope():
    m = GPT(GPTConfig(vocab_size=10, block_size=6, n_layers=1, n_heads=2, d_model=8,
                      norm="rms", mlp="swiglu", pos="rope"))
    names = [n for n, _ in m.named_parameters()]
    assert names == ["token_embedding.weight", "blocks.0.ln1.weight",
                     "blocks.0.attn.c_attn.weight", "blocks.0.attn.c_attn.bias",
                     "blocks.0.attn.c_proj.weight", "blocks.0.attn.c_proj.bias",
                     "blocks.0.ln2.weight", "blocks.0.mlp.gate_proj.weight",
                     "blocks.0.mlp.up_proj.weight", "blocks.0.mlp.down_proj.weight",
                     "ln_f.weight"]
    assert m.blocks[0].mlp.gate_proj.weight.shape == (21, 8)  # int(8 * 8/3)


def test_init_is_seeded_in_the_documented_order():
    cfg = GPTConfig(vocab_size=11, block_size=5, n_layers=1, n_heads=2, d_model=8,
                    dtype="float64")
    m = GPT(cfg, seed=3)
    rng = np.random.default_rng(3)
    np.testing.assert_array_equal(m.token_embedding.weight.data, rng.standard_normal((11, 8)))
    np.testing.assert_array_equal(m.position_embedding.weight.data, rng.standard_normal((5, 8)))
    b = 1 / math.sqrt(8)
    np.testing.assert_array_equal(m.blocks[0].attn.c_attn.weight.data, rng.uniform(-b, b, (24, 8)))
    assert np.all(m.blocks[0].ln1.weight.data == 1) and np.all(m.ln_f.bias.data == 0)
    for (n1, a1), (n2, a2) in zip(GPT(cfg, seed=3).state_dict().items(), m.state_dict().items()):
        assert n1 == n2 and np.array_equal(a1, a2)
    other = GPT(cfg, seed=4).state_dict()
    assert not np.array_equal(other["token_embedding.weight"], m.token_embedding.weight.data)


# ---------------------------------------------------------------- forward
def _batch(rng, V, B, T):
    return rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))


def test_shapes_and_float32_stays_float32():
    cfg = GPTConfig(vocab_size=13, block_size=8, n_layers=2, n_heads=2, d_model=16)
    m = GPT(cfg)
    rng = np.random.default_rng(0)
    idx, tgt = _batch(rng, 13, 3, 8)
    logits, loss = m(idx, tgt)
    assert logits.shape == (3, 8, 13) and logits.dtype == np.float32
    assert loss.shape == () and loss.dtype == np.float32
    assert np.isfinite(loss.item()) and loss.item() > 0
    loss.backward()
    for n, p in m.named_parameters():
        assert p.grad is not None and p.grad.dtype == np.float32, n
    logits, none = m(idx[:, :5])
    assert logits.shape == (3, 5, 13) and none is None
    assert all(p.dtype == np.float32 for p in m.parameters())
    assert m.config is cfg


def test_loss_is_the_mean_cross_entropy_of_the_logits():
    cfg = GPTConfig(vocab_size=9, block_size=6, n_layers=1, n_heads=2, d_model=8,
                    dtype="float64")
    m = GPT(cfg)
    idx, tgt = _batch(np.random.default_rng(1), 9, 2, 6)
    logits, loss = m(idx, tgt)
    z = logits.data.reshape(-1, 9)
    lse = np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1)
    expect = np.mean(lse - z[np.arange(12), tgt.reshape(-1)])
    assert loss.item() == pytest.approx(expect, rel=1e-13)


@pytest.mark.parametrize("pos", ["learned", "rope"])
def test_causal_a_future_token_does_not_change_earlier_logits(pos):
    cfg = GPTConfig(vocab_size=10, block_size=7, n_layers=2, n_heads=2, d_model=8, pos=pos,
                    dtype="float64")
    m = GPT(cfg, seed=1)
    rng = np.random.default_rng(2)
    idx = rng.integers(0, 10, (2, 7))
    base, _ = m(idx)
    for t in (3, 6):
        changed = idx.copy()
        changed[:, t] = (changed[:, t] + 1) % 10
        out, _ = m(changed)
        np.testing.assert_allclose(out.data[:, :t], base.data[:, :t], rtol=1e-13, atol=1e-13)
        assert np.all(np.abs(out.data[:, t] - base.data[:, t]).max(-1) > 1e-6)


def test_rope_model_has_no_position_table_but_sees_order():
    cfg = GPTConfig(vocab_size=10, block_size=6, n_layers=1, n_heads=2, d_model=8, pos="rope",
                    dtype="float64")
    m = GPT(cfg)
    assert "position_embedding.weight" not in m.state_dict()
    a, _ = m(np.array([[1, 2, 3]]))
    b, _ = m(np.array([[2, 1, 3]]))
    assert np.abs(a.data[0, 2] - b.data[0, 2]).max() > 1e-6  # same tokens, other order


def _untied_loss(m, idx, tgt, head_weight):
    """The model's forward with the output projection reading ``head_weight`` instead of the
    token embedding (same blocks, same norms)."""
    B, T = idx.shape
    x = embedding(idx, m.token_embedding.weight)
    x = x + embedding(np.arange(T), m.position_embedding.weight)
    for block in m.blocks:
        x = block(x)
    logits = linear(m.ln_f(x), head_weight)
    return cross_entropy(logits.reshape(B * T, -1), tgt.reshape(-1))


def test_tied_weight_receives_both_gradient_contributions():
    cfg = GPTConfig(vocab_size=12, block_size=5, n_layers=1, n_heads=2, d_model=8,
                    dtype="float64")
    m = GPT(cfg, seed=5)
    idx = np.array([[0, 1, 2, 1, 3], [3, 3, 0, 2, 1]])   # tokens 4..11 never appear in idx
    tgt = np.array([[1, 2, 1, 3, 5], [3, 0, 2, 1, 7]])
    _, loss = m(idx, tgt)
    loss.backward()
    tied = m.token_embedding.weight.grad.copy()

    m.zero_grad()
    head = Tensor(m.token_embedding.weight.data.copy(), requires_grad=True)
    loss2 = _untied_loss(m, idx, tgt, head)
    assert loss2.item() == pytest.approx(loss.item(), rel=1e-14)
    loss2.backward()
    from_embedding, from_head = m.token_embedding.weight.grad, head.grad
    assert np.abs(from_embedding).max() > 1e-3 and np.abs(from_head).max() > 1e-3
    np.testing.assert_allclose(tied, from_embedding + from_head, rtol=1e-12, atol=1e-15)
    # rows never looked up get only the output projection's gradient
    assert np.all(from_embedding[4:] == 0)
    np.testing.assert_allclose(tied[4:], from_head[4:], rtol=1e-12, atol=1e-15)
    assert "lm_head.weight" not in m.state_dict()


def test_float64_end_to_end():
    cfg = GPTConfig(vocab_size=7, block_size=4, n_layers=1, n_heads=2, d_model=8, norm="rms",
                    mlp="swiglu", dtype="float64")
    m = GPT(cfg)
    logits, loss = m(*_batch(np.random.default_rng(3), 7, 2, 4))
    assert logits.dtype == np.float64 and loss.dtype == np.float64
    loss.backward()
    assert all(p.grad.dtype == np.float64 for p in m.parameters())


def test_state_dict_round_trip_reproduces_the_logits():
    cfg = GPTConfig(vocab_size=7, block_size=4, n_layers=1, n_heads=2, d_model=8)
    a, b = GPT(cfg, seed=0), GPT(cfg, seed=1)
    idx = np.array([[1, 2, 3, 4]])
    b.load_state_dict(a.state_dict())
    np.testing.assert_array_equal(a(idx)[0].data, b(idx)[0].data)


def test_bad_inputs_raise():
    m = GPT(GPTConfig(vocab_size=5, block_size=4, n_layers=1, n_heads=2, d_model=8))
    with pytest.raises(ValueError, match="block_size"):
        m(np.zeros((1, 5), dtype=np.int64))
    with pytest.raises(IndexError, match="token id 5"):     # PyTorch: IndexError too
        m(np.array([[0, 5]]))
    with pytest.raises(IndexError, match="token id -1"):
        m(np.array([[0, -1]]))
    with pytest.raises(IndexError, match="token id 9"):
        m(np.array([[0, 1]]), np.array([[0, 9]]))
    with pytest.raises(ValueError, match="shape"):
        m(np.array([0, 1]))
    with pytest.raises(ValueError, match="targets shape"):
        m(np.array([[0, 1]]), np.array([[0, 1, 2]]))
    with pytest.raises(TypeError, match="integer"):
        m(np.array([[0.0, 1.0]]))
    with pytest.raises(TypeError):
        GPT({"vocab_size": 5}, seed=1.5)
    # an index Tensor is accepted
    assert m(Tensor(np.array([[0, 1]])))[0].shape == (1, 2, 5)


# ---------------------------------------------------------------- whole-model gradient check
VARIANTS = list(itertools.product(["ln", "rms"], ["gelu", "swiglu", "relu2"], ["learned", "rope"]))


@pytest.mark.parametrize("norm, mlp, pos", VARIANTS)
def test_whole_model_gradcheck(norm, mlp, pos):
    cfg = GPTConfig(vocab_size=7, block_size=4, n_layers=2, n_heads=2, d_model=8, norm=norm,
                    mlp=mlp, pos=pos, dtype="float64")
    m = GPT(cfg, seed=11)
    rng = np.random.default_rng(12)
    # non-unit gains and non-zero biases, so no norm parameter sits at a special point
    for name, p in m.named_parameters():
        if ".ln" in name or name.startswith("ln_f"):
            p.data[...] = (1.0 + 0.3 * rng.standard_normal(p.shape)) if name.endswith(
                "weight") else 0.2 * rng.standard_normal(p.shape)
    idx, tgt = rng.integers(0, 7, (2, 4)), rng.integers(0, 7, (2, 4))

    def loss_fn(*params):  # the params are the model's own Parameters, perturbed in place
        return m(idx, tgt)[1]

    params = list(m.parameters())
    # all parameters jointly, then each parameter on its own (so a small one cannot hide)
    assert minigrad.gradcheck(loss_fn, params, fast_mode=True, seed=0)
    for i, p in enumerate(params):
        assert minigrad.gradcheck(loss_fn, [p], fast_mode=True, seed=i + 1)


class _WrongBackward(minigrad.Function):
    """Identity whose backward is off by 1%: a planted bug."""

    @staticmethod
    def forward(ctx, a):
        return a.copy()

    @staticmethod
    def backward(ctx, dout):
        return dout * 1.01


def test_whole_model_gradcheck_catches_a_planted_error_in_a_small_parameter():
    from layers.functional import layer_norm
    cfg = GPTConfig(vocab_size=7, block_size=4, n_layers=1, n_heads=2, d_model=8,
                    dtype="float64")
    m = GPT(cfg, seed=11)
    rng = np.random.default_rng(13)
    m.ln_f.bias.data[...] = rng.standard_normal(8)
    ln_f = m.ln_f
    ln_f.forward = lambda x: layer_norm(x, x.shape[-1], ln_f.weight, _WrongBackward.apply(ln_f.bias))
    idx, tgt = rng.integers(0, 7, (2, 4)), rng.integers(0, 7, (2, 4))
    with pytest.raises(minigrad.GradcheckError):
        minigrad.gradcheck(lambda *p: m(idx, tgt)[1], [m.ln_f.bias], fast_mode=True)
    assert minigrad.gradcheck(lambda *p: m(idx, tgt)[1], [m.ln_f.weight], fast_mode=True)


# ---------------------------------------------------------------- nanoGPT's bias
def _nanogpt_num_parameters(V, T, n_layers, C, bias):
    """nanoGPT model.py's parameter count: wte V*C, wpe T*C; per Block ln_1, attn.c_attn (3C, C),
    attn.c_proj (C, C), ln_2, mlp.c_fc (4C, C), mlp.c_proj (C, 4C); ln_f; lm_head tied to wte.
    With bias each LayerNorm and Linear adds a vector of its output width."""
    def linear(o, i):
        return o * i + (o if bias else 0)
    ln = C + (C if bias else 0)
    block = ln + linear(3 * C, C) + linear(C, C) + ln + linear(4 * C, C) + linear(C, 4 * C)
    return V * C + T * C + n_layers * block + ln


@pytest.mark.parametrize("bias, count", [(False, 804_096), (True, 809_856)])
def test_parameter_count_of_nanogpts_shakespeare_char_cpu_model(bias, count):
    # nanoGPT's config/train_shakespeare_char.py with its CPU settings (block_size 64, 4 layers,
    # 4 heads, n_embd 128, bias=False), vocabulary 65
    assert _nanogpt_num_parameters(65, 64, 4, 128, bias) == count
    cfg = GPTConfig(vocab_size=65, block_size=64, n_layers=4, n_heads=4, d_model=128,
                    norm="ln", mlp="gelu", pos="learned", bias=bias)
    m = GPT(cfg)
    assert m.num_parameters() == count
    assert any(n.endswith("bias") for n, _ in m.named_parameters()) == bias


@pytest.mark.parametrize("norm, mlp, pos", [("ln", "gelu", "learned"), ("ln_rms", "relu2", "rope"),
                                            ("rms", "swiglu", "learned")])
def test_without_bias_no_linear_and_no_layernorm_has_one(norm, mlp, pos):
    cfg = GPTConfig(vocab_size=7, block_size=4, n_layers=2, n_heads=2, d_model=8, norm=norm,
                    mlp=mlp, pos=pos, dtype="float64", bias=False)
    m = GPT(cfg, seed=11)
    with_bias = GPT(GPTConfig(**{**cfg.to_dict(), "bias": True}), seed=11)
    names = [n for n, _ in m.named_parameters()]
    assert names == [n for n, _ in with_bias.named_parameters() if not n.endswith("bias")]
    assert all(mod.bias is None for _, mod in m.named_modules() if hasattr(mod, "bias"))
    rng = np.random.default_rng(12)
    idx, tgt = rng.integers(0, 7, (2, 4)), rng.integers(0, 7, (2, 4))
    assert minigrad.gradcheck(lambda *p: m(idx, tgt)[1], list(m.parameters()), fast_mode=True)


def test_config_bias_must_be_a_bool():
    assert GPTConfig(vocab_size=5).bias is True
    with pytest.raises(TypeError, match="^GPTConfig: bias must be a bool, got int$"):
        GPTConfig(vocab_size=5, bias=0)


# ---------------------------------------------------------------- backward passed in
def _own_backwards():
    """Each replaceable layer's own ``<name>_backward`` (layers/<name>.py)."""
    import importlib
    from gpt.model import BACKWARDS
    return {n: getattr(importlib.import_module(f"layers.{n}"), f"{n}_backward") for n in BACKWARDS}


BACKWARD_CONFIGS = {  # config -> the layers it runs, with how many calls a forward makes of each
    ("ln", "gelu", "learned"): dict(layernorm=5, gelu=2, attention=2, linear=9, embedding=2,
                                    cross_entropy=1),
    ("rms", "swiglu", "rope"): dict(rmsnorm=5, swiglu=2, rope=4, attention=2, linear=5,
                                    embedding=1, cross_entropy=1),
    ("ln_rms", "relu2", "learned"): dict(layernorm=3, rmsnorm=2, relu2=2, attention=2, linear=9,
                                         embedding=2, cross_entropy=1),
}


def _loss_and_grads(backward, norm, mlp, pos, dtype):
    cfg = GPTConfig(vocab_size=11, block_size=8, n_layers=2, n_heads=2, d_model=8, norm=norm,
                    mlp=mlp, pos=pos, dtype=dtype)
    m = GPT(cfg, seed=3, backward=backward)
    rng = np.random.default_rng(5)
    for name, p in m.named_parameters():   # non-unit gains, non-zero biases
        p.data[...] += (0.1 * rng.standard_normal(p.shape)).astype(p.dtype)
    logits, loss = m(rng.integers(0, 11, (3, 7)), rng.integers(0, 11, (3, 7)))
    loss.backward()
    return logits.data, loss.data, {n: p.grad for n, p in m.named_parameters()}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("variant", list(BACKWARD_CONFIGS))
def test_the_layers_own_backward_passed_in_gives_the_same_bits(variant, dtype):
    logits, loss, grads = _loss_and_grads(None, *variant, dtype)
    for backward in ({"rmsnorm": _own_backwards()["rmsnorm"]}, _own_backwards()):
        l2, loss2, grads2 = _loss_and_grads(backward, *variant, dtype)
        assert np.array_equal(logits, l2) and np.array_equal(loss, loss2)
        assert all(np.array_equal(grads[n], grads2[n]) for n in grads)


@pytest.mark.parametrize("name, variant", [("rmsnorm", ("rms", "swiglu", "rope")),
                                           ("layernorm", ("ln", "gelu", "learned")),
                                           ("attention", ("ln", "gelu", "learned")),
                                           ("attention", ("rms", "swiglu", "rope")),
                                           ("linear", ("ln", "gelu", "learned"))])
def test_a_wrong_backward_changes_the_gradients_not_the_forward(name, variant):
    own = _own_backwards()[name]

    def twice_dx(dout, cache):   # the first gradient (dx, dq) doubled
        grads = own(dout, cache)
        return (2 * grads[0],) + tuple(grads[1:])
    logits, loss, grads = _loss_and_grads(None, *variant, "float64")
    l2, loss2, grads2 = _loss_and_grads({name: twice_dx}, *variant, "float64")
    assert np.array_equal(logits, l2) and np.array_equal(loss, loss2)
    assert not np.allclose(grads["token_embedding.weight"], grads2["token_embedding.weight"])


@pytest.mark.parametrize("variant", list(BACKWARD_CONFIGS))
def test_each_backward_passed_in_is_called_where_the_model_runs_its_layer(variant):
    calls = {}

    def counted(name, fn):
        def backward(dout, cache):
            calls[name] = calls.get(name, 0) + 1
            return fn(dout, cache)
        return backward
    backward = {n: counted(n, fn) for n, fn in _own_backwards().items()}
    _loss_and_grads(backward, *variant, "float64")
    assert calls == BACKWARD_CONFIGS[variant]


def test_an_unknown_backward_name_is_refused_naming_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown layer name\(s\) \['softmax'\]; the known ones "
                                         r"are \['layernorm', 'rmsnorm', .*'embedding'\]"):
        GPT(GPTConfig(vocab_size=5), backward={"softmax": lambda dout, cache: dout})
