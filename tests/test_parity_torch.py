"""Parity with PyTorch: the same model, the same initial weights, the same batches, the same
optimizer; the per-step training losses must agree.

The PyTorch model is written here, from the chapter's build.py (``ModernGPT`` with nn.LayerNorm or
its RMSNorm, GELU MLP or SwiGLU, nanoGPT attention with a -inf mask, lm_head tied to the token
embedding; RoPE as in the chapter's step 8). torch is optional: the test is skipped when it is not installed.
"""
import math

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # PyTorch parity: trains both engines; leave out with -m "not slow"

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

import minigrad  # noqa: E402
from gpt import GPT, GPTConfig  # noqa: E402

V, BLOCK, N_LAYERS, N_HEADS, D_MODEL = 48, 32, 2, 4, 64
BATCH, STEPS, LR, CLIP = 8, 20, 3e-3, 1.0


class TorchRMSNorm(nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return self.weight * (x / rms)


class TorchSwiGLU(nn.Module):
    def __init__(self, d, hidden_mult=8.0 / 3.0):
        super().__init__()
        h = int(d * hidden_mult)
        self.gate_proj = nn.Linear(d, h, bias=False)
        self.up_proj = nn.Linear(d, h, bias=False)
        self.down_proj = nn.Linear(h, d, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class TorchMLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.c_fc = nn.Linear(d, 4 * d)
        self.c_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


def torch_rope_cache(seq_len, head_dim, dtype, base=10000):
    """The chapter's step-8 build_rope_cache, with the angles in float64 before the cast."""
    half = head_dim // 2
    inv_freq = 1.0 / (base ** (torch.arange(half, dtype=torch.float64) / half))
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float64), inv_freq)  # (T, hs/2)
    cos = torch.cos(angles).repeat_interleave(2, dim=-1).to(dtype)              # (T, hs)
    sin = torch.sin(angles).repeat_interleave(2, dim=-1).to(dtype)
    return cos[None, None], sin[None, None]


def torch_rotate_half(x):
    """The chapter's step-8 rotate_half: interleaved pairs (x[2i], x[2i+1]) -> (-x[2i+1], x[2i])."""
    x1 = x[..., ::2]
    x2 = x[..., 1::2]
    return torch.stack((-x2, x1), dim=-1).flatten(-2)


class TorchAttention(nn.Module):
    def __init__(self, d, n_heads, block_size, rope=False):
        super().__init__()
        self.n_heads = n_heads
        self.rope = rope
        self.c_attn = nn.Linear(d, 3 * d)
        self.c_proj = nn.Linear(d, d)
        self.register_buffer("mask", torch.tril(torch.ones(block_size, block_size)).bool(),
                             persistent=False)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        hd = C // self.n_heads
        q = q.view(B, T, self.n_heads, hd).transpose(1, 2)
        k = k.view(B, T, self.n_heads, hd).transpose(1, 2)
        v = v.view(B, T, self.n_heads, hd).transpose(1, 2)
        if self.rope:
            cos, sin = torch_rope_cache(T, hd, x.dtype)
            q = q * cos + torch_rotate_half(q) * sin
            k = k * cos + torch_rotate_half(k) * sin
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        att = att.masked_fill(~self.mask[:T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class TorchBlock(nn.Module):
    def __init__(self, norm, mlp, rope):
        super().__init__()
        Norm = TorchRMSNorm if norm == "rms" else nn.LayerNorm
        self.ln1 = Norm(D_MODEL)
        self.attn = TorchAttention(D_MODEL, N_HEADS, BLOCK, rope=rope)
        self.ln2 = Norm(D_MODEL)
        self.mlp = TorchSwiGLU(D_MODEL) if mlp == "swiglu" else TorchMLP(D_MODEL)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TorchGPT(nn.Module):
    def __init__(self, norm, mlp, pos="learned"):
        super().__init__()
        Norm = TorchRMSNorm if norm == "rms" else nn.LayerNorm
        self.pos = pos
        self.token_embedding = nn.Embedding(V, D_MODEL)
        if pos == "learned":
            self.position_embedding = nn.Embedding(BLOCK, D_MODEL)
        self.blocks = nn.ModuleList([TorchBlock(norm, mlp, pos == "rope")
                                     for _ in range(N_LAYERS)])
        self.ln_f = Norm(D_MODEL)
        self.lm_head = nn.Linear(D_MODEL, V, bias=False)
        self.lm_head.weight = self.token_embedding.weight

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.token_embedding(idx)
        if self.pos == "learned":
            x = x + self.position_embedding(torch.arange(T))
        for block in self.blocks:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, V), targets.view(-1))


def _data(n=4000, seed=0):
    """A token stream with structure to learn (a noisy cycle), so the loss moves."""
    rng = np.random.default_rng(seed)
    base = (np.arange(n) * 5 + np.arange(n) // 7) % V
    noise = rng.integers(0, V, n)
    return np.where(rng.random(n) < 0.2, noise, base).astype(np.int64)


@pytest.mark.parametrize("dtype, rtol", [("float64", 1e-9), ("float32", 1e-4)])
@pytest.mark.parametrize("norm, mlp, pos", [
    ("ln", "gelu", "learned"), ("rms", "gelu", "learned"), ("ln", "swiglu", "learned"),
    ("rms", "swiglu", "learned"),              # the chapter's four variants
    ("ln", "gelu", "rope"), ("rms", "swiglu", "rope"),   # RoPE as in the chapter's step 8
])
def test_training_losses_match_pytorch(norm, mlp, pos, dtype, rtol):
    tdtype = torch.float64 if dtype == "float64" else torch.float32
    cfg = GPTConfig(vocab_size=V, block_size=BLOCK, n_layers=N_LAYERS, n_heads=N_HEADS,
                    d_model=D_MODEL, norm=norm, mlp=mlp, pos=pos, dtype=dtype)
    ours = GPT(cfg, seed=0)
    theirs = TorchGPT(norm, mlp, pos).to(tdtype)
    sd = ours.state_dict()
    t_params = dict(theirs.named_parameters())  # the tied weight appears once
    assert set(t_params) == set(sd)
    with torch.no_grad():
        for name, p in t_params.items():
            assert tuple(p.shape) == sd[name].shape, name
            p.copy_(torch.from_numpy(sd[name].copy()))
    assert theirs.lm_head.weight is theirs.token_embedding.weight

    opt_o = minigrad.AdamW(ours.parameters(), lr=LR)
    opt_t = torch.optim.AdamW(theirs.parameters(), lr=LR)
    data = _data()
    rng = np.random.default_rng(1)
    losses_o, losses_t = [], []
    for step in range(STEPS):
        ix = rng.integers(0, len(data) - BLOCK - 1, BATCH)
        x = np.stack([data[i:i + BLOCK] for i in ix])
        y = np.stack([data[i + 1:i + 1 + BLOCK] for i in ix])

        _, loss = ours(x, y)
        opt_o.zero_grad()
        loss.backward()
        minigrad.clip_grad_norm_(ours.parameters(), CLIP)
        opt_o.step()
        losses_o.append(loss.item())

        tl = theirs(torch.from_numpy(x), torch.from_numpy(y))
        opt_t.zero_grad()
        tl.backward()
        torch.nn.utils.clip_grad_norm_(theirs.parameters(), CLIP)
        opt_t.step()
        losses_t.append(tl.item())

    assert loss.dtype == np.dtype(dtype)
    print(f"{norm}/{mlp}/{pos}/{dtype}: max rel loss diff "
          f"{np.max(np.abs(np.subtract(losses_o, losses_t)) / np.abs(losses_t)):.2e}")
    np.testing.assert_allclose(losses_o, losses_t, rtol=rtol, atol=0)
    assert losses_o[-1] < losses_o[0] - 0.1  # it trained
    # and the weights after 20 steps agree too
    tol = 1e-8 if dtype == "float64" else 1e-3
    final = ours.state_dict()
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(final[name], p.detach().numpy(),
                                   rtol=tol, atol=tol, err_msg=name)
