"""layers: hand-derived forward/backward passes of the layers modern LLMs use.

One file a layer (``layernorm.py``, ``rmsnorm.py``, ...), read top to bottom: the derivation in
the module docstring, the pure NumPy pair ``<name>_forward(...) -> (out, cache)`` /
``<name>_backward(dout, cache) -> grads``, its ``minigrad.Function`` adapter (``PairFunction``
from ``_function.py`` when the cache is a tuple of arrays), and last the public wrapper, whose
input checks are calls into ``_checks.py`` (``checks.py`` re-exports the few that ``gpt``
uses). ``layers.functional`` collects the functional API and ``layers.modules`` the Modules.
"""
