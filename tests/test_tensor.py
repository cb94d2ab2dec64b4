"""Tensor basics: attributes, dtype rules, operators with scalars and arrays on either side."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import Tensor


def test_attributes_and_shared_memory():
    a = np.arange(6.0).reshape(2, 3)
    t = Tensor(a, requires_grad=True)
    assert t.data is a and t.numpy() is a
    assert t.shape == (2, 3) and t.ndim == 2 and t.size == 6 and t.dtype == np.float64
    assert t.grad is None and t.requires_grad and t.is_leaf
    d = t.detach()
    assert d.data is a and not d.requires_grad
    assert Tensor(np.array(2.5)).item() == 2.5
    with pytest.raises(ValueError):
        t.item()
    assert "requires_grad=True" in repr(t)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.bool_])
def test_integer_tensors_cannot_require_grad(dtype):
    with pytest.raises(TypeError):
        Tensor(np.ones(3, dtype), requires_grad=True)
    t = Tensor(np.ones(3, dtype))
    with pytest.raises(TypeError):
        t.requires_grad = True


def test_non_numeric_data_is_a_type_error():
    with pytest.raises(TypeError):
        Tensor(np.array(["a", "b"]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scalars_take_the_tensor_dtype(dtype):
    x = Tensor(np.ones(3, dtype), requires_grad=True)
    for y in (x + 1, 1 + x, x - 2.5, 2.5 - x, x * 3, 3 * x, x / 2, 2 / x, x ** 2, -x):
        assert y.dtype == dtype
    (x * 2.0 + 1.0).backward(np.ones(3, dtype))
    assert x.grad.dtype == dtype


def test_arrays_on_either_side():
    x = Tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
    a = np.array([[2.0, 0.5, -1.0]])
    for y, ref in ((a * x, a * x.data), (x * a, x.data * a), (a - x, a - x.data),
                   (x / a, x.data / a), (a @ Tensor(np.eye(3)), a)):
        assert isinstance(y, Tensor)
        np.testing.assert_array_equal(y.data, ref)
    (a - x).backward(np.array([[1.0, 2.0, 3.0]]))
    np.testing.assert_array_equal(x.grad, [-1.0, -2.0, -3.0])


def test_integer_tensor_arithmetic_stays_integer_without_grad():
    i = Tensor(np.array([1, 2, 3]))
    assert (i + 1).dtype == np.int64 and not (i * 2).requires_grad
    assert Tensor(np.array([True, False, True])).sum().item() == 2


def test_comparisons_return_bool_tensors():
    x = Tensor(np.array([1.0, 2.0, 3.0]))
    assert (x > 2).dtype == np.bool_
    np.testing.assert_array_equal((x <= 2).data, [True, True, False])


def test_transpose_conventions_follow_numpy():
    a = np.random.default_rng(0).standard_normal((2, 3, 4))
    t = Tensor(a)
    assert t.transpose().shape == a.transpose().shape == (4, 3, 2)
    assert t.T.shape == a.T.shape
    assert t.swapaxes(0, 2).shape == np.swapaxes(a, 0, 2).shape
    assert t.transpose(1, 0, 2).shape == (3, 2, 4)
    assert t.reshape(6, 4).shape == t.reshape((6, 4)).shape == (6, 4)


def test_float32_gradients_stay_float32_through_matmul_broadcast():
    rng = np.random.default_rng(1)
    a = Tensor(rng.standard_normal((2, 3, 4)).astype(np.float32), requires_grad=True)
    b = Tensor(rng.standard_normal((4, 5)).astype(np.float32), requires_grad=True)
    c = Tensor(rng.standard_normal((5,)).astype(np.float32), requires_grad=True)
    y = (a @ b + c).relu().mean(axis=(0, -1))
    y.backward(rng.standard_normal(3).astype(np.float32))
    assert a.grad.dtype == b.grad.dtype == c.grad.dtype == np.float32
    assert c.grad.shape == (5,)


def test_integer_tensor_as_index_and_module_functions():
    x = Tensor(np.arange(12.0).reshape(4, 3), requires_grad=True)
    idx = Tensor(np.array([2, 0]))
    np.testing.assert_array_equal(x[idx].data, x.data[[2, 0]])
    parts = mg.split(x, [1, 3], axis=0)
    assert [p.shape for p in parts] == [(1, 3), (2, 3), (1, 3)]
    assert mg.unbroadcast(np.ones((2, 4, 3)), (4, 1)).shape == (4, 1)
    np.testing.assert_array_equal(mg.unbroadcast(np.ones((2, 4, 3)), (4, 1)), np.full((4, 1), 6.0))
