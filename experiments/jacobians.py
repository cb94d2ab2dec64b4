"""The Jacobians of LayerNorm, RMSNorm and softmax for one row, drawn, with their null directions.

    python -m experiments.jacobians                      # outputs/jacobians/jacobians.png
    python -m experiments.jacobians --output-dir docs/img

For one row x of C = 8 entries (``--seed``; weight 1, so the Jacobian is the normalisation's
own) it builds J[i, j] = d out_i / d x_j from each layer's own backward (row i is the backward
of the one-hot upstream gradient e_i), finds the directions v with J v = 0 numerically (the
right singular vectors whose singular values are below ``1e-3`` of the largest), checks them
against the ones the derivation predicts (LayerNorm: the all-ones vector and xhat; RMSNorm:
xhat; softmax: the all-ones vector), and draws the three Jacobians as heatmaps.

Why it matters: the backward computes dx = J^T dout, which has no component along a null
direction of J. LayerNorm's J sends two directions to 0, so its backward removes two components
(the mean of dxhat, term 2, and its projection on xhat, term 3); RMSNorm's only one (the
projection, its term 2); softmax's the all-ones direction (sum(dy * y), shared by every entry).
docs/derivations.md shows the figure.
"""
import sys

from experiments import cli

PROG = "python -m experiments.jacobians"
with cli.errors(PROG):   # Ctrl-C while NumPy loads: one line
    import numpy as np

    from experiments import figures
    from layers.layernorm import layernorm_backward, layernorm_forward
    from layers.rmsnorm import rmsnorm_backward, rmsnorm_forward
    from layers.softmax import softmax_backward, softmax_forward
C = 8
TOL = 1e-3       # a singular value below TOL times the largest counts as 0


def jacobian(forward, backward, x, *args, **kwargs):
    """J (C, C), ``J[i, j] = d out_i / d x_j`` of the row ``x`` (C,): row i is ``backward`` of
    the one-hot upstream gradient e_i (the vector-Jacobian product e_i^T J)."""
    out, cache = forward(x[None, :], *args, **kwargs)
    rows = []
    for i in range(x.size):
        e = np.zeros_like(out)
        e[0, i] = 1.0
        g = backward(e, cache)
        rows.append((g[0] if isinstance(g, tuple) else g)[0])
    return np.array(rows), out[0], cache


def null_space(J, tol=TOL):
    """An orthonormal basis (k, C) of the directions J sends to about 0, and the singular values
    of J (largest first)."""
    _, s, vt = np.linalg.svd(J)
    return vt[s < tol * s[0]], s


def layers(seed=0):
    """``[(name, J, predicted {label: v}, singular values, basis of the null space found,
    (label, D) the first term's part of J: rstd I for the norms, diag(y) for softmax)]`` for
    LayerNorm, RMSNorm and softmax at one random row of C entries; ``J - D`` is the low-rank part
    that removes the null directions."""
    x = np.random.default_rng(seed).standard_normal(C)
    ones, w, b = np.ones(C), np.ones(C), np.zeros(C)
    ln, _, (ln_xhat, _, ln_rstd) = jacobian(layernorm_forward, layernorm_backward, x, w, b,
                                            eps=1e-5)
    rms, _, (rms_xhat, _, rms_rstd) = jacobian(rmsnorm_forward, rmsnorm_backward, x, w, eps=1e-6)
    sm, y, _ = jacobian(softmax_forward, softmax_backward, x, axis=-1)
    found = []
    for name, J, predicted, diagonal in (
            ("LayerNorm", ln, {"ones": ones, "xhat": ln_xhat[0]}, ("rstd I", ln_rstd * np.eye(C))),
            ("RMSNorm", rms, {"xhat": rms_xhat[0]}, ("rstd I", rms_rstd * np.eye(C))),
            ("softmax", sm, {"ones": ones}, ("diag(y)", np.diag(y)))):
        basis, s = null_space(J)
        found.append((name, J, predicted, s, basis, diagonal))
    return found


def lines(found):
    """What the command prints: per layer its singular values, the null directions found, each
    predicted one checked (J v ~ 0, and inside the space found), then the reading."""
    out = [f"Jacobians d out / d x of one row of C = {C} (weight 1), from each layer's backward; "
           f"a direction v with J v = 0 is a change of x that changes nothing.", ""]
    for name, J, predicted, s, basis, _ in found:
        out.append(f"{name}: singular values " + " ".join(f"{v:.2g}" for v in s))
        out.append(f"  null directions found: {len(basis)} (singular values below {TOL:g} "
                   f"of the largest)")
        for label, v in predicted.items():
            u = v / np.linalg.norm(v)
            out.append(f"  {label:<5} |J v| / |J| |v| = {np.linalg.norm(J @ u) / s[0]:.1e}; its "
                       f"part inside the null space found: {np.linalg.norm(basis @ u):.6f}")
        out.append("")
    return out + [
        "Reading: the backward computes dx = J^T dout, which has no component along a null "
        "direction of J. LayerNorm's Jacobian sends two directions to zero (ones and xhat), so "
        "its backward removes two components of dxhat (its mean, term 2, and its projection on "
        "xhat, term 3); RMSNorm's sends one (xhat), so its backward removes one (term 2); "
        "softmax's sends the all-ones direction to zero: adding a constant to every logit "
        "changes nothing."]


def draw(found, path):
    """Top row: the three Jacobians as heatmaps (one colour scale each, 0 white); bottom row: J
    minus its first term's part (rstd I; softmax's diag(y)), the low-rank part that takes the
    null directions out."""
    fig, axes = figures.subplots(2, 3, figsize=(13, 8.6))
    for col, (name, J, predicted, s, basis, (dlabel, D)) in enumerate(found):
        rank = int(np.sum(np.linalg.svd(J - D, compute_uv=False) > TOL * s[0]))
        for ax, A, title in (
                (axes[0, col], J, f"{name}: J[i, j] = d out_i / d x_j\nzero along "
                 f"{' and '.join(predicted)} ({len(basis)} null direction"
                 f"{'s' if len(basis) != 1 else ''})"),
                (axes[1, col], J - D, f"{name}: J - {dlabel}, rank {rank}\nthe part that takes "
                 f"{' and '.join(predicted)} out")):
            lim = np.abs(A).max()
            im = ax.imshow(A, cmap="RdBu_r", vmin=-lim, vmax=lim)
            ax.set_title(title, fontsize=10)
            ax.set_xlabel("j, the input entry x_j")
            ax.set_ylabel("i, the output entry out_i")
            ax.set_xticks(range(C))
            ax.set_yticks(range(C))
            fig.colorbar(im, ax=ax, shrink=0.8)
    fig.suptitle(f"Jacobians of one row of C = {C} (weight 1; red positive, blue negative): the "
                 f"backward is dx = J^T dout, with no component along a null direction",
                 fontsize=11)
    figures.save(fig, path)


def run(argv):
    """``python -m experiments.jacobians [--output-dir D] [--seed S] [--no-plots]``."""
    p = cli.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    p.add_argument("--output-dir", type=cli.path_arg, default="outputs/jacobians",
                   help="where jacobians.png goes")
    p.add_argument("--seed", type=cli.nonnegative_int, default=0, help="of the row x")
    p.add_argument("--no-plots", action="store_true", help="print only")
    args = p.parse_args(argv)
    plots = not args.no_plots
    if plots and not figures.available():
        raise cli.UsageError(figures.INSTALL_HINT + "; --no-plots prints the directions only")
    out = cli.output_dir(args.output_dir) if plots else None
    found = layers(args.seed)
    print("\n".join(lines(found)))
    if plots:
        cli.write_outputs(out, {"jacobians.png": lambda path: draw(found, path)})
        print(f"\nFigure written to {out / 'jacobians.png'}")
    return 0


if __name__ == "__main__":
    with cli.errors(PROG):
        sys.exit(run(sys.argv[1:]))
