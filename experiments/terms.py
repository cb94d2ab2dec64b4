"""The exercises of ``python -m experiments.exercise``: for each layer, the cases its backward is
checked on, the quantities of its derivation and the named terms of each gradient, as
``docs/derivations.md`` writes them. Per exercise:

* ``cases(rng)``: the forward's inputs at several shapes (a batch of one, one feature, the rows
  where eps matters, |x| up to where exp overflows), random weights (never all ones).
* ``parts(dout, cache)``: the quantities of the derivation, from what a backward gets: arrays,
  or rules ``p -> value`` computed from the others (``diagnosis.Parts``), so that a quantity put
  in place of another reaches all that is built on it. A few are there to be confused with the
  right ones (``1 - t`` for tanh', ``rstd^3``, P without the mask).
* ``terms(p)``: per gradient, its named terms, whose sum is the right gradient.
* ``sizes(*args, **kwargs)``: the sizes of a case a term may be multiplied by ("C features").
* ``constants``: the formulas' constants (GELU's k and c).
"""
from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from layers.gelu import GELU_C, GELU_K
from layers.rope import build_rope_cache, rotate_half


@dataclass(frozen=True)
class Exercise:
    """One backward pass to write, ``layers.<name>.<name>_backward``: ``title``, ``summary``,
    ``section`` (its anchor in docs/derivations.md), ``inputs`` (the forward's positional
    inputs), ``wrt`` (those with a gradient, in the backward's order), the functions above,
    ``helpers`` (what the forward reads from its module: copied into the learner's file) and
    ``study`` (whose GPT calls it; None where no GPT does)."""
    name: str
    title: str
    summary: str
    section: str
    inputs: Tuple[str, ...]
    wrt: Tuple[str, ...]
    cases: Callable
    parts: Callable
    terms: Callable
    sizes: Callable
    constants: Dict[str, float] = field(default_factory=dict)
    helpers: Tuple[str, ...] = ()
    imports: str = "import numpy as np"
    study: Optional[str] = "four_variants"

    grads = property(lambda self: tuple("d" + n for n in self.wrt))          # ("dx", "dweight")
    module = property(lambda self: importlib.import_module(f"layers.{self.name}"))
    function = property(lambda self: f"{self.name}_backward")
    forward = property(lambda self: getattr(self.module, f"{self.name}_forward"))
    backward = property(lambda self: getattr(self.module, self.function))    # the layer's own
    link = property(lambda self: f"docs/derivations.md#{self.section}")
    upstream = property(lambda self: next(iter(inspect.signature(self.backward).parameters)))
    weights = property(lambda self: any(n.startswith("w") for n in self.inputs[1:]))


@dataclass
class Case:
    """One check: the forward's inputs, output and cache, a random upstream gradient, the layer's
    own gradients (``right``, in the order of ``grads``) and the case's sizes."""
    label: str
    args: tuple
    kwargs: Dict[str, Any]
    out: np.ndarray
    cache: Any
    dout: np.ndarray
    right: tuple
    sizes: Dict[str, float]


def as_tuple(grads):
    """A backward's result as a tuple (a bare array for one gradient)."""
    return tuple(grads) if isinstance(grads, (tuple, list)) else (grads,)


def make_cases(ex, seed, dtype=np.float64):
    """Every case of ``ex`` from ``default_rng(seed)``, its float inputs cast to ``dtype`` (the
    same numbers in every dtype)."""
    rng, cases = np.random.default_rng(seed), []
    for label, args, kwargs in ex.cases(rng):
        args = tuple(a.astype(dtype) if a.dtype.kind == "f" else a for a in args)
        out, cache = ex.forward(*args, **kwargs)
        dout = rng.standard_normal(np.shape(out)).astype(out.dtype)
        cases.append(Case(label, args, kwargs, out, cache, dout,
                          as_tuple(ex.backward(dout, cache)), ex.sizes(*args, **kwargs)))
    return cases


def _mean(a):
    return np.mean(a, axis=-1, keepdims=True)       # over the features of each row


def _rows(a):
    return a.reshape(-1, a.shape[-1]).sum(axis=0)   # over every leading axis


def _T(a):
    return np.swapaxes(a, -1, -2)


def _rows_and(last):
    """The sizes of an x (..., C): N rows and its last axis."""
    return lambda x, *_, **__: {"N rows": x.size // x.shape[-1], last: x.shape[-1]}


# ----------------------------------------------------------------------------- norms
# LayerNorm: dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dout * weight
# RMSNorm:   dx = rstd * (dxhat - xhat * mean(dxhat * xhat))

def _norm_cases(bias, eps, label, small):
    def cases(r):
        def case(label, x):
            w = [r.normal(1.0, 0.5, x.shape[-1])] + [r.normal(0.0, 0.5, x.shape[-1])] * bias
            return label, (x, *w), {"eps": eps}
        return [case("x (2, 3, 6)", r.standard_normal((2, 3, 6))),
                case("x (1, 6), a batch of one", r.standard_normal((1, 6))),
                case("x (4, 1), one feature", r.standard_normal((4, 1))), case(label, small(r))]
    return cases


def _norm_parts(no_eps):
    def parts(dout, cache):
        xhat, weight, rstd = cache
        with np.errstate(all="ignore"):   # 0/0 where a row is constant: C = 1
            rstd0 = rstd / np.sqrt(_mean(xhat * xhat))
        return {"dout": dout, "xhat": xhat, "weight": weight, "rstd": rstd,
                "dxhat": lambda p: p["dout"] * p["weight"], "rstd^3": rstd ** 3, no_eps: rstd0}
    return parts


def _norm_terms(mean_term, path):
    def terms(p):
        dxhat, xhat, rstd = p["dxhat"], p["xhat"], p["rstd"]
        dx = [("dxhat (the direct path)", rstd * dxhat),
              ("-mean(dxhat) (the path through the mean)", -rstd * _mean(dxhat)),
              (f"-xhat * mean(dxhat * xhat) ({path})", -rstd * xhat * _mean(dxhat * xhat))]
        found = {"dx": dx if mean_term else dx[::2],
                 "dweight": [("sum over rows of dout * xhat", _rows(p["dout"] * xhat))],
                 "dbias": [("sum over rows of dout", _rows(p["dout"]))]}
        return found if mean_term else {g: found[g] for g in ("dx", "dweight")}
    return terms


# ----------------------------------------------------------------------------- elementwise

def _elementwise_cases(r):
    def x(shape):   # away from 0: the kink of ReLU² is no place for central differences
        a = 2.0 * r.standard_normal(shape)
        return np.sign(a) * (0.1 + np.abs(a))
    large = np.array([-1000.0, -100, -30, -10, -3, 3, 10, 30, 100, 1000])
    return [("x (3, 5)", (x((3, 5)),), {}), ("x (1,), one entry", (x(1),), {}),
            ("x (2, 3, 4)", (x((2, 3, 4)),), {}),
            ("x (10,), large |x| (3 to 1000, both signs: exp overflows)", (large,), {})]


def _gelu_parts(dout, cache):   # dx = dout * (0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2))
    x, t = cache
    return {"dout": dout, "x": x, "t": t, "tanh'(u) = 1 - t^2": lambda p: 1 - p["t"] * p["t"],
            "1 - t": lambda p: 1 - p["t"]}


def _gelu_terms(p):
    x, t, dout, tanh_prime = p["x"], p["t"], p["dout"], p["tanh'(u) = 1 - t^2"]
    return {"dx": [("0.5 (1 + t) (d(0.5 x)/dx times 1 + t)", dout * 0.5 * (1 + t)),
                   ("0.5 x tanh'(u) k (0.5 x tanh'(u) times the k of du/dx)",
                    dout * 0.5 * x * tanh_prime * GELU_K),
                   ("0.5 x tanh'(u) 3 k c x^2 (times the 3 k c x^2 of du/dx)",
                    dout * 0.5 * x * tanh_prime * (3 * GELU_K * GELU_C * x * x))]}


def _relu2_parts(dout, cache):   # dx = dout * 2 r
    return {"dout": dout, "r": cache, "x > 0": lambda p: (p["r"] > 0).astype(p["r"].dtype)}


def _silu_parts(dout, cache):    # dx = dout * (s + x s (1 - s))
    x, s = cache
    return {"dout": dout, "x": x, "s": s, "1 - s": lambda p: 1 - p["s"],
            "sigmoid'(x) = s (1 - s)": lambda p: p["s"] * (1 - p["s"])}


def _silu_terms(p):
    return {"dx": [("s (d(x)/dx times s)", p["dout"] * p["s"]),
                   ("x s (1 - s) (x times sigmoid'(x))",
                    p["dout"] * p["x"] * p["sigmoid'(x) = s (1 - s)"])]}


# ----------------------------------------------------------------------------- SwiGLU
# dh = dout Wd, du = dh * g, da = dh * u * silu'(a); dx = da Wg + du Wu

def _swiglu_cases(r):
    def case(label, x, H, O):
        return label, (x, *(0.5 * r.standard_normal(s) for s in ((H, x.shape[-1]),) * 2 + ((O, H),))), {}
    return [case("x (2, 2, 4), H = 6", r.standard_normal((2, 2, 4)), 6, 4),
            case("x (1, 3), a batch of one, H = 5, O = 2", r.standard_normal((1, 3)), 5, 2),
            case("x (3, 1), one feature, H = 2, O = 3", r.standard_normal((3, 1)), 2, 3)]


def _swiglu_parts(dout, cache):
    x2, a, s, u, g, w_gate, w_up, w_down = cache
    return {"dout": dout, "x": x2, "a": a, "s": s, "u": u, "g": g, "Wg": w_gate, "Wu": w_up,
            "Wd": w_down, "h = g * u": lambda p: p["g"] * p["u"],
            "dh": lambda p: p["dout"].reshape(-1, p["Wd"].shape[0]) @ p["Wd"],
            "silu'(a) = s (1 + a (1 - s))": lambda p: p["s"] * (1 + p["a"] * (1 - p["s"])),
            "sigmoid'(a) = s (1 - s)": lambda p: p["s"] * (1 - p["s"])}


def _swiglu_terms(p):
    x2, d2, shape = p["x"], p["dout"].reshape(-1, p["Wd"].shape[0]), p["dout"].shape[:-1] + (-1,)
    da = p["dh"] * p["u"] * p["silu'(a) = s (1 + a (1 - s))"]     # (N, H)
    du = p["dh"] * p["g"]                                         # (N, H)
    return {"dx": [("da Wg (the gate branch)", (da @ p["Wg"]).reshape(shape)),
                   ("du Wu (the up branch)", (du @ p["Wu"]).reshape(shape))],
            "dw_gate": [("da^T x", da.T @ x2)], "dw_up": [("du^T x", du.T @ x2)],
            "dw_down": [("dout^T h", d2.T @ p["h = g * u"])]}


# ----------------------------------------------------------------------------- RoPE
# dx = dout * cos - rotate_half(dout * sin)

def _rope_cases(r):
    return [(f"x {s}{label}", (r.standard_normal(s), *build_rope_cache(*s[2:], dtype=np.float64)), {})
            for s, label in (((1, 2, 6, 4), ""), ((1, 1, 1, 2), ", one position"), ((2, 1, 3, 8), ""))]


def _neox(x):   # GPT-NeoX's rotate_half: (first half, second half) -> (-second, first)
    return np.concatenate((-x[..., x.shape[-1] // 2:], x[..., :x.shape[-1] // 2]), axis=-1)


def _rope_parts(dout, cache):
    return {"dout": dout, "cos": cache[0], "sin": cache[1], "rotate_half": lambda p: rotate_half,
            "NeoX's rotate_half (halves, not pairs)": lambda p: _neox}


def _rope_terms(p):
    return {"dx": [("dout * cos", p["dout"] * p["cos"]),
                   ("-rotate_half(dout * sin) (the transpose of rotate_half is -rotate_half: the "
                    "backward rotates by -theta)", -p["rotate_half"](p["dout"] * p["sin"]))]}


# ----------------------------------------------------------------------------- softmax
# dx = y * dy - y * sum(dy * y)

def _softmax_cases(r):
    return [("x (3, 5)", (2.0 * r.standard_normal((3, 5)),), {"axis": -1}),
            ("x (1, 4), a batch of one", (2.0 * r.standard_normal((1, 4)),), {"axis": -1}),
            ("x (4, 1), one entry a row", (r.standard_normal((4, 1)),), {"axis": -1}),
            ("x (4, 3), along axis 0", (2.0 * r.standard_normal((4, 3)),), {"axis": 0})]


def _softmax_parts(dy, cache):
    y, axis = cache
    return {"dy": dy, "y": y, "dy * y": lambda p: p["dy"] * p["y"],
            "sum(dy * y)": lambda p: np.sum(p["dy"] * p["y"], axis=axis, keepdims=True)}


def _softmax_terms(p):
    return {"dx": [("y * dy (diag(y) dy)", p["y"] * p["dy"]),
                   ("-y * sum(dy * y) (-y y^T dy)", -p["y"] * p["sum(dy * y)"])]}


# ----------------------------------------------------------------------------- cross-entropy
# dlogits = (probs - onehot(targets)) * dloss / N        (reduction "mean")

def _cross_entropy_cases(r):
    return [(f"logits {s}{label}", (r.standard_normal(s), r.integers(0, s[-1], size=s[:-1])), {})
            for s, label in (((4, 5), ""), ((1, 3), ", a batch of one"),
                             ((2, 3, 5), ", (B, T, V)"), ((3, 1), ", one class"))]


def _cross_entropy_parts(dloss, cache):
    probs, t, valid, eps, reduction, count, shape = cache
    onehot = np.zeros_like(probs)
    onehot[np.arange(len(t)), t] = 1
    return {"dloss": dloss, "probs": probs, "onehot(targets)": onehot,
            "1/N": np.asarray(1 / count, probs.dtype), "shape": lambda p: shape}


def _cross_entropy_terms(p):
    w = p["dloss"] * p["1/N"]
    return {"dlogits": [("probs (the softmax, the derivative of log-sum-exp)",
                         (p["probs"] * w).reshape(p["shape"])),
                        ("-onehot(targets) (the target's own logit)",
                         (-p["onehot(targets)"] * w).reshape(p["shape"]))]}


# ----------------------------------------------------------------------------- attention
# dP = dout v^T, dS = P * dP - P * rowsum(P * dP); dq = dS k / sqrt(hs), dk = dS^T q / sqrt(hs)

def _attention_cases(r):   # Tq = Tk: an untransposed product has the right shape, and is named
    def case(label, shape, causal=True, hv=None):
        return label, (r.standard_normal(shape), r.standard_normal(shape),
                       r.standard_normal(shape[:3] + (hv or shape[3],))), {"is_causal": causal}
    return [case("q, k, v (1, 2, 4, 4), causal", (1, 2, 4, 4)),
            case("q, k, v (1, 1, 1, 2), one position", (1, 1, 1, 2)),
            case("q, k, v (2, 1, 3, 8), causal", (2, 1, 3, 8)),
            case("q, k (1, 2, 3, 2), v (1, 2, 3, 5), not causal", (1, 2, 3, 2), False, hv=5)]


def _softmax_rows(S, mask):
    S = np.where(np.triu(np.ones(S.shape[-2:], bool), 1), -np.inf, S) if mask else S
    e = np.exp(S - S.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _attention_parts(dout, cache):
    q, k, v, P, scale = cache
    S = q @ _T(k) * scale
    return {"dout": dout, "q": q, "k": k, "v": v, "P": P, "1/sqrt(hs)": np.asarray(scale),
            "a transpose (^T)": lambda p: _T, "P without the causal mask": _softmax_rows(S, False),
            "P with the causal mask": _softmax_rows(S, True),
            "P * dP": lambda p: p["P"] * (p["dout"] @ _T(p["v"])),
            "P rowsum(P * dP)": lambda p: p["P"] * np.sum(p["P * dP"], axis=-1, keepdims=True)}


def _attention_terms(p):
    s, T, q, k = p["1/sqrt(hs)"], p["a transpose (^T)"], p["q"], p["k"]
    diag, norm = p["P * dP"], -p["P rowsum(P * dP)"]
    return {"dq": [("(P * dP) k / sqrt(hs) (the softmax's diagonal)", diag @ k * s),
                   ("-(P rowsum(P * dP)) k / sqrt(hs) (the softmax's normalisation)",
                    norm @ k * s)],
            "dk": [("(P * dP)^T q / sqrt(hs) (the softmax's diagonal)", T(diag) @ q * s),
                   ("-(P rowsum(P * dP))^T q / sqrt(hs) (the softmax's normalisation)",
                    T(norm) @ q * s)],
            "dv": [("P^T dout", T(p["P"]) @ p["dout"])]}


# ----------------------------------------------------------------------------- linear, embedding
# linear: dx = dout W, dweight = dout^T x, dbias = sum over rows of dout
# embedding: dweight[v] = sum of dout over the positions that looked up v

def _linear_cases(r):
    return [(f"x {x}{label}, weight {(O, x[-1])}",
             (r.standard_normal(x), 0.5 * r.standard_normal((O, x[-1])), 0.5 * r.standard_normal(O)), {})
            for x, O, label in (((2, 3, 4), 4, ""), ((1, 3), 2, ", a batch of one"),
                                ((5, 1), 3, ", one feature"))]


def _linear_parts(dout, cache):
    x, weight, _ = cache
    return {"dout": dout.reshape(-1, weight.shape[0]), "x": x.reshape(-1, weight.shape[1]),
            "weight": weight, "shape": lambda p: x.shape}


def _embedding_cases(r):
    return [(f"idx {idx.shape} into weight {V, C}{label}", (r.standard_normal((V, C)), idx), {})
            for idx, V, C, label in (
                (np.array([[1, 3, 1, 0], [3, 3, 2, 1]]), 5, 3, ": rows repeated, row 4 unused"),
                (np.array([[2]]), 4, 2, ", a batch of one"),
                (np.array([0, 2, 0, 0, 2, 1]), 3, 1, ", one feature"))]


def _embedding_terms(p):
    idx, d2, shape, dtype = p["idx"], p["dout"], p["shape"], p["dtype"]
    last = len(idx) - 1 - np.unique(idx[::-1], return_index=True)[1]  # each row's last lookup
    earlier = np.setdiff1d(np.arange(len(idx)), last)
    once, again = np.zeros(shape, dtype), np.zeros(shape, dtype)
    once[idx[last]] = d2[last]
    np.add.at(again, idx[earlier], d2[earlier])
    return {"dweight": [("dout at each row's last lookup", once),
                        ("the sum of dout at a row's earlier lookups (a row looked up k times "
                         "gets the sum of its k gradients; where idx repeats, a[idx] = v and "
                         "a[idx] += v keep one of them, np.add.at(a, idx, v) adds every one)",
                         again)]}


# ----------------------------------------------------------------------------- the list

EXERCISES = {ex.name: ex for ex in (
    Exercise("layernorm", "LayerNorm", "LayerNorm: dx, dweight, dbias; x reaches xhat three ways",
             "layernorm", ("x", "weight", "bias"), ("x", "weight", "bias"), _norm_cases(
                 1, 1e-5, "x (3, 6), near-constant rows (var ~ 1e-6, eps = 1e-5)",
                 lambda r: r.normal(0.0, 1.0, (3, 1)) + 1e-3 * r.standard_normal((3, 6))),
             _norm_parts("1/sqrt(var) (eps left out)"),
             _norm_terms(True, "the path through the variance"), _rows_and("C features")),
    Exercise("rmsnorm", "RMSNorm", "RMSNorm: dx, dweight; LayerNorm without the mean", "rmsnorm",
             ("x", "weight"), ("x", "weight"), _norm_cases(
                 0, 1e-6, "x (3, 6), small rows (mean(x^2) ~ 1e-8, eps = 1e-6)",
                 lambda r: 1e-4 * r.standard_normal((3, 6))),
             _norm_parts("1/sqrt(mean(x^2)) (eps left out)"),
             _norm_terms(False, "the projection, the path through mean(x^2)"), _rows_and("C features")),
    Exercise("gelu", "GELU (tanh form)", "GELU, tanh form: dx; the product and the chain rule",
             "gelu", ("x",), ("x",), _elementwise_cases, _gelu_parts, _gelu_terms,
             lambda x: {"N entries": x.size}, {"k = sqrt(2/pi)": GELU_K, "c = 0.044715": GELU_C},
             ("GELU_K", "GELU_C"), "import math\n\nimport numpy as np"),
    Exercise("relu2", "ReLU²", "ReLU²: dx of max(x, 0)^2", "relu", ("x",), ("x",),
             _elementwise_cases, _relu2_parts,
             lambda p: {"dx": [("2 r (d(r^2)/dr, with r = max(x, 0))", p["dout"] * 2 * p["r"])]},
             lambda x: {"N entries": x.size}, study="activations"),
    Exercise("silu", "SiLU", "SiLU: dx of x sigmoid(x), in the saved sigmoid", "silu", ("x",),
             ("x",), _elementwise_cases, _silu_parts, _silu_terms, lambda x: {"N entries": x.size},
             helpers=("sigmoid_stable",), study=None),
    Exercise("swiglu", "SwiGLU", "SwiGLU: dx, dw_gate, dw_up, dw_down of a gated MLP", "swiglu",
             ("x", "w_gate", "w_up", "w_down"), ("x", "w_gate", "w_up", "w_down"), _swiglu_cases,
             _swiglu_parts, _swiglu_terms, lambda x, wg, wu, wd: {
                 **_rows_and("C features")(x), "H hidden": len(wg), "O outputs": len(wd)},
             helpers=("sigmoid_stable",)),
    Exercise("rope", "RoPE", "RoPE: dx of a rotation of pairs; its transpose", "rope",
             ("x", "cos", "sin"), ("x",), _rope_cases, _rope_parts, _rope_terms,
             lambda x, *_: {"T positions": x.shape[-2], "hs entries of a head": x.shape[-1]},
             helpers=("rotate_half",), study="positions"),
    Exercise("softmax", "Softmax", "softmax: dx; the Jacobian diag(y) - y y^T, never formed",
             "softmax", ("x",), ("x",), _softmax_cases, _softmax_parts, _softmax_terms,
             lambda x, axis: {"C entries along the axis": x.shape[axis],
                              "N rows": x.size // x.shape[axis]}, study=None),
    Exercise("cross_entropy", "Cross-entropy", "cross-entropy: dlogits of the mean; softmax minus "
             "one-hot", "cross-entropy", ("logits", "targets"), ("logits",), _cross_entropy_cases,
             _cross_entropy_parts, _cross_entropy_terms, lambda logits, t: {
                 "N targets": t.size, "V classes": logits.shape[-1], "B sequences": len(logits)}),
    Exercise("attention", "Attention", "attention: dq, dk, dv of softmax(q k^T / sqrt(hs)) v",
             "attention", ("q", "k", "v"), ("q", "k", "v"), _attention_cases, _attention_parts,
             _attention_terms, lambda q, k, v, **_: {"hs entries of a head": q.shape[-1],
                                                     "T positions": q.shape[-2]},
             helpers=("_future_mask",)),
    Exercise("linear", "Linear", "linear: dx, dweight, dbias of x W^T + b", "linear",
             ("x", "weight", "bias"), ("x", "weight", "bias"), _linear_cases, _linear_parts,
             lambda p: {"dx": [("dout W", (p["dout"] @ p["weight"]).reshape(p["shape"]))],
                        "dweight": [("dout^T x", p["dout"].T @ p["x"])],
                        "dbias": [("sum over rows of dout", p["dout"].sum(0))]},
             lambda x, w, b: {**_rows_and("C features")(x), "O outputs": len(w)}),
    Exercise("embedding", "Embedding", "embedding: dweight of weight[idx]; a scatter-add",
             "embedding", ("weight", "idx"), ("weight",), _embedding_cases,
             lambda dout, cache: {"dout": dout.reshape(-1, cache[1][1]), "idx": cache[0],
                                  "shape": lambda p: cache[1], "dtype": lambda p: cache[2]},
             _embedding_terms, lambda w, idx: {"N lookups": idx.size, "V rows": len(w)}),
)}
