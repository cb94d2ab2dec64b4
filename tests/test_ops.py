"""Every primitive op: forward values against the NumPy expression, and gradcheck (float64,
slow mode: full Jacobians with one-hot upstream gradients plus a random Gaussian J^T G) on the
shape families of issue 2: 0-d, 1-D, 2-D, batched 3-D/4-D, broadcasting both ways, keepdims,
negative and tuple axes, empty arrays, non-contiguous views, repeated integer indices."""
import numpy as np
import pytest

import minigrad as mg
from minigrad import Tensor, gradcheck


def _rand(shape, seed, kind="any"):
    r = np.random.default_rng(seed).standard_normal(shape)
    if kind == "pos":       # away from 0 for log, sqrt, division, fractional powers
        return np.abs(r) + 0.5
    if kind == "nonzero":   # away from the ReLU / max kinks
        return np.where(np.abs(r) < 0.1, 0.3, r)
    return r


# (id, minigrad fn, numpy fn, [(shape, kind), ...])
CASES = [
    # arithmetic and broadcasting in both directions
    ("add_bcast_3x1_1x4", lambda a, b: a + b, np.add, [((3, 1), "any"), ((1, 4), "any")]),
    ("add_5_2x5", lambda a, b: a + b, np.add, [((5,), "any"), ((2, 5), "any")]),
    ("add_2x5_5", lambda a, b: a + b, np.add, [((2, 5), "any"), ((5,), "any")]),
    ("add_0d", lambda a, b: a + b, np.add, [((), "any"), ((), "any")]),
    ("add_0d_2x3", lambda a, b: a + b, np.add, [((), "any"), ((2, 3), "any")]),
    ("add_empty", lambda a, b: a + b, np.add, [((0, 3), "any"), ((3,), "any")]),
    ("add_4d", lambda a, b: a + b, np.add, [((2, 1, 3, 2), "any"), ((4, 1, 2), "any")]),
    ("sub_bcast", lambda a, b: a - b, np.subtract, [((3, 1), "any"), ((1, 4), "any")]),
    ("sub_5_2x5", lambda a, b: b - a, lambda a, b: b - a, [((5,), "any"), ((2, 5), "any")]),
    ("mul_bcast", lambda a, b: a * b, np.multiply, [((3, 1), "any"), ((1, 4), "any")]),
    ("mul_3d", lambda a, b: a * b, np.multiply, [((2, 3, 4), "any"), ((3, 1), "any")]),
    ("mul_same", lambda a: a * a, lambda a: a * a, [((2, 3), "any")]),
    ("div_bcast", lambda a, b: a / b, np.divide, [((3, 1), "any"), ((1, 4), "pos")]),
    ("div_5_2x5", lambda a, b: a / b, np.divide, [((2, 5), "any"), ((5,), "pos")]),
    ("div_0d", lambda a, b: a / b, np.divide, [((), "any"), ((), "pos")]),
    ("neg", lambda a: -a, np.negative, [((2, 3), "any")]),
    ("scalar_left", lambda a: 2.5 - a * 3.0, lambda a: 2.5 - a * 3.0, [((4,), "any")]),
    ("scalar_right", lambda a: 3.0 / a + a / 4.0, lambda a: 3.0 / a + a / 4.0, [((4,), "pos")]),
    ("array_const_both_sides", lambda a: np.arange(1.0, 4.0) * a + a - np.ones(3),
     lambda a: np.arange(1.0, 4.0) * a + a - np.ones(3), [((2, 3), "any")]),
    ("pow2", lambda a: a ** 2, lambda a: a ** 2, [((2, 3), "any")]),
    ("pow3_0d", lambda a: a ** 3, lambda a: a ** 3, [((), "any")]),
    ("pow_half", lambda a: a ** 0.5, lambda a: a ** 0.5, [((5,), "pos")]),
    ("pow_neg", lambda a: a.pow(-1.5), lambda a: a ** -1.5, [((2, 2), "pos")]),
    ("pow_tensor", lambda a, b: a ** b, np.power, [((2, 3), "pos"), ((2, 3), "any")]),
    ("pow_tensor_bcast", lambda a, b: a.pow(b), np.power, [((3, 1), "pos"), ((4,), "any")]),
    ("rpow", lambda a: 1.7 ** a, lambda a: 1.7 ** a, [((2, 3), "any")]),
    ("maximum_bcast", lambda a, b: mg.maximum(a, b), np.maximum,
     [((3, 1), "any"), ((1, 4), "any")]),
    ("minimum_method", lambda a, b: a.minimum(b), np.minimum, [((2, 3), "any"), ((3,), "any")]),
    ("maximum_scalar", lambda a: a.maximum(0.2), lambda a: np.maximum(a, 0.2), [((5,), "nonzero")]),
    # elementwise
    ("exp", lambda a: a.exp(), np.exp, [((2, 3), "any")]),
    ("exp_empty", lambda a: a.exp(), np.exp, [((2, 0), "any")]),
    ("log", lambda a: a.log(), np.log, [((2, 3), "pos")]),
    ("sqrt", lambda a: a.sqrt(), np.sqrt, [((3, 2), "pos")]),
    ("rsqrt", lambda a: a.rsqrt(), lambda a: 1 / np.sqrt(a), [((3, 2), "pos")]),
    ("tanh", lambda a: a.tanh(), np.tanh, [((2, 2, 2), "any")]),
    ("sigmoid", lambda a: a.sigmoid(), lambda a: 1 / (1 + np.exp(-a)), [((7,), "any")]),
    ("sigmoid_large", lambda a: (a * 40.0).sigmoid(), lambda a: 1 / (1 + np.exp(-a * 40.0)),
     [((6,), "any")]),
    ("relu", lambda a: a.relu(), lambda a: np.maximum(a, 0), [((3, 4), "nonzero")]),
    ("relu_0d", lambda a: a.relu(), lambda a: np.maximum(a, 0), [((), "nonzero")]),
    # matmul, following np.matmul
    ("matmul_1d_1d", lambda a, b: a @ b, np.matmul, [((3,), "any"), ((3,), "any")]),
    ("matmul_1d_2d", lambda a, b: a @ b, np.matmul, [((3,), "any"), ((3, 4), "any")]),
    ("matmul_2d_1d", lambda a, b: a @ b, np.matmul, [((2, 3), "any"), ((3,), "any")]),
    ("matmul_2d_2d", lambda a, b: a @ b, np.matmul, [((2, 3), "any"), ((3, 4), "any")]),
    ("matmul_3d_2d", lambda a, b: a @ b, np.matmul, [((2, 2, 3), "any"), ((3, 4), "any")]),
    ("matmul_1d_3d", lambda a, b: a @ b, np.matmul, [((3,), "any"), ((2, 3, 2), "any")]),
    ("matmul_3d_1d", lambda a, b: a @ b, np.matmul, [((2, 2, 3), "any"), ((3,), "any")]),
    ("matmul_bcast_4d", lambda a, b: a @ b, np.matmul,
     [((2, 1, 2, 3), "any"), ((3, 3, 2), "any")]),
    ("matmul_empty", lambda a, b: a @ b, np.matmul, [((0, 3), "any"), ((3, 2), "any")]),
    ("matmul_empty_inner", lambda a, b: a @ b, np.matmul, [((2, 0), "any"), ((0, 3), "any")]),
    ("rmatmul_const", lambda b: np.arange(6.0).reshape(2, 3) @ b,
     lambda b: np.arange(6.0).reshape(2, 3) @ b, [((3, 2), "any")]),
    # reductions
    ("sum_all", lambda a: a.sum(), np.sum, [((2, 3), "any")]),
    ("sum_0d", lambda a: a.sum(), np.sum, [((), "any")]),
    ("sum_axis0", lambda a: a.sum(axis=0), lambda a: a.sum(axis=0), [((3, 4), "any")]),
    ("sum_neg_keep", lambda a: a.sum(axis=-1, keepdims=True),
     lambda a: a.sum(axis=-1, keepdims=True), [((2, 3, 4), "any")]),
    ("sum_tuple", lambda a: a.sum(axis=(0, 2)), lambda a: a.sum(axis=(0, 2)),
     [((2, 3, 2), "any")]),
    ("sum_tuple_neg_keep", lambda a: a.sum(axis=(-1, -3), keepdims=True),
     lambda a: a.sum(axis=(-1, -3), keepdims=True), [((2, 3, 2, 2), "any")]),
    ("sum_empty_axis", lambda a: a.sum(axis=1), lambda a: a.sum(axis=1), [((2, 0, 3), "any")]),
    ("mean_all", lambda a: a.mean(), np.mean, [((2, 3), "any")]),
    ("mean_axis_keep", lambda a: a.mean(axis=1, keepdims=True),
     lambda a: a.mean(axis=1, keepdims=True), [((2, 3, 2), "any")]),
    ("mean_tuple_neg", lambda a: a.mean(axis=(-2, 0)), lambda a: a.mean(axis=(-2, 0)),
     [((3, 2, 4), "any")]),
    ("mean_empty_rows", lambda a: a.mean(axis=1), lambda a: a.mean(axis=1), [((0, 3), "any")]),
    ("max_all", lambda a: a.max(), np.max, [((3, 4), "any")]),
    ("max_0d", lambda a: a.max(), np.max, [((), "any")]),
    ("max_axis", lambda a: a.max(axis=1), lambda a: a.max(axis=1), [((3, 4), "any")]),
    ("max_neg_keep", lambda a: a.max(axis=-1, keepdims=True),
     lambda a: a.max(axis=-1, keepdims=True), [((2, 3, 4), "any")]),
    ("max_tuple", lambda a: a.max(axis=(0, 2)), lambda a: a.max(axis=(0, 2)),
     [((2, 3, 2), "any")]),
    # shape ops
    ("reshape", lambda a: a.reshape(3, 2), lambda a: a.reshape(3, 2), [((2, 3), "any")]),
    ("reshape_tuple_infer", lambda a: a.reshape((-1,)), lambda a: a.reshape(-1),
     [((2, 3, 2), "any")]),
    ("reshape_0d", lambda a: a.reshape(1, 1), lambda a: a.reshape(1, 1), [((), "any")]),
    ("reshape_empty", lambda a: a.reshape(3, 0), lambda a: a.reshape(3, 0), [((0, 3), "any")]),
    ("transpose_rev", lambda a: a.transpose(), lambda a: a.transpose(), [((2, 3, 4), "any")]),
    ("transpose_axes", lambda a: a.transpose(1, 2, 0), lambda a: a.transpose(1, 2, 0),
     [((2, 3, 4), "any")]),
    ("transpose_neg", lambda a: a.transpose((-1, 0, 1)), lambda a: a.transpose((-1, 0, 1)),
     [((2, 3, 4), "any")]),
    ("T", lambda a: a.T, lambda a: a.T, [((2, 3), "any")]),
    ("swapaxes", lambda a: a.swapaxes(-1, 0), lambda a: a.swapaxes(-1, 0),
     [((2, 3, 4), "any")]),
    ("broadcast_to", lambda a: a.broadcast_to((2, 3, 4)),
     lambda a: np.broadcast_to(a, (2, 3, 4)), [((3, 1), "any")]),
    ("broadcast_to_fn", lambda a: mg.broadcast_to(a, (2, 5)), lambda a: np.broadcast_to(a, (2, 5)),
     [((5,), "any")]),
    # views: transposed and sliced (non-contiguous) inputs to further ops
    ("view_T_then_mul", lambda a, b: a.T * b, lambda a, b: a.T * b,
     [((3, 2), "any"), ((2, 3), "any")]),
    ("view_slice_step", lambda a: a[:, ::2] * a[:, 1::2], lambda a: a[:, ::2] * a[:, 1::2],
     [((3, 4), "any")]),
    ("view_neg_step_matmul", lambda a, b: a[::-1, 1:] @ b.T,
     lambda a, b: a[::-1, 1:] @ b.T, [((3, 4), "any"), ((2, 3), "any")]),
    # indexing
    ("index_int", lambda a: a[1], lambda a: a[1], [((3, 4), "any")]),
    ("index_neg_slice", lambda a: a[-2:, ..., None], lambda a: a[-2:, ..., None],
     [((3, 2, 2), "any")]),
    ("index_0d_result", lambda a: a[1, 2], lambda a: a[1, 2], [((2, 3), "any")]),
    ("index_repeated", lambda a: a[np.array([0, 2, 2, 0, 2])],
     lambda a: a[np.array([0, 2, 2, 0, 2])], [((3, 2), "any")]),
    ("index_repeated_tensor", lambda a: a[Tensor(np.array([[1, 1], [0, 1]]))],
     lambda a: a[np.array([[1, 1], [0, 1]])], [((2, 3), "any")]),
    ("index_2d_fancy", lambda a: a[np.array([0, 1, 1]), np.array([2, 2, 0])],
     lambda a: a[np.array([0, 1, 1]), np.array([2, 2, 0])], [((2, 3), "any")]),
    ("index_bool_mask", lambda a: a[np.array([True, False, True])],
     lambda a: a[np.array([True, False, True])], [((3, 2), "any")]),
    ("index_empty", lambda a: a[np.array([], dtype=int)], lambda a: a[np.array([], dtype=int)],
     [((3, 2), "any")]),
    # an integer, a slice, an index array: PyTorch applies the integer first (test_pytorch_rules)
    ("index_int_slice_array", lambda a: a[1, :, [0, 2, 2]], lambda a: a[1][:, [0, 2, 2]],
     [((2, 3, 4), "any")]),
    # joining and splitting
    ("concatenate0", lambda a, b: mg.concatenate([a, b]), lambda a, b: np.concatenate([a, b]),
     [((2, 3), "any"), ((1, 3), "any")]),
    ("concatenate_neg", lambda a, b: mg.concatenate([a, b, a], axis=-1),
     lambda a, b: np.concatenate([a, b, a], axis=-1), [((2, 1), "any"), ((2, 3), "any")]),
    ("concatenate_empty", lambda a, b: mg.concatenate([a, b]),
     lambda a, b: np.concatenate([a, b]), [((0, 3), "any"), ((2, 3), "any")]),
    ("stack0", lambda a, b: mg.stack([a, b]), lambda a, b: np.stack([a, b]),
     [((2, 3), "any"), ((2, 3), "any")]),
    ("stack_neg", lambda a, b: mg.stack([a, b, b], axis=-1),
     lambda a, b: np.stack([a, b, b], axis=-1), [((2,), "any"), ((2,), "any")]),
    ("split_sections", lambda a: mg.split(a, 2, axis=1)[1] * 2.0,
     lambda a: np.split(a, 2, axis=1)[1] * 2.0, [((2, 4), "any")]),
    ("split_indices", lambda a: a.split([1, 3])[2] - a.split([1, 3])[0],
     lambda a: np.split(a, [1, 3])[2] - np.split(a, [1, 3])[0], [((4, 2), "any")]),
    ("where", lambda a, b: mg.where(np.array([[True], [False]]), a, b),
     lambda a, b: np.where(np.array([[True], [False]]), a, b), [((2, 3), "any"), ((3,), "any")]),
    ("where_scalar", lambda a: mg.where(np.array([True, False, True]), a, 0.5),
     lambda a: np.where(np.array([True, False, True]), a, 0.5), [((2, 3), "any")]),
    ("masked_fill", lambda a: a.masked_fill(np.triu(np.ones((3, 3), bool), 1), -1e9),
     lambda a: np.where(np.triu(np.ones((3, 3), bool), 1), -1e9, a), [((2, 3, 3), "any")]),
    ("astype_roundtrip", lambda a: a.astype(np.float64) * 2.0, lambda a: a * 2.0,
     [((3,), "any")]),
]


def _inputs(spec, seed):
    return [_rand(shape, seed + 10 * i, kind) for i, (shape, kind) in enumerate(spec)]


@pytest.mark.parametrize("name,fn,ref,spec", CASES, ids=[c[0] for c in CASES])
def test_forward_matches_numpy(name, fn, ref, spec):
    arrays = _inputs(spec, 1)
    out = fn(*[Tensor(a.copy(), requires_grad=True) for a in arrays])
    expected = ref(*arrays)
    assert out.shape == np.shape(expected)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out.data, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name,fn,ref,spec", CASES, ids=[c[0] for c in CASES])
def test_gradcheck_slow(name, fn, ref, spec):
    ts = [Tensor(a, requires_grad=True) for a in _inputs(spec, 2)]
    assert gradcheck(fn, ts, seed=3) is True


FAST = ["add_bcast_3x1_1x4", "matmul_bcast_4d", "sum_tuple_neg_keep", "index_repeated",
        "concatenate_neg", "masked_fill", "sigmoid", "max_tuple"]


@pytest.mark.parametrize("name,fn,ref,spec", [c for c in CASES if c[0] in FAST],
                         ids=[c[0] for c in CASES if c[0] in FAST])
def test_gradcheck_fast(name, fn, ref, spec):
    ts = [Tensor(a, requires_grad=True) for a in _inputs(spec, 4)]
    assert gradcheck(fn, ts, fast_mode=True, seed=5) is True


def test_gradcheck_on_noncontiguous_leaves():
    base = _rand((4, 3), 6)
    a = Tensor(base.T, requires_grad=True)             # Fortran-ordered leaf
    b = Tensor(_rand((3, 8), 7)[:, ::2], requires_grad=True)  # strided leaf
    assert not a.data.flags["C_CONTIGUOUS"] and not b.data.flags["C_CONTIGUOUS"]
    assert gradcheck(lambda a, b: (a.T @ b).tanh() * b.sum(axis=0), [a, b])


def test_max_ties_split_evenly():
    # torch.amax's rule: tied maxima share the upstream gradient equally.
    a = Tensor(np.array([[1.0, 3.0, 3.0, 3.0], [2.0, 0.5, 2.0, -1.0]]), requires_grad=True)
    a.max(axis=1).backward(np.array([0.6, -4.0]))
    np.testing.assert_allclose(a.grad, [[0, 0.2, 0.2, 0.2], [-2.0, 0, -2.0, 0]], rtol=1e-15)
    b = Tensor(np.full((2, 2), 7.0), requires_grad=True)
    b.max().backward(np.array(2.0))
    np.testing.assert_array_equal(b.grad, np.full((2, 2), 0.5))


def test_repeated_indices_accumulate():
    w = Tensor(np.zeros((4, 2)), requires_grad=True)
    idx = Tensor(np.array([3, 1, 3, 3]))
    dout = np.arange(8.0).reshape(4, 2) + 1
    w[idx].backward(dout)
    expected = np.zeros((4, 2))
    np.add.at(expected, np.array([3, 1, 3, 3]), dout)   # rows 0+2+3 go to 3, row 1 to 1
    np.testing.assert_array_equal(w.grad, expected)
    assert idx.grad is None


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_preserved_through_every_op(dtype):
    rng = np.random.default_rng(0)
    a = Tensor((np.abs(rng.standard_normal((2, 3))) + 0.5).astype(dtype), requires_grad=True)
    b = Tensor(rng.standard_normal((3, 2)).astype(dtype), requires_grad=True)
    h = ((a * 2.5 + 1) / 3 - a ** 2 + 0.5 / a).exp().log() + a.sqrt().tanh().sigmoid().relu()
    h = h - (-a)
    y = (h @ b).max(axis=-1).mean() + mg.where(a.data > 1, a, 0.0).sum(axis=(0, 1))
    y = y + mg.concatenate([a, a], axis=1).mean() + mg.stack([b, b]).sum() + a.T.reshape(-1)[1]
    y = y + a.broadcast_to((2, 2, 3)).sum() + a.masked_fill(a.data > 1, 0.0).sum() + a.split(3, axis=1)[0].sum()
    assert y.dtype == dtype
    y.backward()
    assert a.grad.dtype == dtype and b.grad.dtype == dtype


@pytest.mark.parametrize("op", ["sum", "mean", "max"])
def test_reduction_axis_errors(op):
    x = Tensor(np.ones((2, 3)))
    # the class NumPy itself raises for the same call, on whichever NumPy is installed
    # (numpy.exceptions.AxisError from 1.25, numpy.AxisError before)
    with pytest.raises(Exception) as numpy_err:
        getattr(np.ones((2, 3)), op)(axis=2)
    with pytest.raises(type(numpy_err.value)) as err:
        getattr(x, op)(axis=2)
    assert type(err.value) is type(numpy_err.value) and type(err.value).__name__ == "AxisError"
    with pytest.raises(ValueError):
        getattr(x, op)(axis=(0, -2))


def test_matmul_0d_is_an_error():
    with pytest.raises(ValueError):
        Tensor(np.ones(())) @ Tensor(np.ones(3))


def test_split_bad_sections():
    with pytest.raises(ValueError):
        mg.split(Tensor(np.ones(5)), 2)
