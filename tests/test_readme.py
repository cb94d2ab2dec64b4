"""README.md and docs/: every relative link names a file of the checkout, every command the
README shows names a module that exists, and the engine snippet runs as written."""
import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page):
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8"))
    missing = [ln for ln in links if "://" not in ln and not (page.parent / ln).exists()]
    assert not missing, f"{page.name}: links to missing files: {missing}"


def test_every_readme_command_names_a_module():
    modules = set(re.findall(r"python -m ([\w.]+)", README.read_text(encoding="utf-8")))
    assert "experiments.four_variants" in modules
    missing = [m for m in sorted(modules)
               if m not in ("venv", "pytest") and importlib.util.find_spec(m) is None]
    assert not missing, missing


def test_engine_snippet_runs():
    text = README.read_text(encoding="utf-8")
    block = re.search(r"## Using the engine\n\n```python\n(.*?)```", text, re.S)
    assert block is not None
    ns = {"__name__": "readme_engine_snippet"}
    exec(compile(block.group(1), str(README), "exec"), ns)
    assert ns["x"].grad.shape == (2, 5, 8) and ns["w"].grad.shape == (8,)
