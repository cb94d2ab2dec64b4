"""minigrad.allocator: glibc's mallopt is set on import, and MINIGRAD_MALLOPT=0 leaves it."""
import os
import platform
import subprocess
import sys

import pytest


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc only")
@pytest.mark.parametrize("env, tuned", [({}, "True"), ({"MINIGRAD_MALLOPT": "0"}, "False")])
def test_the_allocator_is_tuned_unless_switched_off(env, tuned):
    code = "import minigrad; print(minigrad.allocator.TUNED)"
    env = {**{k: v for k, v in os.environ.items() if k != "MINIGRAD_MALLOPT"}, **env}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == tuned, out.stderr
