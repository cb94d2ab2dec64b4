"""Affine map ``x W^T + b`` in PyTorch's Linear layout, as one autograd node.

Shapes: B batch, T sequence, C = in_features, O = out_features; x (..., C) (typically (B, T, C)),
weight (O, C) (PyTorch's ``nn.Linear`` layout), bias (O,) or None. The leading axes are flattened
to N = B*T rows so that the whole layer is one 2-D matrix product.

Forward (``torch.nn.functional.linear``)::

    out = x W^T + b                        (..., O)

Cache: x and W (references to the inputs, no copies) and whether there is a bias. Each
weight's gradient needs the other operand of the product; the bias gradient needs nothing.

Backward (for C = A B: dA = dC B^T, dB = A^T dC; here A = x_flat, B = W^T)::

    dx = dout W                            (..., C)
    dW = dout_flat^T x_flat                (O, C)
    db = sum of dout over all leading axes (O,)

Derivation: docs/derivations.md, section Linear.
PyTorch faces: ``layers.functional.linear``, ``layers.modules.Linear``.
"""
from minigrad import from_pair


def linear_forward(x, weight, bias=None):
    """``out = x W^T + b``.

    Args:
        x (np.ndarray): (..., C). weight (np.ndarray): (O, C). bias (np.ndarray | None): (O,).

    Returns:
        (out, cache): out (..., O); cache = (x, weight, has_bias).
    """
    C = x.shape[-1]
    x2 = x.reshape(-1, C)                     # (N, C), a view when x is contiguous
    out = x2 @ weight.T                       # (N, O)
    if bias is not None:
        out = out + bias                      # broadcast over rows
    return out.reshape(x.shape[:-1] + (weight.shape[0],)), (x, weight, bias is not None)  # (..., O)


def linear_backward(dout, cache):
    """Gradients of ``linear_forward``.

    Args:
        dout (np.ndarray): (..., O).
        cache: (x, weight, has_bias) from ``linear_forward``.

    Returns:
        (dx, dW, db): shapes (..., C), (O, C), (O,); db is None without a bias.
    """
    x, weight, has_bias = cache
    O, C = weight.shape
    d2 = dout.reshape(-1, O)                        # (N, O)
    dx = (d2 @ weight).reshape(x.shape)             # dx = dout W       (..., C)
    dW = d2.T @ x.reshape(-1, C)                    # dW = dout^T x     (O, C)
    db = d2.sum(axis=0) if has_bias else None       # db = sum_n dout_n (O,)
    return dx, dW, db


LinearFunction = from_pair(linear_forward, linear_backward, "LinearFunction",
                           wrt=("x", "weight", "bias"))   # bias optional: None without one
