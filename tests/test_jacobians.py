"""python -m experiments.jacobians: the Jacobians of LayerNorm, RMSNorm and softmax for one row,
their null directions found numerically and checked against the derivation's."""
import subprocess
import sys

import numpy as np
import pytest

from experiments.jacobians import C, jacobian, layers, null_space
from layers.layernorm import layernorm_backward, layernorm_forward


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_null_directions_are_the_derivations(seed):
    found = {name: (J, predicted, basis) for name, J, predicted, s, basis, _ in layers(seed)}
    assert {n: len(b) for n, (_, _, b) in found.items()} == {"LayerNorm": 2, "RMSNorm": 1,
                                                              "softmax": 1}
    for name, (J, predicted, basis) in found.items():
        for label, v in predicted.items():
            u = v / np.linalg.norm(v)
            assert np.linalg.norm(basis @ u) == pytest.approx(1.0, abs=1e-6), (name, label)
            assert np.linalg.norm(J @ u) < 1e-4 * np.linalg.norm(J, 2), (name, label)


def test_the_jacobian_of_layernorm_is_its_closed_form():
    # J = rstd (I - 1 1^T / C - xhat xhat^T / C) with weight 1 (docs/derivations.md, LayerNorm)
    x = np.random.default_rng(5).standard_normal(C)
    J, _, (xhat, _, rstd) = jacobian(layernorm_forward, layernorm_backward, x, np.ones(C),
                                     np.zeros(C), eps=1e-5)
    xh = xhat[0]
    closed = rstd[0, 0] * (np.eye(C) - np.ones((C, C)) / C - np.outer(xh, xh) / C)
    np.testing.assert_allclose(J, closed, rtol=1e-12, atol=1e-12)
    assert len(null_space(closed)[0]) == 2


def test_the_command_prints_the_reading_and_draws_the_png(tmp_path):
    pytest.importorskip("matplotlib")
    r = subprocess.run([sys.executable, "-m", "experiments.jacobians", "--output-dir",
                        str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "null directions found: 2" in r.stdout and "removes two components" in r.stdout
    assert (tmp_path / "jacobians.png").read_bytes()[:4] == b"\x89PNG"
    quiet = subprocess.run([sys.executable, "-m", "experiments.jacobians", "--no-plots",
                            "--output-dir", str(tmp_path / "none")], capture_output=True, text=True)
    assert quiet.returncode == 0 and not (tmp_path / "none").exists()
