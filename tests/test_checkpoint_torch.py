"""The lines of docs/pytorch.md that load a checkpoint into PyTorch, run as written: same logits.

The code block between the ``torch-load`` markers of docs/pytorch.md is executed with the
checkpoint path replaced by a temporary file. torch is optional: skipped when it is not installed.
"""
import re
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # loads checkpoints into PyTorch; leave out with -m "not slow"

torch = pytest.importorskip("torch")

from gpt import GPT, GPTConfig, save_checkpoint  # noqa: E402
from gpt.data import CharTokenizer  # noqa: E402

DOC = Path(__file__).resolve().parents[1] / "docs" / "pytorch.md"
DOC_PATH = "outputs/four_variants/rms_swiglu.npz"


def doc_snippet() -> str:
    text = DOC.read_text(encoding="utf-8")
    m = re.search(r"<!-- torch-load: begin -->\s*```python\n(.*?)```\s*<!-- torch-load: end -->",
                  text, re.S)
    assert m, "docs/pytorch.md has no torch-load block"
    code = m.group(1)
    assert code.count(DOC_PATH) == 1
    return code


@pytest.mark.parametrize("norm, mlp, dtype", [
    ("rms", "swiglu", "float32"), ("ln", "gelu", "float64"), ("rms", "relu2", "float64"),
])
def test_doc_lines_load_a_checkpoint_into_pytorch(norm, mlp, dtype, tmp_path):
    cfg = GPTConfig(vocab_size=11, block_size=8, n_layers=2, n_heads=2, d_model=16,
                    norm=norm, mlp=mlp, dtype=dtype)
    model = GPT(cfg, seed=3)
    rng = np.random.default_rng(7)   # weights away from the initialisation (gains != 1, ...)
    model.load_state_dict({k: (v + rng.normal(0, 0.1, v.shape)).astype(v.dtype)
                           for k, v in model.state_dict().items()})
    path = tmp_path / "m.npz"
    save_checkpoint(model, path, tokenizer=CharTokenizer("abcdefghijk"))
    ns = {}
    exec(doc_snippet().replace(DOC_PATH, str(path)), ns)
    idx = rng.integers(0, 11, (3, 8))
    ours = model(idx)[0].numpy()
    with torch.no_grad():
        theirs = ns["logits"](torch.from_numpy(idx)).numpy()
    assert theirs.dtype == ours.dtype == np.dtype(dtype)
    tol = 1e-10 if dtype == "float64" else 2e-5 * np.abs(ours).max()
    np.testing.assert_allclose(theirs, ours, rtol=0, atol=tol)
