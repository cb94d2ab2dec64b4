"""Our training step against nanoGPT's at the ``shakespeare-cpu`` preset, and op by op.

    OPENBLAS_NUM_THREADS=1 python tools/bench_step.py --nanogpt PATH/TO/nanoGPT [--repeats 9]

Needs torch and a clone of karpathy/nanoGPT (its ``model.py``). Both models are built in this
process at the preset (4 layers, 4 heads, d_model 128, block 64, batch 12, no biases, 65
characters) with the same weights, and trained on the same random batches: AdamW (lr 1e-3,
weight decay 0.1 on the matrices, betas (0.9, 0.99)) after clipping at 1.0, one thread each.
Each repeat times ``--steps`` steps of one model, then of the other (the order alternates);
the ratio is taken within a repeat; printed: medians [min-max] over the repeats. nanoGPT's MLP
uses the exact (erf) GELU, ours at the preset the tanh form; ``--tanh`` gives nanoGPT's the
tanh form too.

Then op by op at the step's shapes (median of ``--repeats`` x 20 calls each, ours / PyTorch's
kernel): GELU (ours the tanh form, against PyTorch's tanh form and its exact one), LayerNorm and
the attention core forward and backward, and the step's matrix products alone (NumPy's, the
floor of a NumPy step, against PyTorch's whole step).
"""
import argparse
import importlib.util
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

B, T, V, L, H, C = 12, 64, 65, 4, 4, 128


def median_spread(xs):
    return f"{statistics.median(xs):.2f} [{min(xs):.2f}-{max(xs):.2f}]"


def models(nanogpt, tanh):
    """(ours, nanoGPT's, our optimizer, theirs) with the same weights."""
    import torch
    from gpt import GPT, GPTConfig
    from gpt.train import configure_optimizers
    spec = importlib.util.spec_from_file_location("nanogpt_model", Path(nanogpt) / "model.py")
    ng = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ng)
    ours = GPT(GPTConfig(vocab_size=V, block_size=T, n_layers=L, n_heads=H, d_model=C,
                         bias=False), 0, "gpt2")
    theirs = ng.GPT(ng.GPTConfig(block_size=T, vocab_size=V, n_layer=L, n_head=H, n_embd=C,
                                 dropout=0.0, bias=False))
    if tanh:
        for block in theirs.transformer.h:
            block.mlp.gelu = torch.nn.GELU(approximate="tanh")
    sd = ours.state_dict()
    rename = {"transformer.wte.weight": "token_embedding.weight",
              "transformer.wpe.weight": "position_embedding.weight"}
    with torch.no_grad():
        for k, t in theirs.state_dict().items():
            if k != "lm_head.weight":        # tied to wte
                t.copy_(torch.from_numpy(np.asarray(sd[rename.get(k) or k.replace(
                    "transformer.h.", "blocks.").replace("ln_1", "ln1").replace(
                    "ln_2", "ln2").replace("transformer.ln_f", "ln_f")])))
    opt_o = configure_optimizers(ours, 1e-3, 0.1, betas=(0.9, 0.99), decay="2d")
    opt_t = theirs.configure_optimizers(0.1, 1e-3, (0.9, 0.99), "cpu")
    return ours, theirs, opt_o, opt_t


def steps(args):
    """The whole step and its phases, interleaved."""
    import torch
    from minigrad.optim import clip_grad_norm_
    ours, theirs, opt_o, opt_t = models(args.nanogpt, args.tanh)
    rng = np.random.default_rng(0)
    batches = [(rng.integers(0, V, (B, T)), rng.integers(0, V, (B, T))) for _ in range(8)]
    tbatches = [tuple(map(torch.from_numpy, b)) for b in batches]
    phases = {"ours": {}, "nanoGPT": {}}

    def timed(who, marks):
        for name, (a, b) in zip(("forward", "backward", "clip", "AdamW"), zip(marks, marks[1:])):
            phases[who].setdefault(name, []).append(b - a)

    def step_ours(i):
        x, y = batches[i % 8]
        t0 = time.perf_counter()
        _, loss = ours(x, y)
        t1 = time.perf_counter()
        opt_o.zero_grad()
        loss.backward()
        t2 = time.perf_counter()
        clip_grad_norm_(ours.parameters(), 1.0)
        t3 = time.perf_counter()
        opt_o.step()
        timed("ours", (t0, t1, t2, t3, time.perf_counter()))

    def step_theirs(i):
        x, y = tbatches[i % 8]
        t0 = time.perf_counter()
        _, loss = theirs(x, y)
        t1 = time.perf_counter()
        opt_t.zero_grad(set_to_none=True)
        loss.backward()
        t2 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(theirs.parameters(), 1.0)
        t3 = time.perf_counter()
        opt_t.step()
        timed("nanoGPT", (t0, t1, t2, t3, time.perf_counter()))

    for i in range(5):
        step_ours(i), step_theirs(i)
    phases["ours"].clear(), phases["nanoGPT"].clear()
    ratio, ms = [], {"ours": [], "nanoGPT": []}
    for r in range(args.repeats):
        took = {}
        for who, f in (("ours", step_ours), ("nanoGPT", step_theirs))[::1 if r % 2 else -1]:
            t0 = time.perf_counter()
            for i in range(args.steps):
                f(i)
            took[who] = (time.perf_counter() - t0) / args.steps
            ms[who].append(1e3 * took[who])
        ratio.append(took["ours"] / took["nanoGPT"])
    print(f"step: ours {median_spread(ms['ours'])} ms, nanoGPT {median_spread(ms['nanoGPT'])} ms, "
          f"ours / nanoGPT {median_spread(ratio)}")
    for name in phases["ours"]:
        a, b = (statistics.median(phases[w][name]) for w in ("ours", "nanoGPT"))
        print(f"  {name:<9} ours {1e3 * a:6.2f} ms  nanoGPT {1e3 * b:6.2f} ms  ours / nanoGPT "
              f"{a / b:.2f}")
    return statistics.median(ms["nanoGPT"])


def per_call(f, repeats, n=20):
    """Median over ``repeats`` of the mean time of ``n`` calls of ``f``, in seconds."""
    f()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        times.append((time.perf_counter() - t0) / n)
    return statistics.median(times)


def ops(args, torch_step_ms):
    """Op by op, ours against PyTorch's kernel, at the step's shapes."""
    import torch
    from layers.attention import attention_backward, attention_forward
    from layers.gelu import gelu_backward, gelu_forward
    from layers.layernorm import layernorm_backward, layernorm_forward
    rng = np.random.default_rng(0)

    def f32(*shape):
        return rng.standard_normal(shape).astype(np.float32)
    h, dh, x, dx = f32(B, T, 4 * C), f32(B, T, 4 * C), f32(B, T, C), f32(B, T, C)
    w, b = np.ones(C, np.float32), np.zeros(C, np.float32)
    q, k, v, dy = (f32(B, H, T, C // H) for _ in range(4))
    ht, xt = torch.from_numpy(h).requires_grad_(), torch.from_numpy(x).requires_grad_()
    wt = torch.ones(C, requires_grad=True)
    qt, kt, vt = (torch.from_numpy(a).requires_grad_() for a in (q, k, v))
    gelu_t = torch.nn.functional.gelu(ht, approximate="tanh")
    gelu_exact_t = torch.nn.functional.gelu(ht)
    ln_t = torch.nn.functional.layer_norm(xt, (C,), wt)
    att_t = torch.nn.functional.scaled_dot_product_attention(qt, kt, vt, is_causal=True)
    gelu_cache, ln_cache = gelu_forward(h)[1], layernorm_forward(x, w, b)[1]
    att_cache = attention_forward(q, k, v, is_causal=True)[1]
    rows = [
        ("GELU forward", lambda: gelu_forward(h),
         lambda: torch.nn.functional.gelu(ht.detach(), approximate="tanh")),
        ("GELU backward", lambda: gelu_backward(dh, gelu_cache),
         lambda: torch.autograd.grad(gelu_t, ht, torch.from_numpy(dh), retain_graph=True)),
        ("GELU forward, PyTorch's exact (nanoGPT's)", lambda: gelu_forward(h),
         lambda: torch.nn.functional.gelu(ht.detach())),
        ("GELU backward, PyTorch's exact (nanoGPT's)", lambda: gelu_backward(dh, gelu_cache),
         lambda: torch.autograd.grad(gelu_exact_t, ht, torch.from_numpy(dh), retain_graph=True)),
        ("LayerNorm forward", lambda: layernorm_forward(x, w, b),
         lambda: torch.nn.functional.layer_norm(xt.detach(), (C,), wt.detach())),
        ("LayerNorm backward", lambda: layernorm_backward(dx, ln_cache),
         lambda: torch.autograd.grad(ln_t, (xt, wt), torch.from_numpy(dx), retain_graph=True)),
        ("attention core forward", lambda: attention_forward(q, k, v, is_causal=True),
         lambda: torch.nn.functional.scaled_dot_product_attention(
             qt.detach(), kt.detach(), vt.detach(), is_causal=True)),
        ("attention core backward", lambda: attention_backward(dy, att_cache),
         lambda: torch.autograd.grad(att_t, (qt, kt, vt), torch.from_numpy(dy),
                                     retain_graph=True)),
    ]
    print(f"\nop by op at the preset's shapes (median of {args.repeats} x 20 calls):")
    for name, ours, theirs in rows:
        a, b = per_call(ours, args.repeats), per_call(theirs, args.repeats)
        print(f"  {name:<42} ours {1e6 * a:8.0f} us  PyTorch {1e6 * b:8.0f} us  ratio {a / b:.2f}")
    # the step's matrix products (forward and backward of every Linear, the tied head, and
    # the attention core's four), NumPy against the same in PyTorch
    shapes = [(B * T, C, 3 * C), (B * T, C, C), (B * T, C, 4 * C), (B * T, 4 * C, C)] * L
    shapes.append((B * T, C, V))
    mats = [(f32(m, kk), f32(kk, n), f32(m, n)) for m, kk, n in shapes]
    qkp = (q, k, f32(B, H, T, T))

    def products(mm, tr, mats, qkp):
        for a, w_, g in mats:
            mm(a, w_), mm(g, tr(w_)), mm(tr(a), g)        # y = a w, da = g w^T, dw = a^T g
        q_, k_, p_ = qkp
        for _ in range(L):      # S = q k^T, P v; dP = dout v^T, dq = dS k, dv = P^T dout, dk = dS^T q
            mm(q_, tr(k_)), mm(p_, k_), mm(q_, tr(k_)), mm(p_, k_), mm(tr(p_), k_), mm(tr(p_), q_)
    numpy_ms = 1e3 * per_call(lambda: products(np.matmul, lambda a: np.swapaxes(a, -1, -2),
                                               mats, qkp), args.repeats, 5)
    tm = [tuple(map(torch.from_numpy, m)) for m in mats]
    tq = tuple(map(torch.from_numpy, qkp))
    torch_ms = 1e3 * per_call(lambda: products(torch.matmul, lambda a: a.transpose(-1, -2), tm, tq),
                              args.repeats, 5)
    print(f"  the step's matrix products: NumPy {numpy_ms:.1f} ms, PyTorch {torch_ms:.1f} ms; "
          f"NumPy's alone are {numpy_ms / torch_step_ms:.2f} of nanoGPT's whole step "
          f"({torch_step_ms:.1f} ms)")


def main(argv):
    p = argparse.ArgumentParser(prog="bench_step", description=__doc__.splitlines()[0])
    p.add_argument("--nanogpt", required=True, help="a clone of karpathy/nanoGPT")
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--steps", type=int, default=10, help="steps a repeat, each model")
    p.add_argument("--tanh", action="store_true", help="nanoGPT's GELU in the tanh form too")
    p.add_argument("--no-ops", action="store_true", help="the whole step only")
    args = p.parse_args(argv)
    import torch
    torch.set_num_threads(1)
    print(f"NumPy {np.__version__}, torch {torch.__version__}, OPENBLAS_NUM_THREADS="
          f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, torch threads 1, load "
          f"{os.getloadavg()[0]:.2f}")
    torch_step_ms = steps(args)
    if not args.no_ops:
        ops(args, torch_step_ms)


if __name__ == "__main__":
    main(sys.argv[1:])
