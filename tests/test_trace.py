"""The first wrong line of a learner's backward (``experiments/exercises/trace.py``, issue 45).

Learners' files as ``start`` writes them, with one mistake each on the line marked ``# here``:
each kind of message points at that line and says what its value is (a near variant of a
quantity, an array changed through an alias, a name read after it was reassigned, names of
the derivation bound to others, a gradient made wrong, the entries where a value differs);
code that raises gets the shapes on its line. Right lines written in unusual ways, with a
mistake elsewhere, are never pointed at: the mark or nothing. The re-run is quiet, keeps the
time limit, and a right answer is never traced.
"""
import re
import sys
import time

import numpy as np
import pytest

from experiments import cli
from experiments.exercises import __main__ as command, grading, guard, learner, trace
from experiments.exercises.catalogue import EXERCISES, make_cases

PROG = command.PROG


def main(argv):
    with pytest.raises(SystemExit) as ei, cli.errors(PROG):
        sys.exit(command.run(argv))
    return ei.value.code


def learner_file(folder, name, body):
    """``start name`` in ``folder``, ``body`` in place of the stub's; (path, the line marked
    ``# here`` or None)."""
    assert main(["start", name, "--dir", str(folder)]) == 0
    path = folder / f"{name}.py"
    stub = f'    raise NotImplementedError("{EXERCISES[name].function}: not written yet")'
    path.write_text(path.read_text().replace(stub, body.strip("\n")))
    marked = [i for i, line in enumerate(path.read_text().splitlines(), 1) if "# here" in line]
    return path, (marked[0] if marked else None)


def checked(tmp_path, capsys, name, body):
    """The check of ``body`` as ``name``'s backward: (its stdout lines, stderr lines, the line
    marked # here, the line the check points at or None, what it says there)."""
    path, marked = learner_file(tmp_path, name, body)
    capsys.readouterr()
    main(["check", name, "--file", str(path)])
    out, err = capsys.readouterr()
    out = out.splitlines()
    first = next((i for i, line in enumerate(out) if line.startswith("first wrong line")), None)
    pointed = int(re.match(r"first wrong line: \S+:(\d+) ", out[first]).group(1)) if first is not \
        None else None
    said = [line.strip() for line in out[first + 1:-1]] if first is not None else []
    return out, err.splitlines(), marked, pointed, said


# ----------------------------------------------------------------------------- each kind

KINDS = [   # (exercise, body, words of the line under "first wrong line")
    ("layernorm", """
    xhat, weight, rstd = cache
    C = xhat.shape[-1]
    dxhat = dout * weight
    mean1 = dxhat.mean(axis=-1, keepdims=True)
    mean2 = (dxhat * xhat).mean(axis=0, keepdims=True)  # here
    dx = rstd * (dxhat - mean1 - xhat * mean2)
    return dx, (dout * xhat).reshape(-1, C).sum(axis=0), dout.reshape(-1, C).sum(axis=0)
""", "your mean2 is the mean over axis 0 of dxhat * xhat; the derivation has mean(dxhat * xhat), "
     "the mean over the row (axis -1)"),
    ("rmsnorm", """
    xhat, weight, rstd = cache
    C = xhat.shape[-1]
    dweight = (dout * xhat).reshape(-1, C).sum(axis=0)
    dxhat = dout * weight
    dx = dxhat
    dx *= rstd  # here
    proj = (dxhat * xhat).mean(axis=-1, keepdims=True)
    dx -= rstd * xhat * proj
    return dx, dweight
""", "it also changed dxhat: dx is dxhat, the same array, since line {m1} (dx = dxhat) | line {p1} "
     "reads dxhat, no longer the derivation's dxhat: a copy (dx = dxhat.copy()) keeps them apart"),
    ("layernorm", """
    xhat, weight, rstd = cache
    C = xhat.shape[-1]
    dout = dout * weight
    dx = rstd * (dout - dout.mean(axis=-1, keepdims=True)
                 - xhat * (dout * xhat).mean(axis=-1, keepdims=True))
    dweight = (dout * xhat).reshape(-1, C).sum(axis=0)  # here
    dbias = dout.reshape(-1, C).sum(axis=0)
    return dx, dweight, dbias
""", "it reads dout, which line {m-3} reassigned (dout = dout * weight): dout is the derivation's "
     "dxhat there, where the derivation's dout belongs"),
    ("layernorm", """
    xhat, rstd, weight = cache  # here
    C = xhat.shape[-1]
    dxhat = dout * weight
    dx = rstd * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True))
    return dx, (dout * xhat).reshape(-1, C).sum(0), dout.reshape(-1, C).sum(0)
""", "your rstd is the derivation's weight, not its rstd; your weight is the derivation's rstd, "
     "not its weight"),
    ("silu", """
    x, s = cache
    dsig = np.where(x >= 0, s * (1 - s), s * (1 + s))  # here
    return dout * (s + x * dsig)
""", "with 1 - s in place of 1 + s, every gradient is right"),
    ("embedding", """
    idx, shape, dtype = cache
    d = dout.reshape(-1, shape[1])
    dW = np.zeros(shape, dtype=dtype)
    for n in range(len(idx) - 1):  # here
        dW[idx[n]] += d[n]
    return dW
""", "with range(len(idx)) in place of range(len(idx) - 1), every gradient is right"),
    ("cross_entropy", """
    probs, t, valid, eps, reduction, count, shape = cache
    d = probs.copy()
    d[:, t] -= 1  # here
    d *= dloss / count
    return d.reshape(shape)
""", "with d[np.arange(len(t)), t] in place of d[:, t], every gradient is right"),
    ("gelu", """
    x, t = cache
    tp = 1 - t  # here
    du = GELU_K * (1 + 3 * GELU_C * x ** 2)
    return dout * (0.5 * (1 + t) + 0.5 * x * tp * du)
""", "your tp is 1 - t; the derivation has tanh'(u) = 1 - t^2 there"),
    ("swiglu", """
    x2, a, s, u, g, w_gate, w_up, w_down = cache
    O, H = w_down.shape
    d = dout.reshape(-1, O)
    dh = d @ w_down
    du = dh * u  # here
    da = dh * u * (s + a * s * (1 - s))
    dx = (da @ w_gate + du @ w_up).reshape(*dout.shape[:-1], -1)
    return dx, da.T @ x2, du.T @ x2, d.T @ (g * u)
""", "your du is the derivation's dg, not its du"),
    ("attention", """
    q, k, v, P, scale = cache
    dv = np.swapaxes(P, -1, -2) @ dout
    dP = dout @ np.swapaxes(v, -1, -2)
    dS = P * (dP - np.sum(P * dP, axis=-1, keepdims=True)) * scale
    dq = dS @ k
    dk = dS @ q  # here
    return dq, dk, dv
""", "what it reads is right (dS, q); what it makes, your dk, is not"),
    ("silu", """
    x, s = cache
    ds = s * (1 - s)
    return dout * (s - x * ds)  # here
""", "with s + x * ds in place of s - x * ds, every gradient is right"),
    ("relu2", """
    r = cache
    g = np.where(r > 0, 0, 2 * r * dout)  # here
    return g
""", "with np.where(r > 0, 2 * r * dout, 0) in place of np.where(r > 0, 0, 2 * r * dout), every "
     "gradient is right"),
    ("rope", """
    cos, sin = cache
    a = dout * sin
    even, odd = a[..., 0::2], a[..., 0::2]  # here
    back = np.stack((odd, -even), axis=-1).reshape(a.shape)
    return dout * cos + back
""", "with (a[..., 0::2], a[..., 1::2]) in place of (a[..., 0::2], a[..., 0::2]), every gradient "
     "is right"),   # which 0::2: the smallest part of the line that holds it once
    ("gelu", """
    x, t = cache
    du = GELU_K * (1 + 3 * GELU_C * x * x)
    dt = 1 - np.tanh(x) ** 2  # here
    return dout * 0.5 * ((1 + t) + x * dt * du)
""", "with t in place of np.tanh(x), every gradient is right"),
    ("embedding", """
    idx, shape, dtype = cache
    g = np.zeros(shape, dtype=dtype)
    np.add.at(g, idx, dout.reshape(len(idx), -1))
    g /= np.maximum(np.bincount(idx, minlength=shape[0]), 1)[:, None]  # here
    return g
""", "your g was right before it, the derivation's dweight; this line changed it"),
    ("swiglu", """
    x2, a, s, u, g, w_gate, w_up, w_down = cache
    O, H = w_down.shape
    d = dout.reshape(-1, O)
    dh = d @ w_down
    dg, du = dh * u, dh * g
    da = dg * (1 + a * (1 - s))  # here
    dx = (da @ w_gate + du @ w_up).reshape(*dout.shape[:-1], -1)
    return dx, da.T @ x2, du.T @ x2, d.T @ (g * u)
""", "your da leaves out a factor s: the derivation's da is it times s"),
    ("embedding", """
    idx, shape, dtype = cache
    rows = dout.reshape(len(idx), -1)
    order = np.argsort(idx)
    g = np.zeros(shape, dtype=dtype)
    np.add.at(g, idx[order], rows)  # here
    return g
""", "with rows[order] in place of rows, every gradient is right"),
    ("layernorm", """
    xhat, weight, rstd = cache
    C = xhat.shape[-1]
    dxhat = dout * weight
    centred = dxhat - dxhat.mean(axis=-1, keepdims=True)
    dx = rstd * centred - xhat * (dxhat * xhat).mean(axis=-1, keepdims=True)  # here
    return dx, (dout * xhat).reshape(-1, C).sum(axis=0), dout.reshape(-1, C).sum(axis=0)
""", "with rstd * (xhat * (dxhat * xhat).mean(axis=-1, keepdims=True)) in place of xhat * "
     "(dxhat * xhat).mean(axis=-1, keepdims=True), every gradient is right"),
    ("rope", """
    cos, sin = cache
    a = dout * sin
    pairs = np.empty(a.shape[:-1] + (a.shape[-1] // 2, 2))
    pairs[..., 0] = a[..., 1::2]
    pairs[..., 1] = a[..., 0::2]  # here
    return dout * cos + pairs.reshape(a.shape)
""", "with -a[..., 0::2] in place of a[..., 0::2], every gradient is right"),
    ("embedding", """
    idx, shape, dtype = cache
    dw = np.zeros(shape, dtype)
    np.add.at(dw, idx, dout.reshape(-1, shape[1]))
    pad = dw[0]
    pad[:] = 0  # here
    return dw
""", "your dw was right before it, the derivation's dweight; this line changed it"),   # not its view
    ("swiglu", """
    x2, a, s, u, g, w_gate, w_up, w_down = cache
    d2 = dout.reshape(-1, w_down.shape[0])
    dh = d2 @ w_down
    dg, du = dh * u, dh * g
    da = dg * (s + s * (1 - s))  # here
    dx = (da @ w_gate + du @ w_up).reshape(*dout.shape[:-1], -1)
    return dx, da.T @ x2, du.T @ x2, d2.T @ (g * u)
""", "with g * (1 - s) in place of s * (1 - s), every gradient is right"),   # which s of three
    ("linear", """
    x, weight, has_bias = cache
    O, C = weight.shape
    D = dout.reshape(-1, O)
    db = D.sum(0, keepdims=True)  # here
    return (D @ weight).reshape(x.shape), D.T @ x.reshape(-1, C), db
""", "in x (1, 3), a batch of one, weight (2, 3): what it reads is right (D = dout); what it makes, "
     "your dbias, is not: it is the right values in shape (1, 2), where the derivation's is (2,)"),
]


@pytest.mark.parametrize("name,body,words", KINDS, ids=[
    "variant", "alias", "reused", "names", "branch", "loop", "index", "confusable", "swapped",
    "made", "sign", "where", "slice", "argument", "undone", "factor", "permuted", "times",
    "partial sign", "undone through a view", "which of three", "keepdims"])
def test_each_kind_points_at_the_marked_line_and_says_what_it_is(tmp_path, capsys, name, body,
                                                                  words):
    out, _, marked, pointed, said = checked(tmp_path, capsys, name, body)
    assert pointed == marked, out
    lines = re.findall(r"line (\d+)", " ".join(said))
    expect = words.replace("{m1}", str(marked - 1)).replace("{p1}", str(marked + 1)).replace(
        "{m-3}", str(marked - 3)).split(" | ")
    assert said == expect, (said, lines)
    assert out[-1].endswith(EXERCISES[name].link)   # after the gradients, before the summary


def test_a_named_mistake_keeps_its_name_and_gets_its_line(tmp_path, capsys):
    out, _, marked, pointed, said = checked(tmp_path, capsys, "rmsnorm", """
    xhat, weight, rstd = cache
    C = xhat.shape[-1]
    g = dout * weight
    s = np.sum(g * xhat, axis=-1, keepdims=True)  # here
    dx = rstd * (g - xhat * s)
    return dx, (dout * xhat).reshape(-1, C).sum(axis=0)
""")
    assert "         in your dx, term 2, -xhat * mean(dxhat * xhat) (the projection, the path " \
           "through mean(x^2)), is multiplied by C: a sum over the C features where a mean " \
           "belongs" in out
    assert pointed == marked and said == [
        "your s is the sum over the row (axis -1) of dxhat * xhat; the derivation has "
        "mean(dxhat * xhat), the mean over the row (axis -1)"]
    assert out.index(next(line for line in out if line.startswith("first wrong"))) == len(out) - 3


def test_code_that_raises_gets_the_shapes_on_its_line(tmp_path, capsys):
    out, err, marked, _, _ = checked(tmp_path, capsys, "layernorm", """
    xhat, weight, rstd = cache
    C = xhat.shape[-1]
    dxhat = dout * weight
    m1 = dxhat.mean(axis=-1)
    m2 = (dxhat * xhat).mean(axis=-1)
    dx = rstd * (dxhat - m1 - xhat * m2)  # here
    return dx, (dout * xhat).reshape(-1, C).sum(axis=0), dout.reshape(-1, C).sum(axis=0)
""")
    assert out == [] and err[0] == "Traceback (most recent call last):"
    at = err.index(next(line for line in err if line.startswith("where it raised")))
    assert err[at].endswith(f"layernorm.py:{marked}   dx = rstd * (dxhat - m1 - xhat * m2)  # here")
    assert err[at + 1:at + 4] == [
        "         rstd (2, 3, 1), dxhat (2, 3, 6), m1 (2, 3), xhat (2, 3, 6), m2 (2, 3)",
        "         your m1 is mean(dxhat) without its kept axis, (2, 3); the derivation's keeps "
        "it, (2, 3, 1), which broadcasts against (2, 3, 6)",
        "         your m2 is mean(dxhat * xhat) without its kept axis, (2, 3); the derivation's "
        "keeps it, (2, 3, 1), which broadcasts against (2, 3, 6)"]
    assert err[-1].startswith(f"{PROG}: your layernorm_backward raised ValueError at ")


def test_a_transposed_array_where_it_raised_is_said_so(tmp_path, capsys):
    _, err, _, _, _ = checked(tmp_path, capsys, "softmax", """
    y, axis = cache
    y = np.moveaxis(y, axis, -1)
    s = (dy * y).sum(axis=-1, keepdims=True)  # here
    return np.moveaxis(y * (dy - s), -1, axis)
""")
    assert "         dy (4, 3), y (3, 4)" in err
    assert "         your y is y transposed (its last two axes swapped), (3, 4); the derivation's " \
           "is (4, 3)" in err


def test_words_that_hold_in_one_case_name_it(tmp_path, capsys):
    out, _, marked, pointed, said = checked(tmp_path, capsys, "layernorm", """
    xhat, weight, rstd = cache
    C = xhat.shape[-1]
    dxhat = dout * weight
    m1 = dxhat.mean(axis=-1, keepdims=True)
    m2 = (dxhat * xhat).mean(axis=-1, keepdims=True)
    dx = rstd * (dxhat - m1 - xhat * m2) * xhat.shape[0]  # here
    return dx, (dout * xhat).reshape(-1, C).sum(0), dout.reshape(-1, C).sum(0)
""")   # times 2 in x (2, 3, 6), times 3 in x (3, 6): "times N (3)" holds in the second alone
    assert pointed == marked, out
    assert said == ["in x (3, 6), near-constant rows (var ~ 1e-6, eps = 1e-5): your dx is dx times "
                    "N (3); the derivation has dx"]


def test_an_alias_names_every_line_that_reads_the_changed_array(tmp_path, capsys):
    out, _, marked, pointed, said = checked(tmp_path, capsys, "layernorm", """
    xhat, weight, rstd = cache
    dxhat = dout * weight
    tmp = dxhat
    tmp -= dxhat.mean(-1, keepdims=True)  # here
    dx = rstd * (tmp - xhat * (dxhat * xhat).mean(-1, keepdims=True))
    dweight = np.sum(dxhat / weight * xhat, axis=tuple(range(dout.ndim - 1)))
    return dx, dweight, dout.reshape(-1, xhat.shape[-1]).sum(0)
""")   # dx reads dxhat and is right; dweight reads it and is not
    assert pointed == marked, out
    assert said[1] == (f"lines {marked + 1} and {marked + 2} read dxhat, no longer the "
                       f"derivation's dxhat: a copy (tmp = dxhat.copy()) keeps them apart")


def test_one_edit_that_makes_a_raising_line_right_is_said(tmp_path, capsys):
    _, err, marked, _, _ = checked(tmp_path, capsys, "cross_entropy", """
    probs, t, valid, eps, reduction, count, shape = cache
    N = probs.shape[0]
    onehot = np.zeros_like(probs)
    onehot[t, np.arange(N)] = 1  # here
    return ((probs - onehot) * (dloss / count)).reshape(shape)
""")
    assert any(line.startswith("where it raised") and line.endswith(f":{marked}   onehot[t, "
                                                                     "np.arange(N)] = 1  # here")
               for line in err)
    assert "         with onehot[np.arange(N), t] in place of onehot[t, np.arange(N)], this case " \
           "runs and every gradient is right" in err


# ----------------------------------------------------------------------------- never a right line

BY_SUMS = """
    xhat, weight, rstd = cache
    C = xhat.shape[-1]
    g = dout * weight
    s1 = g.sum(-1, keepdims=True)
    s2 = (g * xhat).sum(-1, keepdims=True)
    dx = (C * g - s1 - xhat * s2) * rstd / C
    lead = tuple(range(dout.ndim - 1))
    return dx, (dout * xhat).sum(axis=lead), dout.sum(axis=lead)
"""   # LayerNorm by sums, right; below also with dbias's sign flipped

TRAPS = [   # unusual but right lines, and one mistake on the line marked "# here" (or none)
    ("layernorm", BY_SUMS.replace("dout.sum(axis=lead)\n", "-dout.sum(axis=lead)  # here\n")),
    ("layernorm", """
    xhat, weight, rstd = cache
    C = xhat.shape[-1]
    dxhat = dout * weight
    m1 = dxhat.mean(-1, keepdims=True)
    m2 = dxhat.mean(-1, keepdims=True)  # here
    dx = rstd * (dxhat - m1 - xhat * m2)
    return dx, (dout * xhat).reshape(-1, C).sum(0), dout.reshape(-1, C).sum(0)
"""),
    ("layernorm", """
    xhat, weight, rstd = cache
    C = xhat.shape[-1]
    dxhat = dout * weight
    m2 = dxhat.mean(-1, keepdims=True)  # here
    dx = rstd * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * m2)
    return dx, (dout * xhat).reshape(-1, C).sum(0), dout.reshape(-1, C).sum(0)
"""),
    ("layernorm", """
    xhat, weight, rstd = cache
    C = xhat.shape[-1]
    dxhat = dout * weight
    dx = dxhat  # here
    dx = dx - xhat * (dxhat * xhat).mean(-1, keepdims=True)
    dx = dx * rstd
    return dx, (dout * xhat).reshape(-1, C).sum(0), dout.reshape(-1, C).sum(0)
"""),
    ("layernorm", """
    xhat, weight, rstd = cache
    C = xhat.shape[-1]
    g = dout * weight
    g - g.mean(-1, keepdims=True)  # here
    dx = rstd * (g - xhat * (g * xhat).mean(-1, keepdims=True))
    return dx, (dout * xhat).reshape(-1, C).sum(0), dout.reshape(-1, C).sum(0)
"""),
    ("layernorm", """
    xhat, weight, rstd = cache
    C = xhat.shape[-1]
    dxhat = dout * weight
    dvar = xhat * np.mean(dxhat * xhat, axis=-1, keepdims=True)
    dx = rstd * (dxhat - dvar)  # here
    return dx, (dout * xhat).reshape(-1, C).sum(0), dout.reshape(-1, C).sum(0)
"""),
    ("relu2", """
    r = cache
    local = r  # here
    return dout * local
"""),
    ("silu", """
    x, s = cache
    ds = s * (1 - s)
    local = s + x * ds
    dx = dout * local
    return local  # here
"""),
    ("softmax", """
    y, axis = cache
    dx = y * dy
    return dx  # here
"""),
    ("cross_entropy", """
    probs, t, valid, eps, reduction, count, shape = cache
    N = probs.shape[0]
    grad = probs.copy()
    grad[np.arange(N), t] - 1  # here
    grad *= dloss / count
    return grad.reshape(shape)
"""),
    ("cross_entropy", """
    probs, t, valid, eps, reduction, count, shape = cache
    N = probs.shape[0]
    grad = probs.copy()
    for i in range(1, N):  # here
        grad[i, t[i]] -= 1.0
    grad = grad * dloss / count
    return grad.reshape(shape)
"""),
    ("gelu", """
    x, t = cache
    sech2 = 1.0 - t * t
    dudx = GELU_K * 1.0  # here
    left = 0.5 * (1.0 + t)
    right = 0.5 * x * sech2 * dudx
    return dout * (left + right)
"""),
    ("rope", """
    cos, sin = cache
    a = dout  # here
    b = rotate_half(dout * sin)
    return a - b
"""),
    ("swiglu", """
    x2, a, s, u, g, w_gate, w_up, w_down = cache
    O, H = w_down.shape
    d = dout.reshape(-1, O)
    dh = d @ w_down
    du = dh * g
    da = dh * u * (s + a * s * (1 - s))
    dx = da @ w_gate + du @ w_up
    return dx.reshape(a.shape[:-1] + (-1,)), da.T @ x2, du.T @ x2, d.T @ (g * u)  # here
"""),
    ("attention", """
    q, k, v, P, scale = cache
    dv = np.swapaxes(P, -1, -2) @ dout
    dP = dout @ np.swapaxes(v, -1, -2)
    rowsum = np.sum(P * scale, axis=-1, keepdims=True)  # here
    dS = P * (dP - rowsum) * scale
    return dS @ k, np.swapaxes(dS, -1, -2) @ q, dv
"""),
    ("linear", """
    x, weight, has_bias = cache
    O, C = weight.shape
    X, D = x.reshape(-1, C), dout.reshape(-1, O)
    dx = (D @ weight).reshape(x.shape)
    dW = D.T @ X
    db = D.sum(axis=0)
    return dx, dW, D  # here
"""),
    ("layernorm", """
    xhat, weight, rstd = cache
    C = xhat.shape[-1]
    X, D, R = xhat.reshape(-1, C), dout.reshape(-1, C), rstd.reshape(-1)
    dX = np.empty_like(X)
    for i in range(X.shape[0]):
        g = D[i] * weight
        dX[i] = R[i] * (g - g.mean() - X[i] * (g * X[i]).mean())
    return dX.reshape(xhat.shape), (D * X).sum(axis=0), D.mean(axis=0)  # here
"""),
    ("softmax", """
    y, axis = cache
    ym, gm = np.moveaxis(y, axis, -1), np.moveaxis(dy, axis, -1)
    out = np.empty_like(ym)
    for idx in np.ndindex(ym.shape[:-1]):
        row = ym[idx]
        out[idx] = (np.diag(row) + np.outer(row, row)) @ gm[idx]  # here
    return np.moveaxis(out, -1, axis)
"""),
    ("layernorm", BY_SUMS),
    ("embedding", """
    idx, shape, dtype = cache
    d = dout.reshape(-1, shape[1])
    dW = np.zeros(shape, dtype)
    for n, row in enumerate(idx):
        dW[row] += d[n]
    return dW
"""),
    ("gelu", """
    x, t = cache
    inner = 1 + 3 * GELU_C * x * x
    slope = GELU_K * inner
    return 0.5 * (1 + t) * dout + 0.5 * x * (1 - t * t) * slope  # here
"""),   # a factor left out on the last line: not made up for on an earlier one
    ("silu", """
    x, s = cache
    part = x * (1 - s)
    ds = s * (1 + part)
    return dout * ds if False else -dout * ds  # here
"""),   # a sign on the last line: not made up for on an earlier one
    ("layernorm", """
    xhat, weight, rstd = cache
    N = xhat.shape[-1]
    dxhat = dout * weight
    proj = np.sum(dxhat * xhat, axis=-1, keepdims=True) / (N - 1)  # here
    dx = rstd * (dxhat - np.mean(dxhat, axis=-1, keepdims=True) - xhat * proj)
    return dx, (dout * xhat).reshape(-1, N).sum(0), dout.reshape(-1, N).sum(0)
"""),   # N + 1 makes the one-feature case right, and no other: no edit is said of it
    ("layernorm", """
    xhat, weight, rstd = cache
    C = xhat.shape[-1]
    dxhat = dout * weight
    dx = rstd * (dxhat - dxhat.mean(-1, keepdims=True) - xhat * (dxhat * xhat).mean(-1, keepdims=True))
    first = dx[..., 0]
    first *= 2  # here
    return dx, (dout * xhat).reshape(-1, C).sum(0), dout.reshape(-1, C).sum(0)
"""),   # dout in place of dx on the line before would move the damage into dout: not said
    ("cross_entropy", """
    probs, t, valid, eps, reduction, count, shape = cache
    rows = np.arange(probs.shape[0])
    d = probs ** 1.5  # here
    d[rows, t] -= 1.0
    d *= dloss / count
    return d.reshape(shape)
"""),   # a 0-d upstream gradient and an index array that is a permutation, on one line
    ("attention", """
    q, k, v, P, scale = cache
    dP = np.einsum("bhid,bhjd->bhij", dout, v)
    rows = np.einsum("bhij,bhij->bhi", P, dP)[..., None]
    dS = P * (dP - rows) * scale
    dq = np.einsum("bhij,bhjd->bhid", dS, k)
    dk = np.einsum("bhij,bhid->bhjd", dS, q)
    return dq, dk, np.einsum("bhij,bhid->bhjd", P, dout)
"""),
]


@pytest.mark.parametrize("name,body", TRAPS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(TRAPS)])
def test_a_right_line_is_never_pointed_at(tmp_path, capsys, name, body):
    out, _, marked, pointed, _ = checked(tmp_path, capsys, name, body)
    assert pointed in (marked, None), out
    if marked is None:   # a right answer: nothing traced
        assert out[-1].startswith(("Right", "All", "Both")) and pointed is None


# ----------------------------------------------------------------------------- the re-run

WRONG = """
    xhat, weight, rstd = cache
    C = xhat.shape[-1]
    print("called", file=sys.stderr)
    breakpoint()
    dxhat = dout * weight
    mean2 = (dxhat * xhat).mean(axis=0, keepdims=True)
    dx = rstd * (dxhat - dxhat.mean(axis=-1, keepdims=True) - xhat * mean2)
    return dx, (dout * xhat).reshape(-1, C).sum(axis=0), dout.reshape(-1, C).sum(axis=0)
"""


def test_the_rerun_is_quiet_a_print_and_a_breakpoint_act_in_the_checks_cases_only(
        tmp_path, capsys, monkeypatch):
    stops = []
    monkeypatch.setattr(sys, "breakpointhook", lambda *a, **k: stops.append(1))
    path, _ = learner_file(tmp_path, "layernorm", WRONG)
    path.write_text("import sys\n" + path.read_text())
    capsys.readouterr()
    assert main(["check", "layernorm", "--file", str(path)]) == 1
    out, err = capsys.readouterr()
    n = 2 * len(make_cases(EXERCISES["layernorm"], 0))   # float64, then float32
    assert any(line.startswith("first wrong line") for line in out.splitlines())
    assert err.count("called") == n and len(stops) == n
    assert sys.breakpointhook is not trace._nothing


def test_the_rerun_keeps_the_time_limit(monkeypatch):
    monkeypatch.setattr(guard, "TIME_LIMIT", 0.2)
    calls = []

    def backward(dout, cache):   # right in the check's run, hangs in the re-run
        calls.append(1)
        while len(calls) > 1:
            time.sleep(0.01)
        return EXERCISES["relu2"].backward(dout, cache)
    table = trace.statements(backward)
    case = make_cases(EXERCISES["relu2"], 0)[0]
    assert trace.record(backward, table, case.dout, case.cache).error is None
    start = time.perf_counter()
    assert trace.record(backward, table, case.dout, case.cache) is None   # ended by the limit
    assert time.perf_counter() - start < 2 and sys.gettrace() is None


def test_the_search_gives_up_past_its_budget_and_says_nothing(tmp_path, capsys, monkeypatch):
    name, body, _ = KINDS[0]
    assert checked(tmp_path, capsys, name, body)[3] is not None
    monkeypatch.setattr(trace, "BUDGET", 0.0)
    out, _, _, pointed, _ = checked(tmp_path / "again", capsys, name, body)
    assert pointed is None and out[-1].startswith("1 of 3 gradients wrong")


def test_a_debugger_that_replaces_the_recorder_has_no_time_limit(monkeypatch):
    monkeypatch.setattr(guard, "TIME_LIMIT", 0.05)

    def backward(dout, cache):   # as pdb does at a breakpoint(): its own tracer
        sys.settrace(lambda *_: None)
        time.sleep(0.2)
        return EXERCISES["relu2"].backward(dout, cache)
    case = make_cases(EXERCISES["relu2"], 0)[0]
    run = trace.record(backward, trace.statements(backward), case.dout, case.cache)
    assert run is not None and run.error is None
    sys.settrace(None)


def test_a_right_answer_is_not_run_again(tmp_path):
    calls = []

    def layernorm_backward(dout, cache):
        calls.append(1)
        return EXERCISES["layernorm"].backward(dout, cache)
    assert grading.verdict(EXERCISES["layernorm"], layernorm_backward, "mine.py").status == "right"
    assert len(calls) == 2 * len(make_cases(EXERCISES["layernorm"], 0))


def test_a_lambda_or_a_function_without_source_is_not_traced():
    assert trace.statements(lambda dout, cache: dout) is None
    assert trace.statements(np.add) is None
    v = grading.verdict(EXERCISES["relu2"], lambda dout, r: dout * r, "mine.py")
    assert v.status == "wrong" and not any(line.startswith("first wrong") for line in v.lines)


def test_from_a_notebook_the_line_names_the_cell(tmp_path, capsys, monkeypatch):
    path, marked = learner_file(tmp_path, "silu", KINDS[4][1])
    fn = learner.load(EXERCISES["silu"], path)
    monkeypatch.setattr(learner, "_cell", lambda f: "Cell In[3]")
    v = learner.check("silu", fn)
    assert f"first wrong line: Cell In[3]:{marked}   " + \
        "dsig = np.where(x >= 0, s * (1 - s), s * (1 + s))  # here" in v.lines
