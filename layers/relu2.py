"""ReLU², the squared ReLU, with a hand-derived backward.

Shapes: elementwise; x is any shape (in the GPT MLP (B, T, 4C)).

Forward (So et al. 2021, "Primer: Searching for Efficient Transformers for Language
Modeling", sec. 3; the chapter's step 6)::

    r   = max(x, 0)
    out = r^2

Cache: ``r``, the one array the backward reads (x itself is not needed: r carries both the
value and the mask x > 0).

Backward::

    dx = dout * 2 r

The derivative is continuous: 2 max(x, 0) is 0 at x = 0 from both sides, so there is no kink
convention to choose (unlike ReLU).

Derivation: docs/derivations.md, section ReLU².
PyTorch faces: ``layers.functional.relu2``, ``layers.modules.MLP(activation="relu2")``.
"""
import numpy as np

from minigrad import from_pair


def relu2_forward(x: np.ndarray):
    """ReLU² forward in NumPy: ``out = max(x, 0)^2``.

    Returns:
        (out, cache): ``out`` in x's shape and dtype; ``cache = r = max(x, 0)``.
    """
    r = np.maximum(x, 0)    # relu(x); the integer 0 keeps x's dtype
    return r * r, r


def relu2_backward(dout: np.ndarray, cache):
    """ReLU² backward in NumPy: ``dx = dout * 2 max(x, 0)``."""
    r = cache
    return dout * (2 * r)


ReLU2Function = from_pair(relu2_forward, relu2_backward, "ReLU2Function")
