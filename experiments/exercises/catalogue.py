"""One row per layer: everything the project says about a layer's backward besides the layer
itself, in one place (``EXERCISES``). A row holds the exercise of ``python -m
experiments.exercises`` (its names, the cases its backward is checked on, ``cases(rng)``: the
forward's inputs at several shapes, a batch of one, one feature, the rows where eps matters, |x|
up to where exp overflows, random weights, never all ones; the case's sizes a term may be
multiplied by, ``sizes(*args, **kwargs)``: "C features": 6), its derivation's quantities and
terms (builders in ``terms.py``), the stub's prompt (``stubs.py``), the worked example and its
formula (``python -m experiments.explain``), the deliberately broken versions
(``break_backward.py``), its gradient-check entries (``python -m experiments.gradcheck_report``)
and its faces in ``layers/functional.py`` and ``layers/modules.py``.

Adding a layer: the layer file (derivation + pair), its section in docs/derivations.md, its row
here, its faces in functional.py and modules.py, its tests (docs/exercises.md, "Adding a
layer"). A row that lacks a face is refused when this module loads; tests/test_rows.py fails
when a layer file, a section or a face has no row, or a row none of them.
"""
import importlib
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np

from layers import functional as F
from minigrad import Tensor
from layers.gelu import GELU_C, GELU_K, gelu_erf_backward
from layers.layernorm import layernorm_backward
from layers.rope import build_rope_cache, rotate_half
from layers.silu import sigmoid_stable
from layers.softmax import log_softmax_backward

from experiments.exercises.terms import (
    LOG_EXP, attention_parts, attention_terms, batchnorm_parts, batchnorm_terms,
    cross_entropy_parts, cross_entropy_terms,
    embedding_terms, gelu_terms, neox_rotate_half, norm_parts, norm_terms, rope_terms,
    softmax_along, softmax_axes, softmax_parts, swiglu_parts, swiglu_terms)

# the faces every row must have (``Exercise.__post_init__``)
REQUIRED = ("derivation", "prompt", "example", "formula", "breaks", "gradcheck", "functional")


@dataclass(frozen=True)
class Exercise:
    """A layer's row; its backward, ``layers.<name>.<name>_backward``, is the exercise.

    ``section`` is its anchor in docs/derivations.md, ``inputs`` the forward's positional
    inputs, ``wrt`` those with a gradient (in the backward's order), ``cases`` and ``sizes`` as
    above, ``constants`` the formulas' (GELU's k and c), ``helpers`` what the forward reads from
    its module (copied into the learner's file), ``study`` the study whose GPT calls it (None
    where no GPT does). The faces: ``derivation`` (parts, terms): ``parts(dout, cache)`` the
    derivation's quantities, ``terms(p)`` per gradient its named terms; ``axes`` the letters of
    each gradient's last axes (for a shape); ``functions`` the forward's functions a backward may
    put where they do not belong; ``other_layers`` another layer's backward a learner may write
    for this one; ``prompt`` the stub's docstring; ``example`` (what ``--size`` sets, its
    default, ``(rng, size) -> (args, kwargs)``) and ``formula``, explain's; ``breaks``
    ``(gradient, term from 1, factor)``, a term left out (0) or its sign flipped (-1);
    ``gradcheck`` ``{label: (fn, *inputs)}`` (an input a shape or a function of the generator);
    ``functional`` and ``module_class`` its names in layers.functional and layers.modules (None
    where it has no Module); for explain, ``factor`` per gradient the factor in front of all
    its terms, multiplied into each ("rstd"), and ``shown`` the quantities its formula names
    that no term reads whole (attention's dP and dS), ``p -> array``.

    Raises:
        TypeError: a row without one of the ``REQUIRED`` faces.
    """
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
    derivation: Tuple[Callable, Callable] = ()
    axes: Dict[str, Any] = field(default_factory=dict)
    functions: Dict[str, Callable] = field(default_factory=dict)
    other_layers: Tuple[Tuple[str, Callable], ...] = ()
    prompt: str = ""
    example: Tuple[str, int, Callable] = ()
    formula: str = ""
    breaks: Tuple[Tuple[str, int, int], ...] = ()
    gradcheck: Dict[str, tuple] = field(default_factory=dict)
    functional: str = ""
    module_class: Optional[str] = None
    factor: Dict[str, str] = field(default_factory=dict)
    shown: Dict[str, Callable] = field(default_factory=dict)

    def __post_init__(self):
        missing = [f for f in REQUIRED if not getattr(self, f)]
        if missing:
            raise TypeError(f"exercise {self.name}: its row has no {', '.join(missing)}")

    grads = property(lambda self: tuple("d" + n for n in self.wrt))          # ("dx", "dweight")
    parts = property(lambda self: self.derivation[0])                        # (dout, cache) -> p
    terms = property(lambda self: self.derivation[1])                        # p -> {grad: terms}
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


# ----------------------------------------------------------------------------- the examples' and
# the gradient checks' inputs

def away_from_zero(r, n):
    """(n,) float64 Gaussian entries (sd 2) pushed 0.25 away from 0, from generator ``r``:
    ReLU's kink at 0 is no place for central differences."""
    a = 2.0 * r.standard_normal(n)
    return np.sign(a) * (0.25 + np.abs(a))


def rope_cache(T):
    """RoPE's (cos, sin) for T positions of a head of size 4, float64."""
    return build_rope_cache(T, 4, dtype=np.float64)


def gaussian(*shape, scale=1.0):
    """An input: a float64 leaf that requires grad, Gaussian entries of deviation ``scale``."""
    return lambda r: Tensor(scale * r.standard_normal(shape), requires_grad=True)


def positive(*shape):
    """An input: a float64 leaf of ``shape``, uniform in [0.5, 2] (for log, sqrt, division)."""
    return lambda r: Tensor(r.uniform(0.5, 2.0, shape), requires_grad=True)


def off_zero(*shape, margin=0.2):
    """An input: a float64 Gaussian leaf of ``shape`` pushed ``margin`` away from 0, so that
    central differences never straddle a kink (ReLU's, abs's) or a pole."""
    return lambda r: Tensor((lambda z: np.sign(z) * (margin + np.abs(z)))(r.standard_normal(shape)),
                            requires_grad=True)


def gain(n):
    """An input: a float64 (n,) norm gain around 1 (sd 0.5): unit gains hide mistakes."""
    return lambda r: Tensor(r.normal(1.0, 0.5, n), requires_grad=True)


def targets_one_ignored(r):
    """(6,) int64 class indices in [0, 11) from the generator ``r``, one of them -100 (ignored)."""
    t = r.integers(0, 11, size=6)                 # (N,) int
    t[2] = -100
    return t


def cross_entropy(reduction):
    """``F.cross_entropy`` with ``reduction``, ignore_index -100 and label smoothing 0.1, as a
    function of (logits (N, C), targets (N,))."""
    return lambda x, t: F.cross_entropy(x, t, reduction=reduction, ignore_index=-100,
                                        label_smoothing=0.1)


# ----------------------------------------------------------------------------- the rows

def _entries(x):
    return {"N entries": x.size}


EXERCISES = {ex.name: ex for ex in (
    Exercise("layernorm", "LayerNorm", "LayerNorm: dx, dweight, dbias; x reaches xhat three ways",
             "layernorm", ("x", "weight", "bias"), ("x", "weight", "bias"), _norm_cases(
                 1, 1e-5, "x (3, 6), near-constant rows (var ~ 1e-6, eps = 1e-5)",
                 lambda r: r.normal(0.0, 1.0, (3, 1)) + 1e-3 * r.standard_normal((3, 6))),
             _rows_and("C features"),
             derivation=(norm_parts("1/sqrt(var) (eps left out)"),
                 norm_terms(1, "the path through the variance")),
             axes={"dx": "C", "dweight": "C", "dbias": "C"},
             prompt='''cache: (xhat, weight, rstd): xhat (..., C) = (x - mean) * rstd, the normalised rows;
        weight (C,), the gain; rstd (..., 1) = 1 / sqrt(var + eps), one per row. x itself is
        not kept: write everything with xhat and rstd.
    Returns: dx (..., C), dweight (C,), dbias (C,).

    Steps:
        1. out = weight * xhat + bias, the same weight and bias in every row: which entries of
           out does weight[c] reach? Sum over every leading axis ((2, 3, 6) has 2 * 3 rows).
        2. Name dxhat = dL/dxhat.
        3. One row: xhat_j = (x_j - mean) * rstd reaches x_i three ways: directly, through the
           mean and through rstd (var). Find d mean / d x_i, d var / d x_i (sum_j (x_j - mean)
           = 0 helps), then d rstd / d x_i, written with rstd and xhat_i.
        4. Contract dx_i = sum_j dxhat_j d xhat_j / d x_i: one term per path. A mean over a row
           is np.mean(a, axis=-1, keepdims=True).

    Check yourself: every row of dx sums to 0, and with C = 1 dx is exactly 0.''',
             example=("C, the features of the row", 4, lambda r, C: (
                 (r.standard_normal((1, C)), r.normal(1.0, 0.5, C), r.normal(0.0, 0.5, C)), {"eps": 1e-5})),
             formula="dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dout * "
                 "weight; dweight = sum over rows of dout * xhat; dbias = sum over rows of dout",
             breaks=(('dx', 2, 0), ('dx', 3, 0)),
             gradcheck={'layer_norm': (lambda x, w, b: F.layer_norm(x, 8, w, b), (2, 4, 8), gain(8),
                     gaussian(8, scale=0.5))},
             functional='layer_norm', module_class='LayerNorm', factor={"dx": "rstd"}),
    Exercise("rmsnorm", "RMSNorm", "RMSNorm: dx, dweight; LayerNorm without the mean", "rmsnorm",
             ("x", "weight"), ("x", "weight"), _norm_cases(
                 0, 1e-6, "x (3, 6), small rows (mean(x^2) ~ 1e-8, eps = 1e-6)",
                 lambda r: 1e-4 * r.standard_normal((3, 6))), _rows_and("C features"),
             derivation=(norm_parts("1/sqrt(mean(x^2)) (eps left out)"),
                 norm_terms(0, "the projection, the path through mean(x^2)")),
             axes={"dx": "C", "dweight": "C"},
             other_layers=[("is LayerNorm's backward (with the path through the mean), where RMSNorm's "
                 "belongs", lambda dout, c: {"dx": layernorm_backward(dout, c)[0]})],
             prompt='''cache: (xhat, weight, rstd): xhat (..., C) = x * rstd; weight (C,), the gain;
        rstd (..., 1) = 1 / sqrt(ms + eps), ms = mean(x^2) of the row.
    Returns: dx (..., C), dweight (C,).

    Steps:
        1. dweight: which entries of out = weight * xhat does weight[c] reach?
        2. Name dxhat = dL/dxhat.
        3. One row: xhat_j = x_j * rstd reaches x_i directly and through rstd. Find
           d ms / d x_i, then d rstd / d x_i, written with rstd and xhat_i.
        4. Contract dx_i = sum_j dxhat_j d xhat_j / d x_i. How many terms, with no mean?

    Check yourself: with eps = 0 each row of dx is orthogonal to its x (np.sum(dx * x, axis=-1)
    is 0): moving x along itself only rescales it, which RMSNorm undoes.''',
             example=("C, the features of the row", 4, lambda r, C: (
                 (r.standard_normal((1, C)), r.normal(1.0, 0.5, C)), {"eps": 1e-6})),
             formula="dx = rstd * (dxhat - xhat * mean(dxhat * xhat)), dxhat = dout * weight; "
                 "dweight = sum over rows of dout * xhat",
             breaks=(('dx', 2, 0),),
             gradcheck={'rms_norm': (lambda x, w: F.rms_norm(x, 8, w, eps=1e-6), (2, 4, 8), gain(8))},
             functional='rms_norm', module_class='RMSNorm', factor={"dx": "rstd"}),
    Exercise("batchnorm", "BatchNorm", "BatchNorm: dx, dweight, dbias; LayerNorm's terms over the "
             "batch", "batchnorm", ("x", "weight", "bias"), ("x", "weight", "bias"),
             lambda r: [(label, (x, r.normal(1.0, 0.5, x.shape[1]), r.normal(0.0, 0.5, x.shape[1])),
                         {"eps": 1e-5}) for label, x in (
                 ("x (4, 3, 5)", r.standard_normal((4, 3, 5))),
                 ("x (2, 3), two values a channel", r.standard_normal((2, 3))),
                 ("x (6, 1), one channel", r.standard_normal((6, 1))),
                 ("x (5, 3, 4), near-constant channels (var ~ 1e-6, eps = 1e-5)",
                  r.normal(0.0, 1.0, (1, 3, 1)) + 1e-3 * r.standard_normal((5, 3, 4))))],
             lambda x, *_, **__: {"m values a channel": x.size // x.shape[1], "C channels": x.shape[1]},
             helpers=("stat_axes", "per_channel"), study=None,
             derivation=(batchnorm_parts, batchnorm_terms),
             axes={"dx": lambda cache: "N C" if cache[0].ndim == 2 else "N C L", "dweight": "C",
                   "dbias": "C"},
             prompt='''cache: (xhat, weight, rstd): xhat (N, C) or (N, C, L) = (x - mean) * rstd, x
        normalised per channel c (axis 1) over its m = N * L values; weight (C,), the gain;
        rstd (1, C) or (1, C, 1) = 1 / sqrt(var + eps), one per channel. x itself is not kept.
        stat_axes(x) gives the axes a channel's statistics run over; per_channel(a, x) shapes
        a (C,) array to broadcast along x's channel axis.
    Returns: dx (x's shape), dweight (C,), dbias (C,).

    Steps:
        1. out = weight * xhat + bias, weight[c] in every value of channel c: which entries of
           out does weight[c] reach? Sum over the batch (every axis but axis 1).
        2. Name dxhat = dL/dxhat.
        3. This is LayerNorm's derivation on the other axis: within one channel, xhat_j =
           (x_j - mean) * rstd reaches x_i directly, through the mean and through rstd (var).
        4. Contract: one term per path, each mean over the m values of a channel, with
           np.mean(a, axis=stat_axes(a), keepdims=True).

    Check yourself: dx sums to 0 over each channel, and with (N, C) input BatchNorm of x is
    LayerNorm of x transposed.''',
             example=("N, the values of each of 3 channels", 4, lambda r, N: (
                 (r.standard_normal((N, 3)), r.normal(1.0, 0.5, 3), r.normal(0.0, 0.5, 3)),
                 {"eps": 1e-5})),
             formula="dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), the means over "
                 "the batch, dxhat = dout * weight; dweight = sum over the batch of dout * xhat; "
                 "dbias = sum over the batch of dout",
             breaks=(('dx', 2, 0), ('dx', 3, 0)),
             gradcheck={'batch_norm (training)': (
                            lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                            (4, 3, 5), gain(3), gaussian(3, scale=0.5)),
                        'batch_norm (eval)': (
                            lambda x, w, b: F.batch_norm(x, np.array([0.1, -0.2, 0.3]),
                                                         np.array([0.5, 1.5, 2.0]), w, b),
                            (4, 3, 5), gain(3), gaussian(3, scale=0.5))},
             functional='batch_norm', module_class='BatchNorm1d', factor={"dx": "rstd"}),
    Exercise("gelu", "GELU (tanh form)", "GELU, tanh form: dx; the product and the chain rule",
             "gelu", ("x",), ("x",), _elementwise_cases, _entries,
             {"k = sqrt(2/pi)": GELU_K, "c = 0.044715": GELU_C}, ("GELU_K", "GELU_C"),
             "import math\n\nimport numpy as np",
             derivation=(lambda dout, c: {"dout": dout, "x": c[0], "t": c[1], "1 - t": lambda p: 1 - p["t"],
                                  "x^2": lambda p: p["x"] * p["x"],
                                  "tanh'(u) = 1 - t^2": lambda p: 1 - p["t"] * p["t"],
                                  "1 + t^2": lambda p: 1 + p["t"] * p["t"],
                                  "t (1 - t) (sigmoid' written in t)": lambda p: p["t"] * p["1 - t"],
                                  "u = k (x + c x^3)": lambda p: GELU_K * (p["x"] + GELU_C * p["x"] ** 3)},
                 gelu_terms),
             functions={"tanh({})": lambda p: np.tanh},
             other_layers=[("is the exact GELU's backward, Phi(x) + x phi(x) with Phi(x) = 0.5 (1 + t), where "
                 "the tanh form's belongs",
                 lambda dout, c: {"dx": gelu_erf_backward(dout, (c[0], 0.5 * (1 + c[1])))})],
             prompt='''cache: (x, t): the input and t = tanh(u), u = k (x + c x^3), k = GELU_K = sqrt(2/pi),
        c = GELU_C = 0.044715.
    Returns: dx, x's shape.

    Steps:
        1. out = 0.5 x (1 + t) is a product: the product rule gives two terms.
        2. The first: the derivative of 0.5 x, times the other factor.
        3. The second: 0.5 x times dt/dx = tanh'(u) du/dx. Write tanh'(u) with the saved t
           alone (cosh and exp overflow for large |u|), then differentiate u = k (x + c x^3).

    Check yourself: the derivative is 0.5 at x = 0, tends to 1 for large x, 0 for very negative.''',
             example=("N, the entries of x", 5, lambda r, N: ((away_from_zero(r, N),), {})),
             formula="dx = dout * 0.5 * ((1 + t) + x (1 - t^2) k (1 + 3 c x^2)), t = tanh(k (x + c x^3))",
             breaks=(('dx', 3, 0),),
             gradcheck={'gelu': (lambda x: F.gelu(x, approximate="tanh"), gaussian(2, 4, 8, scale=2)),
                 'gelu (exact erf)': (F.gelu, gaussian(2, 4, 8, scale=2))},
             functional='gelu', module_class=None, factor={"dx": "dout"}),
    Exercise("relu2", "ReLU²", "ReLU²: dx of max(x, 0)^2", "relu", ("x",), ("x",),
             _elementwise_cases, _entries, study="activations",
             derivation=(lambda dout, r: {"dout": dout, "r": r,
                                  "x > 0": lambda p: (p["r"] > 0).astype(p["r"].dtype)},
                 lambda p: {"dx": [("2 r (d(r^2)/dr, with r = max(x, 0))", p["dout"] * 2 * p["r"])]}),
             functions={"max({}, 0)": lambda p: lambda a: np.maximum(a, 0)},
             other_layers=[("is ReLU's backward, dout * (x > 0), where ReLU²'s belongs",
                 lambda dout, r: {"dx": dout * (r > 0)})],
             prompt='''cache: r = max(x, 0), x's shape (the array itself, not a tuple).
    Returns: dx, x's shape.

    Steps:
        1. Where x < 0, out is 0 whatever x is; where x > 0, out = x^2. Their derivatives?
        2. Write both with r alone: no mask is needed (at x = 0 both sides agree).''',
             example=("N, the entries of x", 5, lambda r, N: ((away_from_zero(r, N),), {})),
             formula="dx = dout * 2 r, r = max(x, 0)",
             breaks=(('dx', 1, -1),),
             gradcheck={'relu2': (F.relu2, off_zero(2, 4, 8))},
             functional='relu2', module_class=None, factor={"dx": "dout"}),
    Exercise("silu", "SiLU", "SiLU: dx of x sigmoid(x), in the saved sigmoid", "silu", ("x",),
             ("x",), _elementwise_cases, _entries, helpers=("sigmoid_stable",), study=None,
             derivation=(lambda dout, c: {"dout": dout, "x": c[0], "s": c[1], "1 - s": lambda p: 1 - p["s"],
                                  "sigmoid'(x) = s (1 - s)": lambda p: p["s"] * p["1 - s"],
                                  "1 - s^2 (tanh' written in s)": lambda p: 1 - p["s"] ** 2},
                 lambda p: {"dx": [("s (d(x)/dx times s)", p["dout"] * p["s"]),
                                   ("x s (1 - s) (x times sigmoid'(x))",
                                    p["dout"] * p["x"] * p["sigmoid'(x) = s (1 - s)"])]}),
             functions={"sigmoid({})": lambda p: sigmoid_stable},
             prompt='''out = x * sigmoid(x). cache: (x, s): the input and s = sigmoid(x).
    Returns: dx, x's shape.

    Steps:
        1. out = x * s is a product: the product rule gives two terms.
        2. d s / d x: differentiate 1 / (1 + exp(-x)) and write it with s alone.
        3. Put them together with no exp: the forward saved s for you.

    Check yourself: silu'(0) = 0.5; it tends to 1 for large x and to 0 for very negative x.''',
             example=("N, the entries of x", 5, lambda r, N: ((away_from_zero(r, N),), {})),
             formula="dx = dout * (s + x s (1 - s)), s = sigmoid(x)",
             breaks=(('dx', 2, 0),),
             gradcheck={'silu': (F.silu, gaussian(2, 4, 8, scale=2))},
             functional='silu', module_class=None, factor={"dx": "dout"}),
    Exercise("swiglu", "SwiGLU", "SwiGLU: dx, dw_gate, dw_up, dw_down of a gated MLP", "swiglu",
             ("x", "w_gate", "w_up", "w_down"), ("x", "w_gate", "w_up", "w_down"), _swiglu_cases,
             _rows_and("C features", **{"H hidden": 0, "O outputs": 2}),
             helpers=("sigmoid_stable",),
             derivation=(swiglu_parts, swiglu_terms),
             axes={"dx": "C", "dw_gate": "H C", "dw_up": "H C", "dw_down": "O H"},
             functions={"sigmoid({})": lambda p: sigmoid_stable,
                 "silu({})": lambda p: lambda a: a * sigmoid_stable(a)},
             prompt='''cache: (x2, a, s, u, g, w_gate, w_up, w_down): x2 (N, C), x as N rows; a = x2 Wg^T,
        the gate's pre-activation; s = sigmoid(a); u = x2 Wu^T; g = a * s = silu(a), each
        (N, H); w_gate (H, C), w_up (H, C), w_down (O, H): PyTorch's (out, in) layout.
        h = g * u is not kept: recompute it.
    Returns: dx of x's shape (dout's leading axes, then C), dw_gate, dw_up, dw_down of
        their weights' shapes.

    Steps:
        1. out = h Wd^T. For y = x W^T, which product gives dL/dx and which dL/dW? The shapes
           leave one choice each: dh and dw_down.
        2. h = g * u: the product rule gives du and dg.
        3. g = silu(a): da from dg (the SiLU exercise: silu'(a), written with a and s).
        4. a = x Wg^T and u = x Wu^T: dw_gate and dw_up as in step 1.
        5. x feeds both a and u. What happens to its two gradients?''',
             example=("C, the features of x (H = C + 1 hidden, O = C outputs)", 2, lambda r, C: (
                 (r.standard_normal((1, C)), 0.5 * r.standard_normal((C + 1, C)),
                  0.5 * r.standard_normal((C + 1, C)), 0.5 * r.standard_normal((C, C + 1))), {})),
             formula="dh = dout Wd, du = dh * g, da = dh * u * silu'(a); dx = da Wg + du Wu; "
                 "dw_gate = da^T x, dw_up = du^T x, dw_down = dout^T h",
             breaks=(('dx', 1, 0),),
             gradcheck={'swiglu': (F.swiglu, (2, 3, 8), *[gaussian(*s, scale=0.5) for s in ((21, 8), (21, 8), (8, 21))])},
             functional='swiglu', module_class='SwiGLU'),
    Exercise("rope", "RoPE", "RoPE: dx of a rotation of pairs; its transpose", "rope",
             ("x", "cos", "sin"), ("x",), lambda r: [
                 (f"x {s}{label}", (r.standard_normal(s), *build_rope_cache(*s[2:], dtype=float)), {})
                 for s, label in (((1, 2, 6, 4), ""), ((1, 1, 1, 2), ", one position"),
                                  ((2, 1, 3, 8), ""))],
             lambda x, *_: {"T positions": x.shape[-2], "hs entries of a head": x.shape[-1]},
             helpers=("rotate_half",), study="positions",
             derivation=(lambda dout, c: {"dout": dout, "cos": c[0], "sin": c[1],
                                  "rotate_half": lambda p: rotate_half,
                                  "NeoX's rotate_half (halves, not pairs)": lambda p: neox_rotate_half},
                 rope_terms),
             axes={"dx": "B H T hs"},
             prompt='''cache: (cos, sin), each (1, 1, T, hs): cos(theta) and sin(theta) of every position,
        each angle written for both members of its pair (columns 2i and 2i + 1).
    Returns: dx, dout's shape.

    Steps:
        1. One pair: o0 = c x0 - s x1, o1 = s x0 + c x1, a 2x2 matrix R times (x0, x1).
        2. The map is linear in x: its vector-Jacobian product is its transpose applied to
           dout. Which rotation is R's transpose?
        3. In out = x * cos + rotate_half(x) * sin, rotate_half is linear too. What is its
           transpose, written with rotate_half? Try it on one pair (a, b).
        4. cos and sin are constants: they get no gradient.

    Check yourself: np.linalg.norm(dx) equals np.linalg.norm(dout): a rotation keeps lengths.''',
             example=("T, the positions (head size 4)", 2, lambda r, T: (
                 (r.standard_normal((1, 1, T, 4)), *rope_cache(T)), {})),
             formula="dx = dout * cos - rotate_half(dout * sin)",
             breaks=(('dx', 2, -1),),
             gradcheck={'apply_rope': (lambda x: F.apply_rope(x, *build_rope_cache(6, 8, dtype=np.float64)),
                     (2, 2, 6, 8))},
             functional='apply_rope', module_class=None),
    Exercise("softmax", "Softmax", "softmax: dx; the Jacobian diag(y) - y y^T, never formed",
             "softmax", ("x",), ("x",), _softmax_cases, lambda x, axis: {
                 "C entries along the axis": x.shape[axis], "N rows": x.size // x.shape[axis]},
             study=None,
             derivation=(softmax_parts, lambda p: {"dx": [
                 ("y * dy (diag(y) dy)", p["y"] * p["dy"]),
                 ("-y * sum(dy * y) (-y y^T dy)", -p["y"] * p["sum(dy * y)"])]}),
             axes={"dx": softmax_axes},
             functions={"softmax({})": lambda p: softmax_along(p["the sum along the axis"].axis),
                 **LOG_EXP},
             other_layers=[("is log-softmax's backward, dy - y * sum(dy), where softmax's belongs",
                 lambda dy, c: {"dx": log_softmax_backward(dy, (np.log(c[0]), c[1]))})],
             prompt='''cache: (y, axis): the output y = softmax(x) and the axis it normalised.
    Returns: dx, y's shape.

    Steps:
        1. One row: y_i = e_i / Z with e_i = exp(x_i - m), Z = sum_j e_j. y does not depend
           on the shift m: hold it fixed.
        2. The quotient rule: d y_i / d x_j, written with y alone (one part only for i = j).
        3. dx_j = sum_i dy_i d y_i / d x_j without forming the C x C Jacobian: a sum along
           `axis` with keepdims=True.

    Check yourself: every row of dx sums to 0 (a constant added to a row changes nothing).''',
             example=("C, the entries of the row", 4, lambda r, C: ((r.standard_normal((1, C)),),
                 {"axis": -1})),
             formula="dx = y * dy - y * sum(dy * y)",
             breaks=(('dx', 2, 0),),
             gradcheck={'softmax': (F.softmax, gaussian(2, 3, 7, scale=2))},
             functional='softmax', module_class=None),
    Exercise("cross_entropy", "Cross-entropy", "cross-entropy: dlogits of the mean; softmax minus "
             "one-hot", "cross-entropy", ("logits", "targets"), ("logits",), lambda r: [
                 (f"logits {s}{label}", (r.standard_normal(s), r.integers(0, s[-1], s[:-1])), {})
                 for s, label in (((4, 5), ""), ((1, 3), ", a batch of one"),
                                  ((2, 3, 5), ", (B, T, V)"), ((3, 1), ", one class"))],
             lambda logits, t: {"N targets": t.size, "V classes": logits.shape[-1],
                                "B sequences": len(logits)},
             derivation=(cross_entropy_parts, cross_entropy_terms),
             axes={"dlogits": "V"},
             functions={"softmax({})": lambda p: softmax_along(-1), **LOG_EXP},
             prompt='''With reduction "mean" (the default) the loss and dloss are 0-d arrays.
    cache: (probs, t, valid, eps, reduction, count, shape): probs (N, V), the softmax of the
        logits' rows (N = B * T); t (N,), the targets; valid (all True: no ignore_index), eps
        (0.0: no label smoothing) and reduction ("mean") are for later, the derivation's
        Options; count = N, the rows the mean divides by; shape, the logits' shape.
    Returns: dlogits of shape `shape`.

    Steps:
        1. One row: loss_n = log(sum_v exp(x_v)) - x_t. Differentiate the log-sum-exp with
           respect to x_v: which array of the cache is it?
        2. Differentiate -x_t: which entry does it touch? (a[np.arange(N), t] picks one entry
           per row: no one-hot matrix is needed.)
        3. The loss is the mean over the rows, times the upstream dloss. Reshape to `shape`.

    Check yourself: every row of dlogits sums to 0.''',
             example=("V, the classes (2 targets)", 4, lambda r, V: (
                 (r.standard_normal((2, V)), r.integers(0, V, 2)), {})),
             formula="dlogits = (probs - onehot(targets)) * dloss / N",
             breaks=(('dlogits', 2, 0),),
             gradcheck={'cross_entropy': (F.cross_entropy, (6, 11), lambda r: r.integers(0, 11, size=6)),
                 'cross_entropy (sum, ignore_index, label_smoothing)': (cross_entropy("sum"), (6, 11),
                     targets_one_ignored),
                 'cross_entropy (none, ignore_index, label_smoothing)': (cross_entropy("none"), (6, 11),
                     targets_one_ignored)},
             functional='cross_entropy', module_class=None, factor={"dlogits": "dloss / N"}),
    Exercise("attention", "Attention", "attention: dq, dk, dv of softmax(q k^T / sqrt(hs)) v",
             "attention", ("q", "k", "v"), ("q", "k", "v"), _attention_cases,
             lambda q, k, v, **_: {"hs entries of a head": q.shape[-1], "T positions": q.shape[-2]},
             helpers=("_future_mask",),
             derivation=(attention_parts, attention_terms),
             axes={"dq": "B H T hs", "dk": "B H T hs", "dv": "B H T hv"},
             functions={"softmax({})": lambda p: softmax_along(-1), **LOG_EXP},
             prompt='''cache: (q, k, v, P, scale): q, k (B, H, T, hs); v (B, H, T, hv) (hv = hs in the
        GPT, not in every check); P (B, H, T, T) = softmax(S) of the scores
        S = q k^T * scale, row by row, 0 where the causal mask hid a key; scale = 1 / sqrt(hs).
    Returns: dq, dk, dv, each of its input's shape.

    Steps:
        1. out = P v is a matrix product. For C = A B, what are dA and dB? Derive them from
           dL = sum(dC * d(A B)), or let the shapes decide: dP and dv.
        2. P = softmax(S), row by row: dS from dP (the Softmax exercise, along the last axis).
           The mask needs nothing more: look at what P is where it hid a key.
        3. S = q k^T * scale: the matrix rule again gives dq and the gradient of k^T; transpose
           that for dk. `@` multiplies over the leading axes; np.swapaxes(a, -1, -2)
           transposes the last two.

    Check yourself: with the causal mask, an upstream gradient at position 0 alone gives dk
    and dv that are 0 past position 0.''',
             example=("T, the positions (one head of size 2, causal)", 3, lambda r, T: (
                 tuple(r.standard_normal((1, 1, T, 2)) for _ in "qkv"), {"is_causal": True})),
             formula="dP = dout v^T, dS = P * dP - P * rowsum(P * dP); dq = dS k / sqrt(hs), "
                 "dk = dS^T q / sqrt(hs), dv = P^T dout",
             breaks=(('dq', 2, 0), ('dk', 1, 0)),
             gradcheck={'scaled_dot_product_attention (causal)': (
                     lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), *[(2, 2, 5, 4)] * 3),
                 'scaled_dot_product_attention': (F.scaled_dot_product_attention, *[(2, 2, 5, 4)] * 3)},
             functional='scaled_dot_product_attention', module_class='CausalSelfAttention',
             shown={"dP = dout v^T": lambda p: p["dout"] @ np.swapaxes(p["v"], -1, -2),
                    "dS = P * dP - P rowsum(P * dP)":
                        lambda p: p["P * dP"] - p["P rowsum(P * dP)"]}),
    Exercise("linear", "Linear", "linear: dx, dweight, dbias of x W^T + b", "linear",
             ("x", "weight", "bias"), ("x", "weight", "bias"), lambda r: [
                 (f"x {x}{label}, weight {(O, x[-1])}", (r.standard_normal(x), 0.5 *
                  r.standard_normal((O, x[-1])), 0.5 * r.standard_normal(O)), {})
                 for x, O, label in (((2, 3, 4), 4, ""), ((1, 3), 2, ", a batch of one"),
                                     ((5, 1), 3, ", one feature"))],
             _rows_and("C features", **{"O outputs": 0}),
             derivation=(lambda dout, c: {"dout": dout.reshape(-1, c[1].shape[0]), "weight": c[1],
                                  "x": c[0].reshape(-1, c[1].shape[1]), "shape": lambda p: c[0].shape},
                 lambda p: {"dx": [("dout W", (p["dout"] @ p["weight"]).reshape(p["shape"]))],
                            "dweight": [("dout^T x", p["dout"].T @ p["x"])],
                            "dbias": [("sum over rows of dout", p["dout"].sum(0))]}),
             axes={"dx": "C", "dweight": "O C", "dbias": "O"},
             prompt='''cache: (x, weight, has_bias): x (..., C); weight (O, C) in PyTorch's (out, in)
        layout; has_bias, whether a bias was added (always, in the check).
    Returns: dx (..., C), dweight (O, C), dbias (O,) (None when has_bias is False).

    Steps:
        1. Flatten the rows: X = x.reshape(-1, C), D = dout.reshape(-1, O); out = X W^T + b.
        2. The matrix rule: for c = a b, derive da and db from dL = sum(dc * d(a b)), with
           a = X and b = W^T. It gives the gradient of W^T: what is dweight?
        3. b is added to every row. Its gradient? Give dx x's shape.

    Check yourself: every shape. A square weight hides a transposed dweight from any shape
    check, but not from this one's values.''',
             example=("C, the input features (2 rows, 2 outputs)", 3, lambda r, C: (
                 (r.standard_normal((2, C)), 0.5 * r.standard_normal((2, C)),
                  0.5 * r.standard_normal(2)), {})),
             formula="dx = dout W, dweight = dout^T x, dbias = sum over rows of dout",
             breaks=(('dbias', 1, -1),),
             gradcheck={'linear': (F.linear, (2, 4, 8), gaussian(6, 8, scale=0.5), gaussian(6, scale=0.5))},
             functional='linear', module_class='Linear'),
    Exercise("embedding", "Embedding", "embedding: dweight of weight[idx]; a scatter-add",
             "embedding", ("weight", "idx"), ("weight",), lambda r: [
                 (f"idx {idx.shape} into weight {V, C}{label}", (r.standard_normal((V, C)), idx), {})
                 for idx, V, C, label in (
                     (np.array([[1, 3, 1, 0], [3, 3, 2, 1]]), 5, 3, ": rows repeated, row 4 unused"),
                     (np.array([[2]]), 4, 2, ", a batch of one"),
                     (np.array([0, 2, 0, 0, 2, 1]), 3, 1, ", one feature"))],
             lambda w, idx: {"N lookups": idx.size, "V rows": len(w)},
             derivation=(lambda dout, c: {"dout": dout.reshape(-1, c[1][1]), "idx": c[0],
                                  "shape": lambda p: c[1], "dtype": lambda p: c[2],
                                  "k (the times its row was looked up)":
                                      np.bincount(c[0], minlength=c[1][0])[:, None].astype(c[2])},
                 embedding_terms),
             axes={"dweight": "V C"},
             prompt='''cache: (idx, shape, dtype): idx flattened to (N,) integers, and the weight's shape
        (V, C) and dtype. dout has idx's shape + (C,).
    Returns: dweight of that shape and dtype.

    Steps:
        1. out[n] = weight[idx[n]]. What is d out[n, c] / d weight[v, c']?
        2. The chain rule sums over every n. Which rows of dweight get something, and what
           does a row looked up twice get?
        3. Careful: a[idx] = values keeps one value where idx repeats; np.add has a method that
           adds every one.''',
             example=("V, the rows of the table (width 2; idx [1, 3, 1] mod V)", 4, lambda r, V: (
                 (r.standard_normal((V, 2)), np.array([1, 3, 1]) % V), {})),
             formula="dweight[v] = the sum of dout over the positions that looked up v",
             breaks=(('dweight', 2, 0),),
             gradcheck={'embedding': (F.embedding, lambda r: np.array([[1, 3, 1], [0, 3, 3]]), (5, 4))},
             functional='embedding', module_class='Embedding'),
)}
