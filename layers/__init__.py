"""layers: hand-derived forward/backward passes of the layers modern LLMs use.

One file a layer (``layernorm.py``, ``rmsnorm.py``, ...), read top to bottom: the derivation in
the module docstring, the pure NumPy pair ``<name>_forward(...) -> (out, cache)`` /
``<name>_backward(dout, cache) -> grads``, its ``minigrad.Function`` adapter, the public
function (its input checks are calls into ``checks.py``, shared with ``gpt``) and its Module
(``rmsnorm.RMSNorm``). ``layers.functional`` and ``layers.modules`` re-export them.
"""
