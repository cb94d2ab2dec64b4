"""The wrappers' input checks (layers/_checks.py): one wording for one mistake, in every layer."""
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
    (lambda: rms_norm(I64, None), "rms_norm", "x"),
    (lambda: layer_norm(F32, np.ones(4, np.int64), None), "layer_norm", "weight"),
    (lambda: gelu(I64), "gelu", "x"),
    (lambda: silu(I64), "silu", "x"),
    (lambda: relu2(I64), "relu2", "x"),
    (lambda: swiglu(F32, np.ones((6, 4), np.int64), np.ones((6, 4), np.float32),
                    np.ones((4, 6), np.float32)), "swiglu", "w_gate"),
    (lambda: apply_rope(np.zeros((1, 3, 4), np.int64), COS[0], SIN[0]), "apply_rope", "x"),
    (lambda: apply_rope(Q32, COS[0].astype(np.int64), SIN[0]), "apply_rope", "cos"),
    (lambda: softmax(I64), "softmax", "x"),
    (lambda: cross_entropy(I64, np.zeros(2, np.int64)), "cross_entropy", "logits"),
    (lambda: linear(F32, np.ones((3, 4), np.int64)), "linear", "weight"),
    (lambda: embedding(np.zeros(2, np.int64), np.ones((5, 4), np.int64)), "embedding", "weight"),
    (lambda: scaled_dot_product_attention(Q32, Q32.astype(np.int64), Q32),
     "scaled_dot_product_attention", "k"),
]


@pytest.mark.parametrize("call, fn, name", NON_FLOATING,
                         ids=[f"{f}-{n}" for _, f, n in NON_FLOATING])
def test_a_non_floating_input_is_named_in_one_wording(call, fn, name):
    with pytest.raises(TypeError, match=f"^{fn}: {name} must have a floating dtype, got int64$"):
        call()


MIXED = [  # (call with one float64 input among float32 ones, function, argument, reference)
    (lambda: rms_norm(F32, W32.astype(np.float64)), "rms_norm", "weight", "x"),
    (lambda: layer_norm(F32, W32, W32.astype(np.float64)), "layer_norm", "bias", "x"),
    (lambda: swiglu(F32, np.ones((6, 4), np.float32), np.ones((6, 4), np.float64),
                    np.ones((4, 6), np.float32)), "swiglu", "w_up", "x"),
    (lambda: linear(F32, np.ones((3, 4), np.float32), np.ones(3, np.float64)), "linear", "bias",
     "x"),
    (lambda: scaled_dot_product_attention(Q32, Q32, Q32.astype(np.float64)),
     "scaled_dot_product_attention", "v", "q"),
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
    call = {"rms_norm": lambda: rms_norm(F32, W32, eps=eps),
            "layer_norm": lambda: layer_norm(F32, W32, W32, eps=eps)}[norm]
    with pytest.raises(ValueError, match=f"^{norm}: eps must be a finite number >= 0, got "):
        call()
