"""The exercises of ``python -m experiments.exercises``: per layer, its names, the cases its
backward is checked on (``cases(rng)``: the forward's inputs at several shapes, a batch of one,
one feature, the rows where eps matters, |x| up to where exp overflows; random weights, never all
ones), the case's sizes a term may be multiplied by (``sizes(*args, **kwargs)``: "C features":
6) and its derivation (``terms.py``).
"""
import importlib
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from layers.gelu import GELU_C, GELU_K
from layers.rope import build_rope_cache

from experiments.exercises.terms import DERIVATIONS


@dataclass(frozen=True)
class Exercise:
    """One backward pass to write, ``layers.<name>.<name>_backward``: ``section`` is its anchor
    in docs/derivations.md, ``inputs`` the forward's positional inputs, ``wrt`` those with a
    gradient (in the backward's order), ``cases`` and ``sizes`` as above, ``parts`` and
    ``terms`` its derivation's, ``constants`` the formulas' (GELU's k and c),
    ``helpers`` what the forward reads from its module (copied into the learner's file),
    ``study`` the study whose GPT calls it (None where no GPT does)."""
    name: str
    title: str
    summary: str
    section: str
    inputs: Tuple[str, ...]
    wrt: Tuple[str, ...]
    cases: Callable
    sizes: Callable
    constants: Dict[str, float] = field(default_factory=dict)
    helpers: Tuple[str, ...] = ()
    imports: str = "import numpy as np"
    study: Optional[str] = "four_variants"

    grads = property(lambda self: tuple("d" + n for n in self.wrt))          # ("dx", "dweight")
    parts = property(lambda self: DERIVATIONS[self.name][0])                 # (dout, cache) -> p
    terms = property(lambda self: DERIVATIONS[self.name][1])                 # p -> {grad: terms}
    module = property(lambda self: importlib.import_module(f"layers.{self.name}"))
    function = property(lambda self: f"{self.name}_backward")
    forward = property(lambda self: getattr(self.module, f"{self.name}_forward"))
    backward = property(lambda self: getattr(self.module, self.function))    # the layer's own
    link = property(lambda self: f"docs/derivations.md#{self.section}")
    upstream = property(lambda self: next(iter(inspect.signature(self.backward).parameters)))
    weights = property(lambda self: any(n.startswith("w") for n in self.inputs[1:]))


@dataclass
class Case:
    """One check: the forward's inputs, output and cache, a random upstream gradient, the
    layer's own gradients (in the order of ``grads``) and the case's sizes."""
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


def _rows_and(last, **more):
    """The sizes of an x (..., C): N rows and its last axis (and ``more``: name -> the length of
    argument 1, 2 ...)."""
    return lambda x, *a, **_: {"N rows": x.size // x.shape[-1], last: x.shape[-1],
                               **{n: len(a[i]) for n, i in more.items()}}


# ----------------------------------------------------------------------------- cases

def _norm_cases(bias, eps, label, small):
    def cases(r):
        def case(label, x):
            w = [r.normal(1.0, 0.5, x.shape[-1])] + [r.normal(0.0, 0.5, x.shape[-1])] * bias
            return label, (x, *w), {"eps": eps}
        return [case("x (2, 3, 6)", r.standard_normal((2, 3, 6))),
                case("x (1, 6), a batch of one", r.standard_normal((1, 6))),
                case("x (4, 1), one feature", r.standard_normal((4, 1))), case(label, small(r))]
    return cases


def _elementwise_cases(r):
    def x(shape):   # away from 0: the kink of ReLU² is no place for central differences
        a = 2.0 * r.standard_normal(shape)
        return np.sign(a) * (0.1 + np.abs(a))
    return [("x (3, 5)", (x((3, 5)),), {}), ("x (1,), one entry", (x(1),), {}),
            ("x (2, 3, 4)", (x((2, 3, 4)),), {}),
            ("x (10,), large |x| (3 to 1000, both signs: exp overflows)",
             (np.array([-1000.0, -100, -30, -10, -3, 3, 10, 30, 100, 1000]),), {})]


def _swiglu_cases(r):
    def case(label, x, H, O):
        C = x.shape[-1]
        return label, (x, *(0.5 * r.standard_normal(s) for s in ((H, C), (H, C), (O, H)))), {}
    return [case("x (2, 2, 4), H = 6", r.standard_normal((2, 2, 4)), 6, 4),
            case("x (1, 3), a batch of one, H = 5, O = 2", r.standard_normal((1, 3)), 5, 2),
            case("x (3, 1), one feature, H = 2, O = 3", r.standard_normal((3, 1)), 2, 3)]


def _softmax_cases(r):
    return [(f"x {s}{label}", (scale * r.standard_normal(s),), {"axis": axis})
            for s, scale, axis, label in (((3, 5), 2, -1, ""), ((1, 4), 2, -1, ", a batch of one"),
                                          ((4, 1), 1, -1, ", one entry a row"),
                                          ((4, 3), 2, 0, ", along axis 0"))]


def _attention_cases(r):   # Tq = Tk: an untransposed product has the right shape, and is named
    def case(label, shape, causal=True, hv=None):
        return label, (r.standard_normal(shape), r.standard_normal(shape),
                       r.standard_normal(shape[:3] + (hv or shape[3],))), {"is_causal": causal}
    return [case("q, k, v (1, 2, 4, 4), causal", (1, 2, 4, 4)),
            case("q, k, v (1, 1, 1, 2), one position", (1, 1, 1, 2)),
            case("q, k, v (2, 1, 3, 8), causal", (2, 1, 3, 8)),
            case("q, k (1, 2, 3, 2), v (1, 2, 3, 5), not causal", (1, 2, 3, 2), False, hv=5)]


# ----------------------------------------------------------------------------- the list

def _entries(x):
    return {"N entries": x.size}


EXERCISES = {ex.name: ex for ex in (
    Exercise("layernorm", "LayerNorm", "LayerNorm: dx, dweight, dbias; x reaches xhat three ways",
             "layernorm", ("x", "weight", "bias"), ("x", "weight", "bias"), _norm_cases(
                 1, 1e-5, "x (3, 6), near-constant rows (var ~ 1e-6, eps = 1e-5)",
                 lambda r: r.normal(0.0, 1.0, (3, 1)) + 1e-3 * r.standard_normal((3, 6))),
             _rows_and("C features")),
    Exercise("rmsnorm", "RMSNorm", "RMSNorm: dx, dweight; LayerNorm without the mean", "rmsnorm",
             ("x", "weight"), ("x", "weight"), _norm_cases(
                 0, 1e-6, "x (3, 6), small rows (mean(x^2) ~ 1e-8, eps = 1e-6)",
                 lambda r: 1e-4 * r.standard_normal((3, 6))), _rows_and("C features")),
    Exercise("gelu", "GELU (tanh form)", "GELU, tanh form: dx; the product and the chain rule",
             "gelu", ("x",), ("x",), _elementwise_cases, _entries,
             {"k = sqrt(2/pi)": GELU_K, "c = 0.044715": GELU_C}, ("GELU_K", "GELU_C"),
             "import math\n\nimport numpy as np"),
    Exercise("relu2", "ReLU²", "ReLU²: dx of max(x, 0)^2", "relu", ("x",), ("x",),
             _elementwise_cases, _entries, study="activations"),
    Exercise("silu", "SiLU", "SiLU: dx of x sigmoid(x), in the saved sigmoid", "silu", ("x",),
             ("x",), _elementwise_cases, _entries, helpers=("sigmoid_stable",), study=None),
    Exercise("swiglu", "SwiGLU", "SwiGLU: dx, dw_gate, dw_up, dw_down of a gated MLP", "swiglu",
             ("x", "w_gate", "w_up", "w_down"), ("x", "w_gate", "w_up", "w_down"), _swiglu_cases,
             _rows_and("C features", **{"H hidden": 0, "O outputs": 2}),
             helpers=("sigmoid_stable",)),
    Exercise("rope", "RoPE", "RoPE: dx of a rotation of pairs; its transpose", "rope",
             ("x", "cos", "sin"), ("x",), lambda r: [
                 (f"x {s}{label}", (r.standard_normal(s), *build_rope_cache(*s[2:], dtype=float)), {})
                 for s, label in (((1, 2, 6, 4), ""), ((1, 1, 1, 2), ", one position"),
                                  ((2, 1, 3, 8), ""))],
             lambda x, *_: {"T positions": x.shape[-2], "hs entries of a head": x.shape[-1]},
             helpers=("rotate_half",), study="positions"),
    Exercise("softmax", "Softmax", "softmax: dx; the Jacobian diag(y) - y y^T, never formed",
             "softmax", ("x",), ("x",), _softmax_cases, lambda x, axis: {
                 "C entries along the axis": x.shape[axis], "N rows": x.size // x.shape[axis]},
             study=None),
    Exercise("cross_entropy", "Cross-entropy", "cross-entropy: dlogits of the mean; softmax minus "
             "one-hot", "cross-entropy", ("logits", "targets"), ("logits",), lambda r: [
                 (f"logits {s}{label}", (r.standard_normal(s), r.integers(0, s[-1], s[:-1])), {})
                 for s, label in (((4, 5), ""), ((1, 3), ", a batch of one"),
                                  ((2, 3, 5), ", (B, T, V)"), ((3, 1), ", one class"))],
             lambda logits, t: {"N targets": t.size, "V classes": logits.shape[-1],
                                "B sequences": len(logits)}),
    Exercise("attention", "Attention", "attention: dq, dk, dv of softmax(q k^T / sqrt(hs)) v",
             "attention", ("q", "k", "v"), ("q", "k", "v"), _attention_cases,
             lambda q, k, v, **_: {"hs entries of a head": q.shape[-1], "T positions": q.shape[-2]},
             helpers=("_future_mask",)),
    Exercise("linear", "Linear", "linear: dx, dweight, dbias of x W^T + b", "linear",
             ("x", "weight", "bias"), ("x", "weight", "bias"), lambda r: [
                 (f"x {x}{label}, weight {(O, x[-1])}", (r.standard_normal(x), 0.5 *
                  r.standard_normal((O, x[-1])), 0.5 * r.standard_normal(O)), {})
                 for x, O, label in (((2, 3, 4), 4, ""), ((1, 3), 2, ", a batch of one"),
                                     ((5, 1), 3, ", one feature"))],
             _rows_and("C features", **{"O outputs": 0})),
    Exercise("embedding", "Embedding", "embedding: dweight of weight[idx]; a scatter-add",
             "embedding", ("weight", "idx"), ("weight",), lambda r: [
                 (f"idx {idx.shape} into weight {V, C}{label}", (r.standard_normal((V, C)), idx), {})
                 for idx, V, C, label in (
                     (np.array([[1, 3, 1, 0], [3, 3, 2, 1]]), 5, 3, ": rows repeated, row 4 unused"),
                     (np.array([[2]]), 4, 2, ", a batch of one"),
                     (np.array([0, 2, 0, 0, 2, 1]), 3, 1, ", one feature"))],
             lambda w, idx: {"N lookups": idx.size, "V rows": len(w)}),
)}
