"""layers.functional and layers.modules on PyTorch's own test samples: the OpInfo reference
(and so sample) and error inputs of ``torch/testing/_internal/common_methods_invocations.py``
and the module inputs of ``common_modules.py``, in float64, values and gradients against torch.

Every tensor of a sample is cloned for torch and copied to a NumPy array for ours (a Tensor that
requires grad where the sample's does), so both compute on the same numbers; one random upstream
gradient goes back through both. The samples we refuse are listed in REFUSED (the module inputs
in MODULE_REFUSED) with the error we raise (docs/pytorch.md lists them too); PyTorch's error
inputs raise here as well. Needs torch and expecttest (which torch's test helpers import): the
parity extra.
"""
import numpy as np
import pytest

from minigrad import Tensor
from layers import functional as F
from layers import modules as M

pytestmark = pytest.mark.slow  # runs PyTorch; leave out with -m "not slow"

OPS = {  # PyTorch's OpInfo (name, variant) -> ours, called with the OpInfo's arguments
    ("nn.functional.batch_norm", ""): F.batch_norm,
    ("nn.functional.layer_norm", ""): F.layer_norm,
    ("nn.functional.rms_norm", ""): F.rms_norm,
    ("nn.functional.gelu", ""): F.gelu,
    ("nn.functional.relu", ""): F.relu,
    ("nn.functional.silu", ""): F.silu,
    ("softmax", ""): F.softmax,
    ("softmax", "with_dtype"): F.softmax,
    ("log_softmax", ""): F.log_softmax,
    ("log_softmax", "with_dtype"): F.log_softmax,
    ("nn.functional.cross_entropy", ""): F.cross_entropy,
    ("nn.functional.linear", ""): F.linear,
    ("nn.functional.embedding", ""): lambda weight, idx, **kw: F.embedding(idx, weight, **kw),
    ("nn.functional.scaled_dot_product_attention", ""): F.scaled_dot_product_attention,
}
REFUSED = {  # name -> (the samples we refuse, the error, its message): docs/pytorch.md
    "nn.functional.batch_norm": (
        lambda s: s.input.ndim < 2 or not 0 <= s.kwargs.get("momentum", 0.1) <= 1, ValueError,
        "at least 2 axes|momentum must be a number in \\[0, 1\\]"),
    "nn.functional.layer_norm": (lambda s: s.kwargs.get("eps", 0) < 0, ValueError, "eps"),
    "nn.functional.rms_norm": (lambda s: (s.kwargs.get("eps") or 0) < 0, ValueError, "eps"),
    "nn.functional.scaled_dot_product_attention": (
        lambda s: s.kwargs.get("dropout_p", 0) > 0, NotImplementedError, "dropout_p"),
}
MODULES = ("LayerNorm", "RMSNorm", "BatchNorm1d", "Linear", "Embedding")
MODULE_REFUSED = {  # name -> (the forward inputs we refuse, the error, its message)
    "BatchNorm1d": (lambda x: x.shape[0] * int(np.prod(x.shape[2:])) == 0, ValueError,
                    "Expected more than 1 value per channel when training"),   # an empty batch
}


@pytest.fixture(scope="module")
def torch():
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def op_db(torch):
    pytest.importorskip("expecttest")
    from torch.testing._internal.common_methods_invocations import op_db
    return {(op.name, op.variant_test_name): op for op in op_db}


@pytest.fixture(scope="module")
def module_db(torch):
    pytest.importorskip("expecttest")
    from torch.testing._internal.common_modules import module_db
    return {m.module_cls.__name__: m for m in module_db}


def _clone(torch, v):
    """A sample's argument for torch: tensors cloned (contiguous leaves, as required)."""
    if isinstance(v, torch.Tensor):
        return v.detach().clone().requires_grad_(v.requires_grad)
    return type(v)(_clone(torch, x) for x in v) if isinstance(v, (list, tuple)) else v


def _ours(torch, v):
    """The same argument for ours: arrays, Tensors where torch's requires grad, NumPy dtypes."""
    if isinstance(v, torch.Tensor):
        a = v.detach().numpy().copy()
        return Tensor(a, requires_grad=True) if v.requires_grad else a
    if isinstance(v, torch.dtype):
        return np.dtype(str(v).split(".")[1])
    return type(v)(_ours(torch, x) for x in v) if isinstance(v, (list, tuple)) else v


def _leaves(v):
    if isinstance(v, dict):
        v = list(v.values())
    return [y for x in v for y in _leaves(x)] if isinstance(v, (list, tuple)) else [v]


def _compare(torch, out, ref, theirs, mine, rng, where):
    """Values, then the gradients of every input that requires grad, for one upstream gradient."""
    assert out.shape == tuple(ref.shape) and str(out.dtype) in str(ref.dtype), where
    np.testing.assert_allclose(out.data, ref.detach().numpy(), rtol=1e-10, atol=1e-12,
                               err_msg=where)
    pairs = [(t, m) for t, m in zip(_leaves(theirs), _leaves(mine))
             if isinstance(m, Tensor) and m.requires_grad]
    if not pairs or not ref.requires_grad:
        return
    g = rng.standard_normal(out.shape)
    out.backward(g)
    grads = torch.autograd.grad(ref, [t for t, _ in pairs], torch.from_numpy(g),
                                allow_unused=True)
    for i, ((t, m), gt) in enumerate(zip(pairs, grads)):
        expected = np.zeros(t.shape) if gt is None else gt.numpy()
        got = np.zeros(m.shape) if m.grad is None else m.grad
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-11,
                                   err_msg=f"{where}: gradient of input {i}")


@pytest.mark.parametrize("name, variant", list(OPS), ids=[f"{n}-{v}" if v else n for n, v in OPS])
def test_pytorch_samples(torch, op_db, name, variant):
    op, ours, rng = op_db[name, variant], OPS[name, variant], np.random.default_rng(0)
    refused = REFUSED.get(name)
    samples = list(op.reference_inputs("cpu", torch.float64, requires_grad=True))
    assert samples
    for i, s in enumerate(samples):
        args = [_clone(torch, a) for a in (s.input, *s.args)]
        kwargs = {k: _clone(torch, v) for k, v in s.kwargs.items()}
        mine = [_ours(torch, a) for a in args]
        mine_kw = {k: _ours(torch, v) for k, v in kwargs.items()}
        where = f"{name} sample {i}: {tuple(s.input.shape)} {s.kwargs}"
        if refused and refused[0](s):
            with pytest.raises(refused[1], match=refused[2]):
                ours(*mine, **mine_kw)
            continue
        with np.errstate(invalid="ignore"):               # samples at +-inf: NaN, as torch
            _compare(torch, ours(*mine, **mine_kw), op(*args, **kwargs), [args, kwargs],
                     [mine, mine_kw], rng, where)


def test_pytorch_error_inputs_raise_here_too(torch, op_db):
    seen = 0
    for (name, variant), ours in OPS.items():
        op = op_db[name, variant]
        for e in (op.error_inputs("cpu") if op.error_inputs_func else ()):
            s, seen = e.sample_input, seen + 1
            expected = IndexError if e.error_type is IndexError else (ValueError, TypeError)
            with pytest.raises(expected):
                ours(*[_ours(torch, a) for a in (s.input, *s.args)],
                     **{k: _ours(torch, v) for k, v in s.kwargs.items()})
    assert seen >= 6


@pytest.mark.parametrize("cls", MODULES)
def test_pytorch_module_inputs(torch, module_db, cls):
    """Ours built with the same constructor arguments (positional ones included), torch's
    parameters loaded (the same names and shapes, none more, none fewer), the same forward."""
    info, ours, rng = module_db[cls], getattr(M, cls), np.random.default_rng(0)
    inputs = info.module_inputs_func(info, device="cpu", dtype=torch.float64,
                                     requires_grad=True, training=True)
    assert inputs
    for mi in inputs:
        c, f = mi.constructor_input, mi.forward_input
        where = f"{cls}{c.args} {c.kwargs} {mi.desc}"
        theirs = info.module_cls(*c.args, **c.kwargs).to(torch.float64)
        mine = ours(*c.args, **c.kwargs, dtype=np.float64)
        mine.load_state_dict({k: v.detach().numpy().copy()
                              for k, v in theirs.state_dict().items()})
        args = [_clone(torch, a) for a in f.args]
        kwargs = {k: _clone(torch, v) for k, v in f.kwargs.items()}
        margs = [_ours(torch, a) for a in args]
        mkwargs = {k: _ours(torch, v) for k, v in kwargs.items()}
        refused = MODULE_REFUSED.get(cls)
        if refused and refused[0](*f.args):
            with pytest.raises(refused[1], match=refused[2]):
                mine(*margs, **mkwargs)
            continue
        params = dict(theirs.named_parameters())
        mparams = dict(mine.named_parameters())
        assert sorted(params) == sorted(mparams), where
        _compare(torch, mine(*margs, **mkwargs), theirs(*args, **kwargs),
                 [args, kwargs, [params[n] for n in sorted(params)]],
                 [margs, mkwargs, [mparams[n] for n in sorted(params)]], rng, where)
    for e in (info.module_error_inputs_func(info, device="cpu", dtype=torch.float64,
                                            requires_grad=True, training=True)
              if info.module_error_inputs_func else ()):
        c, f = e.module_error_input.constructor_input, e.module_error_input.forward_input
        expected = IndexError if e.error_type is IndexError else (ValueError, TypeError)
        with pytest.raises(expected):
            ours(*c.args, **c.kwargs, dtype=np.float64)(*[_ours(torch, a) for a in f.args])
