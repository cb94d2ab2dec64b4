"""The gradient check's building blocks in minigrad/gradcheck.py, against closed forms: the
Jacobian of ``W @ x`` is ``W``, of ``tanh(x)`` is ``diag(1 - tanh(x)^2)``; the comparison is
``|a - n| <= atol + rtol * |n|`` with NaN failing."""
import numpy as np

from minigrad import Tensor
from minigrad.gradcheck import (analytical_jacobian, compare, engine_vjp, evaluate,
                                forward_graph, numerical_jacobian, numerical_vjp)


def test_numerical_jacobian_of_a_linear_map_is_its_matrix_and_x_is_restored():
    rng = np.random.default_rng(0)
    W = rng.standard_normal((4, 3))
    x = Tensor(rng.standard_normal(3), requires_grad=True)
    before = x.data.copy()
    J = numerical_jacobian(lambda: evaluate(lambda t: t @ W.T, [x]), x.data, 1e-6, 4)
    assert J.shape == (4, 3) and J.dtype == np.float64
    np.testing.assert_allclose(J, W, rtol=0, atol=1e-8)
    np.testing.assert_array_equal(x.data, before)
    # J^T G without storing J, for a random upstream G
    G = rng.standard_normal(4)
    np.testing.assert_allclose(numerical_vjp(lambda: evaluate(lambda t: t @ W.T, [x]), x.data,
                                             1e-6, G), W.T @ G, rtol=0, atol=1e-8)


def test_analytical_jacobian_of_tanh_is_diagonal_in_every_layout():
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 2))
    for arr in (a, np.asfortranarray(a)):  # the one-hot backward indexes flat, C order
        x = Tensor(arr.copy(order="K"), requires_grad=True)
        out = forward_graph(lambda t: t.tanh(), [x])
        (J,) = analytical_jacobian(out, [x], lambda o, G: engine_vjp(o, [x], G, True))
        expected = np.diag((1 - np.tanh(a) ** 2).reshape(-1))
        np.testing.assert_allclose(J, expected, rtol=1e-12, atol=0)
        Jn = numerical_jacobian(lambda: evaluate(lambda t: t.tanh(), [x]), x.data, 1e-6, 6)
        np.testing.assert_allclose(Jn, expected, rtol=0, atol=1e-8)


def test_compare_is_the_pytorch_tolerance_and_nan_fails():
    n = np.array([1.0, 1.0, 0.0, 0.0, 2.0])
    a = np.array([1.0 + 1.1e-3, 1.0 + 0.9e-3, 0.9e-5, 1.1e-5, np.nan])
    # allowed: atol + rtol * |n| = 1e-5 + 1e-3 * |n|
    np.testing.assert_array_equal(compare(a, n, atol=1e-5, rtol=1e-3),
                                  [True, False, False, True, True])
