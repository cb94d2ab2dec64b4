"""The Tensor methods and factories a PyTorch user types (add, sub, mul, div, neg, matmul,
expand, contiguous, softmax, log_softmax, clip; full, randint): values and gradients against
torch itself where it is installed, and PyTorch's documented rules."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import Tensor

RNG = np.random.default_rng(7)

CASES = {   # name: (ours, torch's), each a function of one float64 (3, 5) Tensor
    "add": (lambda t: t.add(t * 2, alpha=0.5), lambda t: t.add(t * 2, alpha=0.5)),
    "sub": (lambda t: t.sub(t.exp(), alpha=3), lambda t: t.sub(t.exp(), alpha=3)),
    "mul": (lambda t: t.mul(t), lambda t: t.mul(t)),
    "div": (lambda t: t.div(t.exp()), lambda t: t.div(t.exp())),
    "neg": (lambda t: t.neg(), lambda t: t.neg()),
    "matmul": (lambda t: t.matmul(t.T), lambda t: t.matmul(t.T)),
    "expand": (lambda t: t[:, :1].expand(2, -1, 4), lambda t: t[:, :1].expand(2, -1, 4)),
    "contiguous": (lambda t: t.T.contiguous(), lambda t: t.T.contiguous()),
    "softmax": (lambda t: t.softmax(1), lambda t: t.softmax(1)),
    "softmax_dim0": (lambda t: t.softmax(0), lambda t: t.softmax(0)),
    "log_softmax": (lambda t: t.log_softmax(-1), lambda t: t.log_softmax(-1)),
    "clip": (lambda t: t.clip(-0.5, 0.5), lambda t: t.clip(-0.5, 0.5)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_value_and_gradient_match_torch(name):
    torch = pytest.importorskip("torch")
    ours, theirs = CASES[name]
    a = RNG.standard_normal((3, 5))
    x, xt = Tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    y, yt = ours(x), theirs(xt)
    assert y.shape == tuple(yt.shape)
    np.testing.assert_allclose(y.data, yt.detach().numpy(), rtol=1e-12, atol=1e-14)
    g = RNG.standard_normal(y.shape)
    y.backward(g)
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(x.grad, xt.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_softmax_dtype_casts_first_and_is_stable_for_large_inputs():
    x = Tensor(np.array([[1000.0, 1001.0]], dtype=np.float32))
    y = x.softmax(1, dtype=np.float64)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y.data, [[1 / (1 + np.e), np.e / (1 + np.e)]], rtol=1e-12)
    assert np.isfinite(x.log_softmax(1).data).all()


def test_expand_and_div_refusals():
    with pytest.raises(ValueError, match="do not fit"):
        Tensor(np.ones(3)).expand(-1, 3)            # -1 on a new axis
    with pytest.raises(ValueError, match="rounding_mode"):
        Tensor(np.ones(3)).div(2, rounding_mode="floor")


def test_contiguous_returns_self_when_already_contiguous():
    x = Tensor(np.ones((2, 3)))
    assert x.contiguous() is x and x.T.contiguous().data.flags.c_contiguous


def test_full_takes_its_dtype_from_the_value_as_torch_full():
    # torch.full's documented inference: bool -> bool, int -> int64, float -> default (float32)
    assert mg.full((2, 3), True).dtype == np.bool_
    assert mg.full((2,), 7).dtype == np.int64 and mg.full(2, 7).tolist() == [7, 7]
    assert mg.full((2,), 1.5).dtype == np.float32
    assert mg.full((2,), 1.5, dtype=np.float64, requires_grad=True).requires_grad
    with pytest.raises(TypeError, match="fill_value"):
        mg.full((2,), "a")


def test_randint_draws_int64_in_the_half_open_range_reproducibly():
    a = mg.randint(3, 6, (1000,), generator=np.random.default_rng(0))
    b = mg.randint(3, 6, (1000,), generator=np.random.default_rng(0))
    assert a.dtype == np.int64 and set(np.unique(a.data)) == {3, 4, 5}
    np.testing.assert_array_equal(a.data, b.data)
    assert mg.randint(10, (2, 2)).shape == (2, 2)          # randint(high, size)
    with pytest.raises(ValueError, match="low < high"):
        mg.randint(5, 5, (1,))
    with pytest.raises(TypeError, match="size"):
        mg.randint(5)
