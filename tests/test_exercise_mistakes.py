"""The diagnosis's general rules (``experiments/exercises/mistakes.py`` and ``terms.variants``)
on wrong backward passes written as learners write them (``wrong_backwards.py``): the tuning
batch, one answer per kind and exercise, and the answers written for the third round's rules,
named in exactly the words expected; the three held-out
batches, written after the rules, never named wrongly and never passed (how many they name is a
figure, ``python -m tests.wrong_backwards``); two mistakes at once of the new kinds get no single
name.
"""
import numpy as np
import pytest

from wrong_backwards import (HELDOUT, HELDOUT2, HELDOUT3, TUNING, TUNING2, Wrong, _layernorm,
                             _norm_dx, _softmax, as_expected, diagnosis, is_named)

from experiments.exercises import mistakes


def _ids(batch):
    return [f"{w.name}-{i}" for i, w in enumerate(batch)]


@pytest.mark.parametrize("w", TUNING + TUNING2, ids=_ids(TUNING) + [f"{i}-r3" for i in _ids(TUNING2)])
def test_the_tuning_batch_is_named_in_the_words_expected(w):
    status, per = diagnosis(w)
    assert status == "wrong"
    for g, lines in per.items():
        if g in w.expect:
            assert as_expected(w.expect[g], lines), lines
        else:
            assert lines[0].startswith("right"), (g, lines)


@pytest.mark.parametrize("w", HELDOUT + HELDOUT2 + HELDOUT3,
                         ids=_ids(HELDOUT) + _ids(HELDOUT2) + [f"{i}-h3" for i in _ids(HELDOUT3)])
def test_the_held_out_batch_is_never_named_wrongly_nor_passed(w):
    status, per = diagnosis(w)
    assert status == "wrong"
    for g, words in w.expect.items():
        assert as_expected(words, per[g]), per[g]


TWO = [   # two mistakes at once, one of them of the new kinds
    Wrong("layernorm", "rstd^2 and weight left out", lambda d, c: _layernorm(
        d, c, dx_of=lambda d, xh, w, r: r * r * (d - _m(d) - xh * _m(d * xh))), {"dx": None}),
    Wrong("layernorm", "the means over axis 0 and term 2's sign", lambda d, c: _layernorm(
        d, c, dx_of=lambda d, xh, w, r: r * (d * w + (d * w).mean(0, keepdims=True) - xh * (
            d * w * xh).mean(0, keepdims=True))), {"dx": None}),
    Wrong("softmax", "log-softmax's backward, doubled", lambda dy, c: 2 * (
        dy - c[0] * np.sum(dy, axis=c[1], keepdims=True)), {"dx": None}),
    Wrong("softmax", "y inside the sum, and a mean", lambda dy, c: c[0] * dy - np.mean(
        c[0] * dy * c[0], axis=c[1], keepdims=True), {"dx": None}),
    Wrong("relu2", "sqrt(r), and half", lambda d, r: d * np.sqrt(r), {"dx": None}),
    Wrong("cross_entropy", "argmax, and no 1/N", lambda dl, c: ((c[0] - np.eye(
        c[0].shape[1], dtype=c[0].dtype)[c[0].argmax(-1)]) * dl).reshape(c[6]), {"dlogits": None}),
]


def _m(a):
    return a.mean(axis=-1, keepdims=True)


@pytest.mark.parametrize("w", TWO, ids=[w.kind for w in TWO])
def test_two_mistakes_at_once_get_no_single_name_of_the_new_kinds(w):
    status, per = diagnosis(w)
    (g, _), = w.expect.items()
    assert status == "wrong"
    assert not is_named(per[g]) or "; term" in per[g][-1], per[g]   # or both named


def test_one_case_far_larger_than_the_others_does_not_hide_a_clean_fit():
    rng = np.random.default_rng(0)
    a, b = [rng.standard_normal(5) for _ in range(2)], [rng.standard_normal(5) for _ in range(2)]
    b[1] = b[1] * 1e9                            # the extreme case: one column 1e9 times larger
    yours = [x + 2 * y for x, y in zip(a, b)]
    right = [x + y for x, y in zip(a, b)]
    assert mistakes.fit(yours, right, [[x, y] for x, y in zip(a, b)], [1.0, 1.0]) == [1.0, 2.0]


def test_a_fit_is_judged_in_each_case():
    # term b is 0 in case 0 (LayerNorm's term 3 at C = 1): yours is b doubled in case 1, and in
    # case 0 wrong by 1e-7 in a way no term explains; over both cases at once the fit leaves
    # 1e-7 of the error, and would name "b counted twice"
    rng = np.random.default_rng(1)
    a = [rng.standard_normal(50) for _ in range(2)]
    b = [np.zeros(50), rng.standard_normal(50)]
    right = [x + y for x, y in zip(a, b)]
    yours = [a[0] + 1e-7 * rng.standard_normal(50), a[1] + 2 * b[1]]
    assert mistakes.fit(yours, right, [[x, y] for x, y in zip(a, b)], [1.0, 1.0]) is None
    yours[0] = a[0]
    assert mistakes.fit(yours, right, [[x, y] for x, y in zip(a, b)], [1.0, 1.0]) == [1.0, 2.0]


@pytest.mark.parametrize("ks,ndim,axes,said", [
    ((0, 1), 4, "B H T hs", "the B and H axes"), ((0,), 1, "O", "the O axis"),
    ((0, 1), 3, "V", "its leading axes (every row)"), ((0,), 2, "", "axis 0"),
    ((0, 1), 2, "", "axis 0, axis 1")])
def test_axes_are_named_by_their_letters_where_the_derivation_gives_them(ks, ndim, axes, said):
    assert mistakes._axes_named(ks, ndim, axes) == said


def test_a_sum_over_axes_that_differ_from_case_to_case_is_not_named():
    right = [np.ones((3, 5)), np.ones((4, 3))]
    yours = [right[0].sum(axis=1, keepdims=True), right[1].sum(axis=0, keepdims=True)]
    assert mistakes._summed(yours, right, [1.0, 1.0], "") is None
    assert mistakes._summed(yours[:1], right[:1], [1.0], "") == "axis 1, kept as size 1"


def test_norm_dx_helper_is_the_layers_dx():   # the learners' helpers themselves are right
    from experiments.exercises.catalogue import EXERCISES, make_cases
    for case in make_cases(EXERCISES["layernorm"], 0):
        assert np.allclose(_layernorm(case.dout, case.cache)[0], case.right[0], rtol=0, atol=1e-12)
        assert np.allclose(_layernorm(case.dout, case.cache, dx_of=_norm_dx(_m))[0], case.right[0],
                           rtol=0, atol=1e-12)
    for case in make_cases(EXERCISES["softmax"], 0):
        assert np.allclose(_softmax(case.dout, case.cache), case.right[0], rtol=0, atol=1e-12)
