"""The source needs no newer Python than pyproject.toml's requires-python, checked by vermin
(a maintained linter: pip install vermin); skipped where vermin is not installed."""
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs vermin over the source

ROOT = Path(__file__).resolve().parents[1]


def test_the_source_runs_on_the_oldest_declared_python():
    vermin = shutil.which("vermin")
    if vermin is None:
        pytest.skip("vermin is not installed (pip install vermin)")
    floor = re.search(r'requires-python\s*=\s*">=\s*(\d+\.\d+)',
                      (ROOT / "pyproject.toml").read_text()).group(1)
    r = subprocess.run([vermin, f"-t={floor}-", "--violations", "--no-tips", "minigrad",
                        "layers", "gpt", "experiments", "tools", "tests"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
