"""The file ``python -m experiments.exercises start NAME`` writes: the layer's forward in full
(copied from its source, with the helpers it reads), then the backward to write, whose docstring
(``PROMPTS``) says what its cache holds, what it returns, and leads through the derivation
without giving it; its body raises ``NotImplementedError``.
"""
import inspect
import re

PROMPTS = {
    "layernorm": '''cache: (xhat, weight, rstd): xhat (..., C) = (x - mean) * rstd, the normalised rows;
        weight (C,), the gain; rstd (..., 1) = 1 / sqrt(var + eps), one per row. x itself is
        not kept: write everything with xhat and rstd.
    Returns: dx (..., C), dweight (C,), dbias (C,).

    Steps:
        1. out = weight * xhat + bias, the same weight and bias in every row: which entries of
           out does weight[c] reach? Sum over every leading axis ((2, 3, 6) has 2 * 3 rows).
        2. Name dxhat = dL/dxhat.
        3. One row: xhat_j = (x_j - mean) * rstd reaches x_i three ways: directly, through the
           mean and through rstd (var). Find d mean / d x_i, d var / d x_i (sum_j (x_j - mean)
           = 0 helps), then d rstd / d x_i, written with rstd and xhat_i.
        4. Contract dx_i = sum_j dxhat_j d xhat_j / d x_i: one term per path. A mean over a row
           is np.mean(a, axis=-1, keepdims=True).

    Check yourself: every row of dx sums to 0, and with C = 1 dx is exactly 0.''',
    "rmsnorm": '''cache: (xhat, weight, rstd): xhat (..., C) = x * rstd; weight (C,), the gain;
        rstd (..., 1) = 1 / sqrt(ms + eps), ms = mean(x^2) of the row.
    Returns: dx (..., C), dweight (C,).

    Steps:
        1. dweight: which entries of out = weight * xhat does weight[c] reach?
        2. Name dxhat = dL/dxhat.
        3. One row: xhat_j = x_j * rstd reaches x_i directly and through rstd. Find
           d ms / d x_i, then d rstd / d x_i, written with rstd and xhat_i.
        4. Contract dx_i = sum_j dxhat_j d xhat_j / d x_i. How many terms, with no mean?

    Check yourself: with eps = 0 each row of dx is orthogonal to its x (np.sum(dx * x, axis=-1)
    is 0): moving x along itself only rescales it, which RMSNorm undoes.''',
    "gelu": '''cache: (x, t): the input and t = tanh(u), u = k (x + c x^3), k = GELU_K = sqrt(2/pi),
        c = GELU_C = 0.044715.
    Returns: dx, x's shape.

    Steps:
        1. out = 0.5 x (1 + t) is a product: the product rule gives two terms.
        2. The first: the derivative of 0.5 x, times the other factor.
        3. The second: 0.5 x times dt/dx = tanh'(u) du/dx. Write tanh'(u) with the saved t
           alone (cosh and exp overflow for large |u|), then differentiate u = k (x + c x^3).

    Check yourself: the derivative is 0.5 at x = 0, tends to 1 for large x, 0 for very negative.''',
    "relu2": '''cache: r = max(x, 0), x's shape (the array itself, not a tuple).
    Returns: dx, x's shape.

    Steps:
        1. Where x < 0, out is 0 whatever x is; where x > 0, out = x^2. Their derivatives?
        2. Write both with r alone: no mask is needed (at x = 0 both sides agree).''',
    "silu": '''out = x * sigmoid(x). cache: (x, s): the input and s = sigmoid(x).
    Returns: dx, x's shape.

    Steps:
        1. out = x * s is a product: the product rule gives two terms.
        2. d s / d x: differentiate 1 / (1 + exp(-x)) and write it with s alone.
        3. Put them together with no exp: the forward saved s for you.

    Check yourself: silu'(0) = 0.5; it tends to 1 for large x and to 0 for very negative x.''',
    "swiglu": '''cache: (x2, a, s, u, g, w_gate, w_up, w_down): x2 (N, C), x as N rows; a = x2 Wg^T,
        the gate's pre-activation; s = sigmoid(a); u = x2 Wu^T; g = a * s = silu(a), each
        (N, H); w_gate (H, C), w_up (H, C), w_down (O, H): PyTorch's (out, in) layout.
        h = g * u is not kept: recompute it.
    Returns: dx of x's shape (dout's leading axes, then C), dw_gate, dw_up, dw_down of
        their weights' shapes.

    Steps:
        1. out = h Wd^T. For y = x W^T, which product gives dL/dx and which dL/dW? The shapes
           leave one choice each: dh and dw_down.
        2. h = g * u: the product rule gives du and dg.
        3. g = silu(a): da from dg (the SiLU exercise: silu'(a), written with a and s).
        4. a = x Wg^T and u = x Wu^T: dw_gate and dw_up as in step 1.
        5. x feeds both a and u. What happens to its two gradients?''',
    "rope": '''cache: (cos, sin), each (1, 1, T, hs): cos(theta) and sin(theta) of every position,
        each angle written for both members of its pair (columns 2i and 2i + 1).
    Returns: dx, dout's shape.

    Steps:
        1. One pair: o0 = c x0 - s x1, o1 = s x0 + c x1, a 2x2 matrix R times (x0, x1).
        2. The map is linear in x: its vector-Jacobian product is its transpose applied to
           dout. Which rotation is R's transpose?
        3. In out = x * cos + rotate_half(x) * sin, rotate_half is linear too. What is its
           transpose, written with rotate_half? Try it on one pair (a, b).
        4. cos and sin are constants: they get no gradient.

    Check yourself: np.linalg.norm(dx) equals np.linalg.norm(dout): a rotation keeps lengths.''',
    "softmax": '''cache: (y, axis): the output y = softmax(x) and the axis it normalised.
    Returns: dx, y's shape.

    Steps:
        1. One row: y_i = e_i / Z with e_i = exp(x_i - m), Z = sum_j e_j. y does not depend
           on the shift m: hold it fixed.
        2. The quotient rule: d y_i / d x_j, written with y alone (one part only for i = j).
        3. dx_j = sum_i dy_i d y_i / d x_j without forming the C x C Jacobian: a sum along
           `axis` with keepdims=True.

    Check yourself: every row of dx sums to 0 (a constant added to a row changes nothing).''',
    "cross_entropy": '''With reduction "mean" (the default) the loss and dloss are 0-d arrays.
    cache: (probs, t, valid, eps, reduction, count, shape): probs (N, V), the softmax of the
        logits' rows (N = B * T); t (N,), the targets; valid (all True: no ignore_index), eps
        (0.0: no label smoothing) and reduction ("mean") are for later, the derivation's
        Options; count = N, the rows the mean divides by; shape, the logits' shape.
    Returns: dlogits of shape `shape`.

    Steps:
        1. One row: loss_n = log(sum_v exp(x_v)) - x_t. Differentiate the log-sum-exp with
           respect to x_v: which array of the cache is it?
        2. Differentiate -x_t: which entry does it touch? (a[np.arange(N), t] picks one entry
           per row: no one-hot matrix is needed.)
        3. The loss is the mean over the rows, times the upstream dloss. Reshape to `shape`.

    Check yourself: every row of dlogits sums to 0.''',
    "attention": '''cache: (q, k, v, P, scale): q, k (B, H, T, hs); v (B, H, T, hv) (hv = hs in the
        GPT, not in every check); P (B, H, T, T) = softmax(S) of the scores
        S = q k^T * scale, row by row, 0 where the causal mask hid a key; scale = 1 / sqrt(hs).
    Returns: dq, dk, dv, each of its input's shape.

    Steps:
        1. out = P v is a matrix product. For C = A B, what are dA and dB? Derive them from
           dL = sum(dC * d(A B)), or let the shapes decide: dP and dv.
        2. P = softmax(S), row by row: dS from dP (the Softmax exercise, along the last axis).
           The mask needs nothing more: look at what P is where it hid a key.
        3. S = q k^T * scale: the matrix rule again gives dq and the gradient of k^T; transpose
           that for dk. `@` multiplies over the leading axes; np.swapaxes(a, -1, -2)
           transposes the last two.

    Check yourself: with the causal mask, an upstream gradient at position 0 alone gives dk
    and dv that are 0 past position 0.''',
    "linear": '''cache: (x, weight, has_bias): x (..., C); weight (O, C) in PyTorch's (out, in)
        layout; has_bias, whether a bias was added (always, in the check).
    Returns: dx (..., C), dweight (O, C), dbias (O,) (None when has_bias is False).

    Steps:
        1. Flatten the rows: X = x.reshape(-1, C), D = dout.reshape(-1, O); out = X W^T + b.
        2. The matrix rule: for c = a b, derive da and db from dL = sum(dc * d(a b)), with
           a = X and b = W^T. It gives the gradient of W^T: what is dweight?
        3. b is added to every row. Its gradient? Give dx x's shape.

    Check yourself: every shape. A square weight hides a transposed dweight from any shape
    check, but not from this one's values.''',
    "embedding": '''cache: (idx, shape, dtype): idx flattened to (N,) integers, and the weight's shape
        (V, C) and dtype. dout has idx's shape + (C,).
    Returns: dweight of that shape and dtype.

    Steps:
        1. out[n] = weight[idx[n]]. What is d out[n, c] / d weight[v, c']?
        2. The chain rule sums over every n. Which rows of dweight get something, and what
           does a row looked up twice get?
        3. Careful: a[idx] = values keeps one value where idx repeats; np.add has a method that
           adds every one.''',
}


def _source_of(module, name):
    """The source of ``name`` in ``module``: a function's definition, or a constant's line."""
    obj = getattr(module, name)
    if callable(obj):
        return inspect.getsource(obj)
    return re.search(rf"^{name} = .*$", inspect.getsource(module), re.M).group(0) + "\n"


def template(ex, check_command, folder):
    """The text of the learner's file for exercise ``ex`` in ``folder``; ``check_command``
    checks it."""
    train = (f"train a GPT with it:\n\n    python -m experiments.{ex.study} --tiny --backward "
             f"{folder}\n" if ex.study else "it is yours: no GPT calls it (SwiGLU's and "
             "attention's backward passes\ntake silu' and the softmax's gradient themselves).\n")
    weights = ", random weights" if ex.weights else ""
    doc = f'''"""Exercise: the backward pass of {ex.title}.

Write `{ex.function}` at the end of this file. Above it is the layer's forward,
`{ex.name}_forward` of layers/{ex.name}.py, in full, so that you can see what it caches. Then

    {check_command}

checks your backward in float64 and float32 on random inputs{weights} and a random upstream
gradient at several shapes, against central differences and the layer's own backward, and
tells you which gradient is wrong and, where it can, what the mistake is in the terms of the
derivation. When every gradient is right, {train}
The check and a training run call the layer's own forward (this copy is for reading) and
hand your backward its cache. The derivation, when you are done or stuck:
{ex.link}.
"""'''
    head = (f"{'Gradient' if len(ex.grads) == 1 else 'Gradients'} {', '.join(ex.grads)} of "
            f"{ex.name}_forward, each of its input's dtype.\n\n    {ex.upstream}: dL/d"
            f"{'out' if ex.upstream == 'dout' else ex.upstream[1:]}, the output's shape.")
    stub = (f'def {ex.function}({ex.upstream}, cache):\n    """{head}\n    {PROMPTS[ex.name]}\n'
            f'    """\n    raise NotImplementedError("{ex.function}: not written yet")')
    constants = "".join(_source_of(ex.module, n) for n in ex.helpers
                        if not callable(getattr(ex.module, n)))
    functions = [_source_of(ex.module, n) for n in ex.helpers if callable(getattr(ex.module, n))]
    blocks = [ex.imports, constants, *functions, inspect.getsource(ex.forward), stub]
    return doc + "\n" + "\n\n\n".join(b.strip("\n") for b in blocks if b) + "\n"
