"""Exact GELU (approximate="none") and the NumPy erf under it.

Oracles: the standard library's math.erf / math.erfc (independent implementations), central
differences (gradcheck, float64, random upstream gradient), and torch when installed."""
import math

import numpy as np
import pytest

from minigrad import Tensor, gradcheck
from layers._erf import erf, erfc
from layers.functional import gelu
from layers.gelu import gelu_erf_backward, gelu_erf_forward

# Dense grid: 300,001 points of [0, 30] (the stated bound of layers/_erf.py); the sign-flipped
# grid checks the symmetry paths.
Z = np.linspace(0.0, 30.0, 300_001)
REF_ERF = np.array([math.erf(v) for v in Z])
REF_ERFC = np.array([math.erfc(v) for v in Z])


def test_erf_error_bound_on_a_dense_grid():
    for sign in (1.0, -1.0):
        err = np.abs(erf(sign * Z) - sign * REF_ERF)
        assert err.max() <= 2.3e-16                                    # absolute
        assert (err <= 2 * np.spacing(np.abs(REF_ERF))).all()         # <= 2 ulp
    live = REF_ERFC > 1e-300                                          # normal numbers
    rel = np.abs(erfc(Z)[live] - REF_ERFC[live]) / REF_ERFC[live]
    assert rel.max() <= 1e-15
    np.testing.assert_allclose(erfc(-Z), 1 + REF_ERF, rtol=0, atol=2.3e-16)


def test_erf_special_values_and_dtype():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan])
    np.testing.assert_array_equal(erf(x), [0.0, -0.0, 1.0, -1.0, np.nan])
    np.testing.assert_array_equal(erfc(x), [1.0, 1.0, 0.0, 2.0, np.nan])
    assert erf(np.float32([0.5])).dtype == np.float32


def test_gelu_exact_forward_against_math_erf():
    x = np.linspace(-40, 40, 4001)
    ref = np.array([v * 0.5 * math.erfc(-v / math.sqrt(2)) for v in x])
    out = gelu(Tensor(x)).data                           # approximate="none" is the default
    # Relative error, also in the left tail. Rounding x / sqrt 2 alone moves Phi(x) by a relative
    # x^2 * 2^-53 (the condition number of Phi is x phi / Phi ~ x^2), so the bound scales with it.
    normal = np.abs(ref) > 1e-290
    rel = np.abs(out - ref)[normal] / np.abs(ref[normal])
    assert (rel <= 4e-16 * (2 + x[normal] ** 2)).all()
    np.testing.assert_allclose(out[~normal], ref[~normal], rtol=0, atol=1e-290)
    assert gelu(Tensor(x[:3].astype(np.float32))).dtype == np.float32


def test_gelu_exact_backward_closed_form_and_gradcheck():
    rng = np.random.default_rng(0)
    x = 3 * rng.standard_normal((3, 5))
    dout = rng.standard_normal(x.shape)
    out, cache = gelu_erf_forward(x)
    phi = np.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    cdf = np.array([0.5 * math.erfc(-v / math.sqrt(2)) for v in x.ravel()]).reshape(x.shape)
    np.testing.assert_allclose(gelu_erf_backward(dout, cache), dout * (cdf + x * phi), rtol=1e-13)
    assert gradcheck(lambda t: gelu(t, approximate="none"),
                     [Tensor(x, requires_grad=True)], eps=1e-6, atol=1e-8, rtol=1e-6)


def test_gelu_rejects_unknown_approximation():
    with pytest.raises(ValueError, match='"none" or "tanh"'):
        gelu(Tensor(np.zeros(2)), approximate="erf")


@pytest.mark.slow  # runs PyTorch; leave out with -m "not slow"
def test_gelu_exact_matches_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = np.concatenate([4 * rng.standard_normal(200), [-8.0, -5.0, 0.0, 5.0, 8.0]])
    dout = rng.standard_normal(x.shape)
    xt = Tensor(x, requires_grad=True)
    y = gelu(xt)
    y.backward(dout)
    tx = torch.tensor(x, requires_grad=True)
    ty = torch.nn.functional.gelu(tx)
    ty.backward(torch.tensor(dout))
    np.testing.assert_allclose(y.data, ty.detach().numpy(), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(xt.grad, tx.grad.numpy(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tanh_gelu_backward_where_x_squared_overflows_is_the_limit_not_nan(dtype):
    """GELU'(x) -> 1 as x -> +inf and -> 0 as x -> -inf (the limits of Phi(x) + x phi(x)); at
    |x| whose square overflows, tanh' is exactly 0 and 0 * inf must not make NaN."""
    from layers.gelu import gelu_backward, gelu_forward
    big = np.sqrt(np.finfo(dtype).max) * 4
    x = np.array([big, -big], dtype=dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        out, cache = gelu_forward(x)
        dx = gelu_backward(np.ones_like(x), cache)
    assert out.tolist() == [x[0], 0.0] and dx.tolist() == [1.0, 0.0]
