"""The chapter's PyTorch models, loaded at run time for side-by-side measurements.

The chapter's ``build.py`` (``ModernGPT``, with the project-5 helpers it imports) lives outside
this project, in a folder laid out as ``projects/07_the-details-that-matter/build.py``. The
project never depends on it: ``experiments.bench`` asks this module for it, and runs without the
reference when torch or the folder is missing.

``find_reference`` looks for ``shared/reference/torch_seed`` beside the checkout (in the
checkout's parent folders); ``load_reference`` imports ``build.py`` from a folder and returns the
module. ``build.py``'s helpers read the corpus named by the ``SEED_CORPUS`` environment variable
at import time; when it is unset, the built-in corpus is named (the models do not use it).
"""
from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Optional

from gpt.data import BUILTIN_CORPUS_PATH

__all__ = ["BUILD_PY", "find_reference", "load_reference", "torch_model_like"]

#: Where ``build.py`` sits inside a reference folder.
BUILD_PY = Path("projects") / "07_the-details-that-matter" / "build.py"

_ROOT = Path(__file__).resolve().parent.parent  # the checkout


def find_reference() -> Optional[Path]:
    """The first ``<ancestor>/shared/reference/torch_seed`` holding ``BUILD_PY``, looking from the
    checkout's parent upwards (three levels); None when there is none."""
    for base in list(_ROOT.parents)[:3]:
        candidate = base / "shared" / "reference" / "torch_seed"
        if (candidate / BUILD_PY).is_file():
            return candidate
    return None


def load_reference(folder: Path) -> ModuleType:
    """Import the chapter's ``build.py`` from ``folder`` (a reference folder, or the file itself).

    Returns:
        the module (``ModernGPT``, ``p5.GPTConfig``, ...).

    Raises:
        ImportError: torch is not installed.
        FileNotFoundError: ``folder`` holds no ``build.py``.
    """
    import torch  # noqa: F401  (an ImportError here means: no reference)

    path = Path(folder)
    if path.is_dir():
        path = path / BUILD_PY
    if not path.is_file():
        raise FileNotFoundError(f"no {BUILD_PY} in {folder}")
    os.environ.setdefault("SEED_CORPUS", str(BUILTIN_CORPUS_PATH))
    spec = importlib.util.spec_from_file_location("chapter_build", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["chapter_build"] = module
    spec.loader.exec_module(module)
    return module


def torch_model_like(ref: ModuleType, model):
    """The chapter's ``ModernGPT`` with the same configuration and the same weights as ``model``
    (a ``gpt.GPT`` with learned positions), so both start from the same point.

    Parameter names are PyTorch's on both sides; the reference's ``lm_head.weight`` is the tied
    token embedding.
    """
    import torch

    c = model.config
    cfg = ref.p5.GPTConfig(block_size=c.block_size, n_layers=c.n_layers, n_heads=c.n_heads,
                           d_model=c.d_model)
    tm = ref.ModernGPT(cfg, vocab_size=c.vocab_size, norm_type=c.norm, mlp_type=c.mlp)
    state = {k: torch.from_numpy(v.copy()) for k, v in model.state_dict().items()}
    state["lm_head.weight"] = state["token_embedding.weight"]
    missing, unexpected = tm.load_state_dict(state, strict=False)
    if unexpected or [k for k in missing if not k.endswith(".mask")]:
        raise ValueError(f"reference model does not match: missing {missing}, "
                         f"unexpected {unexpected}")
    return tm
