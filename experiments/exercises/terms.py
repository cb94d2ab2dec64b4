"""The named terms of every exercise's backward, as ``docs/derivations.md`` writes them, and
the quantities they are built from: the builders a row of ``catalogue.py`` names as its
``derivation`` (parts, terms).

* ``parts(dout, cache)``: the derivation's quantities, from what a backward gets: arrays, or
  rules ``p -> value`` computed from the others (``Parts``), so that a quantity put in
  another's place reaches all that is built on it. Some are there to be confused with the
  right ones (``1 - t`` and ``1 + t^2`` for tanh', u for t, each of sigmoid' and tanh' written
  in the other's output, ``rstd^3``, P without the mask or
  with the other triangle masked, the scores S for P, argmax(probs) for the targets).
* ``terms(p)``: per gradient, its named terms ``[(label, array)]``, whose sum is the right
  gradient (a test holds it against the layer's backward).

``variants`` changes one thing at a time, for the diagnosis (``mistakes.py``): a quantity left
out, another in its place (the confusable ones above among them), two exchanged; then the small
families of ``_neighbours``, general over every exercise: a quantity inverted, squared, its square
root, put through a function of the forward (the row's ``functions``: softmax(P) where P belongs), an index
shifted by one (or wrapped: % V), a reduction (``reduction``) over another axis or with a factor moved across it;
and another layer's backward (the row's ``other_layers``). ``quantities`` are the arrays a term
may be multiplied by; the row's ``axes`` names the last axes of each gradient, for a shape.
"""
import itertools
import re
import types

import numpy as np

from layers.batchnorm import per_channel, stat_axes
from layers.gelu import GELU_C, GELU_K


class Parts(dict):
    """The quantities of one case (``Exercise.parts``): its arrays and those ``put`` in their
    place; its rules computed on first use, from these."""

    def __init__(self, raw, put=None):
        super().__init__({k: v for k, v in raw.items() if not callable(v)})
        self.update(put or {})
        self.rules, self.read = raw, set()   # what terms read, built ones through their rules

    def __missing__(self, key):
        value = self[key] = self.rules[key](self)
        return value

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)


def terms_of(ex, raw, shapes, put=None):
    """``{gradient: [(label, term)]}`` of the quantities ``raw`` (``put`` in place of some), each
    term broadcast to its gradient's shape (``shapes``)."""
    with np.errstate(all="ignore"):
        found = ex.terms(Parts(raw, put))
    return {g: [(label, np.broadcast_to(a, shapes[g])) for label, a in found[g]] for g in found}


def variants(ex, cases):
    """The derivation with one thing changed in every case: (what changed, per case
    ``terms_of``, or per case ``{gradient: [(what, array)]}`` for another layer's backward).

    First one quantity the terms read left out (1 in its place, the identity for a function;
    the ones built from others first), another of as many axes in its place (the forward's
    ``out`` among them), two of them exchanged. Then the families of ``_neighbours``: another
    layer's backward, a quantity inverted, squared, its square root, put through a function of
    the forward, an index shifted (or shifted and wrapped), a reduction over another axis or
    with a factor moved across it."""
    raws, parts, values = _quantities(ex, cases)
    ex.terms(parts[0])
    read = set(parts[0].read)
    keys = [k for k, v in values[0].items()
            if isinstance(v, (np.ndarray, np.generic, types.FunctionType))]
    read = [k for k in keys if k in read]

    def alike(a, b):
        return all((callable(v[a]), np.ndim(v[a])) == (callable(v[b]), np.ndim(v[b]))
                   for v in values)

    def one(x):
        return (lambda y: y) if callable(x) else np.ones_like(x)
    changes = [(f"leaves out {a}", [{a: one(v[a])} for v in values]) for a in read[::-1]
               if not _kind(values[0][a], "iu")]
    changes += [(f"has {b} in place of {a}", [{a: v[b]} for v in values])
                for a in read for b in keys if b != a and alike(a, b)]
    changes += [(f"has {a} and {b} exchanged", [{a: v[b], b: v[a]} for v in values])
                for a, b in itertools.combinations(read, 2) if alike(a, b)]
    shapes = [dict(zip(ex.grads, map(np.shape, c.right))) for c in cases]
    with np.errstate(all="ignore"):
        for what, backward in ex.other_layers:
            yield what, [{g: [(what, np.broadcast_to(a, s[g]))] for g, a in
                          backward(c.dout, c.cache).items()} for c, s in zip(cases, shapes)]
        for what, puts in changes + _neighbours(ex, read, values, parts, [c.sizes for c in cases]):
            try:
                yield what, [terms_of(ex, r, s, put) for r, s, put in zip(raws, shapes, puts)]
            except (ValueError, IndexError, TypeError):   # it does not fit where it is put
                continue


def _quantities(ex, cases):
    """Per case: its quantities as ``parts`` gives them (and the forward's ``out``), as
    ``Parts``, and every one's value."""
    raws = [{**ex.parts(c.dout, c.cache), "out": c.out} for c in cases]
    parts = [Parts(r) for r in raws]
    with np.errstate(all="ignore"):
        return raws, parts, [{k: p[k] for k in r} for p, r in zip(parts, raws)]


def quantities(ex, cases):
    """(name, per case its array) of each of the derivation's floating arrays that is not a
    constant of the case, for the diagnosis: a term multiplied by one of them."""
    values = _quantities(ex, cases)[2]
    return [(k, [v[k] for v in values]) for k in values[0]
            if all(_kind(v[k], "f") and np.ndim(v[k]) for v in values)]


def _kind(value, kinds):
    """Whether ``value`` is an array (not a function) of one of the dtype ``kinds`` ("f", "iu")."""
    return not callable(value) and np.asarray(value).dtype.kind in kinds


def _bare(name):
    """A quantity's name without what it is: "tanh'(u)" of "tanh'(u) = 1 - t^2"."""
    return name.split(" = ")[0].split(" (")[0]


def _symbol(name):
    """A quantity's name as a factor: "tanh'(u)", "rstd", "(dy * y)"."""
    s = _bare(name)
    return s if re.fullmatch(r"[\w']+(\(.*\))?", s) else f"({s})"


def _neighbours(ex, read, values, parts, sizes):
    """The changes of one named quantity beyond another in its place, each a small family, as
    (what changed, per case {quantity: its value}): a quantity (of those the terms read)
    inverted (a division where a multiplication belongs), squared or its square root (an array,
    not a constant of the case: those are the sizes' factors), put through a function of the
    forward (the row's ``functions``); an index shifted by one, or by one and wrapped at the end of the
    axis it indexes (% V: a size of the case above every index); a reduction over another
    axis, or with a factor moved into or out of it (the inner product where the outer one
    belongs)."""
    floats = [a for a in read if _kind(values[0][a], "f")]
    arrays = [a for a in floats if all(np.ndim(v[a]) for v in values)]
    functions = [(fmt, [rule(p) for p in parts]) for fmt, rule in ex.functions.items()]
    found = [(f"divides by {_bare(a)} where it multiplies by it",
              [{a: 1 / v[a]} for v in values]) for a in floats]
    for a in arrays:
        bare = _bare(a)
        found += [(f"has {_symbol(a)}^2 in place of {a}", [{a: v[a] * v[a]} for v in values]),
                  (f"has sqrt({bare}) in place of {a}", [{a: np.sqrt(v[a])} for v in values])]
        found += [(f"has {fmt.format(bare)} in place of {a}", [{a: f(v[a])} for f, v in zip(fs, values)])
                  for fmt, fs in functions]
    for a in (a for a in read if _kind(values[0][a], "iu")):
        found += [(f"has {a} {sign} 1 in place of {a}", [{a: v[a] + step} for v in values])
                  for sign, step in (("-", -1), ("+", 1))]
        found += [(f"has ({a} + 1) % {n.split()[0]} in place of {a}",
                   [{a: (v[a] + 1) % s[n]} for v, s in zip(values, sizes)]) for n in sizes[0]
                  if all(s[n] > np.max(v[a], initial=0) for v, s in zip(values, sizes))]
    for r in (r for r in read if hasattr(values[0][r], "how")):
        how = values[0][r].how
        found += [(f"has the {how} over axis {k} in place of {r}",
                   [{r: reduction(how, k)} for v in values]) for k in (0, -1, -2, 1)
                  if any(v[r].axis != k for v in values)]
        for a in arrays:
            fs = [np.where(v[a] == 0, TINY, v[a]) for v in values]
            found += [(what.format(a=a, r=r), [{r: _moved(v[r], f, way), a: f}
                                               for v, f in zip(values, fs)])
                      for way, what in MOVED.items()]
    return found


MOVED = {   # a factor {a} moved across a reduction {r} (``_moved``)
    "out": "has {a} outside {r}, where it belongs inside",
    "in": "has {a} inside {r}, where it belongs outside",
    "inner": "has {a} inside {r} in place of what it multiplies: an inner product of {a} with "
             "itself where the outer product belongs"}


def _moved(R, F, way):
    """The reduction R with the factor F moved across it, where the terms write R (``MOVED``):
    "out" makes their R(G F) F R(G); "in" makes their F R(G) R(F G); "inner" makes their
    F R(G F) G R(F F). F is put in the terms with ``TINY`` where it is 0 (P where the causal
    mask zeroes it, xhat at C = 1), so that what it multiplies comes through the division
    whole: a learner's F R(G) sums G where F is 0 too."""
    return {"out": lambda a: F * R(a / F), "in": lambda a: R(a * F) / F,
            "inner": lambda a: a / (F * F) * R(F * F)}[way]


TINY = 1e-150   # F's 0 in a moved factor: its square still a normal float, its part negligible


def reduction(how, axis):
    """``np.<how>(a, axis, keepdims=True)`` ("mean" or "sum"; ``axis`` None: every entry), a
    function that says what it is (``.how``, ``.axis``): the diagnosis tries it over another
    axis, or with a factor moved across it (``variants``)."""
    def reduce(a):
        return getattr(np, how)(a, axis=axis, keepdims=True)
    reduce.how, reduce.axis = how, axis
    return reduce


EVERY = {   # a reduction over every entry where one over a row belongs (an axis left out)
    "the mean over every entry (no axis)": lambda p: reduction("mean", None),
    "the sum over every entry (no axis)": lambda p: reduction("sum", None)}


def _rows(a):
    return a.reshape(-1, a.shape[-1]).sum(axis=0)   # over every leading axis


def _T(a):
    return np.swapaxes(a, -1, -2)


# ----------------------------------------------------------------------------- norms
# LayerNorm: dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dout * weight
# RMSNorm:   dx = rstd * (dxhat - xhat * mean(dxhat * xhat))

def norm_parts(no_eps):
    """LayerNorm's and RMSNorm's ``parts(dout, cache)`` (cache ``(xhat, weight, rstd)``: xhat
    (..., C), weight (C,), rstd (..., 1)); ``no_eps`` names rstd without eps, a confusable
    (docs/derivations.md, LayerNorm and RMSNorm)."""
    def parts(dout, cache):
        xhat, weight, rstd = cache
        with np.errstate(all="ignore"):   # 0/0 where a row is constant: C = 1
            rstd0 = rstd / np.sqrt(np.mean(xhat * xhat, axis=-1, keepdims=True))
        return {"dout": dout, "xhat": xhat, "weight": weight, "rstd": rstd,
                "dxhat": lambda p: p["dout"] * p["weight"], "rstd^3": rstd ** 3, no_eps: rstd0,
                "the mean over the row": lambda p: reduction("mean", -1), **EVERY}
    return parts


def norm_terms(bias, path):
    """LayerNorm's (``bias`` 1) or RMSNorm's (0) ``terms(p)``: dx's three (or two) paths, each
    times rstd, dweight and dbias summed over the rows; ``path`` labels the variance term."""
    def terms(p):
        dxhat, xhat, rstd, mean = p["dxhat"], p["xhat"], p["rstd"], p["the mean over the row"]
        dx = [("dxhat (the direct path)", rstd * dxhat),
              ("-mean(dxhat) (the path through the mean)", -rstd * mean(dxhat)),
              (f"-xhat * mean(dxhat * xhat) ({path})", -rstd * xhat * mean(dxhat * xhat))]
        return {"dx": dx if bias else dx[::2],
                "dweight": [("sum over rows of dout * xhat", _rows(p["dout"] * xhat))],
                **({"dbias": [("sum over rows of dout", _rows(p["dout"]))]} if bias else {})}
    return terms


# BatchNorm: LayerNorm's three terms with the means over the batch (every axis but axis 1)

def batchnorm_parts(dout, cache):
    """BatchNorm's ``parts(dout, cache)`` (cache ``(xhat, weight, rstd)``: xhat (N, C, *), rstd
    one value per channel): LayerNorm's with the means over the batch (every axis but axis 1;
    Ioffe & Szegedy 2015)."""
    xhat, weight, rstd = cache
    axes = stat_axes(xhat)
    with np.errstate(all="ignore"):   # 0/0 where a channel is constant: m = 1
        rstd0 = rstd / np.sqrt(np.mean(xhat * xhat, axis=axes, keepdims=True))
    return {"dout": dout, "xhat": xhat, "weight": per_channel(weight, xhat), "rstd": rstd,
            "dxhat": lambda p: p["dout"] * p["weight"], "rstd^3": rstd ** 3,
            "1/sqrt(var) (eps left out)": rstd0,
            "the mean over the batch": lambda p: reduction("mean", axes), **EVERY}


def batchnorm_terms(p):
    """BatchNorm's ``terms(p)``: LayerNorm's three terms of dx over the batch; dweight and dbias
    summed over the batch, (C,) each."""
    dxhat, xhat, rstd, mean = p["dxhat"], p["xhat"], p["rstd"], p["the mean over the batch"]
    axes = stat_axes(xhat)
    return {"dx": [("dxhat (the direct path)", rstd * dxhat),
                   ("-mean(dxhat) (the path through the batch mean)", -rstd * mean(dxhat)),
                   ("-xhat * mean(dxhat * xhat) (the path through the batch variance)",
                    -rstd * xhat * mean(dxhat * xhat))],
            "dweight": [("sum over the batch of dout * xhat", np.sum(p["dout"] * xhat, axis=axes))],
            "dbias": [("sum over the batch of dout", np.sum(p["dout"], axis=axes))]}


# ----------------------------------------------------------------------------- elementwise
# GELU: dx = dout * (0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2)); ReLU²: dx = dout * 2 r;
# SiLU: dx = dout * (s + x s (1 - s))

def gelu_terms(p):
    """GELU's (tanh form) ``terms(p)``: dx as the product rule of 0.5 x (1 + t) and the chain
    rule through u = k (x + c x^3), four terms of x's shape (docs/derivations.md, GELU)."""
    x, dout, tanh_prime = p["x"], p["dout"], p["tanh'(u) = 1 - t^2"]
    return {"dx": [("0.5 (d(0.5 x)/dx times the 1 of 1 + t)", dout * 0.5),
                   ("0.5 t (times the t of 1 + t)", dout * 0.5 * p["t"]),
                   ("0.5 x tanh'(u) k (0.5 x tanh'(u) times the k of du/dx)",
                    dout * 0.5 * x * tanh_prime * GELU_K),
                   ("0.5 x tanh'(u) 3 k c x^2 (times the 3 k c x^2 of du/dx)",
                    dout * 0.5 * x * tanh_prime * (3 * GELU_K * GELU_C * p["x^2"]))]}


# ----------------------------------------------------------------------------- SwiGLU
# dh = dout Wd, du = dh * g, da = dh * u * silu'(a); dx = da Wg + du Wu

def swiglu_parts(dout, cache):
    """SwiGLU's ``parts(dout, cache)`` (cache ``(x2, a, s, u, g, w_gate, w_up, w_down)``, x2
    (N, C)): a, s = sigmoid(a), u, g = silu(a), h = g * u, dh, silu'(a) and confusables."""
    x2, a, s, u, g, w_gate, w_up, w_down = cache
    return {"dout": dout, "x": x2, "a": a, "s": s, "u": u, "g": g, "Wg": w_gate, "Wu": w_up,
            "Wd": w_down, "h = g * u": lambda p: p["g"] * p["u"],
            "dh": lambda p: p["dout"].reshape(-1, p["Wd"].shape[0]) @ p["Wd"],
            "1 - s": lambda p: 1 - p["s"], "sigmoid'(a) = s (1 - s)": lambda p: p["s"] * p["1 - s"],
            "1 - s^2 (tanh' written in s)": lambda p: 1 - p["s"] ** 2,
            "silu'(a) = s (1 + a (1 - s))":   # s + a sigmoid'(a)
                lambda p: p["s"] + p["a"] * p["sigmoid'(a) = s (1 - s)"]}


def swiglu_terms(p):
    """SwiGLU's ``terms(p)``: dx through the gate and the up branch (N, C) reshaped to x's
    shape, dw_gate (H, C), dw_up (H, C), dw_down (O, H) (docs/derivations.md, SwiGLU)."""
    x2, d2, shape = p["x"], p["dout"].reshape(-1, p["Wd"].shape[0]), p["dout"].shape[:-1] + (-1,)
    da = p["dh"] * p["u"] * p["silu'(a) = s (1 + a (1 - s))"]     # (N, H)
    du = p["dh"] * p["g"]                                         # (N, H)
    return {"dx": [("da Wg (the gate branch)", (da @ p["Wg"]).reshape(shape)),
                   ("du Wu (the up branch)", (du @ p["Wu"]).reshape(shape))],
            "dw_gate": [("da^T x", da.T @ x2)], "dw_up": [("du^T x", du.T @ x2)],
            "dw_down": [("dout^T h", d2.T @ p["h = g * u"])]}


# ----------------------------------------------------------------------------- RoPE, softmax
# RoPE: dx = dout * cos - rotate_half(dout * sin); softmax: dx = y * dy - y * sum(dy * y)

def neox_rotate_half(x):
    """GPT-NeoX's rotate_half, (first half, second half) -> (-second, first) along the last
    axis: a confusable for RoPE's pairwise one."""
    return np.concatenate((-x[..., x.shape[-1] // 2:], x[..., :x.shape[-1] // 2]), axis=-1)


def rope_terms(p):
    """RoPE's ``terms(p)``: dx = dout * cos - rotate_half(dout * sin), two terms of x's shape
    (B, H, T, hs) (the transpose of the rotation; Su et al. 2021)."""
    return {"dx": [("dout * cos", p["dout"] * p["cos"]),
                   ("-rotate_half(dout * sin) (the transpose of rotate_half is -rotate_half: the "
                    "backward rotates by -theta)", -p["rotate_half"](p["dout"] * p["sin"]))]}


def softmax_parts(dy, cache):
    """Softmax's ``parts(dy, cache)`` (cache ``(y, axis)``): y, dy, the sum along the axis as a
    named reduction, and dy * y."""
    y, axis = cache
    return {"dy": dy, "y": y, "dy * y": lambda p: p["dy"] * p["y"],
            "the sum along the axis": lambda p: reduction("sum", axis),
            "sum(dy * y)": lambda p: p["the sum along the axis"](p["dy * y"]), **EVERY}


# ----------------------------------------------------------------------------- cross-entropy
# dlogits = (probs - onehot(targets)) * dloss / N        (reduction "mean")

def _onehot(t, like):
    onehot = np.zeros_like(like)
    onehot[np.arange(len(t)), t] = 1
    return onehot


def cross_entropy_parts(dloss, cache):
    """Cross-entropy's ``parts(dloss, cache)``: probs (N, V), the one-hot targets, dloss and 1/N
    (the mean), argmax(probs) as a confusable for the targets."""
    probs, t, _, _, _, count, shape = cache
    return {"dloss": dloss, "probs": probs, "targets": t,
            "onehot(targets)": lambda p: _onehot(p["targets"], p["probs"]),
            "1/N": np.asarray(1 / count, probs.dtype), "shape": lambda p: shape,
            "argmax(probs)": probs.argmax(axis=-1)}


def cross_entropy_terms(p):
    """Cross-entropy's ``terms(p)``: dlogits = (probs - onehot(targets)) * dloss / N, two terms
    of the logits' shape (..., V)."""
    w = p["dloss"] * p["1/N"]
    return {"dlogits": [("probs (the softmax, the derivative of log-sum-exp)",
                         (p["probs"] * w).reshape(p["shape"])),
                        ("-onehot(targets) (the target's own logit)",
                         (-p["onehot(targets)"] * w).reshape(p["shape"]))]}


# ----------------------------------------------------------------------------- attention
# dP = dout v^T, dS = P * dP - P * rowsum(P * dP); dq = dS k / sqrt(hs), dk = dS^T q / sqrt(hs)

def softmax_along(axis):
    """A stable softmax along ``axis``, as a function of an array (for parts and confusables)."""
    def softmax(a):
        e = np.exp(a - a.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)
    return softmax


def attention_parts(dout, cache):
    """Attention's ``parts(dout, cache)`` (cache ``(q, k, v, P, scale)``, (B, H, T, hs)): P,
    1/sqrt(hs), P * dP, P rowsum(P * dP), and confusables (P without or with the other mask,
    the scores S)."""
    q, k, v, P, scale = cache
    S = q @ _T(k) * scale
    T = np.ones(S.shape[-2:], bool)
    return {"dout": dout, "q": q, "k": k, "v": v, "P": P, "1/sqrt(hs)": np.asarray(scale),
            "a transpose (^T)": lambda p: _T, "P without the causal mask": softmax_along(-1)(S),
            "P with the causal mask": softmax_along(-1)(np.where(np.triu(T, 1), -np.inf, S)),
            "P with the other triangle masked (keys j < i)":
                softmax_along(-1)(np.where(np.tril(T, -1), -np.inf, S)),
            "S = q k^T / sqrt(hs)": S,
            "P * dP": lambda p: p["P"] * (p["dout"] @ _T(p["v"])),
            "the sum over the row": lambda p: reduction("sum", -1),
            "P rowsum(P * dP)": lambda p: p["P"] * p["the sum over the row"](p["P * dP"]), **EVERY}


def attention_terms(p):
    """Attention's ``terms(p)``: dq and dk through the softmax's diagonal and normalisation,
    dv = P^T dout, each of its input's shape (docs/derivations.md, Attention)."""
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
# embedding: dweight[v] = the sum of dout over the positions that looked up v

def embedding_terms(p):
    """Embedding's ``terms(p)``: dweight (V, C) as dout at each row's last lookup plus the sum at
    its earlier ones (a scatter-add, np.add.at)."""
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


LOG_EXP = {"exp({})": lambda p: np.exp, "log({})": lambda p: np.log}   # softmax's, log-softmax's


def softmax_axes(cache):
    """Softmax's dx's letters in a case: C its axis, N the others."""
    y, axis = cache
    return " ".join("C" if k == axis % y.ndim else "N" for k in range(y.ndim))
