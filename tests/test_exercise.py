"""Tests of ``python -m experiments.exercise`` (list, start, check) and of training with a
learner's backward (``four_variants --backward DIR``).

The reference is tested first (the named terms sum to the layer's backward, the layer's backward
agrees with central differences, the terms are independent so a fit is unique), then the
diagnosis: every single-term mistake of ``experiments/_broken.py``, and every term of every
gradient dropped, sign-flipped and doubled, is named as exactly that mistake.
"""
from __future__ import annotations

import inspect
import json
import re
from pathlib import Path

import numpy as np
import pytest

from experiments import _broken as B
from experiments import cli, exercise, four_variants
from experiments._exercises import EXERCISES, OURS, Case, as_tuple, make_cases

ROOT = Path(__file__).resolve().parents[1]
ISSUE_LIST = {"layernorm", "rmsnorm", "gelu", "silu", "swiglu", "rope", "softmax",
              "cross_entropy", "attention", "linear", "embedding"}
GPT_LAYERS = ("layernorm", "rmsnorm", "gelu", "swiglu", "attention", "linear", "embedding",
              "cross_entropy")   # the backward passes a four_variants model calls


def main(argv):
    """``python -m experiments.exercise`` in-process: its exit status."""
    with pytest.raises(SystemExit) as ei:
        cli.main(exercise.PROG, exercise.run, argv)
    return ei.value.code


def cases_of(name):
    return make_cases(EXERCISES[name], np.random.default_rng(0))


def terms_of(ex, case):
    """The named terms from ``(dout, cache)`` alone, broadcast to each gradient's shape."""
    terms = ex.terms(Case("", (), {}, None, case.cache, case.dout))
    return {g: [(f, m, np.broadcast_to(a, r.shape)) for f, m, a in terms[g]]
            for g, r in zip(ex.grads, case.right)}


def scale(right, terms):
    return max([np.abs(right).max()] + [np.abs(a).max() for *_, a in terms]) or 1.0


def planted(name, grad, change):
    """A learner's backward: the layer's own with ``change(gradient, terms)`` for ``grad``."""
    ex = EXERCISES[name]

    def backward(dout, cache):
        out = list(as_tuple(OURS[name](dout, cache)))
        j = ex.grads.index(grad)
        terms = ex.terms(Case("", (), {}, None, cache, dout))[grad]
        out[j] = change(out[j], [np.broadcast_to(a, out[j].shape) for *_, a in terms])
        return out[0] if len(out) == 1 else tuple(out)
    return backward


def verdict_lines(name, fn):
    """{gradient: its lines} of ``check``, and the verdict."""
    v = exercise.check(EXERCISES[name], fn, "learner.py")
    per, current = {}, None
    for line in v.lines[2:]:
        head = line.split(" ", 1)[0]
        if head in EXERCISES[name].grads:
            current = head
            per[current] = [line[len(head):].strip()]
        elif line.startswith(" ") and current:
            per[current].append(line.strip())
    return per, v


# ----------------------------------------------------------------------------- the reference

def test_the_issue_list_is_there_each_with_its_derivation_section():
    assert ISSUE_LIST <= set(EXERCISES)
    text = (ROOT / "docs" / "derivations.md").read_text(encoding="utf-8")
    for ex in EXERCISES.values():
        assert f"](#{ex.section})" in text, ex.name      # in the page's contents
        assert (ROOT / "layers" / f"{ex.name}.py").is_file()


@pytest.mark.parametrize("name", EXERCISES)
def test_the_named_terms_sum_to_the_layers_backward(name):
    ex = EXERCISES[name]
    for case in cases_of(name):
        terms = terms_of(ex, case)      # from dout and the cache alone, as a backward
        for g, right in zip(ex.grads, case.right):
            total = sum(a for *_, a in terms[g])
            assert np.abs(total - right).max() <= 1e-13 * scale(right, terms[g]), (case.label, g)


@pytest.mark.parametrize("name", EXERCISES)
def test_the_layers_backward_agrees_with_central_differences(name):
    ex = EXERCISES[name]
    for case in cases_of(name):
        terms = terms_of(ex, case)
        for w, g, right in zip(ex.wrt, ex.grads, case.right):
            num = exercise.numerical(ex, case, ex.inputs.index(w))
            assert np.abs(num - right).max() <= 1e-6 * scale(right, terms[g]), (case.label, g)


@pytest.mark.parametrize("name", EXERCISES)
def test_the_terms_of_each_gradient_are_independent(name):
    """Full column rank over the cases: the least-squares factors are unique."""
    ex = EXERCISES[name]
    cases = cases_of(name)
    for g in ex.grads:
        cols = np.stack([np.concatenate([terms_of(ex, c)[g][i][2].ravel() for c in cases])
                         for i in range(len(terms_of(ex, cases[0])[g]))], axis=1)
        assert np.linalg.matrix_rank(cols) == cols.shape[1], g


def test_the_cases_have_a_batch_of_one_and_a_row_of_one_feature():
    for name in ("layernorm", "rmsnorm", "swiglu", "linear", "embedding"):
        labels = " ".join(c.label for c in cases_of(name))
        assert "a batch of one" in labels and "one feature" in labels, name
    for case in cases_of("layernorm"):
        assert case.dout.dtype == np.float64 and not np.all(case.dout == case.dout.flat[0])


@pytest.mark.parametrize("name", EXERCISES)
def test_our_own_backward_passes_its_check(name):
    per, v = verdict_lines(name, OURS[name])
    assert v.status == "right" and not v.blocker, v.lines
    assert set(per) == set(EXERCISES[name].grads)
    assert all(lines[0].startswith("right: error") and "central differences" in lines[0]
               for lines in per.values())


# ----------------------------------------------------------------------------- the diagnosis

# Each mistake of experiments/_broken.py, and what the check must say about each gradient it
# corrupts (written from _broken's docstrings); every other gradient must be right.
BROKEN = [
    ("layernorm", B.layernorm_backward_no_mean, {"dx": "without term 2, -mean(dxhat)"}),
    ("layernorm", B.layernorm_backward_no_xhat,
     {"dx": "without term 3, -xhat * mean(dxhat * xhat)"}),
    ("layernorm", B.layernorm_backward_no_eps, {"dx": "eps is left out"}),
    ("rmsnorm", B.rmsnorm_backward_no_projection,
     {"dx": "without term 2, -xhat * mean(dxhat * xhat) (the projection term"}),
    ("gelu", B.gelu_backward_no_tanh_prime, {"dx": "without term 2, 0.5 x (1 - t^2)"}),
    ("silu", B.silu_backward_no_sigmoid_prime, {"dx": "without term 2, x s (1 - s)"}),
    ("relu2", B.relu2_backward_no_two, {"dx": "the 2 of d(r^2)/dr = 2 r is missing"}),
    ("swiglu", B.swiglu_backward_no_silu_prime, {"dx": "silu'(a) is missing",
                                                 "dw_gate": "silu'(a) is missing"}),
    ("rope", B.rope_backward_wrong_way,
     {"dx": "term 2, -rotate_half(dout * sin) (the transpose"}),
    ("softmax", B.softmax_backward_no_sum, {"dx": "without term 2, -y * sum(dy * y)"}),
    ("attention", B.attention_backward_dq_unscaled,
     {"dq": "your dq is the right one multiplied by sqrt(hs): the 1/sqrt(hs) of the scores "
            "is left out"}),
    ("cross_entropy", B.cross_entropy_backward_no_mean,
     {"dlogits": "your dlogits is the right one multiplied by N: the 1/N of the mean is "
                 "left out"}),
    ("linear", B.linear_backward_dweight_transposed,
     {"dweight": "your dweight is the right one transposed"}),
    ("embedding", B.embedding_backward_overwrite,
     {"dweight": "without term 2, the sum of dout at a row's earlier lookups"}),
]


def test_every_mistake_of_broken_is_in_the_table():
    assert {fn.__name__ for _, fn, _ in BROKEN} == {
        n for n in B.__all__ if n.islower() and "_backward_" in n}


@pytest.mark.parametrize("name,fn,said", BROKEN, ids=[fn.__name__ for _, fn, _ in BROKEN])
def test_a_mistake_of_broken_is_diagnosed_as_that_mistake(name, fn, said):
    with np.errstate(all="ignore"):      # no_eps divides by a zero variance at C = 1
        per, v = verdict_lines(name, fn)
    assert v.status == "wrong"
    assert bool(v.blocker) == (name == "linear")   # a (C, O) dweight where (O, C) belongs
    for g, lines in per.items():
        if g in said:
            assert lines[0].startswith("wrong: largest error") or "transposed" in lines[0]
            assert said[g] in " ".join(lines), lines
            assert not any("no combination" in ln for ln in lines)
        else:
            assert lines[0].startswith("right"), (g, lines)


def _every_term():
    for name, ex in EXERCISES.items():
        case = cases_of(name)[0]
        for g, terms in terms_of(ex, case).items():
            for i, (formula, *_) in enumerate(terms, 1):
                yield name, g, i, formula, len(terms)


TERMS = list(_every_term())


@pytest.mark.parametrize("name,grad,i,formula,n", TERMS,
                         ids=[f"{t[0]}-{t[1]}-term{t[2]}" for t in TERMS])
def test_each_term_dropped_flipped_or_doubled_is_named(name, grad, i, formula, n):
    expected = {-1: f"your {grad} is the right one without term {i}, {formula}" if n > 1 else
                f"your {grad} is 0 everywhere",
                -2: f"term {i}, {formula}" if n > 1 else
                f"your {grad} is the right one with the wrong sign",
                +1: f"term {i}, {formula}" if n > 1 else f"your {grad} is twice the right one"}
    for c, text in expected.items():
        per, v = verdict_lines(name, planted(name, grad, lambda r, t: r + c * t[i - 1]))
        explanation = per[grad][1]
        assert text in explanation, (c, per[grad])
        if n > 1 and c == -2:
            assert explanation.endswith("has the wrong sign")
        if n > 1 and c == 1:
            assert explanation.endswith("is counted twice")
        assert all(per[g][0].startswith("right") for g in per if g != grad)


@pytest.mark.parametrize("name", [n for n, ex in EXERCISES.items()
                                  if any(len(t) > 1 for t in terms_of(ex, cases_of(n)[0]).values())
                                  ])
def test_a_gradient_twice_the_right_one_is_said_so(name):
    grad = EXERCISES[name].grads[0]
    per, _ = verdict_lines(name, planted(name, grad, lambda r, t: 2 * r))
    assert per[grad][1] == f"your {grad} is twice the right one"


def test_two_terms_wrong_at_once_are_both_named():
    per, _ = verdict_lines("layernorm", planted("layernorm", "dx",
                                                lambda r, t: r - t[1] - 2 * t[2]))
    assert per["dx"][1] == ("in your dx, term 2, -mean(dxhat) (the path through the mean), is "
                            "missing; term 3, -xhat * mean(dxhat * xhat) (the path through the "
                            "variance), has the wrong sign")


def test_a_transposed_weight_gradient_of_any_shape_is_named():
    per, v = verdict_lines("swiglu", planted("swiglu", "dw_gate", lambda r, t: r.T.copy()))
    assert per["dw_gate"] == ["wrong: your dw_gate is the right one transposed: dw_gate has the "
                              "shape of its input, (6, 4) in x (2, 2, 4), H = 6"]
    assert v.blocker.startswith("your dw_gate is the right one transposed")   # the engine
                                                                        # would refuse it


def test_a_sum_over_some_rows_only_is_named():
    def first_axis_only(dout, cache):
        dx, _, dbias = OURS["layernorm"](dout, cache)
        return dx, (dout * cache[0]).sum(axis=0), dbias
    per, _ = verdict_lines("layernorm", first_axis_only)
    assert per["dweight"][0] == ("wrong: dweight has shape (3, 6) in x (2, 3, 6); it must be "
                                 "(6,). Summed over its leading axes yours is right: sum over "
                                 "every row")


def _norm(dout, cache, mean=np.mean, weighted=True, rows=np.sum, order=(0, 1, 2),
          mean_term=True):
    """A learner's LayerNorm backward (RMSNorm's: ``mean_term=False, order=(0, 1)``), with the
    mistakes a learner makes: ``mean`` over a row np.sum, the weight left out of dxhat,
    ``rows`` np.mean for dweight and dbias, the gradients returned in another ``order``."""
    xhat, weight, rstd = cache
    dxhat = dout * weight if weighted else dout
    m = lambda a: mean(a, axis=-1, keepdims=True)  # noqa: E731
    dx = rstd * (dxhat - (m(dxhat) if mean_term else 0.0) - xhat * m(dxhat * xhat))
    grads = (dx, rows((dout * xhat).reshape(-1, xhat.shape[-1]), axis=0),
             rows(dout.reshape(-1, xhat.shape[-1]), axis=0))
    return tuple(grads[i] for i in order)


def _embedding_buffered(dout, cache):
    idx, shape, dtype = cache
    dweight = np.zeros(shape, dtype)
    dweight[idx] += dout.reshape(-1, shape[1])      # buffered: one of each repeated row
    return dweight


def _cross_entropy_no_dloss(dloss, cache):
    probs, t, valid, eps, reduction, count, shape = cache
    d = probs.copy()
    d[np.arange(len(t)), t] -= 1.0
    return (d / count).reshape(shape)


TERMS_LN = ("term 2, -mean(dxhat) (the path through the mean), is multiplied by C; term 3, "
            "-xhat * mean(dxhat * xhat) (the path through the variance), is multiplied by C: a "
            "sum over the C features where a mean belongs")
MEAN_ROWS = "is the right one multiplied by 1/N: a mean over the N rows where a sum belongs"
WEIGHT = "your dx takes dxhat = dout: the weight of dxhat = dout * weight is left out"
COMMON = [
    ("layernorm", lambda d, c: _norm(d, c, weighted=False), {"dx": WEIGHT}),
    ("rmsnorm", lambda d, c: _norm(d, c, weighted=False, order=(0, 1), mean_term=False),
     {"dx": WEIGHT}),
    ("rmsnorm", lambda d, c: _norm(d, c, order=(0, 1)),
     {"dx": "your dx has LayerNorm's term -mean(dxhat): RMSNorm subtracts no mean"}),
    ("layernorm", lambda d, c: _norm(d, c, mean=np.sum), {"dx": "in your dx, " + TERMS_LN}),
    ("layernorm", lambda d, c: _norm(d, c, rows=np.mean),
     {"dweight": "your dweight " + MEAN_ROWS, "dbias": "your dbias " + MEAN_ROWS}),
    ("rmsnorm", lambda d, c: _norm(d, c, rows=np.mean, order=(0, 1), mean_term=False),
     {"dweight": "your dweight " + MEAN_ROWS}),
    ("linear", lambda d, c: tuple(g / (d.size // d.shape[-1]) if i else g
                                  for i, g in enumerate(OURS["linear"](d, c))),
     {"dweight": "your dweight " + MEAN_ROWS, "dbias": "your dbias " + MEAN_ROWS}),
    ("layernorm", lambda d, c: _norm(d, c, order=(0, 2, 1)),
     {"dweight": "wrong: your dweight is the right dbias: return (dx, dweight, dbias) in this "
                 "order",
      "dbias": "wrong: your dbias is the right dweight: return (dx, dweight, dbias) in this "
               "order"}),
    ("softmax", lambda dy, c: c[0] * (1 - c[0]) * dy,
     {"dx": "your dx takes the Jacobian's diagonal alone, y (1 - y)"}),
    ("embedding", _embedding_buffered, {"dweight": "a[idx] = v and a[idx] += v both keep one of "
                                                   "them, np.add.at(a, idx, v) adds every one"}),
    ("cross_entropy", _cross_entropy_no_dloss,
     {"dlogits": "your dlogits is the right one multiplied by 1/dloss: the upstream gradient "
                 "dloss is left out"}),
    ("attention", lambda d, c: (lambda dq, dk, dv: (dq, dk * c[4], dv))(*OURS["attention"](d, c)),
     {"dk": "your dk is the right one multiplied by 1/sqrt(hs): the 1/sqrt(hs) of the scores is "
            "applied twice"}),
]


@pytest.mark.parametrize("name,fn,said", COMMON, ids=[f"{n}-{i}" for i, (n, *_) in
                                                      enumerate(COMMON)])
def test_a_common_mistake_is_named(name, fn, said):
    per, v = verdict_lines(name, fn)
    assert v.status == "wrong"
    for g, lines in per.items():
        if g in said:
            assert said[g] in " ".join(lines), lines
        else:
            assert lines[0].startswith("right"), (g, lines)


def test_the_case_where_it_is_wrong_is_named_only_when_it_is_the_only_one():
    def wrong_in(labels):
        def backward(dout, cache):
            dx, dw, db = OURS["layernorm"](dout, cache)
            if dout.shape[-1] in labels:      # the feature count tells the cases apart
                dx = dx + (0.1 * np.sin(np.arange(dx.size)) ** 2).reshape(dx.shape).astype(dx.dtype)
            return dx, dw, db
        return verdict_lines("layernorm", backward)[0]["dx"][1]
    assert wrong_in({1}) == ("no combination of the terms of dx explains it; it is wrong only "
                             "in x (4, 1), one feature")
    assert wrong_in({6}) == "no combination of the terms of dx explains it"  # 3 of 4 cases


def test_a_numpy_scalar_is_a_0d_array_of_the_wrong_shape():
    def summed_over_everything(dout, cache):
        dx, _, dbias = OURS["layernorm"](dout, cache)
        red = tuple(range(dout.ndim))
        return dx, (dout * cache[0]).sum(axis=red), dbias     # a float64 scalar
    per, v = verdict_lines("layernorm", summed_over_everything)
    assert per["dweight"] == ["wrong: dweight has shape () in x (2, 3, 6); it must be (6,)"]
    assert v.blocker == "dweight has shape () in x (2, 3, 6); it must be (6,)"


def test_an_unexplained_error_says_so_and_where():
    def wrong_in_one_row(dout, cache):
        dx, dw, db = OURS["layernorm"](dout, cache)
        dx = dx.copy()
        dx.reshape(-1, dx.shape[-1])[0, 0] += 1.0    # the first row of every case
        return dx, dw, db
    per, _ = verdict_lines("layernorm", wrong_in_one_row)
    assert re.match(r"wrong: largest error 1 at dx\[0, 0(, 0)?\] of ", per["dx"][0])
    assert per["dx"][1] == "no combination of the terms of dx explains it"


def test_a_float32_slip_is_told_from_a_wrong_term():
    per, _ = verdict_lines("softmax", lambda dy, cache: OURS["softmax"](
        dy, cache).astype(np.float32).astype(np.float64))
    assert "not to float64's round-off" in per["dx"][-1]


def test_a_float64_gradient_for_float32_inputs_is_refused_for_training():
    per, v = verdict_lines("gelu", lambda dout, cache: OURS["gelu"](dout, cache) * np.float64(1))
    assert per["dx"] == ["wrong: the values are right, the dtype is not",
                         "for float32 inputs your dx is float64: a gradient has its input's dtype "
                         "(the GPT trains in float32: a float64 constant or array in your code?)"]
    assert v.status == "wrong" and v.blocker == per["dx"][1]


@pytest.mark.parametrize("name,upstream", [("rmsnorm", "dout"), ("softmax", "dy")])
def test_a_backward_that_modifies_its_upstream_gradient_in_place_is_wrong(name, upstream):
    def in_place(dout, cache):
        grads = OURS[name](dout, cache)
        dout *= 2.0
        return grads
    per, v = verdict_lines(name, in_place)
    assert all(lines[0].startswith("right") for lines in per.values())
    assert v.status == "wrong" and f"modified {upstream} in place" in v.lines[-2]


@pytest.mark.parametrize("name,words", [
    ("layernorm", ("in float64 on random inputs, weights and upstream gradients:",
                   "on random inputs, random weights and a random upstream")),
    ("softmax", ("in float64 on random inputs and upstream gradients:",
                 "on random inputs and a random upstream"))])
def test_only_a_layer_with_weights_is_said_to_have_random_ones(tmp_path, capsys, name, words):
    assert words[0] in exercise.check(EXERCISES[name], OURS[name], "learner.py").lines[0]
    assert main(["start", name, "--dir", str(tmp_path)]) == 0
    assert words[1] in (tmp_path / f"{name}.py").read_text()


@pytest.mark.parametrize("got,line", [
    (lambda dout, cache: OURS["layernorm"](dout, cache)[:2],
     "layernorm_backward returns a tuple of 2; it must return 3 arrays, (dx, dweight, dbias)"),
    (lambda dout, cache: OURS["layernorm"](dout, cache)[0],
     "layernorm_backward returns one array, of shape (2, 3, 6); it must return 3 arrays"),
    (lambda dout, cache: (None, None, None), "dx is None, not a NumPy array"),
])
def test_a_wrong_return_is_one_line(got, line):
    v = exercise.check(EXERCISES["layernorm"], got, "learner.py")
    assert v.status == "wrong" and v.blocker == v.lines[0] and len(v.lines) == 1
    assert v.lines[0].startswith(line)


# ----------------------------------------------------------------------------- the command

def our_code(name):
    """The lines of the layer's backward (comments cut) that its forward does not share."""
    forward = inspect.getsource(EXERCISES[name].forward)
    lines = [ln.split("#")[0].strip() for ln in inspect.getsource(OURS[name]).splitlines()]
    return [ln for ln in lines if len(ln) > 10 and ln not in forward and not ln.startswith("def ")]


def test_the_list_names_every_exercise_and_its_derivation(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    assert main(["list"]) == 0 and capsys.readouterr().out == out
    for ex in EXERCISES.values():
        line = next(ln for ln in out.splitlines() if ln.startswith(ex.name + " "))
        assert line.endswith(f"#{ex.section}") and ex.summary in line
    assert "docs/derivations.md" in out


@pytest.mark.parametrize("name", EXERCISES)
def test_start_writes_the_forward_in_full_and_a_stub(tmp_path, capsys, name):
    ex = EXERCISES[name]
    assert main(["start", name, "--dir", str(tmp_path)]) == 0
    path = tmp_path / f"{name}.py"
    text = path.read_text(encoding="utf-8")
    assert inspect.getsource(ex.forward) in text                     # the forward, in full
    assert f'raise NotImplementedError("{ex.function}: not written yet")' in text
    assert ex.link in text and "Steps:" in text and "cache:" in text
    assert not [ln for ln in our_code(name) if ln in text]         # our backward is not
    namespace = {}
    exec(compile(text, str(path), "exec"), namespace)                # it runs as it is
    out, cache = namespace[f"{name}_forward"](*make_cases(ex, np.random.default_rng(0))[0].args)
    with pytest.raises(NotImplementedError):
        namespace[ex.function](out, cache)
    assert str(path) in capsys.readouterr().out


def test_a_stub_is_not_implemented_yet(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["start", "layernorm"]) == 0
    assert (tmp_path / "exercises" / "layernorm.py").is_file()
    capsys.readouterr()
    assert main(["check", "layernorm"]) == 1
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "layernorm_backward in exercises/layernorm.py is not implemented yet (it raises "
        "NotImplementedError): write it, its docstring leads the way; then check again"]


def test_start_never_overwrites(tmp_path, capsys):
    path = tmp_path / "rope.py"
    path.write_text("mine\n")
    assert main(["start", "rope", "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exists" in err and "check rope --file" in err
    assert path.read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rope.py"]


def _learner_file(tmp_path, name, body):
    """Start ``name`` in ``tmp_path`` and replace its stub's body by ``body``."""
    assert main(["start", name, "--dir", str(tmp_path)]) == 0
    path = tmp_path / f"{name}.py"
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
    assert out[0] == (f"layernorm_backward of {path}, in float64 on random inputs, weights and "
                      f"upstream gradients:")
    assert [ln.split()[:2] for ln in out[2:5]] == [["dx", "right:"], ["dweight", "right:"],
                                                   ["dbias", "right:"]]
    assert out[5].startswith("All 3 gradients right. Train the GPT with it: python -m "
                             f"experiments.four_variants --tiny --backward {tmp_path}")
    other = tmp_path / "try2.py"
    other.write_text(path.read_text())
    assert main(["check", "layernorm", "--file", str(other)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"All 3 gradients right. Train the GPT with it: --backward takes a folder holding it as "
        f"layernorm.py (mkdir mine && cp {other} mine/layernorm.py && python -m "
        f"experiments.four_variants --tiny --backward mine)")
    path.write_text(path.read_text().replace("dxhat - dxhat.mean(axis=-1, keepdims=True)", "dxhat"))
    assert main(["check", "layernorm", "--file", str(path)]) == 1
    out = capsys.readouterr().out
    assert ("your dx is the right one without term 2, -mean(dxhat) (the path through the "
            "mean)") in out
    assert "1 of 3 gradients wrong. The derivation, when you want it: " \
           "docs/derivations.md#layernorm" in out


@pytest.mark.parametrize("name", EXERCISES)
def test_the_check_never_shows_our_code(name):
    ex = EXERCISES[name]
    grad = ex.grads[0]
    for fn in (planted(name, grad, lambda r, t: r - t[0]), planted(name, grad, lambda r, t: r + 1)):
        v = exercise.check(ex, fn, "learner.py")
        shown = "\n".join(v.lines)
        assert not [ln for ln in our_code(name) if ln in shown]


def test_the_learners_exception_shows_their_traceback_and_one_line(tmp_path, capsys):
    path = _learner_file(tmp_path, "rmsnorm", """    xhat, weight, rstd = cache
    dweight = np.einsum("nc,nc->c", dout, xhat)
    return dout, dweight""")
    capsys.readouterr()
    assert main(["check", "rmsnorm", "--file", str(path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.splitlines()
    assert err[0] == "Traceback (most recent call last):"
    line = _line_of(path, "einsum")
    assert err[1] == f'  File "{path.resolve()}", line {line}, in rmsnorm_backward'
    assert "experiments" not in captured.err.replace(exercise.PROG, "")   # their frames only
    assert err[-1].startswith(f"{exercise.PROG}: your rmsnorm_backward raised ValueError at "
                              f"{path}:{_line_of(path, 'einsum')} on x (2, 3, 6): ")


def _line_of(path, text):
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if text in ln)


def test_a_syntax_error_is_shown_as_python_shows_it(tmp_path, capsys):
    path = _learner_file(tmp_path, "silu", "    return dout * (cache[1]")
    capsys.readouterr()
    assert main(["check", "silu", "--file", str(path)]) == 1
    err = capsys.readouterr().err
    assert "SyntaxError" in err and f"{exercise.PROG}: importing {path} raised SyntaxError" in err


@pytest.mark.parametrize("where", ["import", "backward"])
@pytest.mark.parametrize("call,said", [("sys.exit()", "SystemExit at"),
                                       ("sys.exit(3)", "SystemExit at"),
                                       ("raise SystemExit('bye')", "SystemExit at")])
def test_a_sys_exit_in_the_learners_code_is_an_exception_of_theirs(tmp_path, capsys, where,
                                                                    call, said):
    body = f"    {call}" if where == "backward" else "    return dout, dout, dout"
    path = _learner_file(tmp_path, "layernorm", body)
    if where == "import":
        path.write_text(path.read_text() + f"\n{call}\n")
    path.write_text("import sys\n" + path.read_text())
    capsys.readouterr()
    assert main(["check", "layernorm", "--file", str(path)]) == 1
    err = capsys.readouterr().err.splitlines()
    subject = f"importing {path}" if where == "import" else "your layernorm_backward"
    assert err[-1].startswith(f"{exercise.PROG}: {subject} raised {said} {path}:"), err


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
    ("notes.txt", b"def layernorm_backward(dout, cache):\n    pass\n", "notes.txt: not a .py file"),
    ("layernorm.py", bytes(range(128, 256)), "layernorm.py as Python source: 'utf-8' codec"),
])
def test_a_file_that_is_not_python_source_is_bad_input(tmp_path, capsys, name, content, words):
    path = tmp_path / name
    path.write_bytes(content)
    assert main(["check", "layernorm", "--file", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "Traceback" not in err


def test_a_file_without_the_function_is_bad_input(tmp_path, capsys):
    path = tmp_path / "gelu.py"
    path.write_text("def gelu_backwards(dout, cache):\n    return dout\n")
    assert main(["check", "gelu", "--file", str(path)]) == 2
    assert capsys.readouterr().err == (f"{exercise.PROG}: error: {path} defines no function "
                                       f"gelu_backward\n")


# ----------------------------------------------------------------------------- training

def _terms_file(folder, name):
    """A right answer written differently from the layer: the sum of the named terms."""
    (folder / f"{name}.py").write_text(f'''from experiments._exercises import EXERCISES, Case


def {name}_backward(dout, cache):
    ex = EXERCISES["{name}"]
    terms = ex.terms(Case("", (), {{}}, None, cache, dout))
    grads = tuple(sum(a for *_, a in terms[g]) for g in ex.grads)
    return grads[0] if len(grads) == 1 else grads
''')


def test_install_puts_the_learners_backward_where_the_layer_calls_it(tmp_path, monkeypatch):
    import layers.linear
    monkeypatch.setattr(layers.linear, "linear_backward", layers.linear.linear_backward)
    _terms_file(tmp_path, "linear")
    swaps = exercise.backward_swaps(tmp_path)
    assert swaps == (exercise.Swap("linear", str(tmp_path / "linear.py"), "right"),)
    exercise.install(swaps)
    assert layers.linear.linear_backward is not OURS["linear"]
    from minigrad import Tensor
    from layers.linear import linear
    x = Tensor(np.ones((2, 3)), requires_grad=True)
    w = Tensor(np.arange(12.0).reshape(4, 3), requires_grad=True)
    linear(x, w).backward(np.ones((2, 4)))      # the adapter passes `needs`: dropped
    assert np.array_equal(x.grad, np.ones((2, 4)) @ w.data)


def test_a_sys_exit_makes_a_file_unusable_for_training(tmp_path, capsys):
    (tmp_path / "gelu.py").write_text("import sys\nsys.exit(0)\n")
    with pytest.raises(cli.UsageError) as ei:
        exercise.backward_swaps(tmp_path)
    assert str(ei.value).startswith(f"{tmp_path / 'gelu.py'}: gelu_backward cannot train: "
                                    f"importing {tmp_path / 'gelu.py'} raised SystemExit at ")


TINY = ["--steps", "3", "--n-layers", "1", "--d-model", "16", "--n-heads", "2",
        "--block-size", "8", "--eval-every", "3", "--no-plots"]


def _table(out):
    lines = out.splitlines()
    i = lines.index(next(ln for ln in lines if ln.startswith("norm ")))
    return lines[i:i + 6]


def _under_table(text):
    """The line that ends the block of a study's table (stdout or run_log.txt)."""
    lines = text.splitlines()
    i = lines.index(next(ln for ln in lines if ln.startswith("norm ")))
    return lines[lines.index("", i) - 1]


def _train(capsys, out, *argv):
    with pytest.raises(SystemExit) as ei:
        cli.main(four_variants.PROG, four_variants.run, [*argv, "--output-dir", str(out)])
    captured = capsys.readouterr()
    return ei.value.code, captured.out, captured.err


@pytest.mark.slow
def test_training_with_right_answers_gives_the_tiny_table(tmp_path, capsys):
    """The main job twice: as it is, and with every backward the GPT calls replaced by the sum
    of its named terms (the same maths in another order: float32 results differ in the last
    bits, the printed digits do not)."""
    status, plain, _ = _train(capsys, tmp_path / "ours", "--tiny", "--no-plots")
    assert status == 0
    mine = tmp_path / "mine"
    mine.mkdir()
    for name in GPT_LAYERS:
        _terms_file(mine, name)
    assert main(["start", "rope", "--dir", str(mine)]) == 0      # a stub: the layer's own
    capsys.readouterr()
    status, out, err = _train(capsys, tmp_path / "out", "--tiny", "--no-plots",
                              "--backward", str(mine))
    assert status == 0, err
    assert _table(out) == _table(plain)
    said = next(ln for ln in out.splitlines() if ln.startswith("Backward passes: "))
    assert said == ("Backward passes: yours: " + ", ".join(
        f"{n}_backward (right)" for n in EXERCISES if n in GPT_LAYERS)
        + "; not implemented yet: rope; the layers' own for the rest")
    assert f"backward passes from {mine}: yours: layernorm_backward (right)" in err


@pytest.mark.slow
def test_a_wrong_backward_changes_its_rows_and_is_named(tmp_path, capsys):
    status, plain, _ = _train(capsys, tmp_path / "ours", *TINY)
    assert status == 0
    wrong = tmp_path / "wrong"
    path = _learner_file(wrong, "layernorm", LAYERNORM.replace(
        "dxhat - dxhat.mean(axis=-1, keepdims=True)", "dxhat"))
    _learner_file(wrong, "softmax", "    y, axis = cache\n"
                  "    return y * dy - y * (dy * y).sum(axis=axis, keepdims=True)")
    capsys.readouterr()
    status, out, err = _train(capsys, tmp_path / "out", *TINY, "--backward", str(wrong))
    assert status == 0, err
    rows, plain_rows = _table(out)[2:], _table(plain)[2:]
    assert [r != p for r, p in zip(rows, plain_rows)] == [True, False, True, False]  # ln rows only
    warning = ("WARNING: trained with a wrong layernorm_backward (yours) in ln+gelu, ln+swiglu: "
               "these losses are not the model's")
    log = (tmp_path / "out" / "run_log.txt").read_text()
    assert _under_table(out) == _under_table(log) == warning
    said = (f"yours: layernorm_backward (WRONG: {exercise.PROG} check layernorm --file {path}), "
            f"softmax_backward (right, not called in this run); the layers' own for the rest")
    assert f"Backward passes: {said}" in out.splitlines()
    assert f"- backward passes (--backward {wrong}): {said}." in log.splitlines()
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["backward"] == [
        {"exercise": "layernorm", "file": str(path), "check": "wrong",
         "called_by": ["ln+gelu", "ln+swiglu"]},
        {"exercise": "softmax", "file": str(wrong / "softmax.py"), "check": "right",
         "called_by": []}]
    assert [r["backward_called"] for r in results["runs"]] == [["layernorm"], [], ["layernorm"],
                                                              []]
    assert json.loads((tmp_path / "ours" / "results.json").read_text())["backward"] is None


@pytest.mark.slow
def test_a_backward_that_cannot_train_stops_the_run_before_it_starts(tmp_path, capsys):
    folder = tmp_path / "ex"
    _learner_file(folder, "gelu", "    return dout * np.float64(0.5)")   # float64 in float32
    capsys.readouterr()
    status, out, err = _train(capsys, tmp_path / "out", *TINY, "--backward", str(folder))
    assert status == 2 and out == ""
    assert err.splitlines() == [f"{four_variants.PROG}: error: {folder / 'gelu.py'}: gelu_backward "
                                f"cannot train: for float32 inputs your dx is float64: a "
                                f"gradient has its input's dtype (the GPT trains in float32: a "
                                f"float64 constant or array in your code?) ({exercise.PROG} check "
                                f"gelu --file {folder / 'gelu.py'})"]
    assert not (tmp_path / "out").exists()
    status, _, err = _train(capsys, tmp_path / "out", *TINY, "--backward", str(tmp_path / "none"))
    assert status == 2 and "no such folder" in err
    status, _, err = _train(capsys, tmp_path / "out", *TINY, "--backward", str(folder / "gelu.py"))
    assert status == 2 and err.splitlines() == [
        f"{four_variants.PROG}: error: --backward {folder / 'gelu.py'}: is a file; give the "
        f"folder holding your NAME.py files"]
