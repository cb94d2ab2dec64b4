"""Check the declared support range: install and test the project in fresh virtual environments.

For each combination below (oldest Python with the oldest supported numpy, pytest and
matplotlib; newest Python with the newest of each; a few useful ones between, one with the
``parity`` extra and torch), this script, in a temporary directory:

1. creates a virtual environment with that Python (``python -m venv``);
2. ``pip install``s a copy of this repository with the combination's extras and version pins
   (a normal, non-editable install: it downloads packages from the package index);
3. runs the main job, ``python -m experiments.four_variants --tiny``, from outside the source
   tree, so that the installed package (and its built-in corpus) is what runs;
4. runs the test suite, ``python -m pytest``, in the copy of the repository;

and prints one line per combination with the versions installed and the results.

Usage (from the repository root; run by hand, not in CI, as it downloads packages)::

    python tools/check_support.py                 # every combination, about 14 minutes on 2 cores
    python tools/check_support.py --only oldest newest
    python tools/check_support.py --list          # the combinations, and the Python each uses

Interpreters are looked up as ``~/.pyenv/versions/X.Y.*/bin/python`` (highest patch) and then
``pythonX.Y`` on PATH; ``--python 3.9=/path/to/python`` names one. The ``parity`` combination
pins ``torch==2.13.0`` (the CPU build this was tested with), so that pip never resolves a bare
``torch`` to a multi-gigabyte CUDA build; it needs a Python for which that torch exists.

Exit status: 0 every selected combination installed and passed; 1 one failed or its Python was
not found; 2 bad arguments (one line on stderr). BLAS runs one thread (OPENBLAS_NUM_THREADS=1)
unless the variable is already set; PYTHONPATH is cleared inside the environments.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# name: (python "X.Y", extras, pins, build pins). Pins are pip requirement strings; unpinned
# packages get the newest release pip finds for that Python. Build pins, when given, are
# installed first and the project is built with them (--no-build-isolation) instead of with the
# newest setuptools: the floor of pyproject.toml's [build-system] requires.
COMBINATIONS = {
    "oldest": ("3.9", "test,plot", ["numpy==1.23.0", "pytest==7.0.0", "matplotlib==3.5.0"],
               ["setuptools==77.0.3"]),
    "numpy2.0": ("3.10", "test", ["numpy==2.0.0"], []),
    "parity": ("3.11", "test,plot,parity", ["torch==2.13.0"], []),
    "numpy1-last": ("3.12", "test", ["numpy==1.26.4"], []),
    "newest": ("3.13", "test,plot", [], []),
}

VERSIONS_SNIPPET = r"""
import json, platform, importlib
out = {"python": platform.python_version()}
for name in ("numpy", "pytest", "matplotlib", "torch"):
    try:
        out[name] = importlib.import_module(name).__version__
    except Exception:
        pass
print(json.dumps(out))
"""


def find_python(version: str, overrides: dict) -> str | None:
    """Path of a Python ``version`` ("X.Y") interpreter, or None."""
    if version in overrides:
        return overrides[version]
    pattern = os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python")
    found = [p for p in glob.glob(pattern) if re.search(rf"/{re.escape(version)}\.\d+/bin/", p)]
    if found:
        return max(found, key=lambda p: int(re.search(r"\.(\d+)/bin/", p).group(1)))
    return shutil.which(f"python{version}")


def copy_source(dest: Path) -> None:
    """Copy the repository's tracked and untracked-but-not-ignored files to ``dest``."""
    try:
        files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                               capture_output=True, check=True).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        shutil.copytree(ROOT, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns(
            ".git", "__pycache__", "*.egg-info", "build", "dist", "outputs", ".venv"))
        return
    for rel in filter(None, files):
        if (ROOT / rel).is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, dest / rel)


def run(cmd, log: Path, cwd: Path, env: dict, timeout: float) -> subprocess.CompletedProcess:
    """Run ``cmd``, writing its output to ``log``; a timeout counts as a failure (rc 124)."""
    with open(log, "w") as f:
        try:
            return subprocess.run(cmd, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            f.write(f"\n[timed out after {timeout} s]\n")
            return subprocess.CompletedProcess(cmd, 124)


def pytest_summary(log: Path) -> str:
    """pytest's closing counts ("301 passed, 1 skipped"), or '' if it printed none."""
    for line in reversed(log.read_text(errors="replace").splitlines()):
        if re.search(r"\d+ (passed|failed|error)", line):
            return re.sub(r"^=+ | in [\d.]+s.*$|=+$", "", line).strip()
    return ""


def check(name: str, python: str, extras: str, pins: list, build: list, src: Path,
          work: Path) -> dict:
    """Install and test one combination in ``work``; returns its result row."""
    t0 = time.perf_counter()
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    row = {"name": name, "versions": {}, "install": "fail", "main job": "-", "tests": "-"}
    venv = work / "venv"
    if run([python, "-m", "venv", str(venv)], work / "venv.log", work, env, 300).returncode:
        row["install"] = "venv failed"
        return row
    py = str(venv / "bin" / "python")
    env["PATH"] = str(venv / "bin") + os.pathsep + env.get("PATH", "")
    target = f"{src}[{extras}]" if extras else str(src)
    isolation = ["--no-build-isolation"] if build else []
    if (build and run([py, "-m", "pip", "install", *build], work / "build_install.log", work,
                      env, 600).returncode) or \
            run([py, "-m", "pip", "install", *isolation, *pins, target], work / "install.log",
                work, env, 1800).returncode:
        row["seconds"] = round(time.perf_counter() - t0)
        return row
    row["install"] = "ok"
    row["versions"] = json.loads(subprocess.run([py, "-c", VERSIONS_SNIPPET], cwd=work, env=env,
                                                capture_output=True, text=True).stdout or "{}")
    main = run([py, "-m", "experiments.four_variants", "--tiny", "--output-dir",
                str(work / "outputs")], work / "main_job.log", work, env, 900)
    row["main job"] = "ok" if main.returncode == 0 else f"exit {main.returncode}"
    tests = run([py, "-m", "pytest", "-p", "no:cacheprovider"], work / "pytest.log", src,
                env, 1800)
    summary = pytest_summary(work / "pytest.log") or "no summary"
    row["tests"] = summary if tests.returncode == 0 else f"FAIL ({summary})"
    row["seconds"] = round(time.perf_counter() - t0)
    return row


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="+", metavar="NAME", help="run these combinations only")
    p.add_argument("--python", action="append", default=[], metavar="X.Y=PATH",
                   help="interpreter to use for Python X.Y")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory (logs)")
    p.add_argument("--list", action="store_true", help="list the combinations and exit")
    args = p.parse_args(argv)
    unknown = sorted(set(args.only or []) - set(COMBINATIONS))
    overrides = {}
    for item in args.python:
        ver, sep, path = item.partition("=")
        if not sep or not re.fullmatch(r"\d+\.\d+", ver) or not path:
            unknown.append(f"--python {item} (expected X.Y=PATH)")
        overrides[ver] = path
    if unknown:
        print(f"check_support: unknown: {', '.join(unknown)}; combinations: "
              f"{', '.join(COMBINATIONS)}", file=sys.stderr)
        sys.exit(2)
    return args, overrides


def main(argv=None) -> int:
    args, overrides = parse_args(argv)
    names = args.only or list(COMBINATIONS)
    if args.list:
        for name, (ver, extras, pins, build) in COMBINATIONS.items():
            print(f"{name:12s} Python {ver} ({find_python(ver, overrides) or 'not found'}) "
                  f"[{extras}] {' '.join(pins + build) or '(newest of each)'}")
        return 0
    start = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="minigrad-support-"))
    print(f"working in {tmp}", flush=True)
    rows = []
    try:
        src = tmp / "src"
        src.mkdir()
        copy_source(src)
        for name in names:
            ver, extras, pins, build = COMBINATIONS[name]
            python = find_python(ver, overrides)
            if python is None:
                rows.append({"name": name, "versions": {"python": ver}, "install": "no Python",
                             "main job": "-", "tests": "-"})
            else:
                print(f"== {name}: Python {ver} [{extras}] {' '.join(pins + build)}", flush=True)
                rows.append(check(name, python, extras, pins, build, src, tmp / name))
            r = rows[-1]
            print(f"   {json.dumps(r['versions'])} install {r['install']}, main job "
                  f"{r['main job']}, tests {r['tests']}, {r.get('seconds', '-')} s", flush=True)
    finally:
        if args.keep:
            print(f"logs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print()
    print(f"{'combination':12s} {'python':8s} {'numpy':8s} {'pytest':8s} {'matplotlib':10s} "
          f"{'torch':12s} {'install':8s} {'main job':8s} tests")
    for r in rows:
        v = r["versions"]
        print(f"{r['name']:12s} {v.get('python', '-'):8s} {v.get('numpy', '-'):8s} "
              f"{v.get('pytest', '-'):8s} {v.get('matplotlib', '-'):10s} {v.get('torch', '-'):12s} "
              f"{r['install']:8s} {r['main job']:8s} {r['tests']}")
    print(f"total {time.perf_counter() - start:.0f} s")
    ok = all(r["install"] == "ok" and r["main job"] == "ok" and not r["tests"].startswith(("FAIL", "-"))
             for r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
