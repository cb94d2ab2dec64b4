"""The edges of the engine's ops (issue 18), each expectation taken from outside our code:
PyTorch's documented behaviour, a closed form in float64, or central differences."""
import numpy as np
import pytest

from minigrad import Tensor


# ------------------------------------------------ reductions of a 0-d Tensor (tinygrad #4498)
# PyTorch: a 0-d tensor takes dim 0 and -1 (keepdim or not), returns its value as a 0-d tensor
# with gradient 1; any other dim is an IndexError ("expected to be in range of [-1, 0]").
REDUCTIONS = {
    "sum": lambda t, d, k: t.sum(d, keepdims=k),
    "sum_dim": lambda t, d, k: t.sum(dim=d, keepdim=k),
    "mean": lambda t, d, k: t.mean(dim=d, keepdim=k),
    "max": lambda t, d, k: t.max(d, keepdims=k),
    "min": lambda t, d, k: t.min(axis=d, keepdims=k),
    "max_dim": lambda t, d, k: t.max(dim=d, keepdim=k).values,
    "min_dim": lambda t, d, k: t.min(dim=d, keepdim=k).values,
    "amax": lambda t, d, k: t.amax(d, k),
    "amin": lambda t, d, k: t.amin(d, k),
    "sum_tuple": lambda t, d, k: t.sum((d,), keepdims=k),
}


@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("dim", [0, -1])
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reductions_of_a_0d_tensor_over_dim_0_and_minus_1(name, dim, keep):
    t = Tensor(np.float64(3.0), requires_grad=True)
    out = REDUCTIONS[name](t, dim, keep)
    assert out.shape == () and out.item() == 3.0
    g = np.random.default_rng(0).standard_normal()
    out.backward(np.float64(g))
    assert t.grad.shape == () and t.grad == g          # d out / d t = 1


@pytest.mark.parametrize("dim", [1, -2, 2])
@pytest.mark.parametrize("name", sorted(REDUCTIONS) + ["argmax", "argmin"])
def test_a_0d_tensor_refuses_other_dims_with_index_error(name, dim):
    t = Tensor(np.float64(3.0))
    call = REDUCTIONS.get(name, lambda t, d, k: getattr(t, name)(d, k))
    with pytest.raises(IndexError):
        call(t, dim, False)


@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("dim", [0, -1])
def test_index_of_the_extremum_of_a_0d_tensor_is_0(dim, keep):
    t = Tensor(np.float64(3.0))
    for r in (t.argmax(dim, keep), t.argmin(dim, keep), t.max(dim=dim, keepdim=keep).indices):
        assert r.shape == () and r.item() == 0 and r.dtype == np.int64


# ------------------------------------------------ a scalar base: base ** x (tfjs #346)
# torch.pow(scalar, tensor): d/dx base**x = base**x * log(base), and 0 where base == 0 and
# x >= 0 (FunctionsManual.cpp, pow_backward_exponent); elsewhere what the formula gives.
def test_zero_base():
    x = Tensor(np.array([0.0, 1.0, 2.0, 0.5, -1.0]), requires_grad=True)
    y = 0.0 ** x
    np.testing.assert_array_equal(y.data, [1.0, 0.0, 0.0, 0.0, np.inf])
    g = np.random.default_rng(1).standard_normal(5)
    y.backward(g)
    np.testing.assert_array_equal(x.grad, [0.0, 0.0, 0.0, 0.0, -np.inf])   # inf * log 0


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_positive_base_closed_form_and_dtype(dtype):
    rng = np.random.default_rng(2)
    xs = rng.standard_normal(6)
    x = Tensor(xs.astype(dtype), requires_grad=True)
    y = 2.0 ** x
    assert y.dtype == dtype
    g = rng.standard_normal(6)
    y.backward(g.astype(dtype))
    rtol = 1e-6 if dtype == np.float32 else 1e-14
    np.testing.assert_allclose(y.data, 2.0 ** xs, rtol=rtol)
    np.testing.assert_allclose(x.grad, g * 2.0 ** xs * np.log(2.0), rtol=rtol)


def test_negative_base_is_nan_where_the_power_is_not_real():
    x = Tensor(np.array([2.0, 3.0, 0.5]), requires_grad=True)
    y = (-2.0) ** x
    np.testing.assert_array_equal(y.data, [4.0, -8.0, np.nan])
    y.backward(np.ones(3))
    assert np.isnan(x.grad).all()                  # log(-2) is not real: torch gives nan too


# ------------------------------------------------ type promotion with 0-d Tensors (TVM #20405)
# The examples of PyTorch's "Tensor Attributes" page (type promotion), plus its rules: within a
# category a 0-d tensor does not promote a dimensioned one; a 0-d tensor of a higher category
# gives its own dtype; a Python float with an integer tensor gives the default dtype, float32.
def _t(dtype, shape=(1,)):
    return Tensor(np.ones(shape, dtype=dtype))


PROMOTIONS = [
    (lambda: _t(np.int32) + 5, np.int32),
    (lambda: _t(np.int32) + _t(np.int64, ()), np.int32),            # int_tensor + long_zerodim
    (lambda: _t(np.int64) + _t(np.int32), np.int64),
    (lambda: _t(np.bool_) + _t(np.int64), np.int64),
    (lambda: _t(np.bool_) + _t(np.uint8), np.uint8),
    (lambda: _t(np.float32) + _t(np.float64), np.float64),
    (lambda: _t(np.bool_) + _t(np.int32), np.int32),
    (lambda: _t(np.int64) + _t(np.float32), np.float32),            # torch.add(long, float)
    (lambda: _t(np.float32, 3) * _t(np.float64, ()), np.float32),   # TVM #20405
    (lambda: _t(np.float64, ()) * _t(np.float32, 3), np.float32),
    (lambda: _t(np.float32, 3) / np.float64(2.0), np.float32),
    (lambda: _t(np.float32, 3) - np.ones((), np.float64), np.float32),
    (lambda: _t(np.float32, ()) * _t(np.float64, ()), np.float64),  # two 0-d: no exception
    (lambda: _t(np.int64, 3) * _t(np.float64, ()), np.float64),     # higher-category 0-d
    (lambda: _t(np.int64, 3) * _t(np.float32, ()), np.float32),
    (lambda: _t(np.bool_, 3) + _t(np.int64, ()), np.int64),
    (lambda: _t(np.int64, 3) * 2.5, np.float32),                    # float scalar: default
    (lambda: 2.5 - _t(np.int32, 3), np.float32),
]


@pytest.mark.parametrize("k", range(len(PROMOTIONS)))
def test_binary_ops_promote_as_pytorch(k):
    make, dtype = PROMOTIONS[k]
    assert make().dtype == dtype


def test_a_0d_float64_operand_keeps_float32_and_gets_its_float64_gradient():
    rng = np.random.default_rng(3)
    a = rng.standard_normal(3)
    x = Tensor(a.astype(np.float32), requires_grad=True)
    s = Tensor(np.float64(1.7), requires_grad=True)
    for y, ref in ((x * s, a * 1.7), (s - x, 1.7 - a), (x / s, a / 1.7)):
        assert y.dtype == np.float32
        np.testing.assert_allclose(y.data, ref, rtol=1e-6)
    g = rng.standard_normal(3)
    (x * s).backward(g.astype(np.float32))
    assert s.grad.dtype == np.float64 and x.grad.dtype == np.float32
    np.testing.assert_allclose(s.grad, np.sum(g * a), rtol=1e-6)     # d/ds sum(g * x * s)
    np.testing.assert_allclose(x.grad, g * 1.7, rtol=1e-6)


def test_where_promotes_as_pytorch():
    from minigrad import where
    x = Tensor(np.ones(3, dtype=np.float32), requires_grad=True)
    s = Tensor(np.float64(2.0), requires_grad=True)
    y = where(np.array([True, False, True]), x, s)
    assert y.dtype == np.float32
    y.backward(np.array([1.0, 2.0, 3.0], dtype=np.float32))
    assert s.grad == 2.0 and s.grad.dtype == np.float64
    np.testing.assert_array_equal(x.grad, [1.0, 0.0, 3.0])


# ------------------------------------------------ no option accepted and ignored
@pytest.mark.skipif(np.lib.NumpyVersion(np.__version__) < "2.0.0",
                    reason="np.asarray(..., copy=) and __array__'s copy argument are NumPy 2's")
def test_array_protocol_honours_copy_false():
    # NumPy 2's __array__ protocol: copy=False must raise when a copy is needed (a cast)
    t = Tensor(np.ones(3))
    assert np.asarray(t, copy=False) is t.data
    with pytest.raises(ValueError):
        np.asarray(t, dtype=np.float32, copy=False)
    assert np.asarray(t, dtype=np.float32).dtype == np.float32
    assert np.array(t, copy=True) is not t.data
