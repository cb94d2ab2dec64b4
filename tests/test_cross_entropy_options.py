"""cross_entropy's reduction, ignore_index and label_smoothing (PyTorch's options).

Oracles: the loss written from its definition with a smoothed target distribution
q = (1 - eps) onehot + eps / V (loss_n = -sum_v q_v logp_v); central differences (float64,
random upstream gradient); torch when installed."""
import itertools

import numpy as np
import pytest

import minigrad
from minigrad import Tensor
from layers.functional import cross_entropy

RNG = np.random.default_rng(0)
N, V = 7, 5


def _data():
    x = 2 * RNG.standard_normal((N, V))
    t = RNG.integers(0, V, N)
    t[[1, 4]] = -100                                     # two ignored rows
    return x, t


def _reference(x, t, reduction, ignore_index, eps):
    """Definition: per-row cross-entropy against q = (1 - eps) onehot + eps / V."""
    rows = []
    for xn, tn in zip(x, t):
        if tn == ignore_index:
            rows.append(0.0)
            continue
        logp = xn - np.log(np.sum(np.exp(xn)))
        q = np.full(V, eps / V)
        q[tn] += 1 - eps
        rows.append(-np.sum(q * logp))
    rows = np.array(rows)
    count = np.sum(t != ignore_index)
    return {"none": rows, "sum": rows.sum(), "mean": rows.sum() / count}[reduction]


COMBOS = list(itertools.product(["mean", "sum", "none"], [-100, 2], [0.0, 0.1, 1.0]))


@pytest.mark.parametrize("reduction, ignore_index, eps", COMBOS)
def test_forward_against_definition_and_gradcheck(reduction, ignore_index, eps):
    x, t = _data()
    kw = dict(reduction=reduction, ignore_index=ignore_index, label_smoothing=eps)
    if ignore_index == 2:
        t = np.where(t == -100, 2, t)                    # an in-range ignore_index
    out = cross_entropy(Tensor(x), t, **kw)
    np.testing.assert_allclose(out.data, _reference(x, t, **{"reduction": reduction,
                               "ignore_index": ignore_index, "eps": eps}), rtol=1e-12)
    assert out.shape == ((N,) if reduction == "none" else ())
    assert minigrad.gradcheck(lambda z: cross_entropy(z, t, **kw),
                              [Tensor(x, requires_grad=True)], eps=1e-6, atol=1e-8, rtol=1e-6)


def test_ignored_rows_get_zero_gradient_and_are_not_counted():
    x, t = _data()
    xt = Tensor(x, requires_grad=True)
    cross_entropy(xt, t, label_smoothing=0.2).backward()
    assert (xt.grad[[1, 4]] == 0).all() and (xt.grad[[0, 2, 3]] != 0).all()
    # mean over 5 counted rows = sum / 5
    s = cross_entropy(Tensor(x), t, reduction="sum").item()
    assert cross_entropy(Tensor(x), t).item() == pytest.approx(s / 5, rel=1e-14)


def test_every_row_ignored_gives_nan_mean_and_zero_sum():
    x = RNG.standard_normal((3, 4))
    t = np.full(3, -100)
    assert np.isnan(cross_entropy(Tensor(x), t).item())
    assert cross_entropy(Tensor(x), t, reduction="sum").item() == 0.0


def test_batched_shape_and_bad_options():
    x = RNG.standard_normal((2, V, 3))                    # PyTorch's (N, C, d1) layout
    t = RNG.integers(0, V, (2, 3))
    assert cross_entropy(Tensor(x), t, reduction="none").shape == (2, 3)
    with pytest.raises(ValueError, match="reduction"):
        cross_entropy(Tensor(x), t, reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing"):
        cross_entropy(Tensor(x), t, label_smoothing=1.5)
    with pytest.raises(IndexError, match=r"target 9 out of range \[0, 5\)"):
        cross_entropy(Tensor(x), np.where(t == t[0, 0], 9, t))
    with pytest.raises(TypeError, match="ignore_index"):
        cross_entropy(Tensor(x), t, ignore_index=1.0)


@pytest.mark.parametrize("reduction, ignore_index, eps", COMBOS)
@pytest.mark.slow  # runs PyTorch; leave out with -m "not slow"
def test_matches_torch(reduction, ignore_index, eps):
    torch = pytest.importorskip("torch")
    x, t = _data()
    if ignore_index == 2:
        t = np.where(t == -100, 2, t)
    kw = dict(reduction=reduction, ignore_index=ignore_index, label_smoothing=eps)
    xt = Tensor(x, requires_grad=True)
    out = cross_entropy(xt, t, **kw)
    g = RNG.standard_normal(out.shape)
    out.backward(g)
    tx = torch.tensor(x, requires_grad=True)
    ref = torch.nn.functional.cross_entropy(tx, torch.tensor(t), **kw)
    ref.backward(torch.tensor(g))
    np.testing.assert_allclose(out.data, ref.detach().numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(xt.grad, tx.grad.numpy(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("reduction, expected", [("sum", 0.0), ("none", None), ("mean", "nan")])
def test_an_empty_batch_gives_pytorchs_losses_and_an_empty_gradient(reduction, expected):
    """PyTorch on a (0, V) batch: "sum" 0, "none" an empty (0,) tensor, "mean" NaN (0/0, as an
    all-ignored batch); the gradient is (0, V) (pytorch issue 50224)."""
    from minigrad import Tensor
    from layers.functional import cross_entropy
    x = Tensor(np.zeros((0, 5)), requires_grad=True)
    loss = cross_entropy(x, np.zeros(0, dtype=np.int64), reduction=reduction)
    if expected is None:
        assert loss.shape == (0,)
        loss.backward(np.zeros(0))
    else:
        assert (np.isnan(loss.item()) if expected == "nan" else loss.item() == expected)
        loss.backward()
    assert x.grad.shape == (0, 5)
