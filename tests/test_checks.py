"""The wrappers' input checks (layers/checks.py): one wording for one mistake, in every layer."""
import re

import numpy as np
import pytest

from gpt.config import GPTConfig
from layers.functional import (apply_rope, build_rope_cache, cross_entropy, embedding, gelu,
                               layer_norm, linear, relu2, rms_norm, scaled_dot_product_attention,
                               silu, softmax, swiglu)
from layers.modules import CausalSelfAttention
from minigrad import Tensor

F32 = np.zeros((2, 4), np.float32)
F64 = np.zeros((2, 4), np.float64)
I64 = np.zeros((2, 4), np.int64)
W32 = np.ones(4, np.float32)
Q32 = np.zeros((1, 3, 4), np.float32)
COS, SIN = build_rope_cache(3, 4)

NON_FLOATING = [  # (call with one integer input, function name, argument name)
    (lambda: rms_norm(I64, I64.shape[-1], None), "rms_norm", "input"),
    (lambda: layer_norm(F32, F32.shape[-1], np.ones(4, np.int64), None), "layer_norm", "weight"),
    (lambda: gelu(I64), "gelu", "input"),
    (lambda: silu(I64), "silu", "input"),
    (lambda: relu2(I64), "relu2", "x"),
    (lambda: swiglu(F32, np.ones((6, 4), np.int64), np.ones((6, 4), np.float32),
                    np.ones((4, 6), np.float32)), "swiglu", "w_gate"),
    (lambda: apply_rope(np.zeros((1, 3, 4), np.int64), COS[0], SIN[0]), "apply_rope", "x"),
    (lambda: apply_rope(Q32, COS[0].astype(np.int64), SIN[0]), "apply_rope", "cos"),
    (lambda: softmax(I64), "softmax", "input"),
    (lambda: cross_entropy(I64, np.zeros(2, np.int64)), "cross_entropy", "input"),
    (lambda: linear(F32, np.ones((3, 4), np.int64)), "linear", "weight"),
    (lambda: embedding(np.zeros(2, np.int64), np.ones((5, 4), np.int64)), "embedding", "weight"),
    (lambda: scaled_dot_product_attention(Q32, Q32.astype(np.int64), Q32),
     "scaled_dot_product_attention", "key"),
]


@pytest.mark.parametrize("call, fn, name", NON_FLOATING,
                         ids=[f"{f}-{n}" for _, f, n in NON_FLOATING])
def test_a_non_floating_input_is_named_in_one_wording(call, fn, name):
    with pytest.raises(TypeError, match=f"^{fn}: {name} must have a floating dtype, got int64$"):
        call()


MIXED = [  # (call with one float64 input among float32 ones, function, argument, reference)
    (lambda: rms_norm(F32, F32.shape[-1], W32.astype(np.float64)), "rms_norm", "weight", "x"),
    (lambda: layer_norm(F32, W32.shape, W32, W32.astype(np.float64)), "layer_norm", "bias", "x"),
    (lambda: swiglu(F32, np.ones((6, 4), np.float32), np.ones((6, 4), np.float64),
                    np.ones((4, 6), np.float32)), "swiglu", "w_up", "x"),
    (lambda: linear(F32, np.ones((3, 4), np.float32), np.ones(3, np.float64)), "linear", "bias",
     "x"),
    (lambda: scaled_dot_product_attention(Q32, Q32, Q32.astype(np.float64)),
     "scaled_dot_product_attention", "value", "query"),
]


@pytest.mark.parametrize("call, fn, name, ref", MIXED, ids=[f"{f}-{n}" for _, f, n, _ in MIXED])
def test_mixed_dtypes_are_named_in_one_wording(call, fn, name, ref):
    with pytest.raises(TypeError, match=f"^{fn}: {name} is float64 but {ref} is float32; "
                                        f"use one dtype$"):
        call()


ODD_HEADS = [  # (call whose head size is odd or 0, function name, value in the message)
    (lambda: GPTConfig(vocab_size=5, d_model=12, n_heads=4, pos="rope"), "GPTConfig",
     "d_model // n_heads = 12 // 4 = 3 with pos='rope'"),
    (lambda: CausalSelfAttention(6, 2, rope=True), "CausalSelfAttention", "3"),
    (lambda: build_rope_cache(4, 5), "build_rope_cache", "5"),
    (lambda: build_rope_cache(4, 0), "build_rope_cache", "0"),
    (lambda: apply_rope(Tensor(np.zeros((1, 3, 3))), COS[..., :3], SIN[..., :3]), "apply_rope",
     "3"),
    (lambda: apply_rope(Tensor(np.zeros((1, 3, 0))), COS[..., :0], SIN[..., :0]), "apply_rope",
     "0"),
]


@pytest.mark.parametrize("call, fn, got", ODD_HEADS, ids=[f"{f}-{g[:6]}" for _, f, g in ODD_HEADS])
def test_rope_head_size_is_checked_in_one_place(call, fn, got):
    msg = f"{fn}: RoPE needs an even head_dim >= 2 (it rotates pairs), got {got}"
    with pytest.raises(ValueError, match=f"^{re.escape(msg)}$"):
        call()


@pytest.mark.parametrize("eps", [-1e-5, float("nan"), float("inf"), True, "1e-5"])
@pytest.mark.parametrize("norm", ["rms_norm", "layer_norm"])
def test_a_bad_eps_is_refused_by_both_norms(norm, eps):
    call = {"rms_norm": lambda: rms_norm(F32, W32.shape, W32, eps=eps),
            "layer_norm": lambda: layer_norm(F32, W32.shape, W32, W32, eps=eps)}[norm]
    with pytest.raises(ValueError, match=f"^{norm}: eps must be a finite number >= 0, got "):
        call()


NO_AXIS = [  # (call with a 0-d input, function name, argument name)
    (lambda: swiglu(np.float32(1.0), np.ones((6, 1), np.float32), np.ones((6, 1), np.float32),
                    np.ones((1, 6), np.float32)), "swiglu", "x"),
    (lambda: cross_entropy(np.float32(1.0), np.int64(0)), "cross_entropy", "input"),
    (lambda: linear(np.float32(1.0), np.ones((3, 1), np.float32)), "linear", "input"),
]


@pytest.mark.parametrize("call, fn, name", NO_AXIS, ids=[f for _, f, _ in NO_AXIS])
def test_a_0d_input_is_named_in_one_wording(call, fn, name):
    msg = rf"^{fn}: {name} must have at least one axis \(.+\), got a 0-d array$"
    with pytest.raises(ValueError, match=msg):
        call()


def test_an_index_out_of_range_is_an_index_error_in_one_wording():
    # as in PyTorch (IndexError for an embedding index and for a cross-entropy target); the
    # message names the first bad entry in reading order and counts the bad ones
    w = np.zeros((5, 3))
    msg = "embedding: index 7 out of range [0, 5) in input (2 of 4 out of range)"
    with pytest.raises(IndexError, match=f"^{re.escape(msg)}$"):
        embedding(np.array([[0, 7], [-2, 4]]), w)
    t = np.array([0, 9, -100, -3])          # -100 is ignore_index: not counted
    msg = ("cross_entropy: target 9 out of range [0, 5) in target "
           "(2 of 4 out of range; ignore_index is -100)")
    with pytest.raises(IndexError, match=f"^{re.escape(msg)}$"):
        cross_entropy(np.zeros((4, 5)), t)
    from gpt.model import GPT
    m = GPT(GPTConfig(vocab_size=5, block_size=4, n_layers=1, n_heads=2, d_model=8))
    msg = "GPT: token id 6 out of range [0, 5) in targets (1 of 2 out of range)"
    with pytest.raises(IndexError, match=f"^{re.escape(msg)}$"):
        m(np.array([[0, 1]]), np.array([[6, 1]]))


@pytest.mark.parametrize("call, fn", [
    (lambda: GPTConfig(vocab_size=5, d_model=10, n_heads=4), "GPTConfig"),
    (lambda: CausalSelfAttention(10, 4), "CausalSelfAttention"),
])
def test_heads_that_do_not_divide_the_width_are_refused_in_one_wording(call, fn):
    with pytest.raises(ValueError, match=f"^{fn}: n_heads=4 does not divide d_model=10$"):
        call()


def _positive_int_calls():
    from gpt.data import check_split_length, eval_windows, get_batch, uniform_baseline
    from gpt.train import evaluate, train
    data, rng = np.arange(50), np.random.default_rng(0)
    return {  # name -> call(value): every size argument of gpt goes through positive_int
        "GPTConfig.d_model": lambda v: GPTConfig(vocab_size=5, d_model=v),
        "train.steps": lambda v: train(None, data, steps=v),
        "evaluate.batch_size": lambda v: evaluate(None, data, 4, batch_size=v),
        "check_split_length.block_size": lambda v: check_split_length(data, v),
        "get_batch.batch_size": lambda v: get_batch(data, 4, v, rng),
        "eval_windows.max_tokens": lambda v: eval_windows(data, 4, max_tokens=v),
        "uniform_baseline.vocab_size": lambda v: uniform_baseline(v),
    }


@pytest.mark.parametrize("where", sorted(_positive_int_calls()))
@pytest.mark.parametrize("value, error", [(0, ValueError), (-3, ValueError), (2.0, TypeError),
                                          (True, TypeError), ("4", TypeError)])
def test_sizes_in_gpt_are_positive_ints_like_pytorch(where, value, error):
    fn, name = where.split(".")
    wording = "a positive integer" if error is ValueError else "an int"
    with pytest.raises(error, match=f"^{fn}: {name} must be {wording}, got "):
        _positive_int_calls()[where](value)


@pytest.mark.parametrize("base, error", [("x", TypeError), (None, TypeError), (True, TypeError),
                                         (0, ValueError), (-2.0, ValueError),
                                         (float("nan"), ValueError), (float("inf"), ValueError)])
def test_rope_base_must_be_a_finite_positive_number(base, error):
    with pytest.raises(error, match="^build_rope_cache: base must be a "):
        build_rope_cache(4, 4, base=base)


@pytest.mark.parametrize("eps", [-1, float("nan"), "abc", True])
@pytest.mark.parametrize("cls", ["LayerNorm", "RMSNorm"])
def test_a_bad_eps_is_refused_when_the_norm_module_is_built(cls, eps):
    from layers import modules
    with pytest.raises(ValueError, match=f"^{cls}: eps must be a finite number >= 0, got "):
        getattr(modules, cls)(4, eps=eps)
