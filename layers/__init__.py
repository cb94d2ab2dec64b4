"""layers: hand-derived forward/backward passes of the layers modern LLMs use.

One file a layer (``layernorm.py``, ``rmsnorm.py``, ...), read top to bottom: the derivation in
the module docstring, the pure NumPy pair ``<name>_forward(...) -> (out, cache)`` /
``<name>_backward(dout, cache) -> grads``, its ``minigrad.Function`` in one line
(``RMSNormFunction = from_pair(rmsnorm_forward, rmsnorm_backward, "RMSNormFunction")``), the
public function (its input checks are calls into ``checks.py``, shared with ``gpt``) and its
Module (``rmsnorm.RMSNorm``: parameters checked once at construction, then ``forward`` applies
the Function; ``backward=`` puts another backward of the same signature in place of the
layer's own). ``layers.functional`` and ``layers.modules`` re-export them.
"""
