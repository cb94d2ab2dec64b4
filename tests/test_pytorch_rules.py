"""PyTorch's rules where NumPy's differ: advanced indexing with an integer, the dtype of ``**``
and of a Python float beside an integer Tensor in every binary op, ``maximum``/``minimum``/
``rsqrt``/``Tensor ** Tensor``, and the exception types of bad input.

Each expectation is PyTorch's documented behaviour, stated beside the test (with the NumPy
result it replaces); the ``*_torch`` tests replay the same cases on torch where it is installed
(the ``parity`` extra) and compare values, gradients and exception types.
"""
import numpy as np
import pytest

import minigrad as mg
from minigrad import Tensor, gradcheck

RNG = np.random.default_rng(29)


# --------------------------------------------------------------- indexing
# PyTorch applies an integer index first, as a select that removes its axis, and reads the rest
# of the index as NumPy does: x[0, :, idx] is x[0][:, idx]. NumPy counts the integer as one
# more index array and, the two being separated by a slice, moves their axes to the front.
def test_integer_then_slice_then_index_array_keeps_the_axes_in_place():
    y = Tensor(np.arange(24.0).reshape(2, 3, 4))
    assert np.arange(24.0).reshape(2, 3, 4)[0, :, [0, 2]].shape == (2, 3)   # NumPy's reading
    r = y[0, :, [0, 2]]
    assert r.shape == (3, 2)
    np.testing.assert_array_equal(r.data, y.data[0][:, [0, 2]])

    x = Tensor(RNG.standard_normal((2, 5, 6, 5, 3, 4)))
    idx = RNG.integers(0, 5, (2, 1, 1, 5, 1, 1))
    r = x[1, :, 3:11:2, idx, 0:2]
    assert r.shape == (5, 2, 2, 1, 1, 5, 1, 1, 2, 4)
    np.testing.assert_array_equal(r.data, x.data[1][:, 3:11:2, idx, 0:2])
    # a 0-d integer Tensor is an integer, as in PyTorch
    assert x[Tensor(np.array(1)), :, 3:11:2, idx, 0:2].shape == r.shape


def test_mixed_index_gradient_and_setitem_follow_the_same_rule():
    idx = (1, slice(None), [0, 2, 2])                  # a repeated index accumulates
    a = Tensor(RNG.standard_normal((2, 3, 4)), requires_grad=True)
    assert gradcheck(lambda t: t[idx], [a], seed=1)
    g = RNG.standard_normal((3, 3))
    a[idx].backward(g)
    expected = np.zeros((2, 3, 4))
    np.add.at(expected[1], (slice(None), [0, 2, 2]), g)
    np.testing.assert_array_equal(a.grad, expected)

    v = RNG.standard_normal((3, 2))
    t = Tensor(np.zeros((2, 3, 4)))
    t[1, :, [0, 2]] = v                               # the value has the indexed shape (3, 2)
    np.testing.assert_array_equal(t.data[1][:, [0, 2]], v)
    w = Tensor(RNG.standard_normal((2, 3, 4)), requires_grad=True)
    z = w * 1.0
    z[1, :, [0, 2]] = v                               # recorded in the graph
    z.backward(np.ones((2, 3, 4)))
    np.testing.assert_array_equal(z.data[1][:, [0, 2]], v)
    np.testing.assert_array_equal(w.grad[1][:, [0, 2]], 0.0)
    assert w.grad.sum() == 24 - 6
    with pytest.raises(RuntimeError, match="broadcast"):
        t[1, :, [0, 2]] = v.T


def _index_cases():
    m4 = np.array([True, False, True, False])
    return [
        ((2, 3, 4), (0, slice(None), [0, 2])),
        ((2, 3, 4), ([0, 1], slice(None), [0, 2])),
        ((2, 3, 4), ([0, 1], None, [0, 2])),
        ((2, 3, 4), (0, Ellipsis, [0, 2])),
        ((2, 3, 4), (Ellipsis, 0, [0, 2])),
        ((2, 3, 4), (0, None, slice(None), [0, 2])),
        ((2, 3, 4), (slice(None), 0, [0, 2])),
        ((2, 3, 4), ([1, 1], slice(None), 0)),
        ((2, 3, 4), (1, slice(None), m4)),
        ((2, 3, 4), (0, np.array([True, False, True]), [0, 1])),
        ((2, 3, 4), (True, slice(None), [0, 2])),
        ((2, 3, 4), (0, slice(None), True)),
        ((2, 3, 4), (1, slice(None), [[0, 2], [3, 3]])),
        ((2, 5, 6, 5, 3, 4), (1, slice(None), slice(3, 11, 2),
                              np.arange(10).reshape(2, 1, 1, 5, 1, 1) % 5, slice(0, 2))),
        ((2, 5, 6, 5, 3, 4), (slice(None), [0, 1], 0, [0, 1])),
        ((2, 5, 6, 5, 3, 4), (1, [0, 0, 1], slice(None), 2, [1, 1, 1])),
    ]


@pytest.mark.slow  # runs PyTorch; leave out with -m "not slow"
@pytest.mark.parametrize("shape, index", _index_cases())
def test_indexing_torch(shape, index):
    torch = pytest.importorskip("torch")
    ti = tuple(torch.from_numpy(i) if isinstance(i, np.ndarray) else i for i in index)
    a = RNG.standard_normal(shape)
    t, tt = Tensor(a.copy(), requires_grad=True), torch.tensor(a, requires_grad=True)
    y, ty = t[index], tt[ti]
    np.testing.assert_array_equal(y.data, ty.detach().numpy())
    g = RNG.standard_normal(y.shape)
    y.backward(g)
    ty.backward(torch.from_numpy(g))
    np.testing.assert_array_equal(t.grad, tt.grad.numpy())
    s, ts = Tensor(np.zeros(shape)), torch.zeros(shape, dtype=torch.float64)
    s[index], ts[ti] = g, torch.from_numpy(g)
    np.testing.assert_array_equal(s.data, ts.numpy())


# --------------------------------------------------------------- dtypes of **
# PyTorch's type promotion (torch.result_type, "Type promotion" in the docs): a Python float
# beside an integer Tensor gives the default dtype, float32; a Python int keeps the integer
# dtype; a 0-d Tensor does not widen a dimensioned one of its category.
I32 = np.array([1, 2, 3], dtype=np.int32)
POW_DTYPES = [     # (name, fn(i, T): i an int32 Tensor, T makes a Tensor of an array, dtype)
    ("int ** 2.0", lambda i, T: i ** 2.0, np.float32),
    ("int ** 0.5", lambda i, T: i ** 0.5, np.float32),
    ("int ** -1.0", lambda i, T: i ** -1.0, np.float32),
    ("0.7 ** int", lambda i, T: 0.7 ** i, np.float32),
    ("int ** 2", lambda i, T: i ** 2, np.int32),
    ("2 ** int", lambda i, T: 2 ** i, np.int32),
    ("int ** int", lambda i, T: i ** i, np.int32),
    ("int ** float32", lambda i, T: i ** T(np.float32([.5, 1., 2.])), np.float32),
    ("float32 ** 0-d float64", lambda i, T: T(np.float32([1., 2.])) ** T(np.array(2.)),
     np.float32),
    ("float32 ** int", lambda i, T: T(np.float32([1., 2., 3.])) ** i, np.float32),
]


@pytest.mark.parametrize("name, fn, dtype", POW_DTYPES, ids=[c[0] for c in POW_DTYPES])
def test_pow_result_dtype(name, fn, dtype):
    r = fn(Tensor(I32), Tensor)
    assert r.dtype == dtype
    f64 = lambda a: np.asarray(a, dtype=np.float64)   # noqa: E731
    np.testing.assert_allclose(r.data, fn(f64(I32), f64), rtol=1e-6)


# "Integers to negative integer powers are not allowed" (torch.pow with an integer Tensor and
# a negative integer exponent raises a RuntimeError).
def test_integer_to_a_negative_integer_power_is_refused():
    for call in (lambda: Tensor(I32) ** -2, lambda: Tensor(I32).pow(-1)):
        with pytest.raises(RuntimeError, match="negative integer powers"):
            call()


BINARY = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a / b, "**": lambda a, b: a ** b, "maximum": mg.maximum,
    "minimum": mg.minimum, "where": lambda a, b: mg.where(np.array([True, False, True]), a, b),
}


@pytest.mark.parametrize("op", sorted(BINARY))
def test_every_binary_op_gives_float32_for_a_python_float_and_an_integer_tensor(op):
    fn = BINARY[op]
    i = Tensor(I32)
    assert fn(i, 0.5).dtype == np.float32 and fn(0.5, i).dtype == np.float32


def test_clamp_of_an_integer_tensor_with_a_float_bound_is_float32():
    r = Tensor(I32).clamp(0.5, 2.5)
    assert r.dtype == np.float32 and r.tolist() == [1.0, 2.0, 2.5]
    assert Tensor(I32).clamp(max=2).dtype == np.int32


# --------------------------------------------------------------- maximum, minimum, rsqrt, pow
def test_tensor_pow_tensor_gradients_for_both():
    a = Tensor(np.abs(RNG.standard_normal((3, 4))) + 0.5, requires_grad=True)
    b = Tensor(RNG.standard_normal((4,)), requires_grad=True)
    assert gradcheck(lambda a, b: a ** b, [a, b], seed=2)
    assert gradcheck(lambda a, b: (b.abs() + 0.5).pow(a), [a, b], seed=3)
    # torch.pow's backward at x = 0: d/dx is 0 where y = 0, d/dy is 0 where y >= 0
    x = Tensor(np.array([0., 0., 2.]), requires_grad=True)
    y = Tensor(np.array([0., 2., 3.]), requires_grad=True)
    (x ** y).backward(np.ones(3))
    np.testing.assert_array_equal(x.grad, [0., 0., 12.])
    np.testing.assert_allclose(y.grad, [0., 0., 8 * np.log(2.)], rtol=1e-15)


def test_maximum_minimum_rsqrt_values():
    a, b = np.array([1., 2., np.nan, 4.]), np.array([[2.], [3.]])
    np.testing.assert_array_equal(mg.maximum(Tensor(a), Tensor(b)).data, np.maximum(a, b))
    np.testing.assert_array_equal(Tensor(a).minimum(Tensor(b)).data, np.minimum(a, b))
    assert mg.maximum(Tensor(I32), Tensor(np.float32([1.5, 2, 2]))).dtype == np.float32
    x = Tensor(np.array([4., 0.25, 0.]))
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(x.rsqrt().data, [0.5, 2., np.inf])
    assert Tensor(np.float32([4.])).rsqrt().dtype == np.float32
    with pytest.raises(RuntimeError):
        mg.maximum(Tensor(np.ones(3)), Tensor(np.ones(4)))


@pytest.mark.slow  # runs PyTorch; leave out with -m "not slow"
def test_pow_maximum_rsqrt_torch():
    torch = pytest.importorskip("torch")
    xs = np.array([0., 0., 2., -1.5, 0.5, 3.])
    ys = np.array([0., 2., 3., 2., -1., 0.5])
    cases = [
        (lambda x, y: x ** y, lambda x, y: x ** y),
        (lambda x, y: x.pow(2.0) + 0.5 ** y, lambda x, y: x.pow(2.0) + 0.5 ** y),
        (lambda x, y: 0.0 ** y, lambda x, y: 0.0 ** y),
        (mg.maximum, torch.maximum),
        (lambda x, y: x.minimum(y), lambda x, y: x.minimum(y)),
        (lambda x, y: (x.abs() + y.abs()).rsqrt(), lambda x, y: (x.abs() + y.abs()).rsqrt()),
    ]
    g = RNG.standard_normal(6)
    for ours, theirs in cases:
        x, y = Tensor(xs.copy(), requires_grad=True), Tensor(ys.copy(), requires_grad=True)
        tx, ty = torch.tensor(xs, requires_grad=True), torch.tensor(ys, requires_grad=True)
        with np.errstate(all="ignore"):
            out = ours(x, y)
            out.backward(g)
        tout = theirs(tx, ty)
        tout.backward(torch.from_numpy(g))
        np.testing.assert_allclose(out.data, tout.detach().numpy(), rtol=1e-12, equal_nan=True)
        for t, tt in ((x, tx), (y, ty)):
            if tt.grad is not None:
                np.testing.assert_allclose(t.grad, tt.grad.numpy(), rtol=1e-12, equal_nan=True)
    for name, fn, dtype in POW_DTYPES:
        r = fn(torch.from_numpy(I32), torch.from_numpy)
        assert r.dtype == getattr(torch, np.dtype(dtype).name), name
    with pytest.raises(RuntimeError, match="negative integer powers"):
        torch.from_numpy(I32) ** -2


# --------------------------------------------------------------- exception types
# PyTorch raises RuntimeError for these, NumPy ValueError: minigrad raises ValueRuntimeError,
# a subclass of both, so code written for either catches it.
A, B = np.zeros((2, 3)), np.zeros((4, 5))
ERRORS = {
    "matmul shapes": (lambda mod, T: T(A) @ T(B)),
    "matmul 0-d": (lambda mod, T: T(A) @ T(np.array(1.0))),
    "broadcast": (lambda mod, T: T(A) + T(B)),
    "broadcast_to": (lambda mod, T: T(A).broadcast_to((4, 5))),
    "permute repeated": (lambda mod, T: T(A).permute(0, 0)),
    "permute short": (lambda mod, T: T(A).permute(0)),
    "reshape two -1": (lambda mod, T: T(A).reshape(-1, -1)),
    "reshape size": (lambda mod, T: T(A).reshape(4)),
    "cat 0-d": (lambda mod, T: mod.cat([T(np.array(1.)), T(np.array(2.))])),
    "cat shapes": (lambda mod, T: mod.cat([T(A), T(B)])),
    "stack shapes": (lambda mod, T: mod.stack([T(A), T(B)])),
    "clamp(None, None)": (lambda mod, T: T(A).clamp(None, None)),
    "item": (lambda mod, T: T(A).item()),
    "bool": (lambda mod, T: bool(T(A))),
    "flatten": (lambda mod, T: T(A).flatten(1, 0)),
    "t() of 3-D": (lambda mod, T: T(np.zeros((1, 1, 1))).t()),
    "sum repeated dims": (lambda mod, T: T(A).sum(dim=(0, 0))),
    "zeros(-1)": (lambda mod, T: mod.zeros(-1)),
    "arange step 0": (lambda mod, T: mod.arange(0, 5, 0)),
    "arange wrong sign": (lambda mod, T: mod.arange(5, 0)),
    "arange inf": (lambda mod, T: mod.arange(0, float("inf"))),
    "setitem shape": (lambda mod, T: T(A).__setitem__(0, T(np.zeros(4)))),
    "+= broadcast": (lambda mod, T: T(A).__iadd__(T(B))),
    "backward shape": (lambda mod, T: T(np.zeros(2), requires_grad=True).sum().backward(
        T(np.zeros(2)))),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_runtime_error_where_pytorch_raises_one(name):
    with pytest.raises(RuntimeError) as err:
        ERRORS[name](mg, Tensor)
    assert isinstance(err.value, ValueError)          # and NumPy's type, for NumPy code


# torch.arange(2**33, dtype=torch.int32) asks for 32 GiB (a RuntimeError from the allocator
# where memory is short); the values do not fit in int32, which is said before allocating.
def test_arange_refuses_values_that_overflow_the_dtype():
    with pytest.raises(RuntimeError, match="overflow int32"):
        mg.arange(2**33, dtype=np.int32)
    with pytest.raises(RuntimeError, match="overflow int8"):
        mg.arange(-200, -190, dtype=np.int8)
    assert mg.arange(2**31 - 3, 2**31 - 1, dtype=np.int32).tolist() == [2**31 - 3, 2**31 - 2]
    assert mg.arange(0).shape == (0,) and mg.arange(5, 0, -2).tolist() == [5, 3, 1]


@pytest.mark.slow  # runs PyTorch; leave out with -m "not slow"
@pytest.mark.parametrize("name", sorted(ERRORS))
def test_runtime_error_torch(name):
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError):
        ERRORS[name](torch, lambda a, **kw: torch.tensor(a, **kw))
