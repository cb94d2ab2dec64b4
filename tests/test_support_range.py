"""The source stays inside the declared support range (pyproject.toml: requires-python, numpy).

A static scan, so it runs on whatever Python and NumPy CI has: every file parses as the oldest
supported Python's grammar, and uses none of the NumPy names and Python features listed below
that the oldest supported versions lack (or the newest ones removed). The full check, the test
suite run in fresh environments on the oldest and newest versions, is ``tools/check_support.py``.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("minigrad", "layers", "gpt", "experiments", "tests", "tools")

# NumPy names (attribute paths under ``np.``) by the release that added them (numpy release notes).
NUMPY_ADDED = {
    **dict.fromkeys(["exceptions", "dtypes"], (1, 25)),
    **dict.fromkeys(["trapezoid", "concat", "bool", "long", "ulong", "isdtype", "vecdot", "pow",
                     "matrix_transpose", "permute_dims", "acos", "asin", "atan", "atan2",
                     "acosh", "asinh", "atanh", "bitwise_invert", "bitwise_left_shift",
                     "bitwise_right_shift", "unique_all", "unique_counts", "unique_inverse",
                     "unique_values", "strings", "linalg.vector_norm", "linalg.matrix_norm",
                     "linalg.vecdot", "linalg.matrix_transpose", "linalg.svdvals"], (2, 0)),
    **dict.fromkeys(["astype", "unstack", "cumulative_sum", "cumulative_prod"], (2, 1)),
}
# NumPy names removed (or deprecated for removal) in NumPy 2.x: the newest supported lacks them.
NUMPY_REMOVED = {
    "float_", "complex_", "string_", "unicode_", "NaN", "NAN", "Inf", "Infinity", "PINF", "NINF",
    "infty", "PZERO", "NZERO", "product", "cumproduct", "alltrue", "sometrue", "round_",
    "asfarray", "msort", "find_common_type", "mat", "cast", "trapz", "in1d", "row_stack",
    "AxisError", "ComplexWarning", "VisibleDeprecationWarning", "RankWarning", "TooHardError",
    "issubclass_", "issubsctype", "sctype2char", "maximum_sctype", "obj2sctype", "sctypes",
    "set_string_function", "deprecate", "safe_eval", "lookfor", "who", "byte_bounds", "core",
}
# Python names by the release that added them ("module.name"; builtins as "builtins.name").
PYTHON_ADDED = {
    **dict.fromkeys(["itertools.pairwise", "typing.TypeAlias", "typing.ParamSpec",
                     "typing.TypeGuard", "typing.Concatenate", "builtins.aiter",
                     "builtins.anext", "builtins.EncodingWarning"], (3, 10)),
    **dict.fromkeys(["tomllib", "typing.Self", "typing.Never", "typing.LiteralString",
                     "typing.assert_never", "typing.reveal_type", "typing.Required",
                     "typing.NotRequired", "enum.StrEnum", "contextlib.chdir", "datetime.UTC",
                     "builtins.ExceptionGroup", "builtins.BaseExceptionGroup"], (3, 11)),
    **dict.fromkeys(["itertools.batched", "typing.override"], (3, 12)),
    **dict.fromkeys(["warnings.deprecated", "copy.replace"], (3, 13)),
}
# keyword arguments by the Python release that added them: (callable name, keyword)
PYTHON_KWARGS = {("zip", "strict"): (3, 10), ("dataclass", "kw_only"): (3, 10),
                 ("dataclass", "slots"): (3, 10), ("field", "kw_only"): (3, 10)}


def declared_floors(text: str):
    """(python, numpy) floors as version tuples, read from pyproject.toml's text."""
    py = re.search(r'requires-python\s*=\s*">=\s*(\d+)\.(\d+)', text)
    npy = re.search(r'"numpy\s*>=\s*(\d+)\.(\d+)', text)
    assert py and npy, "pyproject.toml must declare requires-python >= and numpy >="
    return tuple(map(int, py.groups())), tuple(map(int, npy.groups()))


def _dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id] + parts[::-1])
    return None


def problems(source: str, name: str, python_floor, numpy_floor):
    """Every use in ``source`` outside the range, as 'name:line: what' strings."""
    try:
        tree = ast.parse(source, name, feature_version=python_floor)
    except SyntaxError as e:
        return [f"{name}:{e.lineno}: syntax newer than Python {python_floor}: {e.msg}"]
    out = []
    has_future = any(isinstance(n, ast.ImportFrom) and n.module == "__future__"
                     and any(a.name == "annotations" for a in n.names) for n in tree.body)

    def flag(node, msg):
        out.append(f"{name}:{node.lineno}: {msg}")

    for node in ast.walk(tree):
        dotted = _dotted(node) if isinstance(node, ast.Attribute) else None
        if dotted and dotted.split(".")[0] in ("np", "numpy"):
            rest = dotted.split(".", 1)[1]
            for key in (rest, rest.split(".")[0], ".".join(rest.split(".")[:2])):
                if NUMPY_ADDED.get(key, (0, 0)) > numpy_floor:
                    flag(node, f"np.{key} is new in numpy {NUMPY_ADDED[key]}")
                    break
                if key in NUMPY_REMOVED and key == rest.split(".")[0]:
                    flag(node, f"np.{key} is removed or deprecated in numpy 2")
                    break
        if dotted and PYTHON_ADDED.get(dotted, (0, 0)) > python_floor:
            flag(node, f"{dotted} is new in Python {PYTHON_ADDED[dotted]}")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mod = getattr(node, "module", None)
            for a in node.names:
                full = f"{mod}.{a.name}" if mod else a.name
                if PYTHON_ADDED.get(full, (0, 0)) > python_floor:
                    flag(node, f"{full} is new in Python {PYTHON_ADDED[full]}")
        if isinstance(node, ast.Name) and PYTHON_ADDED.get(f"builtins.{node.id}", (0, 0)) > python_floor:
            flag(node, f"builtin {node.id} is new in Python {PYTHON_ADDED['builtins.' + node.id]}")
        if isinstance(node, ast.Call):
            fname = _dotted(node.func)
            fname = fname.split(".")[-1] if fname else None
            for kw in node.keywords:
                if PYTHON_KWARGS.get((fname, kw.arg), (0, 0)) > python_floor:
                    flag(node, f"{fname}({kw.arg}=) is new in Python {PYTHON_KWARGS[(fname, kw.arg)]}")
            if (fname in ("isinstance", "issubclass") and len(node.args) == 2
                    and isinstance(node.args[1], ast.BinOp) and python_floor < (3, 10)):
                flag(node, f"{fname}(x, A | B) needs Python 3.10; use a tuple")
        if not has_future and python_floor < (3, 10):
            anns = []
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                anns = [a.annotation for a in args + [node.args.vararg, node.args.kwarg]
                        if a is not None and a.annotation is not None] + [node.returns]
            elif isinstance(node, ast.AnnAssign):
                anns = [node.annotation]
            if any(isinstance(n, ast.BinOp) for a in anns if a is not None for n in ast.walk(a)):
                flag(node, "X | Y annotation needs Python 3.10 or `from __future__ import annotations`")
    return sorted(set(out), key=lambda s: (int(s.split(":")[1]), s))


def test_declared_floors_are_read():
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    py, npy = declared_floors(text)
    assert py >= (3, 9) and npy >= (1, 23)


@pytest.mark.parametrize("snippet, needle", [
    ("match x:\n    case 1:\n        pass\n", "syntax newer"),
    ("import numpy as np\nnp.exceptions.AxisError\n", "np.exceptions is new in numpy (1, 25)"),
    ("import numpy as np\nnp.trapezoid([1])\n", "np.trapezoid is new in numpy (2, 0)"),
    ("import numpy as np\nnp.linalg.vector_norm([1])\n", "np.linalg.vector_norm is new"),
    ("import numpy as np\nnp.float_\n", "np.float_ is removed"),
    ("import numpy as np\nnp.AxisError\n", "np.AxisError is removed"),
    ("list(zip([1], [2], strict=True))\n", "zip(strict=) is new in Python (3, 10)"),
    ("from dataclasses import dataclass\n@dataclass(slots=True)\nclass A:\n    x: int\n",
     "dataclass(slots=) is new"),
    ("isinstance(1, int | float)\n", "isinstance(x, A | B)"),
    ("def f(x: int | None): pass\n", "X | Y annotation"),
    ("import itertools\nitertools.pairwise([1, 2])\n", "itertools.pairwise is new"),
    ("from itertools import batched\n", "itertools.batched is new"),
    ("import tomllib\n", "tomllib is new"),
    ("raise ExceptionGroup('a', [])\n", "builtin ExceptionGroup is new"),
])
def test_scan_flags_each_kind(snippet, needle):
    found = problems(snippet, "snippet.py", (3, 9), (1, 23))
    assert any(needle in p for p in found), found


@pytest.mark.parametrize("snippet", [
    "from __future__ import annotations\ndef f(x: int | None): pass\n",
    "import numpy as np\nnp.bool_(True); np.float64(1); np.linalg.norm([1])\n",
    "try:\n    from numpy.exceptions import AxisError\nexcept ImportError:\n"
    "    from numpy import AxisError\n",
    "isinstance(1, (int, float))\n",
])
def test_scan_passes_what_the_floor_supports(snippet):
    assert problems(snippet, "snippet.py", (3, 9), (1, 23)) == []


def test_source_is_inside_the_declared_range():
    py, npy = declared_floors((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    found = []
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = str(path.relative_to(ROOT))
            found += problems(path.read_text(encoding="utf-8"), rel, py, npy)
    assert found == [], "\n".join(found)
