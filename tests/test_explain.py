"""python -m experiments.explain: every exercise's backward, term by term, on a tiny case; the
terms sum to the layer's own backward and agree with central differences."""
import subprocess
import sys

import numpy as np
import pytest

from experiments.exercises.catalogue import EXERCISES
from experiments.explain import CASES, explain, report


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("seed,size", [(0, None), (3, 2)])
def test_the_terms_sum_to_the_backward_and_to_central_differences(name, seed, size):
    e = explain(name, seed, size)
    assert list(e["grads"]) == list(EXERCISES[name].grads)
    for g, d in e["grads"].items():
        assert len(d["terms"]) >= 1
        np.testing.assert_allclose(d["sum"], d["backward"], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(d["central"], d["backward"], rtol=1e-6, atol=1e-7)
        assert d["max_error"] == np.max(np.abs(d["sum"] - d["central"]))
    assert "central differences" in "\n".join(report(e))


def test_the_sizes_are_the_documented_ones():
    e = explain("layernorm")
    assert e["inputs"]["x"].shape == (1, 4) and {"xhat", "rstd"} <= set(e["quantities"])
    assert explain("attention")["inputs"]["q"].shape == (1, 1, 3, 2)
    assert explain("attention", size=5)["inputs"]["q"].shape == (1, 1, 5, 2)
    assert explain("rmsnorm", size=7)["inputs"]["x"].shape == (1, 7)
    with pytest.raises(ValueError, match="at least 1"):
        explain("gelu", size=0)


def _run(*args):
    return subprocess.run([sys.executable, "-m", "experiments.explain", *args],
                          capture_output=True, text=True)


def test_the_command_prints_the_example_and_refuses_an_unknown_name_in_one_line():
    ok = _run("rmsnorm", "--seed", "1")
    assert ok.returncode == 0, ok.stderr
    assert "xhat" in ok.stdout and "central differences" in ok.stdout and "largest" in ok.stdout
    assert "-xhat * mean(dxhat * xhat)" in ok.stdout           # the check's own label
    bad = _run("groupnorm")
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.count("\n") == 1 and "unknown layer 'groupnorm'" in bad.stderr
    assert _run("gelu", "--size", "0").returncode == 2
    listed = _run("--list")
    assert listed.returncode == 0 and "attention" in listed.stdout


@pytest.mark.parametrize("size", range(1, 13))
def test_every_size_the_option_takes_works_for_every_layer(size):
    for name in CASES:
        e = explain(name, 0, size)
        assert all(d["max_error"] < 1e-6 for d in e["grads"].values()), (name, size)
    assert explain("embedding", 0, 3)["inputs"]["idx"].tolist() == [1, 0, 1]   # [1, 3, 1] mod V


def test_the_heading_names_the_common_factor_and_attention_shows_dp_and_ds():
    lines = report(explain("layernorm"))
    assert "dx, term by term (each times rstd, the factor in front of them all):" in lines
    assert "dweight, term by term:" in lines
    assert "dlogits, term by term (each times dloss / N" in "\n".join(report(explain("cross_entropy")))
    e = explain("attention")
    dP = e["dout"] @ np.swapaxes(e["inputs"]["v"], -1, -2)
    np.testing.assert_allclose(e["quantities"]["dP = dout v^T"], dP)
    P = e["quantities"]["P"]
    dS = P * dP - P * np.sum(P * dP, axis=-1, keepdims=True)
    np.testing.assert_allclose(e["quantities"]["dS = P * dP - P rowsum(P * dP)"], dS)


def test_small_values_keep_four_significant_digits():
    text = "\n".join(report(explain("swiglu")))
    out = explain("swiglu")["out"]
    assert np.max(np.abs(out)) < 0.01            # the case this is about
    assert f"{out.ravel()[0]: .3e}" in text
