"""The PyTorch wing of minigrad: what a user coming from PyTorch types, beside the engine.

``minigrad/engine.py`` and ``minigrad/ops.py`` are the engine (reverse mode and the primitive
ops, NumPy's rules). Importing ``minigrad`` imports this package, which gives ``Tensor``
PyTorch's behaviour:

* ``rules.py``: fills the engine's hooks (``engine.Hooks``): Python floats as float32,
  PyTorch's result dtypes, PyTorch's indexing, ``ValueRuntimeError`` for NumPy's ValueError,
  the version counters that catch an array saved for backward and modified in place;
* ``methods.py``: Tensor's methods in PyTorch's spellings (``dim=``, ``view``, ``permute``,
  ``max(dim=)``, ``amax``, ``clamp``, ...), comparisons, NumPy interoperation, and the
  functions ``where``, ``maximum``, ``minimum``, ``masked_fill``, ``cat``, ``stack``, ``split``,
  ``broadcast_to``;
* ``inplace.py``: ``+=``, ``add_``, ``zero_``, ``t[i] = v``, ... and their place in the graph;
* ``grad_mode.py``: ``no_grad``, ``enable_grad``, ``set_grad_enabled``, ``inference_mode`` in
  every form PyTorch accepts;
* ``factories.py``: ``tensor``, ``zeros``, ``ones``, ``randn``, ``arange``, ...
"""
from . import rules, methods, inplace  # noqa: F401  (each attaches itself to Tensor)
