"""AdamW and clip_grad_norm_ against the published formulas and, when installed, PyTorch.

The reference below is written in the papers' form (Kingma & Ba 2015, Algorithm 1 with bias
corrected moments m_hat, v_hat; Loshchilov & Hutter 2019, decoupled decay), not in the
arrangement the optimizer uses, so the two are independent derivations of one update.
"""

import numpy as np
import pytest

import minigrad
from minigrad import AdamW, Parameter, Tensor, clip_grad_norm_


def reference_adamw(p, grads, lr, betas, eps, wd):
    """Paper-form AdamW on a copy of ``p`` over the list of gradients; returns the trajectory."""
    b1, b2 = betas
    p = p.astype(np.float64).copy()
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    out = []
    for t, g in enumerate(grads, start=1):
        p = p - lr * wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g ** 2
        m_hat = m / (1 - b1 ** t)
        v_hat = v / (1 - b2 ** t)
        p = p - lr * m_hat / (np.sqrt(v_hat) + eps)
        out.append(p.copy())
    return out


def _grads(rng, shape, n):
    return [rng.standard_normal(shape) * rng.uniform(0.1, 3.0) for _ in range(n)]


def test_adamw_matches_paper_formulas_with_param_groups():
    rng = np.random.default_rng(0)
    shapes = [(3, 4), (5,), (2, 2)]
    init = [rng.standard_normal(s) for s in shapes]
    params = [Parameter(a.copy()) for a in init]
    steps = 6
    grads = [_grads(rng, s, steps) for s in shapes]
    opt = AdamW([
        {"params": [params[0]]},                                   # defaults
        {"params": [params[1]], "lr": 0.05, "weight_decay": 0.0},  # own lr, no decay
        {"params": [params[2]], "weight_decay": 0.3, "betas": (0.8, 0.95), "eps": 1e-6},
    ], lr=0.01, weight_decay=0.1)
    traj = []
    for t in range(steps):
        for p, g in zip(params, grads):
            p.grad = g[t].copy()
        opt.step()
        traj.append([p.data.copy() for p in params])
    refs = [
        reference_adamw(init[0], grads[0], 0.01, (0.9, 0.999), 1e-8, 0.1),
        reference_adamw(init[1], grads[1], 0.05, (0.9, 0.999), 1e-8, 0.0),
        reference_adamw(init[2], grads[2], 0.01, (0.8, 0.95), 1e-6, 0.3),
    ]
    for t in range(steps):
        for i in range(3):
            np.testing.assert_allclose(traj[t][i], refs[i][t], rtol=1e-12, atol=1e-14)


def test_adamw_defaults_are_pytorchs():
    p = Parameter(np.zeros(2))
    g = AdamW([p]).param_groups[0]
    assert (g["lr"], g["betas"], g["eps"], g["weight_decay"]) == (1e-3, (0.9, 0.999), 1e-8, 0.01)


def test_first_step_moves_each_coordinate_by_about_lr():
    # with bias correction, |step 1| = lr * |g| / (|g| + eps) ~ lr, whatever the gradient's scale
    p = Parameter(np.zeros(4))
    p.grad = np.array([1e-3, -5.0, 200.0, -0.1])
    AdamW([p], lr=0.02, weight_decay=0.0).step()
    np.testing.assert_allclose(np.abs(p.data), 0.02, rtol=1e-4)
    assert np.all(np.sign(p.data) == -np.sign([1e-3, -5.0, 200.0, -0.1]))


def test_weight_decay_is_decoupled_from_the_gradient():
    # zero gradient: Adam's step is 0, only the decay p *= (1 - lr * wd) acts
    p = Parameter(np.array([2.0, -4.0]))
    p.grad = np.zeros(2)
    AdamW([p], lr=0.1, weight_decay=0.5).step()
    np.testing.assert_allclose(p.data, [2.0 * 0.95, -4.0 * 0.95], rtol=1e-15)


def test_float32_stays_float32_with_float32_state():
    rng = np.random.default_rng(1)
    p = Parameter(rng.standard_normal((4, 3)).astype(np.float32))
    arr = p.data
    opt = AdamW([p], lr=1e-2)
    grads = _grads(rng, (4, 3), 3)
    for g in grads:
        p.grad = g.astype(np.float32)
        opt.step()
    assert p.dtype == np.float32 and p.data is arr  # updated in place
    st = opt.state_dict()["state"][0]
    assert st["exp_avg"].dtype == np.float32 and st["exp_avg_sq"].dtype == np.float32
    init = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)
    ref = reference_adamw(init.astype(np.float64), [g.astype(np.float32).astype(np.float64)
                                                   for g in grads], 1e-2, (0.9, 0.999), 1e-8, 0.01)
    np.testing.assert_allclose(p.data, ref[-1], rtol=1e-5, atol=1e-6)


def test_parameters_without_grad_are_skipped():
    a, b = Parameter(np.ones(3)), Parameter(np.ones(2))
    a.grad = np.ones(3)
    opt = AdamW([a, b], lr=0.1)
    opt.step()
    np.testing.assert_array_equal(b.data, np.ones(2))  # no decay either
    sd = opt.state_dict()
    assert list(sd["state"]) == [0] and sd["state"][0]["step"] == 1


def test_step_bumps_version_counter_so_stale_graphs_refuse_backward():
    p = Parameter(np.array([1.5, -2.0]))
    y = (p * p).sum()  # Mul saves p's array
    p.grad = np.ones(2)
    AdamW([p], lr=0.1).step()
    with pytest.raises(RuntimeError):
        y.backward()


def test_step_runs_under_no_grad_and_leaves_grad_mode_as_it_was():
    p = Parameter(np.ones(2))
    p.grad = np.ones(2)
    AdamW([p]).step()
    assert minigrad.is_grad_enabled()


def test_zero_grad():
    a, b = Parameter(np.ones(3)), Parameter(np.ones(2))
    a.grad, b.grad = np.ones(3), np.ones(2)
    g = b.grad
    opt = AdamW([a, b])
    opt.zero_grad(set_to_none=False)
    assert a.grad is not None and np.all(a.grad == 0) and b.grad is g and np.all(g == 0)
    opt.zero_grad()
    assert a.grad is None and b.grad is None


def test_state_dict_round_trip_resumes_identically():
    rng = np.random.default_rng(2)
    init = [rng.standard_normal((3, 2)), rng.standard_normal(4)]
    grads = [_grads(rng, (3, 2), 6), _grads(rng, (4,), 6)]

    def make():
        ps = [Parameter(a.copy()) for a in init]
        return ps, AdamW([{"params": [ps[0]], "weight_decay": 0.2}, {"params": [ps[1]]}], lr=0.03)

    ps, opt = make()
    for t in range(6):
        for p, g in zip(ps, grads):
            p.grad = g[t].copy()
        opt.step()

    ps2, opt2 = make()
    for t in range(3):
        for p, g in zip(ps2, grads):
            p.grad = g[t].copy()
        opt2.step()
    sd = opt2.state_dict()
    values = [p.data.copy() for p in ps2]
    sd["state"][0]["exp_avg"][...] = 123.0  # state_dict holds copies
    assert not np.any(opt2.state[id(ps2[0])]["exp_avg"] == 123.0)
    sd = opt2.state_dict()

    ps3, opt3 = make()
    for p, v in zip(ps3, values):
        p.data[...] = v
    opt3.load_state_dict(sd)
    assert opt3.param_groups[0]["weight_decay"] == 0.2
    for t in range(3, 6):
        for p, g in zip(ps3, grads):
            p.grad = g[t].copy()
        opt3.step()
    for p, q in zip(ps, ps3):
        np.testing.assert_array_equal(p.data, q.data)


def test_load_state_dict_rejects_mismatches():
    a, b = Parameter(np.ones(3)), Parameter(np.ones(2))
    a.grad = np.ones(3)
    opt = AdamW([a])
    opt.step()
    sd = opt.state_dict()
    with pytest.raises(ValueError, match="parameter group"):
        AdamW([a, b]).load_state_dict(sd)
    with pytest.raises(ValueError, match="shape"):
        AdamW([Parameter(np.ones(4))]).load_state_dict(sd)


@pytest.mark.parametrize("kwargs, word", [
    ({"lr": -1e-3}, "learning rate"),
    ({"eps": -1.0}, "epsilon"),
    ({"weight_decay": -0.1}, "weight_decay"),
    ({"betas": (1.0, 0.999)}, "beta parameter at index 0"),
    ({"betas": (0.9, -0.1)}, "beta parameter at index 1"),
    ({"lr": float("nan")}, "learning rate"),
])
def test_adamw_rejects_bad_hyperparameters(kwargs, word):
    with pytest.raises(ValueError, match=word):
        AdamW([Parameter(np.ones(2))], **kwargs)


def test_adamw_rejects_bad_params():
    p = Parameter(np.ones(2))
    with pytest.raises(ValueError, match="empty"):
        AdamW([])
    with pytest.raises(TypeError):
        AdamW(p)
    with pytest.raises(TypeError):
        AdamW([np.ones(2)])
    with pytest.raises(ValueError, match="more than one parameter group"):
        AdamW([{"params": [p]}, {"params": [p]}])
    with pytest.raises(ValueError, match="learning rate"):
        AdamW([{"params": [p], "lr": -1.0}])


# torch.optim.AdamW's signature (torch/optim/adamw.py): amsgrad=False, *, maximize=False,
# foreach=None, capturable=False, differentiable=False, fused=None. Any other value changes
# torch's update or its implementation; minigrad implements none of them, so each is refused.
@pytest.mark.parametrize("option, value", [
    ("amsgrad", True), ("maximize", True), ("foreach", True), ("capturable", True),
    ("differentiable", True), ("fused", True), ("maximize", 1),
])
def test_adamw_refuses_options_it_does_not_implement(option, value):
    p = Parameter(np.ones(2))
    with pytest.raises(NotImplementedError, match=f"{option}="):
        AdamW([p], **{option: value})
    with pytest.raises(NotImplementedError, match=f"{option}="):   # pytorch #109992: a group key
        AdamW([{"params": [p], option: value}])
    sd = AdamW([p]).state_dict()
    sd["param_groups"][0][option] = value
    opt = AdamW([p], lr=0.5)
    with pytest.raises(NotImplementedError, match=f"{option}="):
        opt.load_state_dict(sd)
    assert opt.param_groups[0]["lr"] == 0.5 and opt.param_groups[0][option] is not value
    p.grad = np.ones(2)                         # torch reads the groups at every step
    opt.param_groups[0][option] = value
    with pytest.raises(NotImplementedError, match=f"{option}="):
        opt.step()
    np.testing.assert_array_equal(p.data, np.ones(2))


def test_adamw_groups_carry_torchs_decoupled_weight_decay_and_falsy_defaults():
    # torch >= 2.6: AdamW is Adam(decoupled_weight_decay=True); its groups hold the key
    p = Parameter(np.ones(2))
    assert AdamW([p]).param_groups[0]["decoupled_weight_decay"] is True
    with pytest.raises(NotImplementedError, match="decoupled_weight_decay=False"):
        AdamW([{"params": [p], "decoupled_weight_decay": False}])
    AdamW([p], maximize=0, amsgrad=np.False_, foreach=0)      # == False: the same update


def test_adamw_accepts_torch_defaults_and_refuses_unknown_group_keys():
    p = Parameter(np.ones(2))
    opt = AdamW([p], amsgrad=False, maximize=False, foreach=None, capturable=False,
                differentiable=False, fused=None)
    assert {"amsgrad", "maximize", "foreach", "capturable", "differentiable",
            "fused"} <= set(opt.param_groups[0])
    AdamW([p], foreach=False, fused=False)
    with pytest.raises(ValueError, match="momentum"):
        AdamW([{"params": [p], "momentum": 0.9}])
    sd = opt.state_dict()
    sd["param_groups"][0]["nesterov"] = True
    with pytest.raises(ValueError, match="nesterov"):
        AdamW([p]).load_state_dict(sd)
    with pytest.raises(TypeError):
        AdamW([p], momentum=0.9)


def test_adamw_skips_frozen_parameters_and_missing_grads():
    # pytorch #150610: AdamW(model.parameters()) after freezing a layer is accepted; torch steps
    # exactly the parameters whose .grad is not None
    frozen = Parameter(np.ones(3))
    frozen.requires_grad = False
    w, unused = Parameter(np.ones(2)), Parameter(np.ones(2))
    w.grad = np.array([1.0, -1.0])
    opt = AdamW([frozen, w, unused], lr=0.1, weight_decay=0.0)
    opt.step()
    np.testing.assert_array_equal(frozen.data, 1.0)
    np.testing.assert_array_equal(unused.data, 1.0)
    np.testing.assert_allclose(w.data, [0.9, 1.1], rtol=1e-7)   # first Adam step: lr * sign(g)
    assert id(frozen) not in opt.state and id(unused) not in opt.state


# ---------------------------------------------------------------- clip_grad_norm_
def test_clip_grad_norm_scales_to_max_norm():
    rng = np.random.default_rng(3)
    ps = [Parameter(np.zeros(s)) for s in [(3, 4), (5,), (2,)]]
    gs = [rng.standard_normal(p.shape) * 4 for p in ps]
    for p, g in zip(ps, gs):
        p.grad = g.copy()
    expected = float(np.linalg.norm(np.concatenate([g.ravel() for g in gs])))
    total = clip_grad_norm_(ps, 1.0)
    assert isinstance(total, float)
    assert total == pytest.approx(expected, rel=1e-13)
    coef = 1.0 / (expected + 1e-6)
    for p, g in zip(ps, gs):
        np.testing.assert_allclose(p.grad, g * coef, rtol=1e-13)
    new = float(np.linalg.norm(np.concatenate([p.grad.ravel() for p in ps])))
    assert new == pytest.approx(1.0, abs=1e-5) and new < 1.0


def test_clip_grad_norm_leaves_small_gradients_alone_and_skips_missing_grads():
    a, b = Parameter(np.zeros(3)), Parameter(np.zeros(2))
    a.grad = np.array([0.1, -0.2, 0.2])
    total = clip_grad_norm_([a, b], max_norm=1.0)
    assert total == pytest.approx(0.3, rel=1e-14)
    np.testing.assert_array_equal(a.grad, [0.1, -0.2, 0.2])
    assert b.grad is None
    assert clip_grad_norm_([b], 1.0) == 0.0


def test_clip_grad_norm_inf_norm_and_single_tensor():
    a = Parameter(np.zeros(3))
    a.grad = np.array([0.5, -3.0, 2.0])
    total = clip_grad_norm_(a, 1.5, norm_type=float("inf"))
    assert total == 3.0
    np.testing.assert_allclose(a.grad, np.array([0.5, -3.0, 2.0]) * 1.5 / (3.0 + 1e-6))


def test_clip_grad_norm_float32_stays_float32():
    a = Parameter(np.zeros(4, dtype=np.float32))
    a.grad = np.full(4, 3.0, dtype=np.float32)
    total = clip_grad_norm_([a], 1.0)
    assert a.grad.dtype == np.float32
    assert total == pytest.approx(6.0, rel=1e-6)
    np.testing.assert_allclose(a.grad, 0.5, rtol=1e-5)


def test_clip_grad_norm_rejects_bad_arguments():
    a = Parameter(np.zeros(2))
    a.grad = np.ones(2)
    with pytest.raises(ValueError, match="max_norm"):
        clip_grad_norm_([a], -1.0)
    with pytest.raises(ValueError, match="norm_type"):
        clip_grad_norm_([a], 1.0, norm_type=0)
    with pytest.raises(TypeError):
        clip_grad_norm_([a], "1")


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_clip_grad_norm_error_if_nonfinite(bad):
    # torch.nn.utils.clip_grad_norm_: error_if_nonfinite=True raises a RuntimeError when the
    # total norm is nan, inf or -inf, before any gradient is scaled
    a, b = Parameter(np.zeros(2)), Parameter(np.zeros(2))
    a.grad, b.grad = np.array([3.0, 4.0]), np.array([1.0, bad])
    with pytest.raises(RuntimeError, match="non-finite"):
        clip_grad_norm_([a, b], 1.0, error_if_nonfinite=True)
    np.testing.assert_array_equal(a.grad, [3.0, 4.0])
    np.testing.assert_array_equal(b.grad, [1.0, bad])
    a.grad = np.array([3.0, 4.0])
    assert clip_grad_norm_([a], 1.0, 2.0, True, None) == pytest.approx(5.0, rel=1e-14)
    np.testing.assert_allclose(a.grad, [3.0, 4.0] / np.float64(5.0 + 1e-6), rtol=1e-15)


def test_clip_grad_norm_foreach():
    a = Parameter(np.zeros(2))
    a.grad = np.array([3.0, 4.0])
    assert clip_grad_norm_([a], 10.0, foreach=None) == clip_grad_norm_([a], 10.0, foreach=False)
    with pytest.raises(NotImplementedError, match="foreach=True"):
        clip_grad_norm_([a], 1.0, foreach=True)
    np.testing.assert_array_equal(a.grad, [3.0, 4.0])


# ---------------------------------------------------------------- against PyTorch itself
@pytest.mark.slow  # runs PyTorch; leave out with -m "not slow"
def test_adamw_and_clip_match_torch():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(4)
    for dtype, tdtype, rtol in [(np.float64, torch.float64, 1e-12), (np.float32, torch.float32, 1e-5)]:
        init = [rng.standard_normal(s).astype(dtype) for s in [(4, 3), (6,), (2, 5)]]
        ours = [Parameter(a.copy()) for a in init]
        theirs = [torch.nn.Parameter(torch.tensor(a.copy(), dtype=tdtype)) for a in init]
        groups_o = [{"params": ours[:2]}, {"params": ours[2:], "lr": 0.02, "weight_decay": 0.0}]
        groups_t = [{"params": theirs[:2]}, {"params": theirs[2:], "lr": 0.02, "weight_decay": 0.0}]
        opt_o = AdamW(groups_o, lr=3e-3, weight_decay=0.1)
        opt_t = torch.optim.AdamW(groups_t, lr=3e-3, weight_decay=0.1)
        for step in range(8):
            scale = 0.3 if step % 2 else 5.0  # alternate clipped / unclipped steps
            for po, pt in zip(ours, theirs):
                g = (rng.standard_normal(po.shape) * scale).astype(dtype)
                po.grad = g.copy()
                pt.grad = torch.tensor(g.copy(), dtype=tdtype)
            n_o = clip_grad_norm_(ours, 1.0)
            n_t = torch.nn.utils.clip_grad_norm_(theirs, 1.0).item()
            assert n_o == pytest.approx(n_t, rel=rtol)
            opt_o.step()
            opt_t.step()
            for po, pt in zip(ours, theirs):
                np.testing.assert_allclose(po.data, pt.detach().numpy(), rtol=rtol, atol=rtol * 1e-2)
