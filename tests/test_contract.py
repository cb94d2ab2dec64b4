"""The PyTorch contract of layers.functional and layers.modules beyond the layers' maths:
the Modules' positional parameters, ``dtype=``, cross_entropy's layout, class weights and
probability targets, attention's mask and broadcasting, and every refusal.

Oracles: the definitions written out in NumPy, central differences (float64, random upstream
gradients), and, where installed, torch itself (marked slow)."""
import re
from pathlib import Path

import numpy as np
import pytest

from minigrad import Tensor, gradcheck
from layers import functional as F
from layers.attention import attention_forward
from layers.modules import Embedding, Identity, LayerNorm, Linear, RMSNorm

RNG = np.random.default_rng(11)
TOL = dict(eps=1e-6, atol=1e-7, rtol=1e-6)
DOC = Path(__file__).resolve().parent.parent / "docs" / "pytorch.md"


def _leaf(*shape):
    return Tensor(RNG.standard_normal(shape), requires_grad=True)


def _upstream(fn, *xs):
    """``fn`` times a fixed random upstream gradient, summed: its gradient is the VJP."""
    g = RNG.standard_normal(fn(*xs).shape)
    return lambda *a: (fn(*a) * g).sum()


# ---------------------------------------------------------------------------------- Modules

def test_norms_take_pytorchs_positional_parameters():
    x = _leaf(4, 5, 5)
    xa = x.data
    plain = (xa - xa.mean(-1, keepdims=True)) / np.sqrt(xa.var(-1, keepdims=True) + 1e-3)
    ln = LayerNorm([5], 1e-3, False, dtype=np.float64)        # elementwise_affine=False
    assert ln.weight is None and ln.bias is None and not list(ln.parameters())
    np.testing.assert_allclose(ln(x).data, plain, rtol=1e-12)
    rms = RMSNorm([5], 1e-3, False, dtype=np.float64)
    assert rms.weight is None and not list(rms.parameters())
    np.testing.assert_allclose(rms(x).data, xa / np.sqrt((xa ** 2).mean(-1, keepdims=True) + 1e-3),
                               rtol=1e-12)
    nob = LayerNorm(5, 1e-5, True, False)                     # bias=False
    assert nob.bias is None and nob.weight.shape == (5,) and nob.weight.dtype == np.float32
    assert LayerNorm(5, dtype=None).weight.dtype == np.float32    # None: PyTorch's default


@pytest.mark.parametrize("call", [
    lambda: LayerNorm(5, 1e-5, np.random.default_rng(0)),      # the old (shape, eps, rng) order
    lambda: RMSNorm(5, 1e-6, np.random.default_rng(0)),
    lambda: Linear(4, 3, True, np.random.default_rng(0)),      # rng is keyword-only
    lambda: Embedding(4, 3, None, None, 2.0),                  # norm_type is not offered
    lambda: LayerNorm(5, 1e-5, True, True, None, np.float64),  # no device slot
])
def test_an_argument_out_of_pytorchs_order_is_refused_not_taken(call):
    with pytest.raises(TypeError):
        call()


def test_forward_takes_pytorchs_argument_name():
    x = _leaf(2, 10)
    lin = Linear(10, 8, rng=np.random.default_rng(0), dtype=np.float64)
    np.testing.assert_array_equal(lin(input=x).data, lin(x).data)
    assert LayerNorm(10, dtype=np.float64)(input=x).shape == (2, 10)
    assert RMSNorm(10, dtype=np.float64)(x=x).shape == (2, 10)
    assert Embedding(4, 3)(input=np.array([1, 3])).shape == (2, 3)
    assert Identity(54, unused_argument=0.1)(input=x) is x     # arguments ignored, as torch


def test_embedding_refuses_an_index_out_of_range_negative_ones_too():
    emb = Embedding(4, 3, rng=np.random.default_rng(0))
    with pytest.raises(IndexError, match=r"index -1 out of range \[0, 4\)"):
        emb(np.array([-1]))                   # PyTorch raises; NumPy would give the last row
    with pytest.raises(IndexError):
        emb(np.array([[0, 4]]))
    with pytest.raises(TypeError, match="integer"):
        emb(np.array([0.0]))


# ------------------------------------------------------------------ softmax, log_softmax

@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax])
def test_dtype_casts_first_and_the_gradient_comes_back_in_the_input_dtype(fn):
    x = Tensor(RNG.standard_normal((3, 4)).astype(np.float32), requires_grad=True)
    y = fn(x, 1, dtype=np.float64)
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y.data, fn(Tensor(x.data.astype(np.float64)), 1).data)
    y.backward(RNG.standard_normal((3, 4)))
    assert x.grad.dtype == np.float32
    with pytest.raises(TypeError, match="floating"):
        fn(x, 1, dtype=np.int64)


def test_softmax_of_one_entry_and_of_an_empty_axis():
    x = Tensor(np.float64(2.0), requires_grad=True)
    assert F.softmax(x, 0).item() == 1.0 and F.log_softmax(x, -1).item() == 0.0
    F.log_softmax(x, -1).backward()
    assert x.grad == 0.0                                  # d(x - x)/dx
    e = Tensor(np.zeros((5, 0, 0)), requires_grad=True)
    for fn in (F.softmax, F.log_softmax):
        y = fn(e, -1)
        assert y.shape == (5, 0, 0)                       # PyTorch's empty result
        y.backward(np.zeros((5, 0, 0)))
    assert e.grad.shape == (5, 0, 0)


# ---------------------------------------------------------------------------- cross_entropy

N, C = 5, 4


def _reference(x, target, weight, ignore_index, eps, reduction, axis=1):
    """PyTorch's definition, written out: q = w * ((1 - eps) p + eps / C) with p the one-hot of
    an index (0 for an ignored one) or the given probabilities; loss = -sum_c q_c logp_c; the
    mean divides by sum of w[t] over counted indices, or by the number of entries."""
    x = np.moveaxis(x, axis, -1)
    logp = x - np.log(np.exp(x).sum(-1, keepdims=True))
    w = np.ones(C) if weight is None else weight
    if target.dtype.kind == "f":
        p, denom = np.moveaxis(target, axis, -1), x[..., 0].size
    else:
        valid = target != ignore_index
        p = (np.where(valid, target, 0)[..., None] == np.arange(C)) * valid[..., None]
        denom = (w[np.where(valid, target, 0)] * valid).sum()
    q = w * ((1 - eps) * p + eps / C)
    if target.dtype.kind != "f":
        q = q * valid[..., None]
    loss = -(q * logp).sum(-1)
    return {"none": loss, "sum": loss.sum(), "mean": loss.sum() / denom}[reduction]


CASES = [  # (input shape, index targets?, weight?, ignore_index, label_smoothing)
    ((N, C), True, True, -100, 0.0),
    ((N, C), True, True, 2, 0.3),
    ((2, C, 3, 2), True, False, 1, 0.2),                  # (N, C, d1, d2), the fused node
    ((2, C, 3), True, True, 0, 0.1),
    ((C,), True, True, -100, 0.2),                        # unbatched: target 0-d
    ((N, C), False, False, -100, 0.0),                    # class probabilities
    ((2, C, 3), False, True, -100, 0.25),
]


def _case(shape, index, weighted):
    x = 2 * RNG.standard_normal(shape)
    tshape = shape[:1] + shape[2:] if len(shape) > 1 else ()
    if index:
        target = RNG.integers(0, C, tshape)
    else:
        target = RNG.random(shape)
        target /= target.sum(axis=1 if len(shape) > 1 else 0, keepdims=True)
    return x, target, (RNG.random(C) + 0.5 if weighted else None)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("shape, index, weighted, ignore_index, eps", CASES)
def test_cross_entropy_against_its_definition_and_central_differences(
        shape, index, weighted, ignore_index, eps, reduction):
    x, target, weight = _case(shape, index, weighted)
    kw = dict(weight=weight, reduction=reduction, label_smoothing=eps,
              **({"ignore_index": ignore_index} if index else {}))
    out = F.cross_entropy(Tensor(x), target, **kw)
    ref = _reference(x, target, weight, ignore_index, eps, reduction, axis=1 if x.ndim > 1 else 0)
    np.testing.assert_allclose(out.data, ref, rtol=1e-12, atol=1e-14)
    xs = [Tensor(x, requires_grad=True)]
    if not index:                              # probabilities are differentiated, as torch's
        xs.append(Tensor(target, requires_grad=True))
    fn = (lambda z: F.cross_entropy(z, target, **kw)) if index else \
        (lambda z, p: F.cross_entropy(z, p, **kw))
    assert gradcheck(_upstream(fn, *xs), xs, **TOL)


def test_the_class_axis_is_second_and_unit_weights_change_nothing():
    x = RNG.standard_normal((2, C, 3))
    t = RNG.integers(0, C, (2, 3))
    t[0, 1] = -100
    flat = F.cross_entropy(Tensor(np.moveaxis(x, 1, -1).reshape(-1, C)), t.reshape(-1),
                           reduction="none", label_smoothing=0.1)
    np.testing.assert_allclose(
        F.cross_entropy(Tensor(x), t, reduction="none", label_smoothing=0.1).data,
        flat.data.reshape(2, 3), rtol=1e-14)
    np.testing.assert_allclose(F.cross_entropy(Tensor(x), t, np.ones(C)).data,
                               F.cross_entropy(Tensor(x), t).data, rtol=1e-14)


def test_a_weighted_mean_of_nothing_is_nan():
    x = Tensor(RNG.standard_normal((3, C)))
    assert np.isnan(F.cross_entropy(x, np.full(3, -100), np.ones(C)).item())
    assert np.isnan(F.cross_entropy(x, np.array([0, 1, 1]), np.array([0.0, 0, 1, 1])).item())


@pytest.mark.parametrize("call, exc, match", [
    (lambda x: F.cross_entropy(x, np.zeros((N, 3))), ValueError, "class probabilities"),
    (lambda x: F.cross_entropy(x, np.full((N, C), 0.25), ignore_index=0), ValueError,
     "ignore_index"),
    (lambda x: F.cross_entropy(x, np.zeros(N, int), np.ones(C, np.float32)), TypeError,
     "weight is float32 but input is float64"),
    (lambda x: F.cross_entropy(x, np.zeros(N, int), np.ones(C + 1)), ValueError, "weight"),
    (lambda x: F.cross_entropy(x, np.zeros(N, int), Tensor(np.ones(C), requires_grad=True)),
     ValueError, "constants"),
    (lambda x: F.cross_entropy(x, np.zeros((N, 2), int)), ValueError, "without the class axis"),
])
def test_cross_entropy_refusals(call, exc, match):
    with pytest.raises(exc, match=match):
        call(Tensor(RNG.standard_normal((N, C))))


# -------------------------------------------------------------------------------- attention

def _attention(q, k, v, mask):
    s = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1]) + mask
    p = np.exp(s - s.max(-1, keepdims=True))
    return p / p.sum(-1, keepdims=True) @ v


def test_a_bool_mask_hides_keys_and_a_row_that_sees_none_gives_zero():
    q, k, v = _leaf(2, 2, 3, 4), _leaf(2, 2, 5, 4), _leaf(2, 2, 5, 6)
    mask = RNG.random((3, 5)) < 0.6
    mask[:2, 0] = True                                    # rows 0, 1 see a key
    mask[2] = False                                       # row 2 sees none
    out = F.scaled_dot_product_attention(q, k, v, Tensor(mask))
    ref = _attention(q.data[..., :2, :], k.data, v.data, np.where(mask[:2], 0.0, -np.inf))
    np.testing.assert_allclose(out.data[..., :2, :], ref, rtol=1e-12)
    assert (out.data[..., 2, :] == 0).all()               # PyTorch's 0, not NaN
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, mask)  # noqa: E731
    assert gradcheck(_upstream(fn, q, k, v), [q, k, v], **TOL)
    out.backward(RNG.standard_normal(out.shape))
    assert (q.grad[..., 2, :] == 0).all()                 # no key seen: nothing flows back


def test_an_additive_mask_and_its_gradient_with_broadcast_leading_dims():
    q, k, v = _leaf(2, 1, 3, 4), _leaf(1, 3, 5, 4), _leaf(3, 5, 6)   # batch (2, 3)
    mask = _leaf(3, 1, 5)                                  # per head, per key
    out = F.scaled_dot_product_attention(q, k, v, mask)
    assert out.shape == (2, 3, 3, 6)
    np.testing.assert_allclose(out.data, _attention(q.data, k.data, v.data, mask.data),
                               rtol=1e-12)
    fn = lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, m)  # noqa: E731
    assert gradcheck(_upstream(fn, q, k, v, mask), [q, k, v, mask], **TOL)
    # a constant mask (an array) takes the same path as no mask; a float32 mask is cast
    m32 = mask.data.astype(np.float32)   # rounded: the same result as float64 of that mask
    a = F.scaled_dot_product_attention(q, k, v, m32)
    np.testing.assert_allclose(a.data, _attention(q.data, k.data, v.data, m32.astype(np.float64)),
                               rtol=1e-12)


def test_the_pair_without_a_mask_is_what_it_was():
    q, k, v = (RNG.standard_normal((2, 3, 4, 5)) for _ in range(3))
    out, _ = attention_forward(q, k, v, is_causal=True)
    mask = np.tril(np.ones((4, 4), bool))
    np.testing.assert_array_equal(attention_forward(q, k, v, mask)[0], out)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(dropout_p=0.1), NotImplementedError, "dropout_p"),
    (dict(dropout_p=1.5), ValueError, "dropout_p"),
    (dict(enable_gqa=True), NotImplementedError, "enable_gqa"),
    (dict(attn_mask=np.ones((3, 5), bool), is_causal=True), ValueError, "not both"),
    (dict(attn_mask=np.ones((3, 5), np.int64)), TypeError, "bool or floating"),
    (dict(attn_mask=np.ones((4, 5), bool)), ValueError, "does not broadcast"),
    (dict(attn_mask=np.ones((3, 3, 5), bool)), ValueError, "does not broadcast"),  # enlarges
    (dict(scale=float("nan")), ValueError, "finite"),
])
def test_attention_refusals(kwargs, exc, match):
    q, k, v = _leaf(2, 2, 3, 4), _leaf(2, 2, 5, 4), _leaf(2, 2, 5, 4)
    with pytest.raises(exc, match=match):
        F.scaled_dot_product_attention(q, k, v, **kwargs)


def test_attention_over_no_key_is_zero_and_any_finite_scale_works():
    q, k, v = _leaf(1, 2, 4), _leaf(1, 0, 4), _leaf(1, 0, 3)
    assert (F.scaled_dot_product_attention(q, k, v).data == 0).all()
    q, k, v = _leaf(1, 3, 4), _leaf(1, 5, 4), _leaf(1, 5, 2)
    for scale in (0.0, -0.5):                            # PyTorch computes these too
        out = F.scaled_dot_product_attention(q, k, v, scale=scale)
        s = q.data @ np.swapaxes(k.data, -1, -2) * scale
        p = np.exp(s - s.max(-1, keepdims=True))
        np.testing.assert_allclose(out.data, p / p.sum(-1, keepdims=True) @ v.data, rtol=1e-12)


# ---------------------------------------------------------------------------------- refusals

@pytest.mark.parametrize("call, name", [
    (lambda: F.relu(Tensor(np.ones(2)), inplace=True), "inplace"),
    (lambda: F.silu(Tensor(np.ones(2)), True), "inplace"),
    (lambda: F.embedding(np.array([0]), np.ones((2, 3)), 0), "padding_idx"),
    (lambda: F.embedding(np.array([0]), np.ones((2, 3)), max_norm=1.0), "max_norm"),
    (lambda: Embedding(4, 3, 0), "padding_idx"),
    (lambda: Embedding(4, 3, max_norm=1.0), "max_norm"),
    (lambda: F.scaled_dot_product_attention(*[np.ones((1, 2, 2))] * 3, dropout_p=0.5),
     "dropout_p"),
    (lambda: F.scaled_dot_product_attention(*[np.ones((1, 2, 2))] * 3, enable_gqa=True),
     "enable_gqa"),
])
def test_every_refusal_names_its_option_and_is_listed_in_pytorch_md(call, name):
    with pytest.raises(NotImplementedError, match=f"{name}=.* is not implemented"):
        call()
    assert re.search(rf"\b{name}\b", DOC.read_text()), f"{name} is not in docs/pytorch.md"


# ------------------------------------------------------------------------- against torch

@pytest.mark.slow  # runs PyTorch
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_options_together_match_torch(reduction):
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((3, C, 2, 2))
    t = RNG.integers(0, C, (3, 2, 2))
    t[0, 0, 1] = t[2, 1, 1] = 3                              # ignored below
    p = RNG.random((3, C, 2, 2))
    w = RNG.random(C) + 0.5
    for target, kw in ((t, dict(ignore_index=3)), (p, {})):
        kw.update(weight=w, reduction=reduction, label_smoothing=0.15)
        xt, pt = Tensor(x, requires_grad=True), Tensor(p, requires_grad=True)
        out = F.cross_entropy(xt, pt if target is p else target, **kw)
        g = RNG.standard_normal(out.shape)
        out.backward(g)
        tx, tp = torch.tensor(x, requires_grad=True), torch.tensor(p, requires_grad=True)
        ref = torch.nn.functional.cross_entropy(
            tx, tp if target is p else torch.tensor(target),
            **{**kw, "weight": torch.tensor(w)})
        ref.backward(torch.tensor(g))
        np.testing.assert_allclose(out.data, ref.detach().numpy(), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(xt.grad, tx.grad.numpy(), rtol=1e-10, atol=1e-14)
        if target is p:
            np.testing.assert_allclose(pt.grad, tp.grad.numpy(), rtol=1e-10, atol=1e-14)


@pytest.mark.slow  # runs PyTorch
def test_attention_masks_and_broadcasting_match_torch():
    torch = pytest.importorskip("torch")
    q, k, v = _leaf(2, 1, 3, 4), _leaf(1, 3, 5, 4), _leaf(3, 5, 6)
    bool_mask = RNG.random((3, 3, 5)) < 0.5
    bool_mask[0, 1] = False                                 # head 0, row 1 sees no key
    float_mask = _leaf(3, 1, 5)
    for mask in (bool_mask, float_mask):
        out = F.scaled_dot_product_attention(q, k, v, mask)
        g = RNG.standard_normal(out.shape)
        out.backward(g)
        tq, tk, tv = (torch.tensor(a.data, requires_grad=True) for a in (q, k, v))
        tm = (torch.tensor(mask) if mask is bool_mask else
              torch.tensor(mask.data, requires_grad=True))
        ref = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, tm)
        ref.backward(torch.tensor(g))
        np.testing.assert_allclose(out.data, ref.detach().numpy(), rtol=1e-12, atol=1e-14)
        for ours, theirs in ((q, tq), (k, tk), (v, tv)):
            np.testing.assert_allclose(ours.grad, theirs.grad.numpy(), rtol=1e-10, atol=1e-13)
            ours.grad = None
        if mask is float_mask:
            np.testing.assert_allclose(mask.grad, tm.grad.numpy(), rtol=1e-10, atol=1e-13)
