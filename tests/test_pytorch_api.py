"""PyTorch call forms: dim=/keepdim=, shape methods, abs/clamp/min/amax/..., factories,
rms_norm(eps=None). Every new differentiable op is gradient-checked here (float64, random
upstream gradient, random inputs away from kinks); shapes and values are checked against NumPy
or hand computation, and against torch where installed."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import Tensor, gradcheck
from layers.functional import rms_norm, softmax

RNG = np.random.default_rng(0)
TOL = dict(eps=1e-6, atol=1e-8, rtol=1e-6)


def _leaf(*shape):
    return Tensor(RNG.standard_normal(shape), requires_grad=True)


def _away(*shape, margin=0.2):
    z = RNG.standard_normal(shape)
    return Tensor(np.sign(z) * (margin + np.abs(z)), requires_grad=True)


GRADCHECKS = {
    "abs": (lambda: [_away(3, 4)], lambda a: a.abs()),
    "clamp": (lambda: [Tensor(np.array([[-1.7, -0.6, 0.3], [0.9, 1.4, -0.2]]), requires_grad=True)],
              lambda a: a.clamp(-1.0, 1.0)),
    "clamp(max=)": (lambda: [_away(3, 4)], lambda a: a.clamp(max=0.1)),
    "max()": (lambda: [_leaf(3, 4)], lambda a: a.max()),
    "min(axis)": (lambda: [_leaf(3, 4)], lambda a: a.min(axis=0)),
    "max(dim)": (lambda: [_leaf(3, 4)], lambda a: a.max(dim=1, keepdim=True).values),
    "min(dim)": (lambda: [_leaf(3, 4)], lambda a: a.min(dim=-1).values),
    "amax": (lambda: [_leaf(2, 3, 4)], lambda a: a.amax(dim=(0, 2))),
    "amin": (lambda: [_leaf(2, 3, 4)], lambda a: a.amin(1, True)),
    "sum(dim)": (lambda: [_leaf(2, 3, 4)], lambda a: a.sum(dim=1, keepdim=True)),
    "mean(dim)": (lambda: [_leaf(2, 3, 4)], lambda a: a.mean(dim=(0, 2))),
    "softmax(dim)": (lambda: [_leaf(2, 3, 4)], lambda a: softmax(a, dim=1)),
    "view": (lambda: [_leaf(2, 3, 4)], lambda a: a.view(4, -1)),
    "permute": (lambda: [_leaf(2, 3, 4)], lambda a: a.permute(2, 0, 1)),
    "unsqueeze": (lambda: [_leaf(2, 3)], lambda a: a.unsqueeze(-1)),
    "squeeze": (lambda: [_leaf(1, 3, 1)], lambda a: a.squeeze()),
    "flatten": (lambda: [_leaf(2, 3, 4)], lambda a: a.flatten(0, 1)),
    "t": (lambda: [_leaf(2, 3)], lambda a: a.t()),
    "transpose(dim0, dim1)": (lambda: [_leaf(2, 3, 4)], lambda a: a.transpose(-2, -1)),
}


@pytest.mark.parametrize("name", sorted(GRADCHECKS))
def test_gradcheck(name):
    make, fn = GRADCHECKS[name]
    assert gradcheck(fn, make(), **TOL)


def test_gradcheck_catches_a_wrong_clamp_backward(monkeypatch):
    # Test the tester: a clamp whose backward lets the gradient through everywhere.
    monkeypatch.setattr(mg.ops.Clamp, "backward", staticmethod(lambda ctx, dc: dc))
    x = Tensor(np.array([-1.7, 0.3, 1.4]), requires_grad=True)
    with pytest.raises(mg.GradcheckError):
        gradcheck(lambda a: a.clamp(-1.0, 1.0), [x], **TOL)


def test_dim_and_axis_spellings_agree():
    x = Tensor(RNG.standard_normal((2, 3, 4)))
    for m in ("sum", "mean", "amax", "amin"):
        a = getattr(x, m)(axis=1, keepdims=True).data
        b = getattr(x, m)(dim=1, keepdim=True).data
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, getattr(np, {"amax": "max", "amin": "min"}.get(m, m))(
            x.data, axis=1, keepdims=True))
    np.testing.assert_array_equal(softmax(x, dim=0).data, softmax(x, axis=0).data)
    with pytest.raises(TypeError, match="both axis= and dim="):
        x.sum(axis=0, dim=1)
    with pytest.raises(TypeError, match="both dim= and axis="):
        softmax(x, axis=0, dim=1)


def test_shape_methods_against_numpy():
    a = RNG.standard_normal((2, 1, 3))
    x = Tensor(a)
    assert x.view(3, 2).shape == (3, 2) and x.view((-1,)).shape == (6,)
    np.testing.assert_array_equal(x.permute(2, 0, 1).data, a.transpose(2, 0, 1))
    assert x.unsqueeze(0).shape == (1, 2, 1, 3) and x.unsqueeze(-1).shape == (2, 1, 3, 1)
    assert x.squeeze().shape == (2, 3) and x.squeeze(0).shape == (2, 1, 3)   # size 2: kept
    assert x.squeeze((1, 2)).shape == (2, 3)
    assert x.flatten().shape == (6,) and x.flatten(1).shape == (2, 3)
    assert Tensor(np.float64(2.0)).flatten().shape == (1,)
    np.testing.assert_array_equal(Tensor(a[:, 0]).t().data, a[:, 0].T)
    assert x.dim() == 3
    with pytest.raises(ValueError, match="<= 2 dimensions"):
        x.t()
    with pytest.raises(ValueError, match="permutation"):
        x.permute(0, 0, 1)
    with pytest.raises(IndexError, match="out of range"):
        x.unsqueeze(4)
    # transpose(dim0, dim1) swaps two axes (PyTorch); a full permutation still works (NumPy)
    np.testing.assert_array_equal(x.transpose(-2, -1).data, np.swapaxes(a, -2, -1))
    np.testing.assert_array_equal(x.transpose(2, 0, 1).data, a.transpose(2, 0, 1))
    np.testing.assert_array_equal(Tensor(a[:, 0]).transpose(0, 1).data, a[:, 0].T)
    with pytest.raises(IndexError, match="out of range"):
        x.transpose(0, 3)


def test_abs_clamp_values():
    x = Tensor([-2.0, -0.5, 0.0, 0.5, 2.0])
    np.testing.assert_array_equal(x.abs().data, [2, 0.5, 0, 0.5, 2])
    np.testing.assert_array_equal(x.clamp(-1, 1).data, [-1, -0.5, 0, 0.5, 1])
    np.testing.assert_array_equal(x.clamp(min=2, max=1).data, [1] * 5)    # min > max gives max
    with pytest.raises(ValueError, match="at least one"):
        x.clamp()
    with pytest.raises(TypeError, match="real scalar"):
        x.clamp(min=Tensor([0.0]))
    assert Tensor(np.ones(2, np.float32)).clamp(0, 0.5).dtype == np.float32


def test_item_tolist_detach():
    x = Tensor([[1.5, 2.0]], requires_grad=True)
    assert x[0, 1].item() == 2.0 and x.tolist() == [[1.5, 2.0]]
    d = x.detach()
    assert not d.requires_grad and d.data is x.data


def test_rms_norm_eps_none_is_finfo_eps():
    # The numbers (float64, PyTorch's F.rms_norm(x, (4,), ones(4), eps=None)), and the
    # closed form x / sqrt(mean(x^2) + finfo(dtype).eps) for float32.
    x = np.array([[1e-3, -2e-3, 3e-3, 4e-4]])
    out = rms_norm(Tensor(x), x.shape[-1], None, eps=None).data
    np.testing.assert_allclose(out, [[0.53149, -1.06299, 1.59448, 0.21260]], atol=5e-6)
    np.testing.assert_allclose(out, x / np.sqrt(np.mean(x * x) + 2.220446049250313e-16),
                               rtol=1e-15)
    x32 = x.astype(np.float32)
    out32 = rms_norm(Tensor(x32), 4, np.ones(4, np.float32), eps=None).data
    ref = x / np.sqrt(np.mean(x * x) + 1.1920928955078125e-07)        # 0.52277, not 0.53149
    np.testing.assert_allclose(out32, ref, rtol=1e-6)
    from layers.modules import RMSNorm
    np.testing.assert_allclose(RMSNorm(4, eps=None)(Tensor(x32)).data, ref, rtol=1e-6)


def test_factories():
    assert mg.zeros(2, 3).shape == (2, 3) and mg.zeros((2, 3)).dtype == np.float32
    assert (mg.ones(4, dtype=np.float64).data == 1).all()
    assert mg.zeros(2, requires_grad=True).requires_grad
    a, b = mg.randn(3, 2, generator=np.random.default_rng(5)), mg.randn(
        (3, 2), generator=np.random.default_rng(5))
    np.testing.assert_array_equal(a.data, b.data)
    np.testing.assert_array_equal(
        a.data, np.random.default_rng(5).standard_normal((3, 2)).astype(np.float32))
    assert mg.arange(5).dtype == np.int64 and mg.arange(5).tolist() == [0, 1, 2, 3, 4]
    np.testing.assert_array_equal(mg.arange(0, 1, 0.25).data, [0, .25, .5, .75])
    assert mg.arange(0, 1, 0.25).dtype == np.float32
    assert mg.arange(1, 4, dtype=np.float64).tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="nonzero"):
        mg.arange(0, 1, 0)
    with pytest.raises(TypeError, match="Generator"):
        mg.randn(2, generator=0)
    with pytest.raises(ValueError, match="sizes"):
        mg.zeros(-1)


@pytest.mark.slow  # runs PyTorch; leave out with -m "not slow"
def test_against_torch():
    torch = pytest.importorskip("torch")
    a = RNG.standard_normal((2, 1, 3))
    x, tx = Tensor(a), torch.tensor(a)
    for ours, theirs in [
        (x.squeeze(0), tx.squeeze(0)), (x.squeeze(), tx.squeeze()), (x.flatten(1), tx.flatten(1)),
        (x.unsqueeze(-2), tx.unsqueeze(-2)), (x.permute(1, 2, 0), tx.permute(1, 2, 0)),
        (x.view(3, -1), tx.view(3, -1)), (x.transpose(0, 2), tx.transpose(0, 2)),
        (x[:, 0].transpose(0, 1), tx[:, 0].transpose(0, 1)), (x.sum(dim=-1, keepdim=True), tx.sum(dim=-1, keepdim=True)),
        (x.argmax(dim=2, keepdim=True), tx.argmax(dim=2, keepdim=True)), (x.argmin(), tx.argmin()),
    ]:
        assert ours.shape == tuple(theirs.shape)
        np.testing.assert_array_equal(ours.data, theirs.numpy())
    for args in [(5,), (1, 4), (0, 1, 0.25), (-1, 1.05, 0.35), (3, 0, -1)]:
        ours, theirs = mg.arange(*args), torch.arange(*args)
        assert ours.dtype == np.dtype(str(theirs.dtype).replace("torch.", ""))
        np.testing.assert_array_equal(ours.data, theirs.numpy())
    w = torch.ones(4, dtype=torch.float64)
    xx = torch.tensor([[1e-3, -2e-3, 3e-3, 4e-4]], dtype=torch.float64)
    np.testing.assert_allclose(rms_norm(Tensor(xx.numpy()), 4, None, eps=None).data,
                               torch.nn.functional.rms_norm(xx, (4,), w, eps=None).numpy(),
                               rtol=1e-15)
