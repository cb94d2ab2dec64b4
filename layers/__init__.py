"""layers: hand-derived forward/backward passes of the layers modern LLMs use.

One file a layer (``layernorm.py``, ``rmsnorm.py``, ...), each a pure NumPy pair
``*_forward(...) -> (out, cache)`` / ``*_backward(dout, cache) -> grads`` plus a thin
``minigrad.Function`` adapter; ``layers.functional`` collects the functional API and
``layers.modules`` the Modules.
"""
