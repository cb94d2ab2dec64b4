"""Tensor <-> NumPy interoperation, 0-d results, dtype promotion, comparison operators."""
import numpy as np
import pytest

import minigrad
from minigrad import Function, Module, Parameter, Tensor
from layers import functional as F


def _scalar(rng):
    return Tensor(np.asarray(rng.uniform(0.5, 2.0)), requires_grad=True)


@pytest.mark.parametrize("op,ref", [
    (lambda t: t.exp(), np.exp), (lambda t: t.sqrt(), np.sqrt), (lambda t: t.tanh(), np.tanh),
    (lambda t: t.log(), np.log), (lambda t: F.relu2(t), lambda a: np.maximum(a, 0) ** 2),
])
def test_unary_ops_on_0d_tensors(op, ref):
    rng = np.random.default_rng(0)
    x = _scalar(rng)
    out = op(x)
    assert out.shape == () and out.dtype == np.float64
    np.testing.assert_allclose(out.data, ref(x.data), rtol=1e-12)
    assert minigrad.gradcheck(op, [x])


def test_exp_of_a_loss_is_perplexity():
    rng = np.random.default_rng(1)
    logits = Tensor(rng.standard_normal((4, 5)), requires_grad=True)
    targets = np.array([0, 1, 2, 3])
    ppl = F.cross_entropy(logits, targets).exp()
    logp = logits.data - np.log(np.exp(logits.data).sum(1, keepdims=True))
    np.testing.assert_allclose(ppl.item(), np.exp(-logp[np.arange(4), targets].mean()), rtol=1e-12)
    ppl.backward()
    assert logits.grad.shape == (4, 5)


def test_numpy_conversion_and_ufuncs():
    x = Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    assert np.asarray(x) is x.data
    assert np.asarray(x, dtype=np.float32).dtype == np.float32
    with pytest.raises(TypeError):
        np.exp(x)  # would silently drop the graph; the engine refuses it
    y = np.ones((2, 3)) * x  # ndarray on the left still builds a node
    assert isinstance(y, Tensor) and y.requires_grad
    g = np.random.default_rng(2).standard_normal((2, 3))
    y.backward(g)
    np.testing.assert_array_equal(x.grad, g)


def test_python_number_conversions():
    x = Tensor(np.array([2.5]))
    assert float(x) == 2.5 and int(x) == 2 and bool(Tensor(np.array(0.0))) is False
    with pytest.raises(ValueError, match="ambiguous"):
        bool(Tensor(np.ones(2)))
    with pytest.raises(ValueError):
        float(Tensor(np.ones(2)))


def test_equality_is_elementwise_like_numpy():
    a = Tensor(np.array([1.0, 2.0, 3.0]))
    np.testing.assert_array_equal((a == 2.0).data, [False, True, False])
    np.testing.assert_array_equal((a != a).data, [False, False, False])
    assert len({a, a}) == 1  # still hashable by identity


def test_rpow_scalar_base():
    rng = np.random.default_rng(3)
    x = Tensor(rng.standard_normal((2, 3)), requires_grad=True)
    np.testing.assert_allclose((2.0 ** x).data, 2.0 ** x.data, rtol=1e-12)
    assert minigrad.gradcheck(lambda t: 3.0 ** t, [x])   # a base <= 0: tests/test_op_edges.py


def test_integer_side_takes_the_float_dtype():
    x = Tensor(np.ones(3, dtype=np.float32), requires_grad=True)
    i = Tensor(np.array([1, 2, 3]))
    for y in (x + i, i * x, x / np.array([1, 2, 4]), np.array([1, 2, 3]) - x):
        assert y.dtype == np.float32
    (x * i).backward(np.ones(3, dtype=np.float32))
    assert x.grad.dtype == np.float32
    np.testing.assert_array_equal(x.grad, [1, 2, 3])


def test_masked_fill_needs_a_bool_mask():
    x = Tensor(np.zeros(3), requires_grad=True)
    with pytest.raises(TypeError, match="bool"):
        x.masked_fill(np.array([1.0, 0.0, 1.0]), 5.0)
    np.testing.assert_array_equal(x.masked_fill(np.array([True, False, True]), 5.0).data, [5, 0, 5])


def test_load_state_dict_accepts_tensors():
    class M(Module):
        def __init__(self, v):
            super().__init__()
            self.w = Parameter(np.full(3, v))

    a, b = M(1.0), M(2.0)
    a.load_state_dict(dict(b.named_parameters()))
    np.testing.assert_array_equal(a.w.data, [2.0, 2.0, 2.0])



def test_load_state_dict_names_every_mismatch_as_pytorch_does_and_copies_nothing():
    class M(Module):
        def __init__(self):
            super().__init__()
            self.w = Parameter(np.ones(3))
            self.b = Parameter(np.zeros(2))

    m = M()
    with pytest.raises(ValueError) as e:
        m.load_state_dict({"w": np.full(4, 7.0), "extra": np.ones(1)})   # b missing, w (4,)
    assert str(e.value).splitlines() == [
        "Error(s) in loading state_dict for M:",
        '\tMissing key(s) in state_dict: "b".',
        '\tUnexpected key(s) in state_dict: "extra".',
        "\tsize mismatch for w: copying a param with shape (4,) from checkpoint, the shape in "
        "current model is (3,)."]
    np.testing.assert_array_equal(m.w.data, np.ones(3))      # nothing was copied
    m.load_state_dict({"w": np.full(3, 7.0), "extra": np.ones(1)}, strict=False)
    np.testing.assert_array_equal(m.w.data, np.full(3, 7.0))
    np.testing.assert_array_equal(m.b.data, np.zeros(2))
    with pytest.raises(ValueError, match="size mismatch for b"):     # shapes even when not strict
        m.load_state_dict({"b": np.ones(3)}, strict=False)

def test_gradcheck_hints_at_an_ignored_upstream_gradient_on_a_scalar_output():
    class SquareIgnoresUpstream(Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return np.sum(a * a)

        @staticmethod
        def backward(ctx, dout):
            (a,) = ctx.saved_tensors
            return 2 * a  # BUG: not multiplied by dout

    x = Tensor(np.random.default_rng(4).standard_normal(4), requires_grad=True)
    with pytest.raises(minigrad.GradcheckError, match="ignores or mishandles its upstream"):
        minigrad.gradcheck(SquareIgnoresUpstream.apply, [x])


def test_norms_take_none_weight_and_bias_like_pytorch():
    rng = np.random.default_rng(5)
    x = Tensor(rng.standard_normal((3, 6)), requires_grad=True)
    xc = x.data - x.data.mean(-1, keepdims=True)
    np.testing.assert_allclose(F.layer_norm(x, x.shape[-1], None, None).data,
                               xc / np.sqrt((xc ** 2).mean(-1, keepdims=True) + 1e-5), rtol=1e-12)
    np.testing.assert_allclose(F.rms_norm(x, x.shape[-1], None).data,
                               x.data / np.sqrt((x.data ** 2).mean(-1, keepdims=True)
                                                + np.finfo(np.float64).eps),  # PyTorch's eps=None
                               rtol=1e-12)
    assert minigrad.gradcheck(lambda t: F.layer_norm(t, t.shape[-1], None, None), [x])
    assert minigrad.gradcheck(lambda t: F.rms_norm(t, t.shape[-1], None), [x])
