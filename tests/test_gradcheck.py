"""The checker is tested too (HIPS/autograd's test_tests.py): planted wrong backward passes
must fail, in slow and in fast mode, and the report must name the right input and entry;
the correct versions must pass."""
import re

import numpy as np
import pytest

import minigrad as mg
from minigrad import Function, GradcheckError, GradcheckReport, Tensor, gradcheck, gradcheck_report


def _t(shape, seed, scale=1.0, offset=0.0):
    return Tensor(np.random.default_rng(seed).standard_normal(shape) * scale + offset,
                  requires_grad=True)


# --------------------------------------------------------------------------- planted bugs
class MulScaled(Function):
    """c = a * b with da off by a factor 1.01 when ctx.bug."""

    @staticmethod
    def forward(ctx, a, b, bug):
        ctx.save_for_backward(a, b)
        ctx.bug = bug
        return a * b

    @staticmethod
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        return dc * b * (1.01 if ctx.bug else 1.0), dc * a, None


class TanhIgnoresUpstream(Function):
    """c = tanh(a); the bug returns 1 - c^2, ignoring dc."""

    @staticmethod
    def forward(ctx, a, bug):
        c = np.tanh(a)
        ctx.save_for_backward(c)
        ctx.bug = bug
        return c

    @staticmethod
    def backward(ctx, dc):
        (c,) = ctx.saved_tensors
        return ((1 - c * c) if ctx.bug else dc * (1 - c * c)), None


class AddBroadcast(Function):
    """c = a + b, b of shape (3, 1) broadcast over (3, 4); the bug keeps one column of dc
    instead of summing them (a missing broadcast reduction of the right shape)."""

    @staticmethod
    def forward(ctx, a, b, bug):
        ctx.bug = bug
        return a + b

    @staticmethod
    def backward(ctx, dc):
        db = dc[:, :1] if ctx.bug else dc.sum(axis=1, keepdims=True)
        return dc, db.copy(), None


class AddBroadcastNoReduce(Function):
    """c = a + b with b (3, 1); the bug returns the unreduced (3, 4) gradient for b."""

    @staticmethod
    def forward(ctx, a, b):
        return a + b

    @staticmethod
    def backward(ctx, dc):
        return dc, dc


class MatMulT(Function):
    """c = a @ b (square); the bug returns da transposed."""

    @staticmethod
    def forward(ctx, a, b, bug):
        ctx.save_for_backward(a, b)
        ctx.bug = bug
        return a @ b

    @staticmethod
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        da = dc @ b.T
        return (da.T.copy() if ctx.bug else da), a.T @ dc, None


class DivSwapped(Function):
    """c = a / b; the bug sends b's gradient to a and a's to b (same shapes)."""

    @staticmethod
    def forward(ctx, a, b, bug):
        ctx.save_for_backward(a, b)
        ctx.bug = bug
        return a / b

    @staticmethod
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        da, db = dc / b, -dc * a / (b * b)
        return (db, da, None) if ctx.bug else (da, db, None)


class Gather(Function):
    """c = w[idx]; the bug uses `da[idx] += dc`, which drops repeated indices."""

    @staticmethod
    def forward(ctx, w, idx, bug):
        ctx.idx, ctx.shape, ctx.bug = idx, w.shape, bug
        return w[idx]

    @staticmethod
    def backward(ctx, dc):
        dw = np.zeros(ctx.shape)
        if ctx.bug:
            dw[ctx.idx] += dc
        else:
            np.add.at(dw, ctx.idx, dc)
        return dw, None, None


W3 = np.random.default_rng(99).standard_normal((3, 4)) * 1.7  # random non-unit weights

# id -> (fn(bug) -> callable, inputs factory, input position named, entry named (or None))
PLANTED = {
    "scale_1.01": (lambda bug: lambda a, b: MulScaled.apply(a, b, bug) * W3,
                   lambda: [_t((3, 4), 1), _t((3, 4), 2)], 0, None),
    "ignored_upstream": (lambda bug: lambda a: TanhIgnoresUpstream.apply(a, bug),
                         lambda: [_t((2, 3), 3)], 0, None),
    "ignored_upstream_scalar_out": (lambda bug: lambda a: TanhIgnoresUpstream.apply(a, bug).sum() * 1.3,
                                    lambda: [_t((4,), 4)], 0, None),
    "missing_broadcast_reduction": (lambda bug: lambda a, b: AddBroadcast.apply(a, b, bug) * W3,
                                    lambda: [_t((3, 4), 5), _t((3, 1), 6)], 1, None),
    "transposed_matmul": (lambda bug: lambda a, b: MatMulT.apply(a, b, bug),
                          lambda: [_t((3, 3), 7), _t((3, 3), 8)], 0, None),
    "wrong_input": (lambda bug: lambda a, b: DivSwapped.apply(a, b, bug),
                    lambda: [_t((2, 2), 9), _t((2, 2), 10, 0.3, 2.0)], None, None),
    "fancy_index_plus_equals": (lambda bug: lambda w, i: Gather.apply(w, i, bug) * 0.7,
                                lambda: [_t((4, 2), 11), Tensor(np.array([1, 3, 3, 0]))], 0, 3),
}


@pytest.mark.parametrize("fast", [False, True], ids=["slow", "fast"])
@pytest.mark.parametrize("name", list(PLANTED))
def test_planted_bug_fails_and_names_input(name, fast):
    make, inputs, pos, row = PLANTED[name]
    ins = inputs()
    with pytest.raises(GradcheckError) as ei:
        gradcheck(make(True), ins, fast_mode=fast)
    msg, rep = str(ei.value), ei.value.report
    assert rep is not None and not rep.passed
    assert rep.mode == ("fast" if fast else "slow")
    assert f"{rep.mode} mode" in msg and "eps=1e-06" in msg and "seed=0" in msg
    assert "atol=1e-05" in msg and "rtol=0.001" in msg
    assert rep.check in ("jacobian", "vjp")
    assert re.search(r"\d+ of \d+ ", msg)
    if pos is not None:
        assert rep.worst[0] == pos
        assert f"input {pos} (shape {ins[pos].shape})" in msg
    if row is not None:  # the repeated index row 3 is the one that loses contributions
        assert rep.worst[1][0] == row
    assert "worst entries" in msg
    # the correct backward passes, in the same mode
    assert gradcheck(make(False), inputs(), fast_mode=fast)


@pytest.mark.parametrize("fast", [False, True], ids=["slow", "fast"])
def test_missing_reduction_with_wrong_shape_is_reported(fast):
    a, b = _t((3, 4), 1), _t((3, 1), 2)
    rep = gradcheck_report(lambda a, b: AddBroadcastNoReduce.apply(a, b), [a, b], fast_mode=fast)
    assert not rep.passed and rep.check == "backward error"
    assert "AddBroadcastNoReduce" in rep.message and "input 1" in rep.message
    assert not gradcheck(lambda a, b: AddBroadcastNoReduce.apply(a, b), [a, b],
                         raise_exception=False)


def test_hints():
    a, b = _t((3, 4), 1), _t((3, 4), 2)
    msg = gradcheck_report(lambda a, b: MulScaled.apply(a, b, True) * W3, [a, b]).message
    assert "scale error" in msg and "1.01" in msg
    a, b = _t((3, 3), 7), _t((3, 3), 8)
    msg = gradcheck_report(lambda a, b: MatMulT.apply(a, b, True), [a, b]).message
    assert "transpose" in msg
    a, b = _t((2, 2), 9), _t((2, 2), 10, 0.3, 2.0)
    msg = gradcheck_report(lambda a, b: DivSwapped.apply(a, b, True), [a, b]).message
    assert "wrong input" in msg
    # A path that never reaches its input: all-zero analytical column.
    x, y = _t((3,), 3), _t((3,), 4)
    rep = gradcheck_report(lambda x, y: x * 2.0 + (y * 3.0).detach(), [x, y])
    assert not rep.passed and "missing path" in rep.message and rep.worst[0] == 1


def test_small_blocks_print_both_jacobians():
    a, b = _t((2, 2), 1), _t((2, 2), 2)
    msg = gradcheck_report(lambda a, b: MulScaled.apply(a, b, True), [a, b]).message
    assert "analytical Jacobian" in msg and "numerical Jacobian" in msg
    # the worst entry line names output index, input index and the input value there
    a0 = a.data.reshape(-1)
    line = [l for l in msg.splitlines() if l.strip().startswith("(")][0]
    out_idx, in_idx = re.findall(r"\(\d+, \d+\)", line)[:2]
    k = int(in_idx[1]) * 2 + int(in_idx[4])
    assert f"{a0[k]:.6g}" in line and out_idx == in_idx  # diagonal Jacobian


def test_correct_ops_pass_with_report_numbers():
    a, b = _t((3, 4), 1), _t((4, 2), 2)
    for fast in (False, True):
        rep = gradcheck_report(lambda a, b: (a @ b).tanh() * 1.5, [a, b], fast_mode=fast)
        assert isinstance(rep, GradcheckReport) and rep.passed and rep.check == "passed"
        assert 0 <= rep.max_abs_err < 1e-6 and 0 <= rep.max_rel_err < 1e-3
        assert rep.max_tol_ratio < 1 and rep.n_violations == 0 and rep.n_compared > 0
        assert rep.checked_inputs == (0, 1)
    assert rep.worst is None  # fast mode compares directions, not entries
    rep = gradcheck_report(lambda a, b: (a @ b).tanh() * 1.5, [a, b])
    assert rep.worst[0] in (0, 1) and len(rep.worst[1]) == 2
    # max abs error is the actual max: planting a 1e-7 error raises it to about that
    assert rep.max_abs_err < 1e-8


def test_kink_is_named_not_blamed():
    x = Tensor(np.array([-1.0, 0.0, 2.0]), requires_grad=True)
    for fast in (False, True):
        rep = gradcheck_report(lambda x: x.relu() * 3.0, [x], fast_mode=fast)
        assert not rep.passed and rep.check == "kink"
        assert "non-differentiable point at input 0, index (1,), value 0.0" in rep.message
        assert "scale error" not in rep.message
    assert gradcheck(lambda x: x.relu() * 3.0, [Tensor(np.array([-1.0, 0.3, 2.0]),
                                                        requires_grad=True)])


def test_float32_input_is_a_type_error():
    x = Tensor(np.ones(3, np.float32), requires_grad=True)
    with pytest.raises(TypeError):
        gradcheck(lambda x: x * 2.0, [x])
    with pytest.raises(TypeError):
        gradcheck_report(lambda x: x * 2.0, [x], fast_mode=True)


def test_no_input_requires_grad_is_a_value_error():
    with pytest.raises(ValueError):
        gradcheck(lambda x: x * 2.0, [Tensor(np.ones(3))])


def test_integer_inputs_skipped_and_get_no_gradient():
    w = _t((5, 3), 1)
    idx = Tensor(np.array([[0, 4], [4, 2]]))
    targets = np.array([1, 2])
    assert gradcheck(lambda w, i, t: w[i][..., t] * 1.1, [w, idx, targets])
    assert idx.grad is None


def test_unchecked_input_receiving_a_gradient_fails():
    const = Tensor(np.ones(3))

    def fn(x, c):
        c.grad = np.ones(3)  # something writes a gradient into a constant
        return x * 2.0
    rep = gradcheck_report(fn, [_t((3,), 1), const])
    assert not rep.passed and rep.check == "unchecked input got a gradient"
    assert const.grad is None  # restored


def test_grad_and_data_restored_and_enable_grad():
    x = _t((2, 3), 1)
    before_grad = np.full((2, 3), 5.0)
    x.grad = before_grad
    data_obj, data_copy = x.data, x.data.copy()
    seen = []

    def fn(x):
        seen.append(mg.is_grad_enabled())
        return x.exp() * 0.5
    with mg.no_grad():
        assert gradcheck(fn, [x])
    assert seen[0] is True  # analytical passes run under enable_grad
    assert x.grad is before_grad and x.data is data_obj
    np.testing.assert_array_equal(x.data, data_copy)
    # also after a failure
    rep = gradcheck_report(lambda a, b: MulScaled.apply(a, b, True), [x, _t((2, 3), 2)])
    assert not rep.passed and x.grad is before_grad and x.data is data_obj


def test_input_mutation_is_detected():
    def fn(x):
        x.data[0] += 1.0
        return x * 2.0
    rep = gradcheck_report(fn, [_t((3,), 1)])
    assert not rep.passed and rep.check == "input mutated" and "input 0" in rep.message

    class MutatingBackward(Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * 2

        @staticmethod
        def backward(ctx, dc):
            (a,) = ctx.saved_tensors
            a *= 1.0000001
            return dc * 2
    rep = gradcheck_report(lambda x: MutatingBackward.apply(x), [_t((3,), 2)])
    assert not rep.passed and rep.check == "input mutated" and "backward" in rep.message


def test_zero_upstream_must_give_zero_gradient():
    class Leaky(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, dc):
            return dc * 2 + 1e-9 * (dc == 0)  # too small for the tolerances, not exactly zero
    rep = gradcheck_report(lambda x: Leaky.apply(x), [_t((2, 2), 1)])
    assert not rep.passed and rep.check == "zero upstream" and "input 0" in rep.message


def test_nondeterministic_backward_fails():
    class Noisy(Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, dc):
            noise = np.random.default_rng().standard_normal(dc.shape) * 1e-12
            return dc * (2 + noise)
    rep = gradcheck_report(lambda x: Noisy.apply(x), [_t((3,), 1)])
    assert not rep.passed and rep.check == "determinism"


def test_non_finite_gradient_fails():
    x = Tensor(np.array([0.0, 1.0]), requires_grad=True)
    with np.errstate(divide="ignore"):
        rep = gradcheck_report(lambda x: (x * 1.0).sqrt(), [x])
    assert not rep.passed and rep.check == "finite" and rep.worst == (0, (0,))


def test_raise_exception_false_returns_false():
    a, b = _t((2, 2), 1), _t((2, 2), 2)
    assert gradcheck(lambda a, b: MulScaled.apply(a, b, True), [a, b],
                     raise_exception=False) is False
    assert gradcheck(lambda a, b: MulScaled.apply(a, b, True), [a, b], raise_exception=False,
                     fast_mode=True) is False


@pytest.mark.slow
def test_fast_mode_checks_every_parameter_of_a_model():
    # ~100k float64 parameters read through closure (as a Module's would be), checked jointly.
    rng = np.random.default_rng(0)
    ws = [Tensor(rng.standard_normal((64, 64)) * 0.15, requires_grad=True) for _ in range(24)]
    x = Tensor(rng.standard_normal((4, 64)))

    def model(*_):
        h = x
        for w in ws:
            h = (h @ w).tanh()
        return h
    assert sum(w.size for w in ws) > 98_000
    assert gradcheck(model, ws, fast_mode=True)
    # one planted bug in one layer is caught and located (a smaller model: the report then
    # builds the failing input's Jacobian entry by entry)
    small = [Tensor(rng.standard_normal((16, 16)) * 0.3, requires_grad=True) for _ in range(8)]
    bad, x16 = small[5], Tensor(rng.standard_normal((4, 16)))

    def model_bug(*_):
        h = x16
        for w in small:
            h = MatMulScaled.apply(h, w) if w is bad else h @ w
            h = h.tanh()
        return h
    rep = gradcheck_report(model_bug, small, fast_mode=True)
    assert not rep.passed and rep.worst[0] == 5


class MatMulScaled(Function):
    """c = a @ b with db off by 1.01."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b

    @staticmethod
    def backward(ctx, dc):
        a, b = ctx.saved_tensors
        return dc @ b.T, (a.T @ dc) * 1.01


def test_repeated_input_tensor_checked_once():
    x = _t((3,), 1)
    rep = gradcheck_report(lambda a, b: a * b * 0.9, [x, x])
    assert rep.passed and rep.checked_inputs == (0,)
