"""layers: hand-derived forward/backward passes of the layers modern LLMs use.

One file a layer (``layernorm.py``, ``rmsnorm.py``, ...), the maths and nothing else, read top
to bottom: the derivation in the module docstring, the pure NumPy pair
``<name>_forward(...) -> (out, cache)`` / ``<name>_backward(dout, cache) -> grads``, and its
``minigrad.Function`` in one line
(``RMSNormFunction = from_pair(rmsnorm_forward, rmsnorm_backward, "RMSNormFunction")``).
The PyTorch faces live apart, as PyTorch's own do: the functions with PyTorch's signatures in
``functional.py`` (``F.rms_norm``), the Modules in ``modules.py`` (``RMSNorm``; ``backward=``
puts another backward of the same signature in place of the layer's own), and they, not the
layer files, call the input checks of ``checks.py`` (shared with ``gpt``).
"""
