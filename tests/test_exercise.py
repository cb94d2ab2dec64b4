"""Tests of the exercises (``python -m experiments.exercises``, ``experiments.exercises.learner.
check``) and of training with a learner's backward (``--backward DIR``).

The reference first (the named terms sum to the layer's backward, which agrees with central
differences; the terms are independent, so a fit is unique). Then the diagnosis, on wrong
answers written here the way a learner writes them: each kind of mistake of issue 28, for each
exercise where it can occur, is named as that kind; answers with two mistakes get no single
name; no wrong answer passes, float32 overflows included.
"""
from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from layers.gelu import GELU_C, GELU_K
from layers.rope import rotate_half

from experiments import cli, four_variants, runner
from experiments.exercises import __main__ as command, grading, guard, learner, mistakes
from experiments.exercises.catalogue import EXERCISES, as_tuple, make_cases
from experiments.exercises.terms import terms_of

ROOT = Path(__file__).resolve().parents[1]
PROG = command.PROG


def T(a):
    return np.swapaxes(a, -1, -2)


def mean(a):
    return a.mean(axis=-1, keepdims=True)


def main(argv):
    """``python -m experiments.exercises`` in this process: its exit status."""
    with pytest.raises(SystemExit) as ei, cli.errors(PROG):
        sys.exit(command.run(argv))
    return ei.value.code


def said(name, fn):
    """{gradient: its lines} of the check of ``fn``, and the verdict."""
    ex = EXERCISES[name]
    with np.errstate(all="ignore"):
        v = grading.verdict(ex, fn, "mine.py")
    per, current = {}, None
    for line in v.lines[2:-1]:
        if line.startswith("first wrong line"):   # the learner's line, after the gradients
            break
        head = line.split(" ", 1)[0]
        if head in ex.grads:
            current = head
            per[head] = [line[len(head):].strip()]
        elif current:
            per[current].append(line.strip())
    return per, v


def named_terms(name, case):
    ex = EXERCISES[name]
    return terms_of(ex, ex.parts(case.dout, case.cache),
                              dict(zip(ex.grads, map(np.shape, case.right))))


def scale(right, terms):
    return max([np.abs(right).max()] + [np.abs(a).max() for _, a in terms]) or 1.0


# ----------------------------------------------------------------------------- the reference

def test_every_exercise_has_its_layer_and_its_derivation():
    text = (ROOT / "docs" / "derivations.md").read_text(encoding="utf-8")
    for ex in EXERCISES.values():
        assert f"](#{ex.section})" in text and (ROOT / "layers" / f"{ex.name}.py").is_file()


@pytest.mark.parametrize("name", EXERCISES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_named_terms_sum_to_the_layers_backward(name, dtype):
    for case in make_cases(EXERCISES[name], 0, dtype):
        terms = named_terms(name, case)
        for g, right in zip(EXERCISES[name].grads, case.right):
            total = sum(a for _, a in terms[g])
            tol = 1e-13 if dtype == np.float64 else 1e-5
            assert np.abs(total - right).max() <= tol * scale(right, terms[g]), (case.label, g)


@pytest.mark.parametrize("name", EXERCISES)
def test_the_layers_backward_agrees_with_central_differences(name):
    ex = EXERCISES[name]
    for case in make_cases(ex, 0):
        terms = named_terms(name, case)
        for w, g, right in zip(ex.wrt, ex.grads, case.right):
            num = grading.numerical(ex, case, ex.inputs.index(w))
            assert np.abs(num - right).max() <= 1e-6 * scale(right, terms[g]), (case.label, g)


@pytest.mark.parametrize("name", EXERCISES)
def test_the_terms_of_each_gradient_are_independent(name):
    cases = make_cases(EXERCISES[name], 0)
    for g in EXERCISES[name].grads:
        cols = np.stack([np.concatenate([named_terms(name, c)[g][i][1].ravel() for c in cases])
                         for i in range(len(named_terms(name, cases[0])[g]))], axis=1)
        assert np.linalg.matrix_rank(cols) == cols.shape[1], g


@pytest.mark.parametrize("name", ["gelu", "relu2", "silu"])
def test_an_elementwise_layer_is_checked_where_exp_overflows(name):
    x = make_cases(EXERCISES[name], 0, np.float32)[-1].args[0]
    with np.errstate(over="ignore"):
        assert np.isinf(np.exp(x)).any() and np.isinf(np.exp(-x)).any()
        assert np.isinf(np.exp(x.astype(np.float64))).any()   # float64's limit too


@pytest.mark.parametrize("name", EXERCISES)
def test_our_own_backward_is_right(name):
    per, v = said(name, EXERCISES[name].backward)
    assert v.status == "right" and not v.blocker and set(per) == set(EXERCISES[name].grads)
    assert all(lines == [lines[0]] and lines[0].startswith("right: error ") for lines in per.values())
    assert v.gradients == {g: "right" for g in EXERCISES[name].grads}


# ----------------------------------------------------------------------------- each kind named

def planted(name, grad, change):
    """The layer's own backward with ``change(gradient, its terms)`` in place of ``grad``."""
    ex = EXERCISES[name]

    def backward(dout, cache):
        out = list(as_tuple(ex.backward(dout, cache)))
        j = ex.grads.index(grad)
        terms = terms_of(ex, ex.parts(dout, cache),
                                   dict(zip(ex.grads, map(np.shape, out))))[grad]
        out[j] = change(out[j], [a for _, a in terms])
        return tuple(out) if len(out) > 1 else out[0]
    return backward


TERMS = [(name, g, i, label, len(terms)) for name in EXERCISES for g, terms in
         named_terms(name, make_cases(EXERCISES[name], 0)[0]).items()
         for i, (label, _) in enumerate(terms, 1)]


@pytest.mark.parametrize("name,g,i,label,n", TERMS, ids=[f"{t[0]}-{t[1]}-{t[2]}" for t in TERMS])
def test_each_term_left_out_flipped_or_doubled_is_named(name, g, i, label, n):
    expected = {-1: f"your {g} is the right one without term {i}, {label}" if n > 1 else
                f"your {g} is 0 everywhere",
                -2: f"term {i}, {label}, has the wrong sign" if n > 1 else
                f"your {g} is the right one with the wrong sign",
                1: f"term {i}, {label}, is counted twice" if n > 1 else
                f"your {g} is twice the right one"}
    for c, text in expected.items():
        per, v = said(name, planted(name, g, lambda r, t: r + c * t[i - 1]))
        assert text in per[g][1], (c, per[g])
        assert all(per[h][0].startswith("right") for h in per if h != g)


def _norm(dout, cache, mean=np.mean, weighted=True, rows=np.sum, rstd3=False, mean_term=True,
          order=(0, 1, 2), dweight_of=None, dbias_of=None, no_eps=False):
    """A learner's LayerNorm backward (RMSNorm's with ``mean_term=False``) with the mistakes
    a learner makes in it."""
    xhat, weight, rstd = cache
    C, m = xhat.shape[-1], lambda a: mean(a, axis=-1, keepdims=True)
    dxhat = dout * weight if weighted else dout
    if no_eps:
        var = (xhat / rstd) ** 2
        var = var.mean(axis=-1, keepdims=True)
        rstd = 1 / np.sqrt(var) if no_eps == "nan" else np.where(var > 0, 1 / np.sqrt(var + (var == 0)), 0)
    third = (rstd ** 3 if rstd3 else rstd) * xhat * m(dxhat * xhat)
    dx = rstd * (dxhat - (m(dxhat) if mean_term else 0)) - third
    dweight = rows(((dout if dweight_of is None else dweight_of) * xhat).reshape(-1, C), axis=0)
    dbias = rows((dbias_of if dbias_of is not None else dout).reshape(-1, C), axis=0)
    grads = (dx, dweight, dbias) if mean_term else (dx, dweight)
    return tuple(grads[k] for k in order[:len(grads)])


def _swiglu(dout, cache, swap=False, h_of=None, dsilu=None, per_row=False):
    x2, a, s, u, g, wg, wu, wd = cache
    d2 = dout.reshape(-1, dout.shape[-1])
    dh = d2 @ wd
    du, dg = (dh * u, dh * g) if swap else (dh * g, dh * u)
    da = dg * (s * (1 + a * (1 - s)) if dsilu is None else dsilu(a, s))
    grads = [(da @ wg + du @ wu).reshape(*dout.shape[:-1], -1), da.T @ x2, du.T @ x2,
             d2.T @ (g * u if h_of is None else h_of(g, u))]
    return tuple(grads[:1] + [w / len(x2) for w in grads[1:]] if per_row else grads)


def _gelu(dout, cache, dudx=None, tanh_prime=None, k=GELU_K):
    x, t = cache
    du = k * (1 + 3 * GELU_C * x * x) if dudx is None else dudx(x)
    tp = 1 - t * t if tanh_prime is None else tanh_prime(t)
    return dout * (0.5 * (1 + t) + 0.5 * x * tp * du)


def _attention(dout, cache, scale=None, P_of=None, dk_of=None, dv_of=None):
    q, k, v, P, sc = cache
    sc = sc if scale is None else scale(sc)
    if P_of:
        S = q @ T(k) * cache[4]
        S = P_of(S)
        e = np.exp(S - S.max(-1, keepdims=True))
        P = e / e.sum(-1, keepdims=True)
    dP = dout @ T(v)
    dS = P * dP - P * np.sum(P * dP, -1, keepdims=True)
    dq = dS @ k * sc
    dk = T(dS) @ q * sc if dk_of is None else dk_of(dS, q, dq) * sc
    return dq, dk, T(P) @ dout if dv_of is None else dv_of(P, dout)


def _ce(dloss, cache, over=None):
    probs, t, valid, eps, reduction, count, shape = cache
    d = probs.copy()
    d[np.arange(len(t)), t] -= 1
    return (d * dloss / (count if over is None else over(shape))).reshape(shape)


def _masked(S):
    return np.where(np.triu(np.ones(S.shape[-2:], bool), 1), -np.inf, S)


def _neox(z):
    h = z.shape[-1] // 2
    return np.concatenate((-z[..., h:], z[..., :h]), -1)


PART = "the path through the mean"
KINDS = [   # (exercise, a learner's backward, {gradient: what the check must say})
    # a factor of the case's sizes
    ("layernorm", lambda d, c: _norm(d, c, mean=np.sum), {"dx": "term 2, -mean(dxhat) (the "
     "path through the mean), and term 3, -xhat * mean(dxhat * xhat) (the path through the "
     "variance), are multiplied by C: a sum over the C features where a mean belongs"}),
    ("layernorm", lambda d, c: _norm(d, c, rows=np.mean), {
        "dweight": "your dweight is the right one multiplied by 1/N: a mean over the N rows "
                   "where a sum belongs", "dbias": "your dbias is the right one multiplied by 1/N"}),
    ("rmsnorm", lambda d, c: _norm(d, c, rows=np.mean, mean_term=False),
     {"dweight": "multiplied by 1/N: a mean over the N rows"}),
    ("linear", lambda d, c: (lambda dx, dw, db: (dx, dw / len(d.reshape(-1, d.shape[-1])), db))(
        *EXERCISES["linear"].backward(d, c)), {"dweight": "multiplied by 1/N: a mean over the N rows"}),
    ("swiglu", lambda d, c: _swiglu(d, c, per_row=True), {
        g: f"your {g} is the right one multiplied by 1/N" for g in ("dw_gate", "dw_up", "dw_down")}),
    ("softmax", lambda dy, c: c[0] * dy - c[0] * np.mean(dy * c[0], axis=c[1], keepdims=True),
     {"dx": "term 2, -y * sum(dy * y) (-y y^T dy), is multiplied by 1/C: a mean over the C "
            "entries along the axis where a sum belongs"}),
    ("attention", lambda d, c: _attention(d, c, scale=lambda s: s * s), {
        g: f"your {g} is the right one multiplied by 1/sqrt(hs): a 1/sqrt(hs) too many: a "
           f"division by hs where sqrt(hs) belongs?" for g in ("dq", "dk")}),
    ("attention", lambda d, c: _attention(d, c, scale=lambda s: 1.0),
     {g: f"your {g} leaves out 1/sqrt(hs)" for g in ("dq", "dk")}),
    ("cross_entropy", lambda d, c: _ce(d, c, over=lambda s: 1),
     {"dlogits": "your dlogits leaves out 1/N"}),
    ("cross_entropy", lambda d, c: _ce(d, c, over=lambda s: s[0]),
     {"dlogits": "multiplied by N/B: a mean over the B sequences where a mean over the N targets "
                 "belongs"}),
    ("cross_entropy", lambda d, c: _ce(d, c, over=lambda s: s[-1]),
     {"dlogits": "multiplied by N/V: a mean over the V classes where a mean over the N targets"}),
    ("layernorm", lambda d, c: (lambda dx, dw, db: (dx, dw / len(d), db))(
        *EXERCISES["layernorm"].backward(d, c)), {"dweight": "yours x 2 = right at x (2, 3, 6); x 3 "
                                                  "at x (3, 6), near-constant rows"}),
    # the wrong derivative of an inner function
    ("gelu", lambda d, c: _gelu(d, c, dudx=lambda x: GELU_K), {"dx": "your dx is the right one "
     "without term 4, 0.5 x tanh'(u) 3 k c x^2 (times the 3 k c x^2 of du/dx)"}),
    ("gelu", lambda d, c: _gelu(d, c, dudx=lambda x: 1), {"dx": "is multiplied by 1.253 = 1/k: "
     "k = sqrt(2/pi) left out?; term 4, 0.5 x tanh'(u) 3 k c x^2 (times the 3 k c x^2 of "
     "du/dx), is missing"}),
    ("gelu", lambda d, c: _gelu(d, c, dudx=lambda x: GELU_K * (1 + GELU_C * x * x)),
     {"dx": "term 4, 0.5 x tanh'(u) 3 k c x^2 (times the 3 k c x^2 of du/dx), is multiplied by 1/3"}),
    ("gelu", lambda d, c: _gelu(d, c, dudx=lambda x: GELU_K * (1 + 3 * GELU_C * x)),
     {"dx": "your dx has x in place of x^2"}),
    ("gelu", lambda d, c: _gelu(d, c, tanh_prime=lambda t: 1 - t),
     {"dx": "your dx has 1 - t in place of tanh'(u) = 1 - t^2"}),
    ("gelu", lambda d, c: _gelu(d, c, k=0.79788), {"dx": "are multiplied by 0.9999943 (a rounded "
                                                         "constant?)"}),
    ("silu", lambda d, c: d * (c[1] + c[0] * c[1] * c[1]), {"dx": "your dx has s in place of 1 - s"}),
    ("silu", lambda d, c: d * (c[1] + c[0] * (1 - c[1])),
     {"dx": "your dx has 1 - s in place of sigmoid'(x) = s (1 - s)"}),
    ("swiglu", lambda d, c: _swiglu(d, c, dsilu=lambda a, s: s), {
        g: f"your {g} has s in place of silu'(a) = s (1 + a (1 - s))" for g in ("dx", "dw_gate")}),
    ("swiglu", lambda d, c: _swiglu(d, c, dsilu=lambda a, s: s * (1 - s)), {
        g: f"your {g} has sigmoid'(a) = s (1 - s) in place of silu'(a)" for g in ("dx", "dw_gate")}),
    ("swiglu", lambda d, c: _swiglu(d, c, dsilu=lambda a, s: 1), {
        g: f"your {g} leaves out silu'(a) = s (1 + a (1 - s))" for g in ("dx", "dw_gate")}),
    ("relu2", lambda d, r: d * 2 * r * r, {"dx": "your dx has out in place of r"}),
    ("relu2", lambda d, r: d * 2 * (r > 0), {"dx": "your dx has x > 0 in place of r"}),
    ("relu2", lambda d, r: d * r, {"dx": "your dx is half the right one"}),
    # swapped roles
    ("swiglu", lambda d, c: _swiglu(d, c, swap=True), {"dx": "your dx has u and g exchanged",
     "dw_gate": "your dw_gate has g in place of u", "dw_up": "your dw_up has u in place of g"}),
    ("swiglu", lambda d, c: _swiglu(d, c, h_of=lambda g, u: g),
     {"dw_down": "your dw_down leaves out u"}),
    ("rope", lambda d, c: d * c[1] - rotate_half(d * c[0]), {"dx": "your dx has cos and sin exchanged"}),
    ("rope", lambda d, c: d * c[0] - _neox(d * c[1]),
     {"dx": "your dx has NeoX's rotate_half (halves, not pairs) in place of rotate_half"}),
    ("rope", lambda d, c: d * c[0] + rotate_half(d * c[1]), {"dx": "in your dx, term 2, "
     "-rotate_half(dout * sin) (the transpose of rotate_half is -rotate_half: the backward rotates "
     "by -theta), has the wrong sign"}),
    ("rmsnorm", lambda d, c: _norm(d, c, mean_term=False, dweight_of=d * c[1]),
     {"dweight": "your dweight has dxhat in place of dout"}),
    ("layernorm", lambda d, c: _norm(d, c, weighted=False), {"dx": "your dx leaves out weight"}),
    ("rmsnorm", lambda d, c: _norm(d, c, weighted=False, mean_term=False),
     {"dx": "your dx leaves out weight"}),
    ("linear", lambda d, c: (lambda dx, dw, db: (dx, dw.T.copy(), db))(*EXERCISES["linear"].backward(d, c)),
     {"dweight": "your dweight is the right one transposed (its last two axes): dweight has the "
                 "shape of its input, (4, 4) in x (2, 3, 4), weight (4, 4)"}),
    ("attention", lambda d, c: _attention(d, c, dk_of=lambda dS, q, dq: T(q) @ dS),
     {"dk": "your dk is the right one transposed (its last two axes)"}),
    ("attention", lambda d, c: _attention(d, c, dk_of=lambda dS, q, dq: dS @ q),
     {"dk": "your dk leaves out a transpose (^T)"}),
    ("attention", lambda d, c: _attention(d, c, dv_of=lambda P, dout: P @ dout),
     {"dv": "your dv leaves out a transpose (^T)"}),
    # a mask in the wrong place
    ("attention", lambda d, c: _attention(d, c, P_of=lambda S: S), {
        g: f"your {g} has P without the causal mask in place of P" for g in ("dq", "dk", "dv")}),
    ("attention", lambda d, c: _attention(d, c, P_of=_masked), {
        g: f"your {g} has P with the causal mask in place of P" for g in ("dq", "dk", "dv")}),
    # a reduction over every entry where one over a row belongs (the axis left out)
    ("softmax", lambda dy, c: c[0] * dy - c[0] * np.sum(dy * c[0]), {"dx": "your dx has the sum "
     "over every entry (no axis) in place of the sum along the axis"}),
    ("attention", lambda d, c: _attention(d, c, dk_of=lambda dS, q, dq: T(
        c[3] * (d @ T(c[2])) - c[3] * np.sum(c[3] * (d @ T(c[2])))) @ q), {"dk": "your dk has the "
        "sum over every entry (no axis) in place of the sum over the row"}),
    # the output in place of the input; rstd^3 where rstd belongs; eps left out
    ("silu", lambda d, c: d * c[1] * (1 + c[0] * c[1] * (1 - c[1])), {"dx": "your dx has out in place of x"}),
    ("layernorm", lambda d, c: (lambda x, w, r: (r * (d * w - np.mean(d * w) - x * np.mean(
        d * w * x, axis=-1, keepdims=True)), *EXERCISES["layernorm"].backward(d, c)[1:]))(*c),
     {"dx": "in your dx, term 2, -mean(dxhat) (the path through the mean), has the mean over "
            "every entry (no axis) in place of the mean over the row"}),
    ("layernorm", lambda d, c: _norm(d, c, rstd3=True), {"dx": "in your dx, term 3, -xhat * "
     "mean(dxhat * xhat) (the path through the variance), has rstd^3 in place of rstd"}),
    ("rmsnorm", lambda d, c: _norm(d, c, rstd3=True, mean_term=False),
     {"dx": "term 2, -xhat * mean(dxhat * xhat) (the projection, the path through mean(x^2)), "
            "has rstd^3 in place of rstd"}),
    ("layernorm", lambda d, c: _norm(d, c, no_eps="nan"),
     {"dx": "your dx has 1/sqrt(var) (eps left out) in place of rstd"}),
    ("layernorm", lambda d, c: _norm(d, c, no_eps="guarded"),
     {"dx": "your dx has 1/sqrt(var) (eps left out) in place of rstd"}),
    ("rmsnorm", lambda d, c: _norm(d, c, mean_term=False, no_eps="nan"),
     {"dx": "your dx has 1/sqrt(mean(x^2)) (eps left out) in place of rstd"}),
    # the right values in another shape; the softmax's diagonal alone
    ("rmsnorm", lambda d, c: (lambda dx, dw: (dx, dw[None]))(*EXERCISES["rmsnorm"].backward(d, c)),
     {"dweight": "dweight has shape (1, 6) in x (2, 3, 6); it must be (6,): the values are right "
                 "(keepdims=True, or a reshape left out?)"}),
    ("softmax", lambda dy, c: c[0] * (1 - c[0]) * dy, {"dx": "your dx leaves out the sum along the axis"}),
    ("embedding", lambda d, c: (lambda w: (w.__setitem__(c[0], d.reshape(-1, c[1][1])), w)[1])(
        np.zeros(c[1], c[2])), {"dweight": "your dweight is the right one without term 2, the sum of "
                                           "dout at a row's earlier lookups"}),
]


@pytest.mark.parametrize("name,fn,words", KINDS, ids=[f"{k[0]}-{i}" for i, k in enumerate(KINDS)])
def test_a_mistake_of_each_kind_is_named_as_that_kind(name, fn, words):
    per, v = said(name, fn)
    assert v.status == "wrong"
    for g, lines in per.items():
        if g in words:
            assert words[g] in " ".join(lines), lines
            assert not any("no single mistake" in ln for ln in lines), lines
        else:
            assert lines[0].startswith("right"), (g, lines)


COPIES = [   # a gradient computed with another one's formula, the other right
    ("layernorm", lambda d, c: _norm(d, c, dbias_of=d * c[0]), "dbias", "dweight"),
    ("layernorm", lambda d, c: (lambda dx, dw, db: (dx, db, db))(*_norm(d, c)), "dweight", "dbias"),
    ("attention", lambda d, c: _attention(d, c, dk_of=lambda dS, q, dq: dq / c[4]), "dk", "dq"),
    ("swiglu", lambda d, c: (lambda dx, dwg, dwu, dwd: (dx, dwg, dwg, dwd))(*_swiglu(d, c)),
     "dw_up", "dw_gate"),
]


@pytest.mark.parametrize("name,fn,g,other", COPIES, ids=[c[2] for c in COPIES])
def test_a_copied_formula_is_said_so_and_not_an_order(name, fn, g, other):
    per, v = said(name, fn)
    assert per[g] == [f"wrong: your {g} equals the right {other}: a copy of its formula?"]
    assert per[other][0].startswith("right") and "order" not in " ".join(v.lines)


def test_two_gradients_exchanged_are_an_order_mistake():
    per, _ = said("layernorm", lambda d, c: _norm(d, c, order=(0, 2, 1)))
    for g, h in (("dweight", "dbias"), ("dbias", "dweight")):
        assert per[g] == [f"wrong: your {g} is the right {h}, and your {h} the right {g}: return "
                          f"(dx, dweight, dbias) in this order"]


TWO = [   # two mistakes at once, of different kinds
    ("layernorm", "dx", lambda d, c: _norm(d, c, weighted=False, rstd3=True)),
    ("layernorm", "dx", lambda d, c: _norm(d, c, mean=np.sum, no_eps="guarded")),
    ("gelu", "dx", lambda d, c: _gelu(d, c, tanh_prime=lambda t: 1 - t, k=0.79788)),
    ("silu", "dx", lambda d, c: d * (c[1] + 2 * c[0] * (1 - c[1]))),
    ("swiglu", "dx", lambda d, c: _swiglu(d, c, swap=True, dsilu=lambda a, s: s)),
    ("rope", "dx", lambda d, c: d * c[1] - _neox(d * c[0])),
    ("attention", "dq", lambda d, c: _attention(d, c, P_of=lambda S: S, scale=lambda s: s * s)),
    ("cross_entropy", "dlogits", lambda d, c: (c[0] / c[5]).reshape(c[6])),
    ("softmax", "dx", lambda dy, c: c[0] * dy - c[0] * np.mean(dy, axis=c[1], keepdims=True)),
    ("relu2", "dx", lambda d, r: d * r * r),
]


@pytest.mark.parametrize("name,g,fn", TWO, ids=[f"{t[0]}-{i}" for i, t in enumerate(TWO)])
def test_two_mistakes_at_once_get_no_single_name(name, g, fn):
    per, v = said(name, fn)
    assert v.status == "wrong"
    assert per[g][1].startswith(f"no single mistake in the terms of {g} explains it") or (
        "; term" in per[g][1]), per[g]           # the plain message, or both mistakes named


@pytest.mark.parametrize("name,fn", [
    ("gelu", lambda d, c: (lambda x, t2: d * (0.5 * (1 + t2) + 0.5 * x * (1 - t2 * t2) * GELU_K
                                               * (1 + 3 * GELU_C * x * x)))(
        c[0], (lambda e: (e - 1) / (e + 1))(np.exp(2 * GELU_K * (c[0] + GELU_C * c[0] ** 3))))),
    ("silu", lambda d, c: (lambda e: d * (1 / (1 + e) + c[0] * e / (1 + e) ** 2))(np.exp(-c[0]))),
])
def test_a_backward_that_overflows_is_wrong(name, fn):
    per, v = said(name, fn)
    assert v.status == "wrong" and "NaN or inf" in per["dx"][-1]


def test_a_backward_wrong_only_in_float32_is_wrong():
    def fn(dout, cache):
        dx = EXERCISES["relu2"].backward(dout, cache)
        return dx if dx.dtype == np.float64 else dx * np.float32(1 + 1e-3)
    per, v = said("relu2", fn)
    assert v.status == "wrong" and per["dx"][0].startswith(
        "wrong: right in float64, not in float32: largest error")


def test_a_float64_gradient_for_float32_inputs_is_its_dtype_alone():
    # a float64 array (not a scalar: NumPy 1's value-based casting keeps float32 with a scalar)
    per, v = said("gelu", lambda dout, cache: EXERCISES["gelu"].backward(dout, cache) * np.ones(1))
    assert per["dx"] == ["wrong: the values are right, the dtype is not",
                         "for float32 inputs your dx is float64: a gradient has its input's dtype "
                         "(the GPT trains in float32: a float64 constant or array in your code?)"]
    assert v.blocker == per["dx"][1]


def test_a_float32_gradient_for_float64_inputs_is_its_dtype_alone():
    per, v = said("softmax", lambda dy, cache: EXERCISES["softmax"].backward(dy, cache).astype(np.float32))
    assert per["dx"] == ["wrong: the values are right to float32's round-off, the dtype is not",
                         "for float64 inputs your dx is float32: a gradient has its input's dtype"]
    assert not v.blocker   # the GPT trains in float32: it would train


def test_a_factor_near_one_is_printed_with_its_digits():
    assert mistakes.number(0.9999943) == "0.9999943 (a rounded constant?)"
    assert mistakes.number(1 / GELU_K, {"k = sqrt(2/pi)": GELU_K}) == "1.253 = 1/k: k = sqrt(2/pi) left out?"
    assert mistakes.number(0.37) == "0.37" and mistakes.number(1 / 3) == "1/3"


def test_an_unexplained_error_says_where_and_the_line_that_made_it():
    def wrong_in_one_row(dout, cache):
        dx, dw, db = EXERCISES["layernorm"].backward(dout, cache)
        dx = dx.copy()
        dx.reshape(-1, dx.shape[-1])[0, 0] += 1.0
        return dx, dw, db
    per, v = said("layernorm", wrong_in_one_row)
    assert per["dx"] == [per["dx"][0]] and per["dx"][0].startswith(
        "wrong: largest error 1 at dx[0, 0")   # no term explains it: the line says the rest
    first = next(i for i, line in enumerate(v.lines) if line.startswith("first wrong line"))
    assert v.lines[first].endswith("dx.reshape(-1, dx.shape[-1])[0, 0] += 1.0")
    assert v.lines[first + 1].strip() == ("your dx was right before it, the derivation's dx; "
                                          "this line changed it")


def test_an_unexplained_error_without_a_line_says_so():
    per, _ = said("layernorm", lambda dout, cache: (lambda dx, dw, db: (
        dx + (np.arange(dx.size).reshape(dx.shape) == 0), dw, db))(
        *EXERCISES["layernorm"].backward(dout, cache)))   # a lambda: no lines to trace
    assert per["dx"][0].startswith("wrong: largest error 1 at dx[0, 0")
    assert per["dx"][1] == "no single mistake in the terms of dx explains it"


def test_the_case_where_it_is_wrong_is_named_when_it_is_the_only_one():
    def fn(dout, cache):
        dx, dw, db = EXERCISES["layernorm"].backward(dout, cache)
        bump = 0.1 * np.cos(np.arange(dx.size)).reshape(dx.shape) * (dx.shape[-1] == 1)
        return dx + bump.astype(dx.dtype), dw, db
    assert said("layernorm", fn)[0]["dx"][1] == ("no single mistake in the terms of dx explains "
                                                  "it; it is wrong only in x (4, 1), one feature")


def test_a_sum_over_some_rows_only_is_named():
    per, _ = said("layernorm", lambda d, c: (lambda dx, dw, db: (dx, (d * c[0]).sum(axis=0), db))(
        *EXERCISES["layernorm"].backward(d, c)))
    assert per["dweight"] == ["wrong: dweight has shape (3, 6) in x (2, 3, 6); it must be (6,). "
                              "Summed over its leading axes yours is right: sum over every row"]


@pytest.mark.parametrize("name,upstream", [("rmsnorm", "dout"), ("softmax", "dy")])
def test_a_backward_that_modifies_its_arguments_in_place_is_wrong(name, upstream):
    def in_place(dout, cache):
        grads = EXERCISES[name].backward(dout, cache)
        dout *= 2.0
        return grads
    per, v = said(name, in_place)
    assert all(lines[0].startswith("right") for lines in per.values())
    assert v.status == "wrong" and f"modified {upstream} in place" in v.lines[2]   # read first


def test_a_backward_that_spoils_its_cache_in_place_hears_so_before_the_terms():
    def spoils(dout, cache):
        cache[0][...] = 0.0        # xhat zeroed, then used: the terms' diagnosis comes after
        return EXERCISES["layernorm"].backward(dout, cache)
    per, v = said("layernorm", spoils)
    assert v.status == "wrong" and v.lines[2].startswith("your backward modified the cache in place")


@pytest.mark.parametrize("got,line", [
    (lambda dout, cache: EXERCISES["layernorm"].backward(dout, cache)[:2],
     "layernorm_backward returns a tuple of 2; it must return 3 arrays, (dx, dweight, dbias)"),
    (lambda dout, cache: EXERCISES["layernorm"].backward(dout, cache)[0],
     "layernorm_backward returns one array, of shape (2, 3, 6); it must return 3 arrays"),
    (lambda dout, cache: (None, None, None), "dx is None, not a NumPy array"),
])
def test_a_wrong_return_is_one_line(got, line):
    v = grading.verdict(EXERCISES["layernorm"], got, "mine.py")
    assert v.status == "wrong" and v.lines == [v.blocker] and v.blocker.startswith(line)


def test_a_backward_that_hangs_is_one_line_naming_the_case(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(guard, "TIME_LIMIT", 0.2)
    path = tmp_path / "relu2.py"
    path.write_text("def relu2_backward(dout, cache):\n    while True:\n        pass\n")
    assert main(["check", "relu2", "--file", str(path)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "your relu2_backward did not return within 0.2 s on x (3, 5) (a loop that never ends?)"]


def test_no_time_limit_while_a_debugger_runs(monkeypatch):
    import time
    monkeypatch.setattr(guard, "TIME_LIMIT", 0.02)

    def slow(dout, cache):
        time.sleep(0.08)
        return EXERCISES["relu2"].backward(dout, cache)
    sys.settrace(lambda *_: None)     # as pdb does, in a breakpoint() of the learner's
    try:
        assert grading.verdict(EXERCISES["relu2"], slow, "mine.py").status == "right"
    finally:
        sys.settrace(None)


def test_the_learners_prints_go_to_stderr_and_a_closed_stdout_does_not_matter(monkeypatch, capsys):
    def noisy(dout, cache):
        print("dout", dout.shape)
        return EXERCISES["relu2"].backward(dout, cache)

    class Closed:
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")
    monkeypatch.setattr(sys, "stdout", Closed())
    assert grading.verdict(EXERCISES["relu2"], noisy, "mine.py").status == "right"
    monkeypatch.undo()
    learner.check("relu2", noisy)
    out, err = capsys.readouterr()
    assert "dout (3, 5)" in err and "dout" not in out and out.splitlines()[-1].startswith("Right.")


def test_check_from_python_prints_the_commands_lines_and_returns_the_verdict(tmp_path, capsys):
    path = tmp_path / "softmax.py"
    path.write_text("def softmax_backward(dy, cache):\n    y, axis = cache\n    return y * dy\n")
    assert main(["check", "softmax", "--file", str(path)]) == 1
    command = capsys.readouterr().out.splitlines()
    v = learner.check("softmax", learner.load(EXERCISES["softmax"], path))
    assert capsys.readouterr().out.splitlines()[1:] == command[1:] and v.status == "wrong"
    assert v.gradients == {"dx": "wrong"}
    with pytest.raises(ValueError, match="no exercise 'softmaxx'"):
        learner.check("softmaxx", print)


# ----------------------------------------------------------------------------- the command

def test_the_list_names_every_exercise_and_its_derivation(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert main(["list"]) == 0 and capsys.readouterr().out == out
    for ex in EXERCISES.values():
        line = next(ln for ln in out.splitlines() if ln.startswith(ex.name + " "))
        assert line.endswith(f"#{ex.section}") and ex.summary in line


def our_code(name):
    """The lines of the layer's backward (comments cut) that its forward does not share."""
    forward = inspect.getsource(EXERCISES[name].forward)
    lines = [ln.split("#")[0].strip() for ln in inspect.getsource(EXERCISES[name].backward).splitlines()]
    return [ln for ln in lines if len(ln) > 10 and ln not in forward and not ln.startswith("def ")]


@pytest.mark.parametrize("name", EXERCISES)
def test_start_writes_the_forward_in_full_and_a_stub_that_runs(tmp_path, capsys, name):
    ex = EXERCISES[name]
    assert main(["start", name, "--dir", str(tmp_path)]) == 0
    text = (tmp_path / f"{name}.py").read_text(encoding="utf-8")
    assert inspect.getsource(ex.forward) in text and ex.link in text and "Steps:" in text
    assert not [ln for ln in our_code(name) if ln in text]          # our backward is not there
    namespace = {}
    exec(compile(text, f"{name}.py", "exec"), namespace)
    case = make_cases(ex, 0)[0]
    out, cache = namespace[f"{name}_forward"](*case.args, **case.kwargs)
    with pytest.raises(NotImplementedError):
        namespace[ex.function](out, cache)
    assert main(["check", name, "--file", str(tmp_path / f"{name}.py")]) == 1
    assert "is not implemented yet" in capsys.readouterr().out


def test_start_never_overwrites(tmp_path, capsys):
    path = tmp_path / "rope.py"
    path.write_text("mine\n")
    assert main(["start", "rope", "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exists" in err and "check rope --file" in err
    assert path.read_text() == "mine\n"


def _learner_file(folder, name, body):
    """Start ``name`` in ``folder`` and write ``body`` in place of its stub's."""
    assert main(["start", name, "--dir", str(folder)]) == 0
    path = folder / f"{name}.py"
    stub = f'    raise NotImplementedError("{EXERCISES[name].function}: not written yet")'
    path.write_text(path.read_text().replace(stub, body))
    return path


LAYERNORM = """    xhat, weight, rstd = cache
    C = xhat.shape[-1]
    dxhat = dout * weight
    dx = rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True)
                 - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True))
    return dx, (dout * xhat).reshape(-1, C).sum(axis=0), dout.reshape(-1, C).sum(axis=0)"""


def test_check_a_right_file_then_a_wrong_one(tmp_path, capsys):
    path = _learner_file(tmp_path, "layernorm", LAYERNORM)
    capsys.readouterr()
    assert main(["check", "layernorm", "--file", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [ln.split()[:2] for ln in out[2:5]] == [["dx", "right:"], ["dweight", "right:"],
                                                   ["dbias", "right:"]]
    assert out[5] == ("All 3 gradients right. Train the GPT with it: python -m "
                      f"experiments.four_variants --tiny --backward {tmp_path}")
    path.write_text(path.read_text().replace("dxhat - dxhat.mean(axis=-1, keepdims=True)", "dxhat"))
    assert main(["check", "layernorm", "--file", str(path)]) == 1
    out = capsys.readouterr().out
    assert "your dx is the right one without term 2, -mean(dxhat) (the path through the mean)" in out
    assert "1 of 3 gradients wrong. The derivation, when you want it: docs/derivations.md#layernorm" in out


def test_the_learners_exception_shows_their_traceback_and_one_line(tmp_path, capsys):
    path = _learner_file(tmp_path, "rmsnorm", '    return dout, np.einsum("nc,nc->c", dout, cache[0])')
    capsys.readouterr()
    assert main(["check", "rmsnorm", "--file", str(path)]) == 1
    captured = capsys.readouterr()
    line = next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if "einsum" in ln)
    err = captured.err.splitlines()
    assert captured.out == "" and err[0] == "Traceback (most recent call last):"
    assert err[1] == f'  File "{path.resolve()}", line {line}, in rmsnorm_backward'
    assert "experiments" not in captured.err.replace(PROG, "")     # their frames only
    assert err[-1].startswith(f"{PROG}: your rmsnorm_backward raised ValueError at {path}:{line} "
                              f"on x (2, 3, 6): ")


@pytest.mark.parametrize("where", ["import", "backward"])
def test_a_syntax_error_or_a_sys_exit_is_the_learners_exception(tmp_path, capsys, where):
    path = _learner_file(tmp_path, "silu", "    sys.exit(3)" if where == "backward" else
                         "    return dout * (cache[1]")
    path.write_text("import sys\n" + path.read_text())
    capsys.readouterr()
    assert main(["check", "silu", "--file", str(path)]) == 1
    err = capsys.readouterr().err.splitlines()[-1]
    assert err.startswith(f"{PROG}: your silu_backward raised SystemExit at {path}:" if
                          where == "backward" else f"{PROG}: importing {path} raised SyntaxError")


@pytest.mark.parametrize("argv,words", [
    (["check", "layernorm", "--file", "nowhere.py"], "nowhere.py: no such file"),
    (["check", "layernorm", "--file", "."], ".: is a folder"),
    (["check", "nosuch"], "invalid choice: 'nosuch'"),
    (["start"], "the following arguments are required: NAME"),
])
def test_bad_input_is_one_line_and_status_2(capsys, argv, words):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "Traceback" not in err


@pytest.mark.parametrize("name,content,words", [
    ("notes.txt", b"def gelu_backward(dout, cache):\n    pass\n", "notes.txt: not a .py file"),
    ("gelu.py", bytes(range(128, 256)), "gelu.py as Python source: 'utf-8' codec"),
    ("gelu.py", b"def gelu_backwards(dout, cache):\n    return dout\n", "defines no function gelu_backward"),
])
def test_a_file_that_is_not_an_exercise_is_bad_input(tmp_path, capsys, name, content, words):
    (tmp_path / name).write_bytes(content)
    assert main(["check", "gelu", "--file", str(tmp_path / name)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err


def test_a_fifo_is_named_as_such_not_as_missing(tmp_path, capsys):
    os.mkfifo(tmp_path / "gelu.py")
    assert main(["check", "gelu", "--file", str(tmp_path / "gelu.py")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "gelu.py: not a regular file (a FIFO or a device)" in err


# ----------------------------------------------------------------------------- training

def test_check_folder_refuses_what_cannot_train(tmp_path):
    (tmp_path / "gelu.py").write_text("import numpy as np\n\n\ndef gelu_backward(dout, cache):\n"
                                      "    return dout * np.full(1, 0.5) * (1 + cache[1])\n")
    with pytest.raises(cli.UsageError, match=r"gelu_backward cannot train: for float32 inputs "
                                             r"your dx is float64"):
        learner.check_folder(tmp_path)
    for folder, words in ((tmp_path / "none", "no such folder"), (tmp_path / "gelu.py", "is a file"),
                          (tmp_path / "empty", "no exercise file in it")):
        (tmp_path / "empty").mkdir(exist_ok=True)
        with pytest.raises(cli.UsageError, match=words):
            learner.check_folder(folder)


def test_check_folder_runs_the_backward_on_the_check_cases_and_says_so(tmp_path, capsys):
    # what docs/exercises.md tells a learner with a breakpoint() in a --backward file: the
    # check's cases come first, float64 then float32 (8 stops for layernorm), then the training
    (tmp_path / "layernorm.py").write_text(
        "import sys\nfrom layers.layernorm import layernorm_backward as own\n\n\n"
        "def layernorm_backward(dout, cache):\n"
        "    print('called', dout.dtype, dout.shape, file=sys.stderr)\n"
        "    return own(dout, cache)\n")
    learner.check_folder(tmp_path)
    err = capsys.readouterr().err.splitlines()
    calls = [line.split(" ", 2)[1:] for line in err if line.startswith("called ")]
    n = len(make_cases(EXERCISES["layernorm"], 0))
    assert n == 4 and [dt for dt, _ in calls] == ["float64"] * n + ["float32"] * n
    assert {shape for _, shape in calls} == {"(2, 3, 6)", "(1, 6)", "(4, 1)", "(3, 6)"}
    assert err[-1].startswith(f"backward passes from {tmp_path}, checked on the check's cases "
                              f"before training: yours: layernorm_backward (right)")


def test_backward_passes_hand_the_model_every_name_and_record_the_calls(tmp_path):
    path = _learner_file(tmp_path, "relu2", "    return dout * 2 * cache")
    swaps = (learner.Swap("relu2", str(path), "right"), learner.Swap("gelu", "-", "not implemented"))
    called = set()
    fns = learner.backward_passes(swaps, called)
    from gpt.model import BACKWARDS
    assert set(fns) == set(BACKWARDS)
    r = np.array([0.0, 2.0])
    assert np.array_equal(fns["relu2"](np.ones(2), r), [0.0, 4.0]) and called == {"relu2"}
    fns["linear"](np.ones((1, 2)), (np.ones((1, 3)), np.ones((2, 3)), True))
    assert called == {"relu2", "linear"}
    assert learner.trained_with(swaps, called) == (
        "yours: relu2_backward (right); not implemented yet: gelu; the layers' own for the rest")
    assert learner.trained_with(swaps, {"relu2"}) == (
        "yours: relu2_backward (right); not implemented yet: gelu")   # every one called is yours


TINY = ["--steps", "3", "--n-layers", "1", "--d-model", "16", "--n-heads", "2",
        "--block-size", "8", "--eval-every", "3", "--no-plots"]


def _train(capsys, out, *argv):
    with pytest.raises(SystemExit) as ei, cli.errors(four_variants.STUDY.prog):
        sys.exit(runner.run(four_variants.STUDY, [*argv, "--output-dir", str(out)]))
    captured = capsys.readouterr()
    return ei.value.code, captured.out, captured.err


def _table(out):
    lines = out.splitlines()
    i = lines.index(next(ln for ln in lines if ln.startswith("norm ")))
    return lines[i:lines.index("", i)]


def test_training_with_yours_right_gives_the_layers_numbers_wrong_is_flagged(tmp_path, capsys):
    status, plain, _ = _train(capsys, tmp_path / "ours", *TINY)
    assert status == 0
    mine = tmp_path / "mine"
    _learner_file(mine, "layernorm", LAYERNORM)
    _learner_file(mine, "rope", '    raise NotImplementedError("rope_backward: not written yet")')
    capsys.readouterr()
    status, out, err = _train(capsys, tmp_path / "right", *TINY, "--backward", str(mine))
    assert status == 0, err
    assert _table(out) == _table(plain)
    assert ("Backward passes: yours: layernorm_backward (right); not implemented yet: rope; the "
            "layers' own for the rest") in out.splitlines()
    path = mine / "layernorm.py"
    path.write_text(path.read_text().replace("dxhat - dxhat.mean(axis=-1, keepdims=True)", "dxhat"))
    status, out, err = _train(capsys, tmp_path / "wrong", *TINY, "--backward", str(mine))
    rows, plain_rows = _table(out)[2:], _table(plain)[2:]
    assert [r != p for r, p in zip(rows, plain_rows)] == [True, False, True, False]  # ln rows
    assert ("WARNING: trained with a wrong layernorm_backward (yours) in ln+gelu, ln+swiglu: these "
            "losses are not the model's") in _table(out) + [out.splitlines()[out.splitlines().index(
                _table(out)[-1]) + 1]]
    results = json.loads((tmp_path / "wrong" / "results.json").read_text())
    assert results["backward"][0] == {"exercise": "layernorm", "file": str(path), "check": "wrong",
                                      "called_by": ["ln+gelu", "ln+swiglu"]}


def test_a_run_without_backward_imports_no_module_of_the_exercises():
    code = ("import sys, experiments.four_variants; "
            "print(sorted(k for k in sys.modules if k.startswith('experiments.exercises')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0 and r.stdout == "[]\n", r.stderr


@pytest.mark.parametrize("name", ["gelu", "layernorm"])
def test_nan_everywhere_is_not_right_elsewhere(name):
    # before: "NaN or inf where the right one is finite, and right elsewhere", no entry right
    def nan_in(share):   # the backward, with NaN in the first share of each gradient
        def backward(dout, cache):
            grads = [g.copy() for g in as_tuple(EXERCISES[name].backward(dout, cache))]
            for g in grads:
                g.reshape(-1)[:int(g.size * share)] = np.nan
            return tuple(grads) if len(grads) > 1 else grads[0]
        return backward
    per, v = said(name, nan_in(1.0))
    assert v.status == "wrong"
    for g in EXERCISES[name].grads:
        assert per[g][-1] == (f"your {g} is NaN or inf everywhere: an exp or a power that "
                              f"overflows, or a 0/0?"), per[g]
    per, _ = said(name, nan_in(0.5))   # right where it is finite: said so
    assert per["dx"][-1].startswith("your dx is NaN or inf where the right one is finite, and "
                                    "right elsewhere"), per["dx"]


def test_q_at_a_breakpoint_in_a_backward_file_ends_the_command_as_ctrl_c(tmp_path):
    # the check's cases run the learner's backward before training: q there quits (130, as
    # docs/commands.md says), it is not taken for the learner's backward raising
    (tmp_path / "layernorm.py").write_text(
        "from layers.layernorm import layernorm_backward as own\n\n\n"
        "def layernorm_backward(dout, cache):\n    breakpoint()\n    return own(dout, cache)\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONBREAKPOINT"}
    r = subprocess.run([sys.executable, "-m", "experiments.four_variants", "--tiny", "--steps",
                        "1", "--backward", str(tmp_path), "--output-dir", str(tmp_path / "out")],
                       cwd=ROOT, env=env, input="q\n", capture_output=True, text=True)
    assert r.returncode == 130 and r.stderr.endswith(
        "python -m experiments.four_variants: interrupted\n")   # after the (Pdb) prompt
    assert not (tmp_path / "out").exists()
