"""docs/pytorch.md: its "coming from PyTorch" example runs, and every row of the differences
table says what minigrad does, what PyTorch does, and why."""
import re
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "pytorch.md"


def _section(text, title):
    start = text.index(f"## {title}")
    nxt = text.find("\n## ", start + 1)
    return text[start:nxt if nxt != -1 else len(text)]


def test_coming_from_pytorch_example_runs():
    block = re.search(r"```python\n(.*?)```", _section(DOC.read_text(), "Coming from PyTorch"),
                      re.S)
    assert block is not None
    code = block.group(1)
    assert "assert" in code                      # the example checks what it claims
    exec(compile(code, str(DOC), "exec"), {"__name__": "pytorch_md_example"})


def test_every_difference_has_a_reason():
    rows = [ln for ln in _section(DOC.read_text(), "Deliberate differences").splitlines()
            if ln.startswith("|") and not ln.startswith("|---")][1:]      # skip the header
    assert len(rows) >= 15
    for row in rows:
        cells = [c.strip() for c in row.strip().strip("|").split(" | ")]
        assert len(cells) == 3 and all(cells), row


def test_readme_links_it():
    readme = (DOC.parent.parent / "README.md").read_text()
    assert "docs/pytorch.md" in readme
