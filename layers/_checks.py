"""Input checks shared by the functional entry points of ``layers``."""
from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from minigrad import Tensor


def float_input(t: Any, name: str, fn: str) -> Tuple[Any, np.ndarray]:
    """Check that ``t`` (a Tensor, or an array-like taken as a constant) is floating.

    Args:
        t: the input.
        name: its argument name, for the message.
        fn: the calling function's name, for the message.

    Returns:
        (operand, array): ``operand`` is ``t`` itself when it is a Tensor (so gradients reach
        it) and the array otherwise; ``array`` is the underlying np.ndarray.

    Raises:
        TypeError: if the dtype is not floating.
    """
    a = t.data if isinstance(t, Tensor) else np.asarray(t)
    if not np.issubdtype(a.dtype, np.floating):
        raise TypeError(f"{fn}: {name} must have a floating dtype, got {a.dtype}")
    return (t if isinstance(t, Tensor) else a), a
