"""BatchNorm, proven as LayerNorm is (central differences, the engine's composite, a closed form),
then against PyTorch in float64 (forward, the three gradients, the running statistics, eval), its
buffers in state_dict (into torch and back), and its errors."""
import re

import numpy as np
import pytest

from minigrad import Module, Parameter, Sequential, Tensor, gradcheck
from layers import functional as F
from layers.batchnorm import (BatchNormEvalFunction, BatchNormFunction, batchnorm_backward,
                              batchnorm_eval_backward, batchnorm_eval_forward, batchnorm_forward)
from layers.modules import BatchNorm1d, Linear

from composite_norms import batch_norm_eval_ref, batch_norm_ref, grads_of

SHAPES = [(6, 4), (3, 4, 5)]                     # (N, C) and (N, C, L)
TOL = dict(eps=1e-6, atol=1e-7, rtol=1e-5)


def _params(rng, C):
    """Random non-unit gain and non-zero bias (unit gains hide mistakes)."""
    return 1.0 + 0.5 * rng.standard_normal(C), 0.3 * rng.standard_normal(C)


def _stats(rng, C):
    """Running statistics as a trained model has them: any mean, a positive variance."""
    return rng.standard_normal(C), rng.uniform(0.5, 2.0, C)


def _leaves(*arrays):
    return [Tensor(np.array(a, dtype=np.float64), requires_grad=True) for a in arrays]


def _per_channel(x):
    """x (N, C) or (N, C, L) as C rows of its m = N * L values, channel by channel."""
    return np.moveaxis(x, 1, 0).reshape(x.shape[1], -1)


def _closed_form(x, w, b, eps):
    """BatchNorm in training mode written from its definition, one channel at a time."""
    out = np.empty_like(x)
    for c in range(x.shape[1]):
        v = x[:, c]
        out[:, c] = w[c] * (v - v.mean()) / np.sqrt(((v - v.mean()) ** 2).mean() + eps) + b[c]
    return out


def _batch_norm(training, rm, rv):
    """``F.batch_norm`` as a function of (x, weight, bias) alone."""
    return lambda x, w, b: F.batch_norm(x, rm, rv, w, b, training=training)


# ----------------------------------------------------------------------- 1. central differences
# gradcheck compares the engine's J^T G for a random upstream G (and the whole Jacobian, entry by
# entry) with central differences, for x, weight and bias.

@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("training", [True, False], ids=["training", "eval"])
def test_gradcheck(shape, training):
    rng = np.random.default_rng(0)
    C = shape[1]
    x, (w, b), (rm, rv) = 2.0 + 3.0 * rng.standard_normal(shape), _params(rng, C), _stats(rng, C)
    stats = (Tensor(rm), Tensor(rv))
    assert gradcheck(_batch_norm(training, *stats), _leaves(x, w, b), **TOL)


@pytest.mark.parametrize("shape", [(2, 3), (1, 3, 2)], ids=["N=2", "N=1,L=2"])
def test_gradcheck_two_values_a_channel(shape):
    # the fewest values the batch statistics accept: every xhat is +-1, the variance path is big
    rng = np.random.default_rng(1)
    x, (w, b) = rng.standard_normal(shape), _params(rng, 3)
    assert gradcheck(_batch_norm(True, None, None), _leaves(x, w, b), **TOL)


def test_gradcheck_near_constant_channels():
    # spread 1e-3 (var ~ 1e-6 < eps = 1e-5): rstd ~ 300, gradients ~ 1e3; atol scaled to them
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 3, 1)) + 1e-3 * rng.standard_normal((4, 3, 5))
    w, b = _params(rng, 3)
    assert gradcheck(_batch_norm(True, None, None), _leaves(x, w, b), eps=1e-6, atol=1e-4,
                     rtol=1e-5)


def test_gradcheck_through_the_module_in_both_modes():
    rng = np.random.default_rng(3)
    bn = BatchNorm1d(4, dtype=np.float64)
    bn.weight.data[...], bn.bias.data[...] = _params(rng, 4)
    x = _leaves(rng.standard_normal((5, 4, 3)))[0]
    assert gradcheck(lambda x, w, b: bn(x), [x, bn.weight, bn.bias], **TOL)
    bn.eval()                               # the running statistics the checks above left
    assert gradcheck(lambda x, w, b: bn(x), [x, bn.weight, bn.bias], **TOL)


# ---------------------------------------------------------------- 2. against the composite
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("case", ["normal", "near_constant", "offset"])
@pytest.mark.parametrize("training", [True, False], ids=["training", "eval"])
def test_backward_equals_engine_composite(shape, case, training):
    rng = np.random.default_rng(4)
    C = shape[1]
    x = rng.standard_normal(shape)
    x = {"normal": x, "near_constant": 0.7 + 1e-3 * x, "offset": 1e6 + x}[case]
    (w, b), (rm, rv) = _params(rng, C), _stats(rng, C)
    if case == "offset":
        rm = rm + 1e6
    G = rng.standard_normal(shape)
    out_f, g_f = grads_of(_batch_norm(training, Tensor(rm), Tensor(rv)), (x, w, b), G)
    ref = ((lambda x, w, b: batch_norm_ref(x, w, b, 1e-5)) if training else
           (lambda x, w, b: batch_norm_eval_ref(x, rm, rv, w, b, 1e-5)))
    out_c, g_c = grads_of(ref, (x, w, b), G)
    np.testing.assert_allclose(out_f, out_c, rtol=0, atol=1e-9)
    for gf, gc in zip(g_f, g_c):
        np.testing.assert_allclose(gf, gc, rtol=0, atol=1e-10 * max(1.0, np.abs(gc).max()))


@pytest.mark.parametrize("shape", SHAPES)
def test_numpy_pairs_match_their_functions(shape):
    rng = np.random.default_rng(5)
    C = shape[1]
    x, (w, b), (rm, rv) = rng.standard_normal(shape), _params(rng, C), _stats(rng, C)
    G = rng.standard_normal(shape)
    for forward, backward, function, consts in (
            (batchnorm_forward, batchnorm_backward, BatchNormFunction, ()),
            (batchnorm_eval_forward, batchnorm_eval_backward, BatchNormEvalFunction, (rm, rv))):
        out, cache = forward(x, *consts, w, b, 1e-5)
        grads = backward(G, cache)
        out_t, grads_t = grads_of(
            lambda x, w, b: function.apply(x, *consts, w, b, eps=1e-5), (x, w, b), G)
        np.testing.assert_array_equal(out, out_t)
        for g, gt in zip(grads, grads_t):
            np.testing.assert_array_equal(g, gt)
    assert BatchNormEvalFunction.wrt == ("x", "weight", "bias")   # the statistics: constants


# ------------------------------------------------------------------ 3. forward, closed form
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 2e-6)])
def test_forward_closed_form_and_dtypes(shape, dtype, tol):
    rng = np.random.default_rng(6)
    C = shape[1]
    x, (w, b), (rm, rv) = rng.standard_normal(shape), _params(rng, C), _stats(rng, C)
    xt, wt, bt = (Tensor(a.astype(dtype), requires_grad=True) for a in (x, w, b))
    out = F.batch_norm(xt, None, None, wt, bt, training=True)
    assert out.dtype == dtype and out.shape == shape
    np.testing.assert_allclose(out.data, _closed_form(x, w, b, 1e-5), rtol=tol, atol=tol)
    out.backward(rng.standard_normal(shape).astype(dtype))
    for t in (xt, wt, bt):
        assert t.grad.dtype == dtype and t.grad.shape == t.shape
    # eval: the affine map weight * (x - running_mean) / sqrt(running_var + eps) + bias
    out = F.batch_norm(xt, Tensor(rm.astype(dtype)), Tensor(rv.astype(dtype)), wt, bt)
    to_c = (-1,) + (1,) * (len(shape) - 2)
    ref = w.reshape(to_c) * (x - rm.reshape(to_c)) / np.sqrt(rv.reshape(to_c) + 1e-5) \
        + b.reshape(to_c)
    assert out.dtype == dtype
    np.testing.assert_allclose(out.data, ref, rtol=tol, atol=tol)


def test_normalized_channels_have_zero_mean_unit_variance_and_dx_sums_to_zero():
    # independent of the formula's code: each channel, not each row, is normalised
    rng = np.random.default_rng(7)
    x = 3.0 + 5.0 * rng.standard_normal((8, 4, 6))
    y = F.batch_norm(Tensor(x), None, None, training=True, eps=1e-12).data
    np.testing.assert_allclose(_per_channel(y).mean(1), 0.0, atol=1e-12)
    np.testing.assert_allclose(_per_channel(y).var(1), 1.0, rtol=1e-10)
    assert np.abs(y.mean(axis=-1)).max() > 0.1           # rows are not normalised
    # the output does not change when a channel is shifted, so dx sums to 0 over each channel
    xt, wt, bt = _leaves(x, *_params(rng, 4))
    F.batch_norm(xt, None, None, wt, bt, training=True).backward(rng.standard_normal(x.shape))
    np.testing.assert_allclose(_per_channel(xt.grad).sum(1), 0.0, atol=1e-12)


def test_batchnorm_is_layernorm_on_the_other_axis():
    # the same three terms: BatchNorm of x (N, C) is LayerNorm of x.T (C, N), values and dx
    rng = np.random.default_rng(8)
    x, G = rng.standard_normal((5, 3)), rng.standard_normal((5, 3))
    out_b, (dx_b,) = grads_of(lambda x: F.batch_norm(x, None, None, training=True), (x,), G)
    out_l, (dx_l,) = grads_of(lambda x: F.layer_norm(x.T, 5).T, (x,), G)
    np.testing.assert_allclose(out_b, out_l, rtol=0, atol=1e-14)
    np.testing.assert_allclose(dx_b, dx_l, rtol=0, atol=1e-14)


def test_eval_is_the_same_affine_map_for_every_batch():
    rng = np.random.default_rng(9)
    (w, b), (rm, rv) = _params(rng, 4), _stats(rng, 4)
    x = rng.standard_normal((6, 4, 3))

    def bn(x, training):
        return F.batch_norm(Tensor(x), Tensor(rm), Tensor(rv), w, b, training=training).data
    np.testing.assert_allclose(bn(x[:1], False), bn(x, False)[:1], rtol=0, atol=1e-15)
    assert np.abs(bn(x[:2], True) - bn(x, True)[:2]).max() > 1e-2  # training: the batch counts
    a = 0.3                                                          # affine: a mix maps to a mix
    np.testing.assert_allclose(bn(a * x + (1 - a) * x[::-1], False),
                               a * bn(x, False) + (1 - a) * bn(x[::-1], False), atol=1e-13)


def test_plain_arrays_are_constants():
    rng = np.random.default_rng(10)
    x, (w, b) = rng.standard_normal((4, 3)), _params(rng, 3)
    xt = Tensor(x, requires_grad=True)
    out = F.batch_norm(xt, None, None, w, b, training=True)
    out.backward(rng.standard_normal(out.shape))
    assert xt.grad is not None
    assert not F.batch_norm(x, None, None, w, b, training=True).requires_grad


# ---------------------------------------------------------------- 4. the running statistics
def test_training_updates_the_running_statistics_in_place_with_pytorchs_momentum():
    rng = np.random.default_rng(11)
    x = 2.0 + 3.0 * rng.standard_normal((5, 3, 4))
    rm0, rv0 = _stats(rng, 3)
    rm, rv = Tensor(rm0.copy()), Tensor(rv0.copy())
    arrays = (rm.data, rv.data)
    F.batch_norm(x, rm, rv, training=True, momentum=0.25)
    rows = _per_channel(x)                                       # (C, m), m = 20
    batch_var = ((rows - rows.mean(1, keepdims=True)) ** 2).sum(1) / (rows.shape[1] - 1)
    np.testing.assert_allclose(rm.data, 0.75 * rm0 + 0.25 * rows.mean(1), rtol=1e-14)
    np.testing.assert_allclose(rv.data, 0.75 * rv0 + 0.25 * batch_var, rtol=1e-14)  # unbiased
    assert rm.data is arrays[0] and rv.data is arrays[1]           # in place
    # an ndarray is updated in place too; momentum 1 replaces, 0 keeps; eval leaves them
    am, av = rm0.copy(), rv0.copy()
    F.batch_norm(x, am, av, training=True, momentum=1.0)
    np.testing.assert_allclose(am, rows.mean(1), rtol=1e-14)
    np.testing.assert_allclose(av, batch_var, rtol=1e-14)
    F.batch_norm(x, am, av, training=True, momentum=0.0)
    F.batch_norm(x, am, av, training=False)
    np.testing.assert_allclose(am, rows.mean(1), rtol=1e-14)


def test_the_module_counts_batches_in_training_only():
    rng = np.random.default_rng(12)
    bn = BatchNorm1d(3, dtype=np.float64)
    assert bn.training and bn.num_batches_tracked.dtype == np.int64
    assert bn.num_batches_tracked.shape == ()
    batches = [rng.standard_normal((4, 3)) + i for i in range(3)]
    for x in batches:
        bn(Tensor(x))
    assert int(bn.num_batches_tracked.data) == 3
    bn.eval()
    before = bn.state_dict()
    y = bn(Tensor(batches[0]))
    assert not bn.training and int(bn.num_batches_tracked.data) == 3
    for k, v in bn.state_dict().items():
        np.testing.assert_array_equal(v, before[k])
    mean, var = before["running_mean"], before["running_var"]
    np.testing.assert_allclose(y.data, (batches[0] - mean) / np.sqrt(var + 1e-5), rtol=1e-13)
    assert bn.train() is bn and bn.training


def test_momentum_none_is_the_cumulative_average():
    rng = np.random.default_rng(13)
    bn = BatchNorm1d(3, momentum=None, dtype=np.float64)
    batches = [rng.standard_normal((4, 3, 2)) * (i + 1) + i for i in range(4)]
    for x in batches:
        bn(Tensor(x))
    np.testing.assert_allclose(bn.running_mean.data,
                               np.mean([_per_channel(x).mean(1) for x in batches], 0), rtol=1e-13)
    np.testing.assert_allclose(bn.running_var.data,
                               np.mean([_per_channel(x).var(1, ddof=1) for x in batches], 0),
                               rtol=1e-13)


def test_without_running_statistics_the_batch_normalises_in_eval_too():
    rng = np.random.default_rng(14)
    bn = BatchNorm1d(3, track_running_stats=False, dtype=np.float64)
    assert bn.running_mean is None and bn.running_var is None and bn.num_batches_tracked is None
    assert list(bn.state_dict()) == ["weight", "bias"] and list(bn.buffers()) == []
    x = rng.standard_normal((5, 3))
    y_train = bn(Tensor(x)).data
    np.testing.assert_array_equal(bn.eval()(Tensor(x)).data, y_train)
    np.testing.assert_allclose(y_train, _closed_form(x, np.ones(3), np.zeros(3), 1e-5), rtol=1e-12)


def test_without_affine_or_bias():
    bn = BatchNorm1d(3, affine=False)
    assert bn.weight is None and bn.bias is None and list(bn.parameters()) == []
    assert list(bn.state_dict()) == ["running_mean", "running_var", "num_batches_tracked"]
    bn = BatchNorm1d(3, bias=False)
    assert bn.bias is None and [n for n, _ in bn.named_parameters()] == ["weight"]
    y = bn(Tensor(np.arange(12, dtype=np.float32).reshape(4, 3)))
    np.testing.assert_allclose(_per_channel(y.data).mean(1), 0.0, atol=1e-6)


def test_a_refused_input_changes_no_buffer():
    bn = BatchNorm1d(3, dtype=np.float64)
    bn(Tensor(np.random.default_rng(15).standard_normal((4, 3))))
    before = bn.state_dict()
    for bad in (np.zeros((1, 3)), np.zeros((4, 2)), np.zeros((2, 3), np.float32),
                np.zeros((2, 3, 2, 2))):
        with pytest.raises((ValueError, TypeError)):
            bn(Tensor(bad))
    for k, v in bn.state_dict().items():
        np.testing.assert_array_equal(v, before[k])


# --------------------------------------------------------------------------- 5. buffers
class _Net(Module):
    """A Linear, then a BatchNorm1d, then a buffer of its own, not persistent."""

    def __init__(self):
        super().__init__()
        self.fc = Linear(4, 3, rng=np.random.default_rng(0), dtype=np.float64)
        self.bn = BatchNorm1d(3, dtype=np.float64)
        self.register_buffer("scratch", Tensor(np.zeros(2)), persistent=False)

    def forward(self, x):
        return self.bn(self.fc(x))


def test_buffers_are_listed_and_saved_under_dotted_names():
    net = _Net()
    assert [n for n, _ in net.named_buffers()] == [
        "scratch", "bn.running_mean", "bn.running_var", "bn.num_batches_tracked"]
    assert [b for b in net.buffers()][1] is net.bn.running_mean
    assert [n for n, _ in net.named_parameters()] == ["fc.weight", "fc.bias", "bn.weight",
                                                      "bn.bias"]
    assert list(net.state_dict()) == ["fc.weight", "fc.bias", "bn.weight", "bn.bias",
                                      "bn.running_mean", "bn.running_var",
                                      "bn.num_batches_tracked"]        # scratch: not persistent
    assert net.state_dict()["bn.num_batches_tracked"].dtype == np.int64


def test_load_state_dict_restores_buffers_and_checks_them():
    rng = np.random.default_rng(16)
    a, b = _Net(), _Net()
    for _ in range(2):
        a(Tensor(rng.standard_normal((5, 4))))
    b.load_state_dict(a.state_dict())
    for (n, t), (_, u) in zip(a.named_buffers(), b.named_buffers()):
        np.testing.assert_array_equal(t.data, u.data, err_msg=n)
        assert t.dtype == u.dtype
    assert int(b.bn.num_batches_tracked.data) == 2
    x = Tensor(rng.standard_normal((5, 4)))
    np.testing.assert_array_equal(a.eval()(x).data, b.eval()(x).data)
    sd = a.state_dict()
    del sd["bn.num_batches_tracked"]
    with pytest.raises(ValueError,
                       match='Missing key\\(s\\) in state_dict: "bn.num_batches_tracked"'):
        b.load_state_dict(sd)
    sd = {**a.state_dict(), "bn.running_mean": np.zeros(4)}
    before = b.state_dict()
    with pytest.raises(ValueError, match="size mismatch for bn.running_mean"):
        b.load_state_dict(sd)
    for k, v in b.state_dict().items():                  # a failed load copies nothing
        np.testing.assert_array_equal(v, before[k])
    with pytest.raises(ValueError, match='Unexpected key\\(s\\) in state_dict: "scratch"'):
        b.load_state_dict({**a.state_dict(), "scratch": np.zeros(2)})


def test_register_buffer_as_pytorchs():
    m = Module()
    m.w = Parameter(np.zeros(2))
    m.register_buffer("stat", Tensor(np.ones(2)))
    assert m.stat is m._buffers["stat"]
    m.stat = Tensor(np.full(3, 2.0))                   # assigning keeps it a buffer
    assert list(m.state_dict()) == ["w", "stat"] and m.state_dict()["stat"].shape == (3,)
    m.stat = None                                      # None: registered, saved nowhere
    assert list(m.state_dict()) == ["w"] and list(m.named_buffers()) == []
    with pytest.raises(TypeError, match="cannot assign 'int' as buffer 'stat'"):
        m.stat = 3
    m.stat = Parameter(np.zeros(1))                    # a Parameter becomes a parameter
    assert list(m._buffers) == [] and [n for n, _ in m.named_parameters()] == ["w", "stat"]
    for name, tensor, error, message in (
            ("a.b", Tensor(np.zeros(1)), KeyError, 'contain "."'),
            ("", Tensor(np.zeros(1)), KeyError, "empty string"),
            ("w", Tensor(np.zeros(1)), KeyError, "attribute 'w' already exists"),
            ("forward", Tensor(np.zeros(1)), KeyError, "attribute 'forward' already exists"),
            (3, Tensor(np.zeros(1)), TypeError, "buffer name should be a string"),
            ("c", np.zeros(1), TypeError, "cannot assign 'ndarray' object to buffer 'c'")):
        with pytest.raises(error, match=re.escape(message)):
            m.register_buffer(name, tensor)
    m.register_buffer("c", Tensor(np.zeros(1)))
    del m.c
    assert "c" not in m._buffers and list(m.state_dict()) == ["w", "stat"]


def test_a_shared_buffer_is_saved_once():
    shared = Tensor(np.zeros(2))
    a, b = Module(), Module()
    a.register_buffer("s", shared)
    b.register_buffer("s", shared)
    outer = Sequential(a, b)
    assert list(outer.state_dict()) == ["0.s"] and [n for n, _ in outer.named_buffers()] == ["0.s"]


# ----------------------------------------------------------------------------- 6. errors
def test_functional_errors():
    x, C = Tensor(np.zeros((4, 3))), 3
    rm, rv = Tensor(np.zeros(C)), Tensor(np.ones(C))
    cases = [
        (dict(input=Tensor(np.zeros(3))), ValueError, "at least 2 axes"),
        (dict(input=Tensor(np.zeros((1, 3))), training=True), ValueError,
         "Expected more than 1 value per channel when training, got input size (1, 3)"),
        (dict(input=Tensor(np.zeros((1, 3, 1))), training=True), ValueError,
         "Expected more than 1 value per channel when training, got input size (1, 3, 1)"),
        (dict(input=Tensor(np.zeros((0, 3))), training=True), ValueError,
         "Expected more than 1 value per channel"),
        (dict(running_var=None, training=True), ValueError, "both be None or neither"),
        (dict(running_mean=None, running_var=None), ValueError,
         "must be given when training=False"),
        (dict(running_mean=Tensor(np.zeros(4))), ValueError, "running_mean has shape (4,)"),
        (dict(running_var=Tensor(np.ones(C, np.float32))), TypeError,
         "running_var is float32 but input is float64"),
        (dict(running_mean=[0.0, 0.0, 0.0]), TypeError, "running_mean must be a Tensor"),
        (dict(weight=np.ones(4)), ValueError,
         "weight has shape (4,), expected (3,) to match axis 1"),
        (dict(bias=np.zeros(C, np.float32)), TypeError, "bias is float32"),
        (dict(input=Tensor(np.zeros((4, 3), np.int64))), TypeError, "floating dtype"),
        (dict(training=1), TypeError, "training must be a bool"),
        (dict(momentum=1.5, training=True), ValueError, "momentum must be a number in [0, 1]"),
        (dict(momentum=None, training=True), ValueError, "momentum"),
        (dict(eps=-1e-5), ValueError, "eps must be a finite number >= 0"),
        (dict(eps=0.0, training=True), ValueError, "eps must be positive when training"),
    ]
    for change, error, message in cases:
        args = {**dict(input=x, running_mean=rm, running_var=rv, training=False), **change}
        with pytest.raises(error, match=re.escape(message)):
            F.batch_norm(**args)
    # eval takes one value a channel: it computes no statistic
    assert F.batch_norm(Tensor(np.zeros((1, 3))), rm, rv).shape == (1, 3)
    np.testing.assert_array_equal(rm.data, 0.0)          # nothing refused above changed them
    np.testing.assert_array_equal(rv.data, 1.0)


def test_module_errors():
    bn = BatchNorm1d(3)
    for shape, message in (((2, 3, 2, 2), "expected 2D or 3D input (got 4D input)"),
                           ((3,), "expected 2D or 3D input (got 1D input)")):
        with pytest.raises(ValueError, match=re.escape(f"BatchNorm1d: {message}")):
            bn(Tensor(np.zeros(shape, np.float32)))
    with pytest.raises(ValueError, match=re.escape("BatchNorm1d: input has shape (2, 4), "
                                                   "expected (N, 3) or (N, 3, L)")):
        bn(Tensor(np.zeros((2, 4), np.float32)))
    with pytest.raises(TypeError, match="^BatchNorm1d: input is float64 but the module is "
                                        "float32; use one dtype$"):
        bn(Tensor(np.zeros((2, 3))))
    with pytest.raises(TypeError, match="floating dtype"):
        bn(np.zeros((2, 3), np.int64))
    with pytest.raises(ValueError, match="Expected more than 1 value per channel when training"):
        bn(Tensor(np.zeros((1, 3), np.float32)))
    assert bn.eval()(Tensor(np.zeros((1, 3), np.float32))).shape == (1, 3)
    for kwargs, error in ((dict(num_features=0), ValueError), (dict(num_features=2.0), TypeError),
                          (dict(momentum=1.5), ValueError), (dict(eps=-1.0), ValueError),
                          (dict(affine="yes"), TypeError), (dict(track_running_stats=1), TypeError),
                          (dict(bias=None), TypeError), (dict(dtype=np.int32), TypeError)):
        with pytest.raises(error):
            BatchNorm1d(**{"num_features": 3, **kwargs})
    # a Module without weight and statistics takes either float dtype
    free = BatchNorm1d(3, affine=False, track_running_stats=False)
    for dt in (np.float32, np.float64):
        assert free(Tensor(np.arange(6, dtype=dt).reshape(2, 3))).dtype == dt


# ------------------------------------------------------------------------- 7. against PyTorch
def _torch_bn(torch, shape, mode, rng):
    """The same BatchNorm in torch and here: random weights, the same running statistics."""
    C = shape[1]
    kwargs = dict(momentum=None) if mode == "momentum None" else (
        dict(affine=False) if mode == "not affine" else
        dict(track_running_stats=False) if mode == "no running stats" else
        dict(bias=False) if mode == "no bias" else {})
    theirs = torch.nn.BatchNorm1d(C, **kwargs).double()
    ours = BatchNorm1d(C, **kwargs, dtype=np.float64)
    if ours.weight is not None:
        ours.weight.data[...] = _params(rng, C)[0]
    if ours.bias is not None:
        ours.bias.data[...] = _params(rng, C)[1]
    theirs.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in ours.state_dict().items()})
    return theirs, ours


def _step(torch, theirs, ours, x, G):
    """One forward and backward through both; returns (output, dx, parameter grads) of each."""
    xt = torch.tensor(x, requires_grad=True)
    yt = theirs(xt)
    yt.backward(torch.from_numpy(G))
    xo = Tensor(x.copy(), requires_grad=True)
    yo = ours(xo)
    yo.backward(G)
    got = [yo.data, xo.grad] + [p.grad for p in ours.parameters()]
    want = [yt.detach().numpy(), xt.grad.numpy()] + [p.grad.numpy() for p in theirs.parameters()]
    for p in (*ours.parameters(), *theirs.parameters()):
        p.grad = None
    return got, want


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mode", ["default", "momentum None", "not affine", "no running stats",
                                  "no bias"])
def test_module_parity_with_torch(shape, mode):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(17)
    theirs, ours = _torch_bn(torch, shape, mode, rng)
    for step in range(4):                                   # training: batch statistics
        x = (1.0 + step) * rng.standard_normal(shape) + step
        got, want = _step(torch, theirs, ours, x, rng.standard_normal(shape))
        assert len(got) == len(want)
        for i, (g, w) in enumerate(zip(got, want)):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12, err_msg=f"{step} {i}")
    buffers = dict(theirs.named_buffers())
    assert [n for n, _ in ours.named_buffers()] == list(buffers)
    for name, b in ours.named_buffers():
        assert b.dtype == buffers[name].numpy().dtype
        np.testing.assert_allclose(b.data, buffers[name].numpy(), rtol=1e-12, atol=1e-15,
                                   err_msg=name)
    if buffers:
        assert int(ours.num_batches_tracked.data) == int(theirs.num_batches_tracked) == 4
    theirs.eval(), ours.eval()                              # eval: the running statistics
    x = rng.standard_normal(shape)
    got, want = _step(torch, theirs, ours, x, rng.standard_normal(shape))
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12, err_msg=f"eval {i}")


@pytest.mark.parametrize("shape", SHAPES + [(3, 2, 3, 4)])
@pytest.mark.parametrize("training", [True, False], ids=["training", "eval"])
def test_functional_parity_with_torch(shape, training):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(18)
    C = shape[1]
    x, (w, b), (rm, rv) = rng.standard_normal(shape), _params(rng, C), _stats(rng, C)
    G = rng.standard_normal(shape)
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    trm, trv = torch.tensor(rm), torch.tensor(rv)
    yt = torch.nn.functional.batch_norm(tx, trm, trv, tw, tb, training, 0.3, 1e-4)
    yt.backward(torch.from_numpy(G))
    ox, ow, ob = _leaves(x, w, b)
    orm, orv = Tensor(rm.copy()), Tensor(rv.copy())
    yo = F.batch_norm(ox, orm, orv, ow, ob, training, 0.3, 1e-4)
    yo.backward(G)
    np.testing.assert_allclose(yo.data, yt.detach().numpy(), rtol=1e-10, atol=1e-12)
    for o, t in ((ox, tx), (ow, tw), (ob, tb)):
        np.testing.assert_allclose(o.grad, t.grad.numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(orm.data, trm.numpy(), rtol=1e-12)
    np.testing.assert_allclose(orv.data, trv.numpy(), rtol=1e-12)


def test_errors_are_torchs():
    torch = pytest.importorskip("torch")
    for shape, message in (((2, 3, 2, 2), "expected 2D or 3D input (got 4D input)"),
                           ((1, 3), "Expected more than 1 value per channel when training, "
                                    "got input size")):
        for call in (lambda: torch.nn.BatchNorm1d(3)(torch.zeros(shape)),
                     lambda: BatchNorm1d(3)(Tensor(np.zeros(shape, np.float32)))):
            with pytest.raises(ValueError, match=re.escape(message)):
                call()
    message = "Expected more than 1 value per channel when training, got input size"
    for call in (lambda: torch.nn.functional.batch_norm(torch.zeros(1, 3), None, None,
                                                        training=True),
                 lambda: F.batch_norm(Tensor(np.zeros((1, 3))), None, None, training=True)):
        with pytest.raises(ValueError, match=message):
            call()


def test_state_dict_round_trip_with_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(19)
    ours = Sequential(Linear(4, 3, rng=rng, dtype=np.float64), BatchNorm1d(3, dtype=np.float64))
    for _ in range(3):
        ours(Tensor(rng.standard_normal((6, 4))))
    theirs = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3)).double()
    assert list(ours.state_dict()) == list(theirs.state_dict())      # names and order
    theirs.load_state_dict({k: torch.from_numpy(v) for k, v in ours.state_dict().items()})
    assert int(theirs[1].num_batches_tracked) == 3
    x = rng.standard_normal((5, 4))
    ours.eval(), theirs.eval()
    np.testing.assert_allclose(ours(Tensor(x)).data, theirs(torch.from_numpy(x)).detach().numpy(),
                               rtol=1e-12, atol=1e-14)
    # and back: torch trains on, ours loads its state
    theirs.train()
    for _ in range(2):
        theirs(torch.from_numpy(rng.standard_normal((6, 4))))
    back = Sequential(Linear(4, 3, dtype=np.float64), BatchNorm1d(3, dtype=np.float64))
    back.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    assert int(back[1].num_batches_tracked.data) == 5
    for k, v in theirs.state_dict().items():
        np.testing.assert_array_equal(back.state_dict()[k], v.numpy(), err_msg=k)
    back.eval(), theirs.eval()
    np.testing.assert_allclose(back(Tensor(x)).data, theirs(torch.from_numpy(x)).detach().numpy(),
                               rtol=1e-12, atol=1e-14)
