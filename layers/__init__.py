"""layers: hand-derived forward/backward passes of the layers modern LLMs use.

One file a layer (``layernorm.py``, ``rmsnorm.py``, ...), read top to bottom: the derivation in
the module docstring, the pure NumPy pair ``<name>_forward(...) -> (out, cache)`` /
``<name>_backward(dout, cache) -> grads``, its ``minigrad.Function`` adapter, the public
function, whose input checks are calls into ``_checks.py`` (``checks.py`` re-exports the few
that ``gpt`` uses), and the Module (``rmsnorm.RMSNorm``). ``layers.functional`` and
``layers.modules`` re-export the functions and the Modules.
"""
