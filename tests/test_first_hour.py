"""The first hour of a PyTorch user: PyTorch's signatures for the norms, attention and
cross-entropy, ``minigrad.tensor`` and float32 for Python floats, and the names reached for
first (F.relu, F.log_softmax, var/std, cat, clone, zeros_like, Sequential). Expectations come
from NumPy closed forms and PyTorch's documentation (and torch itself where installed)."""
import numpy as np
import pytest

import minigrad as mg
from layers import functional as F
from layers.modules import LayerNorm, Linear, RMSNorm
from minigrad import Tensor, gradcheck

RNG = np.random.default_rng(7)
TOL = dict(eps=1e-6, atol=1e-8, rtol=1e-6)


def _leaf(*shape):
    return Tensor(RNG.standard_normal(shape), requires_grad=True)


def _upstream(fn, *inputs):
    """fn's output contracted with a random upstream gradient: gradcheck of a scalar that
    weighs every output entry differently."""
    g = RNG.standard_normal(fn(*inputs).shape)
    return lambda *a: (fn(*a) * g).sum()


# ------------------------------------------------------------------ dtypes of new Tensors
def test_python_floats_give_float32_and_arrays_keep_their_dtype():
    assert Tensor([1.0, 2.0]).dtype == np.float32 == mg.tensor([[1.5]]).dtype
    assert Tensor(3.0).dtype == np.float32
    assert Tensor([1, 2]).dtype == np.int64 == mg.tensor([3]).dtype
    assert Tensor(np.zeros(2)).dtype == np.float64 and Tensor(np.float64(1.0)).dtype == np.float64
    assert Tensor([1.0], dtype=np.float64).dtype == np.float64
    # the first Linear call of a PyTorch user: a list of floats into a float32 Module
    assert Linear(2, 3, rng=np.random.default_rng(0))(Tensor([[1.0, 2.0]])).shape == (1, 3)


def test_tensor_copies_and_detaches():
    a = np.ones(3, np.float32)
    t = mg.tensor(a, requires_grad=True)
    a[0] = 5.0
    assert t.data[0] == 1.0 and t.requires_grad and t.grad_fn is None
    u = mg.tensor(t * 2)
    assert not u.requires_grad and u.grad_fn is None and np.array_equal(u.data, [2, 2, 2])


def test_zeros_like_and_ones_like():
    x = Tensor(np.arange(6.0).reshape(2, 3))
    z, o = mg.zeros_like(x), mg.ones_like(x, dtype=np.float32)
    assert z.shape == o.shape == (2, 3) and z.dtype == np.float64 and o.dtype == np.float32
    assert not z.data.any() and (o.data == 1).all()
    assert mg.zeros_like(x, requires_grad=True).requires_grad


# ------------------------------------------------------------------ norms: torch's signature
@pytest.mark.parametrize("ns", [8, (8,), [8], (5, 8)])
def test_layer_norm_over_normalized_shape(ns):
    x = _leaf(2, 5, 8)
    k = 1 if isinstance(ns, int) else len(ns)
    shape = x.shape[-k:]
    w = Tensor(RNG.standard_normal(shape), requires_grad=True)
    b = Tensor(RNG.standard_normal(shape), requires_grad=True)
    axes = tuple(range(-k, 0))
    mu = x.data.mean(axis=axes, keepdims=True)
    var = ((x.data - mu) ** 2).mean(axis=axes, keepdims=True)
    expect = (x.data - mu) / np.sqrt(var + 1e-5) * w.data + b.data
    np.testing.assert_allclose(F.layer_norm(x, ns, w, b).data, expect, rtol=1e-12, atol=1e-12)
    fn = lambda x, w, b: F.layer_norm(x, ns, w, b)  # noqa: E731
    assert gradcheck(_upstream(fn, x, w, b), [x, w, b], **TOL)


@pytest.mark.parametrize("ns", [8, (5, 8)])
def test_rms_norm_over_normalized_shape_with_torch_default_eps(ns):
    x = _leaf(2, 5, 8)
    k = 1 if isinstance(ns, int) else len(ns)
    w = Tensor(RNG.standard_normal(x.shape[-k:]), requires_grad=True)
    ms = (x.data ** 2).mean(axis=tuple(range(-k, 0)), keepdims=True)
    expect = x.data / np.sqrt(ms + np.finfo(np.float64).eps) * w.data  # torch: eps=None
    np.testing.assert_allclose(F.rms_norm(x, ns, w).data, expect, rtol=1e-12)
    fn = lambda x, w: F.rms_norm(x, ns, w, eps=1e-6)  # noqa: E731
    assert gradcheck(_upstream(fn, x, w), [x, w], **TOL)


def test_norm_modules_take_normalized_shape():
    x = Tensor(RNG.standard_normal((3, 4, 6)))
    ln, rms = LayerNorm((4, 6), dtype=np.float64), RMSNorm(6, dtype=np.float64)
    assert ln.weight.shape == ln.bias.shape == (4, 6) and rms.eps is None
    np.testing.assert_allclose(ln(x).data, F.layer_norm(x, (4, 6)).data, rtol=1e-12)
    np.testing.assert_allclose(rms(x).data, F.rms_norm(x, (6,)).data, rtol=1e-12)


@pytest.mark.parametrize("call, exc, match", [
    (lambda x: F.layer_norm(x, (4,)), ValueError, r"normalized_shape \(4,\) must be the last axes"),
    (lambda x: F.rms_norm(x, (2, 5)), ValueError, "must be the last axes"),
    (lambda x: F.layer_norm(x, ()), ValueError, "at least one size"),
    (lambda x: F.layer_norm(x, 5.0), TypeError, "normalized_shape must be an int"),
    (lambda x: F.layer_norm(x, (3, 5), np.ones(15)), ValueError, r"weight has shape \(15,\)"),
    (lambda x: F.rms_norm(x, 5, np.ones(5)), TypeError, "weight is float64 but x is float32"),
])
def test_norm_bad_normalized_shape(call, exc, match):
    with pytest.raises(exc, match=match):
        call(Tensor(np.zeros((2, 3, 5), np.float32)))


# ------------------------------------------------------------------ attention, cross-entropy
def test_sdpa_takes_torch_signature_and_scale():
    q, k, v = _leaf(1, 2, 3, 4), _leaf(1, 2, 5, 4), _leaf(1, 2, 5, 6)
    s = q.data @ k.data.swapaxes(-1, -2) * 0.3
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    out = F.scaled_dot_product_attention(q, k, v, scale=0.3)
    np.testing.assert_allclose(out.data, p @ v.data, rtol=1e-12)
    fn = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, None, 0.0, True, scale=0.3)  # noqa: E731,E501
    assert gradcheck(_upstream(fn, q, k, v), [q, k, v], **TOL)
    with pytest.raises(TypeError):                           # scale is keyword-only, as torch's
        F.scaled_dot_product_attention(q, k, v, None, 0.0, True, 0.3)
    with pytest.raises(NotImplementedError, match="dropout_p"):
        F.scaled_dot_product_attention(q, k, v, dropout_p=0.1)


def test_cross_entropy_options_after_weight_are_keyword_only():
    logits, target = Tensor(np.zeros((2, 3))), np.array([0, 2])
    np.testing.assert_allclose(F.cross_entropy(input=logits, target=target).item(), np.log(3))
    np.testing.assert_allclose(F.cross_entropy(logits, target, np.array([1.0, 2.0, 3.0])).item(),
                               np.log(3))                  # a weighted mean of equal losses
    with pytest.raises(TypeError):
        F.cross_entropy(logits, target, None, None, -100)   # torch's size_average slot


# ------------------------------------------------------------------ relu, log_softmax
def test_relu():
    x = Tensor(np.array([-2.0, 0.0, 3.0]), requires_grad=True)
    y = F.relu(x)
    y.backward(np.array([5.0, 6.0, 7.0]))
    assert y.data.tolist() == [0.0, 0.0, 3.0] and x.grad.tolist() == [0.0, 0.0, 7.0]
    assert F.relu(np.array([-1.0, 2.0])).data.tolist() == [0.0, 2.0]
    assert F.relu([-1.0, 2.0]).dtype == np.float32 == F.softmax([1.0, 2.0]).dtype   # as Tensor(list)


def test_log_softmax_closed_form_finite_tail_and_gradient():
    x = _leaf(3, 4, 5)
    expect = x.data - np.log(np.exp(x.data).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(F.log_softmax(x, dim=1).data, expect, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.exp(F.log_softmax(x).data), F.softmax(x).data, rtol=1e-12)
    assert F.log_softmax(Tensor(np.array([0.0, -1000.0]))).data.tolist() == [0.0, -1000.0]
    assert gradcheck(_upstream(lambda t: F.log_softmax(t, dim=1), x), [x], **TOL)


# ------------------------------------------------------------------ var, std, cat, clone
@pytest.mark.parametrize("kw, ddof", [({}, 1), ({"correction": 0}, 0), ({"correction": 2}, 2)])
def test_var_std_with_correction_against_numpy(kw, ddof):
    x = _leaf(3, 4, 5)
    np.testing.assert_allclose(x.var(**kw).data, np.var(x.data, ddof=ddof), rtol=1e-12)
    np.testing.assert_allclose(x.var(dim=1, keepdim=True, **kw).data,
                               np.var(x.data, axis=1, ddof=ddof, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(x.std(dim=(0, 2), **kw).data,
                               np.std(x.data, axis=(0, 2), ddof=ddof), rtol=1e-12)
    assert gradcheck(_upstream(lambda t: t.var(dim=2, **kw), x), [x], **TOL)
    assert gradcheck(_upstream(lambda t: t.std(dim=0, **kw), x), [x], **TOL)


def test_var_divides_by_max_of_zero_and_n_minus_correction_as_torch():
    # torch.var's documentation: sum((x - mean)^2) / max(0, N - correction); correction=None is 1
    x = Tensor(np.array([[1.0, 2.0, 4.0]]))
    with np.errstate(divide="ignore", invalid="ignore"):
        assert np.isnan(Tensor(np.array([3.0])).var().item())            # 0 / 0
        assert x.var(correction=5).item() == np.inf == x.std(dim=1, correction=3).item()
        with pytest.warns(RuntimeWarning, match="empty"):                 # as torch warns
            assert np.isnan(Tensor(np.zeros((3, 0))).var(dim=1).data).all()   # 0 / 0
    assert x.var(correction=None).item() == x.var().item() == np.var(x.data, ddof=1)


def test_cat_is_concatenate_with_dim():
    a, b = _leaf(2, 3), _leaf(2, 4)
    c = mg.cat([a, b], dim=1)
    np.testing.assert_array_equal(c.data, np.concatenate([a.data, b.data], axis=1))
    assert gradcheck(_upstream(lambda a, b: mg.cat((a, b), dim=-1), a, b), [a, b], **TOL)


def test_cat_and_stack_take_torch_result_dtype_and_refuse_one_tensor():
    f, i = Tensor(np.ones(2, np.float32), requires_grad=True), Tensor(np.arange(2))
    assert mg.cat([f, i]).dtype == np.float32 == mg.stack([i, f]).dtype   # NumPy: float64
    assert mg.cat([i, Tensor(np.ones(1, np.float64))]).dtype == np.float64
    mg.cat([f, i]).backward(np.arange(4.0, dtype=np.float32))
    assert f.grad.tolist() == [0.0, 1.0] and f.grad.dtype == np.float32
    for join in (mg.cat, mg.stack):
        with pytest.raises(TypeError, match="sequence"):
            join(f)                               # torch.cat(t) is a TypeError too


def test_clone_copies_and_passes_the_gradient():
    x = _leaf(2, 3)
    y = x * 1.0
    z = y.clone()
    z.data[0, 0] = 99.0
    assert y.data[0, 0] != 99.0 and z.grad_fn is not None
    g = RNG.standard_normal((2, 3))
    x.clone().backward(g)
    np.testing.assert_array_equal(x.grad, g)


def test_sequential_applies_in_order_with_torch_keys():
    rng = np.random.default_rng(0)
    l1, l2 = Linear(4, 3, rng=rng, dtype=np.float64), Linear(3, 2, rng=rng, dtype=np.float64)
    seq = mg.Sequential(l1, LayerNorm(3, dtype=np.float64), l2)
    x = Tensor(rng.standard_normal((5, 4)))
    np.testing.assert_allclose(seq(x).data, l2(F.layer_norm(l1(x), 3)).data, rtol=1e-12)
    assert list(seq.state_dict()) == ["0.weight", "0.bias", "1.weight", "1.bias", "2.weight",
                                      "2.bias"]
    assert len(seq) == 3 and seq[2] is l2
    with pytest.raises(TypeError, match="Module"):
        mg.Sequential(l1, "relu")


# ------------------------------------------------------------------ against torch itself
def test_against_torch_where_installed():
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((2, 5, 8))
    w, b = RNG.standard_normal((5, 8)), RNG.standard_normal((5, 8))
    tx, tw, tb = (torch.tensor(a) for a in (x, w, b))
    tF = torch.nn.functional
    np.testing.assert_allclose(F.layer_norm(Tensor(x), (5, 8), w, b).data,
                               tF.layer_norm(tx, (5, 8), tw, tb).numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(F.rms_norm(Tensor(x), (5, 8), w).data,
                               tF.rms_norm(tx, (5, 8), tw).numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(F.log_softmax(Tensor(x), dim=1).data,
                               tF.log_softmax(tx, dim=1).numpy(), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(Tensor(x).var(dim=1).data, tx.var(dim=1).numpy(), rtol=1e-10)
    assert str(torch.tensor([1.0]).dtype) == "torch.float32" and Tensor([1.0]).dtype == np.float32


def test_std_of_a_constant_has_gradient_0_as_torch():
    # torch's std_backward: grad / (2 std) masked to 0 where std is 0 (sqrt alone gives 0 * inf)
    for x in (np.full(3, 2.0), np.float64(5.0), np.full((2, 4), -1.5)):
        t = Tensor(x, requires_grad=True)
        s = t.std(correction=0)
        s.backward(np.float64(0.7))
        assert s.item() == 0.0 and np.array_equal(t.grad, np.zeros_like(x))
    t = Tensor(np.array([[1.0, 1.0], [1.0, 3.0]]), requires_grad=True)   # one row 0, one not
    t.std(dim=1).backward(np.array([1.0, 1.0]))
    # row 2: d std / dx = (x - mean) / ((N - 1) std) = (-1, 1) / (1 * sqrt(2))
    np.testing.assert_allclose(t.grad, [[0, 0], [-2 ** -0.5, 2 ** -0.5]], rtol=1e-15)


@pytest.mark.parametrize("dim", [(), []])
def test_an_empty_dim_reduces_every_axis_as_torch(dim):
    x = Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    s = x.sum(dim=dim)
    assert s.shape == () and s.item() == 15.0
    assert x.mean(dim=dim).item() == 2.5
    assert x.var(dim=dim).item() == pytest.approx(3.5)      # sum((k - 2.5)^2) / 5
    assert x.sum(axis=()).shape == (2, 3)                   # NumPy's axis=() reduces nothing


def test_stack_takes_dim():
    a, b = Tensor(np.arange(3.0)), Tensor(np.arange(3.0, 6.0))
    np.testing.assert_array_equal(mg.stack([a, b], dim=1).data, np.stack([a.data, b.data], 1))


def test_requires_grad_freezes_a_module_and_backward_takes_gradient():
    layer = Linear(3, 2, rng=np.random.default_rng(0), dtype=np.float64)
    assert layer.requires_grad_(False) is layer
    assert not any(p.requires_grad for p in layer.parameters())
    x = mg.tensor(np.ones((4, 3)), requires_grad=True)
    g = np.random.default_rng(1).standard_normal((4, 2))
    layer(x).backward(gradient=g)                     # torch's keyword
    np.testing.assert_allclose(x.grad, g @ layer.weight.data, rtol=1e-15)
    assert layer.weight.grad is None


def test_transpose_of_a_0d_tensor_over_dim_0_and_minus_1_is_the_identity():
    t = mg.tensor(np.float64(3.0), requires_grad=True)      # torch.transpose(t, 0, -1) is t
    y = t.transpose(0, -1)
    y.backward(np.float64(0.5))
    assert y.shape == () and y.item() == 3.0 and t.grad == 0.5
    with pytest.raises(IndexError):
        t.transpose(0, 1)


# ------------------------------------------------------------------ PyTorch's dtype rules
# torch 2.13, from its documentation and checked with torch itself: a float function of an
# integer or bool Tensor gives float32 (the default dtype); sum, abs, relu, square and an
# integer power keep int64; mean, var, std and softmax of integers raise.
FLOAT_FUNCTIONS = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda a: 1 / np.sqrt(a),
    "sigmoid": lambda a: 1 / (1 + np.exp(-a)), "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
    "log1p": np.log1p}


@pytest.mark.parametrize("name", sorted(FLOAT_FUNCTIONS))
@pytest.mark.parametrize("values", [[1, 2, 3], [True, False]])
def test_a_float_function_of_an_integer_or_bool_tensor_is_float32(name, values):
    out = getattr(mg.tensor(values), name)()
    assert out.dtype == np.float32
    with np.errstate(divide="ignore"):
        want = FLOAT_FUNCTIONS[name](np.array(values, dtype=np.float64))
    np.testing.assert_allclose(out.data, want, rtol=1e-6)


def test_true_division_and_powers_of_integers_follow_torch():
    i = mg.tensor([1, 2, 3])
    for out in (i / i, 1 / i, i / 2, i ** 0.5):
        assert out.dtype == np.float32
    np.testing.assert_allclose((i / 2).data, [0.5, 1.0, 1.5])
    for out in (i ** 2, i.sum(), i.abs(), i.relu(), i.square()):
        assert out.dtype == np.int64
    np.testing.assert_array_equal(i.square().data, [1, 4, 9])


@pytest.mark.parametrize("call", [lambda t: t.mean(), lambda t: t.var(), lambda t: t.std(),
                                  lambda t: t.softmax(0), lambda t: t.log_softmax(0)])
def test_mean_var_std_and_softmax_of_integers_raise_and_say_cast_first(call):
    with pytest.raises(RuntimeError, match=r"takes a floating Tensor \(cast first: x.float\(\)"):
        call(mg.tensor([1, 2, 3]))


def test_the_casts_a_pytorch_user_types():
    i = mg.tensor([1, 2, 3])
    assert i.float().dtype == np.float32 and i.double().dtype == np.float64
    assert mg.tensor([1.7, -1.7]).long().data.tolist() == [1, -1]     # toward zero, as torch
    assert i.to("cpu") is i and i.to(np.float64).dtype == np.float64
    assert i.to(mg.tensor([1.0])).dtype == np.float32 and i.to("cpu", np.float32).dtype == np.float32
    x = mg.tensor([1.0, 2.0], requires_grad=True)
    x.double().sum().backward()                                       # through the cast
    assert x.grad.dtype == np.float32 and x.grad.tolist() == [1.0, 1.0]
    with pytest.raises(RuntimeError, match="CPU only"):
        i.to("cuda")


def test_all_any_and_rand():
    assert bool(mg.tensor([1, 2]).all()) and not bool(mg.tensor([0, 2]).all())
    assert bool(mg.tensor([0.0, 2.0]).any()) and mg.tensor([[0, 1], [0, 0]]).any(dim=1).tolist() \
        == [True, False]
    r = mg.rand(2, 3, generator=np.random.default_rng(0))
    assert r.shape == (2, 3) and r.dtype == np.float32 and 0 <= r.data.min() < r.data.max() < 1
    np.testing.assert_array_equal(r.data, np.random.default_rng(0).random((2, 3), np.float64)
                                  .astype(np.float32))


@pytest.mark.parametrize("name", ["sin", "cos", "log1p", "square"])
def test_the_new_functions_have_their_gradient(name):
    x = Tensor(RNG.uniform(0.2, 2.0, (3, 4)), requires_grad=True)
    assert gradcheck(_upstream(lambda a: getattr(a, name)(), x), [x], **TOL)


def test_grad_assignment_is_checked_as_torch_checks_it():
    p = mg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    p.grad = mg.ones(3)                                    # a Tensor gives its array
    assert isinstance(p.grad, np.ndarray) and p.grad.tolist() == [1.0, 1.0, 1.0]
    p.grad = np.zeros(3, np.float32)
    p.grad = None
    for bad, error, what in ((np.ones(4, np.float32), RuntimeError, "shape"),
                             (np.ones(3), RuntimeError, "dtype"),
                             ([1.0, 2.0, 3.0], TypeError, "list"), (1.0, TypeError, "float")):
        with pytest.raises(error, match=what):
            p.grad = bad
    assert p.grad is None


def test_numpy_warnings_stay_inside_the_ops_where_torch_is_silent():
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # a RuntimeWarning would fail the test
        x = mg.tensor([0.0, -1.0, 1000.0, 1.0], requires_grad=True)
        outs = [x.log(), x.sqrt(), x / 0.0, 1.0 / x, x.exp(), x.log1p(), x.rsqrt(),
                x.exp() - x.exp(), x.exp() * 0.0, x.exp().sin(), x.exp().cos()]
        mg.tensor([np.nan, 1e20]).long()
        for out in outs:
            out.sum().backward()
        assert np.isinf(outs[0].data[0]) and np.isnan(outs[1].data[1]) and np.isinf(outs[4].data[2])


# ------------------------------------------------------------------ Module's first names
def test_register_parameter_children_apply_as_torch():
    from minigrad import Module, Parameter, Sequential
    m = Sequential(Linear(4, 3), Linear(3, 2))
    m.register_parameter("scale", Parameter(np.ones(1, np.float32)))
    assert [n for n, _ in m.named_parameters()][:2] == ["scale", "0.weight"]   # own ones first
    m.register_parameter("nothing", None)
    assert m.nothing is None and "nothing" not in dict(m.named_parameters())
    for name, param, error in (("a.b", None, KeyError), ("", None, KeyError), (3, None, TypeError),
                               ("x", mg.tensor([1.0]), TypeError), ("training", None, KeyError)):
        with pytest.raises(error):
            m.register_parameter(name, param)
    assert list(m.children()) == [m[0], m[1]]
    order = []
    assert m.apply(lambda mod: order.append(mod)) is m
    assert order == [m[0], m[1], m]                            # children first, as torch
    assert isinstance(Module().apply(lambda mod: None), Module)


def test_sequential_of_a_function_names_sequential_and_says_what_to_do():
    from minigrad import Sequential
    with pytest.raises(TypeError, match=r"^Sequential holds Modules, got function relu: call a "
                                        r"function in a Module's forward$"):
        Sequential(Linear(4, 3), F.relu, Linear(3, 2))
