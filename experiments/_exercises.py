"""The exercises of ``python -m experiments.exercise``: for each layer, the inputs it is checked
on and the named terms of its backward, as ``docs/derivations.md`` writes them.

An exercise is a layer of ``layers/`` whose NumPy pair ``<name>_forward(...) -> (out, cache)``
and ``<name>_backward(dout, cache)`` the learner completes: the forward is the layer's own, the
backward the learner's. Three things per exercise, each read against its section of
``docs/derivations.md``:

* ``cases(rng)``: the inputs, at several shapes (a batch of one, a row of one feature where that
  matters, the rows where eps matters), random weights, float64. Each case is run through the
  layer's forward; its upstream gradient is random (``make_cases``).
* ``terms(case)``: for each gradient the backward returns, its named terms, one array each,
  whose sum is the right gradient (a test holds every sum against the layer's own backward).
  They read only ``case.dout`` and ``case.cache``, as a backward does.
  The diagnosis fits a wrong answer as a combination of them: a dropped term has factor 0, a
  sign flip -1, a term counted twice 2.
* ``mistakes(case)``: the classic mistakes that are not a combination of terms (eps left out of
  rstd, the weight left out of dxhat, a matrix not transposed), each as the gradient it gives.
* ``factors(case)``: for each gradient, the numbers of the case its terms may be multiplied by
  by mistake (C for a sum where a mean belongs, 1/N for a mean where a sum belongs, sqrt(hs)
  for a scale left out), each as (symbol, what it means, value).

Shape letters as in the layers: N rows, C features, H hidden or heads, T positions, hs head
size, V classes or rows of an embedding.
"""
from __future__ import annotations

import dataclasses
import importlib
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from layers.gelu import GELU_C, GELU_K
from layers.rope import build_rope_cache, rotate_half
from layers.silu import dsilu

Terms = Dict[str, List[Tuple[str, str, np.ndarray]]]   # gradient -> [(formula, meaning, array)]
Mistakes = Dict[str, List[Tuple[str, np.ndarray]]]     # gradient -> [(what it does, gradient)]
Factors = Dict[str, List[Tuple[str, str, float]]]      # gradient -> [(symbol, meaning, value)]


@dataclass(frozen=True)
class Exercise:
    """One backward pass to write: ``layers.<name>.<name>_backward``.

    Attributes:
        name: the layer's file and function stem ("layernorm").
        title: its name in prose ("LayerNorm").
        summary: its line in the list.
        section: the anchor of its section in docs/derivations.md.
        inputs: the names of the forward's positional inputs.
        wrt: the inputs the backward returns a gradient for, in its order (d<name> each).
        cases: ``rng -> [(label, args, kwargs)]``, the forward's inputs at several shapes.
        terms: ``Case -> Terms``.
        mistakes: ``Case -> Mistakes``.
        factors: ``Case -> Factors``.
        helpers: names of the layer module (functions or constants) the forward reads, copied
            into the learner's file beside it.
        imports: the learner's file's imports.
        study: the study whose models call this backward ("four_variants"), or None where no
            GPT does (SwiGLU and attention differentiate their SiLU and softmax themselves).
    """
    name: str
    title: str
    summary: str
    section: str
    inputs: Tuple[str, ...]
    wrt: Tuple[str, ...]
    cases: Callable
    terms: Callable
    mistakes: Callable = lambda case: {}
    factors: Callable = lambda case: {}
    helpers: Tuple[str, ...] = ()
    imports: str = "import numpy as np"
    study: Optional[str] = "four_variants"

    @property
    def grads(self):
        """The gradients' names, ("dx", "dweight", "dbias")."""
        return tuple("d" + n for n in self.wrt)

    @property
    def upstream(self):
        """The name of the backward's first argument, the upstream gradient ("dout", "dy")."""
        return next(iter(inspect.signature(self.backward).parameters))

    @property
    def weights(self):
        """Whether the layer has weights besides its input (LayerNorm's weight, SwiGLU's w_up)."""
        return any(n.startswith("w") for n in self.inputs[1:])

    @property
    def module(self):
        return importlib.import_module(f"layers.{self.name}")

    @property
    def function(self):
        """The name of the backward the learner writes."""
        return f"{self.name}_backward"

    @property
    def forward(self):
        return getattr(self.module, f"{self.name}_forward")

    @property
    def backward(self):
        """The layer's own backward (as imported, before any swap)."""
        return OURS[self.name]

    @property
    def link(self):
        return f"docs/derivations.md#{self.section}"


@dataclass
class Case:
    """One check of a backward: the forward's inputs, its output and cache, a random upstream
    gradient and the right gradients (the layer's backward), one per name of ``grads``."""
    label: str
    args: tuple
    kwargs: Dict[str, Any]
    out: np.ndarray
    cache: Any
    dout: np.ndarray
    right: Tuple[np.ndarray, ...] = field(default=())


def as_tuple(grads):
    """A backward's result as a tuple (a bare array for one gradient)."""
    return tuple(grads) if isinstance(grads, (tuple, list)) else (grads,)


def make_case(ex, label, args, kwargs, rng):
    """Run the layer's forward on ``args``; a random upstream gradient of the output's shape and
    dtype; the right gradients from the layer's backward."""
    out, cache = ex.forward(*args, **kwargs)
    dout = np.asarray(rng.standard_normal(np.shape(out)), dtype=out.dtype)
    case = Case(label, tuple(args), dict(kwargs), out, cache, dout)
    case.right = as_tuple(ex.backward(dout, cache))
    return case


def make_cases(ex, rng, dtype=np.float64):
    """Every case of ``ex``, its float inputs cast to ``dtype``."""
    cast = [(label, tuple(a.astype(dtype) if a.dtype.kind == "f" else a for a in args), kw)
            for label, args, kw in ex.cases(rng)]
    return [make_case(ex, label, args, kw, rng) for label, args, kw in cast]


def _mean(a):
    return np.mean(a, axis=-1, keepdims=True)       # over the features of each row


def _rows(a):
    return a.reshape(-1, a.shape[-1]).sum(axis=0)   # over every leading axis


def _T(a):
    return np.swapaxes(a, -1, -2)


def _gain(r, C):
    return r.normal(1.0, 0.5, C)                    # a gain that is not all ones


def _mean_not_sum(c):
    """1/N, for a weight's or bias's gradient: N rows of dout (..., C)."""
    return [("1/N", "a mean over the N rows where a sum belongs", c.dout.shape[-1] / c.dout.size)]


def _norm_factors(c):
    """C in dx (a sum over a row where a mean belongs), 1/N in dweight and dbias."""
    return {"dx": [("C", "a sum over the C features where a mean belongs",
                    float(c.dout.shape[-1]))], "dweight": _mean_not_sum(c),
            "dbias": _mean_not_sum(c)}


def _weight_left_out(c, terms):
    """dx with dxhat = dout: the terms of the cache with an all-ones weight."""
    xhat, weight, rstd = c.cache
    plain = dataclasses.replace(c, cache=(xhat, np.ones_like(weight), rstd))
    return ("takes dxhat = dout: the weight of dxhat = dout * weight is left out",
            sum(a for *_, a in terms(plain)["dx"]))


# ----------------------------------------------------------------------------- LayerNorm
# dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)),  dxhat = dout * weight

def _layernorm_cases(r):
    def case(label, x):
        C = x.shape[-1]
        return label, (x, _gain(r, C), r.normal(0.0, 0.5, C)), {"eps": 1e-5}
    return [case("x (2, 3, 6)", r.standard_normal((2, 3, 6))),
            case("x (1, 6), a batch of one", r.standard_normal((1, 6))),
            case("x (4, 1), one feature", r.standard_normal((4, 1))),
            case("x (3, 6), near-constant rows (var ~ 1e-6, eps = 1e-5)",
                 r.normal(0.0, 1.0, (3, 1)) + 1e-3 * r.standard_normal((3, 6)))]


def _layernorm_terms(c):
    xhat, weight, rstd = c.cache
    dxhat = c.dout * weight
    return {"dx": [("dxhat", "the direct path", rstd * dxhat),
                   ("-mean(dxhat)", "the path through the mean", -rstd * _mean(dxhat)),
                   ("-xhat * mean(dxhat * xhat)", "the path through the variance",
                    -rstd * xhat * _mean(dxhat * xhat))],
            "dweight": [("sum over rows of dout * xhat", "", _rows(c.dout * xhat))],
            "dbias": [("sum over rows of dout", "", _rows(c.dout))]}


def _layernorm_mistakes(c):
    x, eps = c.args[0], c.kwargs["eps"]
    var = x.var(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        no_eps = c.right[0] * (np.sqrt(var + eps) / np.sqrt(var))
    return {"dx": [("uses 1/sqrt(var) where rstd = 1/sqrt(var + eps) belongs: eps is left out "
                    "(it matters on near-constant rows)", no_eps),
                   _weight_left_out(c, _layernorm_terms)]}


# ----------------------------------------------------------------------------- RMSNorm
# dx = rstd * (dxhat - xhat * mean(dxhat * xhat)),  dxhat = dout * weight

def _rmsnorm_cases(r):
    def case(label, x):
        return label, (x, _gain(r, x.shape[-1])), {"eps": 1e-6}
    return [case("x (2, 3, 6)", r.standard_normal((2, 3, 6))),
            case("x (1, 6), a batch of one", r.standard_normal((1, 6))),
            case("x (4, 1), one feature", r.standard_normal((4, 1))),
            case("x (3, 6), small rows (mean(x^2) ~ 1e-8, eps = 1e-6)",
                 1e-4 * r.standard_normal((3, 6)))]


def _rmsnorm_terms(c):
    xhat, weight, rstd = c.cache
    dxhat = c.dout * weight
    return {"dx": [("dxhat", "the direct path", rstd * dxhat),
                   ("-xhat * mean(dxhat * xhat)", "the projection term, the path through "
                    "mean(x^2)", -rstd * xhat * _mean(dxhat * xhat))],
            "dweight": [("sum over rows of dout * xhat", "", _rows(c.dout * xhat))]}


def _rmsnorm_mistakes(c):
    x, eps = c.args[0], c.kwargs["eps"]
    xhat, weight, rstd = c.cache
    ms = _mean(x * x)
    return {"dx": [("uses 1/sqrt(mean(x^2)) where rstd = 1/sqrt(mean(x^2) + eps) belongs: eps "
                    "is left out (it matters on small rows)",
                    c.right[0] * (np.sqrt(ms + eps) / np.sqrt(ms))),
                   _weight_left_out(c, _rmsnorm_terms),
                   ("has LayerNorm's term -mean(dxhat): RMSNorm subtracts no mean, so x has no "
                    "path through one", c.right[0] - rstd * _mean(c.dout * weight))]}


# ----------------------------------------------------------------------------- elementwise

def _elementwise_cases(r):
    return [("x (3, 5)", (2.0 * r.standard_normal((3, 5)),), {}),    # both tails
            ("x (1,), one entry", (2.0 * r.standard_normal(1),), {}),
            ("x (2, 3, 4)", (2.0 * r.standard_normal((2, 3, 4)),), {})]


def _relu2_cases(r):
    def away_from_zero(shape):   # the kink at 0 is no place for central differences
        x = r.standard_normal(shape)
        return np.sign(x) * (0.1 + np.abs(x))
    return [("x (3, 5)", (away_from_zero((3, 5)),), {}),
            ("x (1,), one entry", (np.array([0.7]),), {}),
            ("x (2, 3, 4)", (away_from_zero((2, 3, 4)),), {})]


# GELU (tanh): dx = dout * (0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2))

def _gelu_terms(c):
    x, t = c.cache
    return {"dx": [("0.5 (1 + t)", "d(0.5 x)/dx times (1 + t)", c.dout * 0.5 * (1 + t)),
                   ("0.5 x (1 - t^2) k (1 + 3 c x^2)", "0.5 x times tanh'(u) du/dx",
                    c.dout * 0.5 * x * (1 - t * t) * GELU_K * (1 + 3 * GELU_C * x * x))]}


def _gelu_mistakes(c):
    x, t = c.cache
    term1 = c.dout * 0.5 * (1 + t)
    tanh_prime = c.dout * 0.5 * x * (1 - t * t)
    return {"dx": [("takes du/dx = k (1 + c x^2): the 3 of d(x^3)/dx is missing",
                    term1 + tanh_prime * GELU_K * (1 + GELU_C * x * x)),
                   ("takes du/dx = 1 + 3 c x^2: the k = sqrt(2/pi) of u = k (x + c x^3) is "
                    "missing", term1 + tanh_prime * (1 + 3 * GELU_C * x * x))]}


# ReLU²: dx = dout * 2 r

def _relu2_terms(c):
    return {"dx": [("2 r", "d(r^2)/dr, with r = max(x, 0)", c.dout * 2 * c.cache)]}


def _relu2_mistakes(c):
    r = c.cache
    return {"dx": [("is dout * r: the 2 of d(r^2)/dr = 2 r is missing", c.dout * r),
                   ("is ReLU's gradient, dout * (x > 0), not ReLU²'s", c.dout * (r > 0))]}


# SiLU: dx = dout * (s + x s (1 - s))

def _silu_terms(c):
    x, s = c.cache
    return {"dx": [("s", "d(x)/dx times s", c.dout * s),
                   ("x s (1 - s)", "x times sigmoid'(x)", c.dout * x * s * (1 - s))]}


# ----------------------------------------------------------------------------- SwiGLU
# dh = dout Wd, du = dh * g, da = dh * u * s (1 + a (1 - s)); dx = da Wg + du Wu

def _swiglu_cases(r):
    def case(label, x, H, O):
        C = x.shape[-1]
        return label, (x, 0.5 * r.standard_normal((H, C)), 0.5 * r.standard_normal((H, C)),
                       0.5 * r.standard_normal((O, H))), {}
    return [case("x (2, 2, 4), H = 6", r.standard_normal((2, 2, 4)), 6, 4),
            case("x (1, 3), a batch of one, H = 5, O = 2", r.standard_normal((1, 3)), 5, 2),
            case("x (3, 1), one feature, H = 2, O = 3", r.standard_normal((3, 1)), 2, 3)]


def _swiglu_parts(c):
    x2, a, s, u, g, w_gate, w_up, w_down = c.cache
    d2 = c.dout.reshape(-1, c.dout.shape[-1])           # (N, O)
    dh = d2 @ w_down                                    # (N, H)
    return x2, a, s, u, g, w_gate, w_up, d2, dh, c.dout.shape[:-1] + x2.shape[1:]  # x's


def _swiglu_terms(c):
    x2, a, s, u, g, w_gate, w_up, d2, dh, shape = _swiglu_parts(c)
    da = dh * u * dsilu(a, s)                           # (N, H) dg * silu'(a)
    du = dh * g                                         # (N, H)
    return {"dx": [("da Wg", "the gate branch", (da @ w_gate).reshape(shape)),
                   ("du Wu", "the up branch", (du @ w_up).reshape(shape))],
            "dw_gate": [("da^T x", "", da.T @ x2)],
            "dw_up": [("du^T x", "", du.T @ x2)],
            "dw_down": [("dout^T h", "h = g * u", d2.T @ (g * u))]}


def _swiglu_mistakes(c):
    x2, a, s, u, g, w_gate, w_up, d2, dh, shape = _swiglu_parts(c)
    dx_up = (dh * g) @ w_up
    out = {"dx": [], "dw_gate": []}
    for what, da in (("passes dg = dh * u straight to da: silu'(a) is missing", dh * u),
                     ("takes silu'(a) = s (1 - s), the sigmoid's derivative; silu's is "
                      "s (1 + a (1 - s))", dh * u * s * (1 - s))):
        out["dx"].append((what, (da @ w_gate + dx_up).reshape(shape)))
        out["dw_gate"].append((what, da.T @ x2))
    return out


# ----------------------------------------------------------------------------- RoPE
# dx = dout * cos - rotate_half(dout * sin)

def _rope_cases(r):
    def case(label, B, H, T, hs):
        cos, sin = build_rope_cache(T, hs, dtype=np.float64)         # (1, 1, T, hs)
        return label, (r.standard_normal((B, H, T, hs)), cos, sin), {}
    return [case("x (1, 2, 6, 4)", 1, 2, 6, 4),
            case("x (1, 1, 1, 2), one position", 1, 1, 1, 2),
            case("x (2, 1, 3, 8)", 2, 1, 3, 8)]


def _rope_terms(c):
    cos, sin = c.cache
    return {"dx": [("dout * cos", "", c.dout * cos),
                   ("-rotate_half(dout * sin)", "the transpose of rotate_half is -rotate_half: "
                    "the backward rotates by -theta", -rotate_half(c.dout * sin))]}


# ----------------------------------------------------------------------------- softmax
# dx = y * dy - y * sum(dy * y)

def _softmax_cases(r):
    return [("x (3, 5)", (2.0 * r.standard_normal((3, 5)),), {"axis": -1}),
            ("x (1, 4), a batch of one", (2.0 * r.standard_normal((1, 4)),), {"axis": -1}),
            ("x (4, 1), one entry a row", (r.standard_normal((4, 1)),), {"axis": -1}),
            ("x (4, 3), along axis 0", (2.0 * r.standard_normal((4, 3)),), {"axis": 0})]


def _softmax_terms(c):
    y, axis = c.cache
    return {"dx": [("y * dy", "diag(y) dy", y * c.dout),
                   ("-y * sum(dy * y)", "-y y^T dy",
                    -y * np.sum(c.dout * y, axis=axis, keepdims=True))]}


def _softmax_mistakes(c):
    y, _ = c.cache
    return {"dx": [("takes the Jacobian's diagonal alone, y (1 - y): every y_i depends on every "
                    "x_j of its row, so dy_i reaches every dx_j", y * (1 - y) * c.dout)]}


# ----------------------------------------------------------------------------- cross-entropy
# dlogits = (probs - onehot(targets)) * dloss / N        (reduction "mean")

def _cross_entropy_cases(r):
    def case(label, shape):
        return label, (r.standard_normal(shape), r.integers(0, shape[-1], size=shape[:-1])), {}
    return [case("logits (4, 5)", (4, 5)),
            case("logits (1, 3), a batch of one", (1, 3)),
            case("logits (2, 3, 5), (B, T, V)", (2, 3, 5)),
            case("logits (3, 1), one class", (3, 1))]


def _cross_entropy_terms(c):
    probs, t, valid, eps, reduction, count, shape = c.cache
    onehot = np.zeros_like(probs)
    onehot[np.arange(len(t)), t] = 1.0
    w = c.dout / count                                  # dloss / N
    return {"dlogits": [("probs", "the softmax, the derivative of log-sum-exp",
                         (probs * w).reshape(shape)),
                        ("-onehot(targets)", "the target's own logit",
                         (-onehot * w).reshape(shape))]}


def _cross_entropy_factors(c):
    return {"dlogits": [("N", "the 1/N of the mean is left out (the gradient of the summed "
                              "loss)", float(c.cache[5])),
                        ("1/dloss", "the upstream gradient dloss is left out", 1 / float(c.dout))]}


# ----------------------------------------------------------------------------- attention
# dP = dout v^T, dS = P * dP - P * rowsum(P * dP); dq = dS k / sqrt(hs), dk = dS^T q / sqrt(hs)

def _attention_cases(r):
    def case(label, shape, causal=True, hv=None):     # Tq = Tk: a product left untransposed
        B, H, T, hs = shape                            # has the right shape, and is named
        return label, (r.standard_normal(shape), r.standard_normal(shape),
                       r.standard_normal((B, H, T, hv or hs))), {"is_causal": causal}
    return [case("q, k, v (1, 2, 4, 4), causal", (1, 2, 4, 4)),
            case("q, k, v (1, 1, 1, 2), one position", (1, 1, 1, 2)),
            case("q, k, v (2, 1, 3, 8), causal", (2, 1, 3, 8)),
            case("q, k (1, 2, 3, 2), v (1, 2, 3, 5), not causal", (1, 2, 3, 2), False, hv=5)]


def _attention_parts(c):
    q, k, v, P, scale = c.cache
    dP = c.dout @ _T(v)                                 # (B, H, Tq, Tk)
    diag = P * dP                                       # the softmax's diag(P) dP
    norm = -P * np.sum(P * dP, axis=-1, keepdims=True)  # its -P rowsum(P * dP)
    return q, k, P, scale, diag, norm


def _attention_terms(c):
    q, k, P, scale, diag, norm = _attention_parts(c)
    return {"dq": [("(P * dP) k / sqrt(hs)", "the softmax's diagonal", diag @ k * scale),
                   ("-(P * rowsum(P * dP)) k / sqrt(hs)", "the softmax's normalisation",
                    norm @ k * scale)],
            "dk": [("(P * dP)^T q / sqrt(hs)", "the softmax's diagonal", _T(diag) @ q * scale),
                   ("-(P * rowsum(P * dP))^T q / sqrt(hs)", "the softmax's normalisation",
                    _T(norm) @ q * scale)],
            "dv": [("P^T dout", "", _T(P) @ c.dout)]}


def _attention_mistakes(c):
    q, k, P, scale, diag, norm = _attention_parts(c)
    return {"dk": [("is dS q: dS must be transposed, dk = dS^T q / sqrt(hs)",
                    (diag + norm) @ q * scale)],
            "dv": [("is P dout: P must be transposed, dv = P^T dout", P @ c.dout)]}


def _attention_factors(c):
    scale = float(c.cache[4])
    factors = [("sqrt(hs)", "the 1/sqrt(hs) of the scores is left out", 1 / scale),
               ("1/sqrt(hs)", "the 1/sqrt(hs) of the scores is applied twice", scale)]
    return {"dq": factors, "dk": factors}


# ----------------------------------------------------------------------------- linear
# dx = dout W, dW = dout^T x, db = sum over rows of dout

def _linear_cases(r):
    def case(label, x, O):
        C = x.shape[-1]
        return label, (x, 0.5 * r.standard_normal((O, C)), 0.5 * r.standard_normal(O)), {}
    return [case("x (2, 3, 4), weight (4, 4)", r.standard_normal((2, 3, 4)), 4),
            case("x (1, 3), a batch of one, weight (2, 3)", r.standard_normal((1, 3)), 2),
            case("x (5, 1), one feature, weight (3, 1)", r.standard_normal((5, 1)), 3)]


def _linear_terms(c):
    x, weight, _ = c.cache
    d2 = c.dout.reshape(-1, weight.shape[0])            # (N, O)
    return {"dx": [("dout W", "", (d2 @ weight).reshape(x.shape))],
            "dweight": [("dout^T x", "", d2.T @ x.reshape(-1, weight.shape[1]))],
            "dbias": [("sum over rows of dout", "", d2.sum(axis=0))]}


# ----------------------------------------------------------------------------- embedding
# dweight[v] = sum of dout over the positions that looked up v

def _embedding_cases(r):
    return [("idx (2, 4) into weight (5, 3): rows repeated, row 4 unused",
             (r.standard_normal((5, 3)), np.array([[1, 3, 1, 0], [3, 3, 2, 1]])), {}),
            ("idx (1, 1) into weight (4, 2), a batch of one",
             (r.standard_normal((4, 2)), np.array([[2]])), {}),
            ("idx (6,) into weight (3, 1), one feature",
             (r.standard_normal((3, 1)), np.array([0, 2, 0, 0, 2, 1])), {})]


def _embedding_terms(c):
    idx, shape, dtype = c.cache
    d2 = c.dout.reshape(-1, shape[1])                   # (N, C)
    last = len(idx) - 1 - np.unique(idx[::-1], return_index=True)[1]  # each row's last lookup
    earlier = np.setdiff1d(np.arange(len(idx)), last)
    once, again = np.zeros(shape, dtype), np.zeros(shape, dtype)
    once[idx[last]] = d2[last]
    np.add.at(again, idx[earlier], d2[earlier])
    return {"dweight": [("dout at each row's last lookup", "", once),
                        ("the sum of dout at a row's earlier lookups",
                         "a row looked up k times gets the sum of its k gradients; where idx "
                         "repeats, a[idx] = v and a[idx] += v both keep one of them, "
                         "np.add.at(a, idx, v) adds every one", again)]}


# ----------------------------------------------------------------------------- the list

EXERCISES = {ex.name: ex for ex in (
    Exercise("layernorm", "LayerNorm", "LayerNorm: dx, dweight, dbias; x reaches xhat three ways",
             "layernorm", ("x", "weight", "bias"), ("x", "weight", "bias"),
             _layernorm_cases, _layernorm_terms, _layernorm_mistakes, _norm_factors),
    Exercise("rmsnorm", "RMSNorm", "RMSNorm: dx, dweight; LayerNorm without the mean",
             "rmsnorm", ("x", "weight"), ("x", "weight"),
             _rmsnorm_cases, _rmsnorm_terms, _rmsnorm_mistakes, _norm_factors),
    Exercise("gelu", "GELU (tanh form)", "GELU, tanh form: dx; the product and the chain "
             "rule", "gelu", ("x",), ("x",), _elementwise_cases, _gelu_terms,
             _gelu_mistakes, helpers=("GELU_K", "GELU_C"), imports="import math\n\nimport "
             "numpy as np"),
    Exercise("relu2", "ReLU²", "ReLU²: dx of max(x, 0)^2", "relu", ("x",), ("x",), _relu2_cases,
             _relu2_terms, _relu2_mistakes, study="activations"),
    Exercise("silu", "SiLU", "SiLU: dx of x sigmoid(x), in the saved sigmoid", "silu",
             ("x",), ("x",), _elementwise_cases, _silu_terms, helpers=("sigmoid_stable",),
             study=None),
    Exercise("swiglu", "SwiGLU", "SwiGLU: dx, dw_gate, dw_up, dw_down of a gated MLP",
             "swiglu", ("x", "w_gate", "w_up", "w_down"),
             ("x", "w_gate", "w_up", "w_down"), _swiglu_cases, _swiglu_terms, _swiglu_mistakes,
             helpers=("sigmoid_stable",)),
    Exercise("rope", "RoPE", "RoPE: dx of a rotation of pairs; its transpose", "rope",
             ("x", "cos", "sin"), ("x",), _rope_cases, _rope_terms, helpers=("rotate_half",),
             study="positions"),
    Exercise("softmax", "Softmax", "softmax: dx; the Jacobian diag(y) - y y^T, never formed",
             "softmax", ("x",), ("x",), _softmax_cases, _softmax_terms, _softmax_mistakes,
             study=None),
    Exercise("cross_entropy", "Cross-entropy", "cross-entropy: dlogits of the mean; softmax minus "
             "one-hot", "cross-entropy", ("logits", "targets"), ("logits",),
             _cross_entropy_cases, _cross_entropy_terms, factors=_cross_entropy_factors),
    Exercise("attention", "Attention", "attention: dq, dk, dv of softmax(q k^T / sqrt(hs)) v",
             "attention", ("q", "k", "v"), ("q", "k", "v"), _attention_cases,
             _attention_terms, _attention_mistakes, _attention_factors,
             helpers=("_future_mask",)),
    Exercise("linear", "Linear", "linear: dx, dweight, dbias of x W^T + b", "linear",
             ("x", "weight", "bias"), ("x", "weight", "bias"), _linear_cases, _linear_terms,
             factors=lambda c: {"dweight": _mean_not_sum(c), "dbias": _mean_not_sum(c)}),
    Exercise("embedding", "Embedding", "embedding: dweight of weight[idx]; a scatter-add",
             "embedding", ("weight", "idx"), ("weight",), _embedding_cases, _embedding_terms),
)}

# The layers' own backward passes, as imported: a swap (``experiments.exercise.install``)
# replaces the module attribute, never these.
OURS = {name: getattr(ex.module, ex.function) for name, ex in EXERCISES.items()}
