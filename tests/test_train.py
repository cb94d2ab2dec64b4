"""Tests of gpt.train: the chapter's loop, determinism, evaluation, divergence handling."""
import math

import numpy as np
import pytest

import minigrad
from gpt import GPT, GPTConfig
from gpt.data import CharTokenizer, get_batch, load_corpus, train_val_split
from gpt.train import TrainingDiverged, estimate_loss, evaluate, train
from minigrad.optim import AdamW, clip_grad_norm_


@pytest.fixture(scope="module")
def corpus():
    text = load_corpus()
    tok = CharTokenizer(text)
    tr, va = train_val_split(tok.encode(text))
    return tok, tr, va


def small_config(vocab_size, **kw):
    base = dict(vocab_size=vocab_size, block_size=16, n_layers=1, n_heads=2, d_model=32)
    base.update(kw)
    return GPTConfig(**base)


def test_training_lowers_the_loss_on_builtin_corpus(corpus):
    tok, tr, va = corpus
    model = GPT(GPTConfig(tok.vocab_size), seed=0)  # the chapter's configuration
    before_train = evaluate(model, tr)
    before_val = evaluate(model, va)
    # PyTorch's init (embedding ~ N(0, 1), tied to lm_head) starts far above ln(48) = 3.87
    assert before_train > math.log(48) and before_val > math.log(48)
    res = train(model, tr, steps=25, batch_size=32, seed=0)
    assert len(res.losses) == 25 and len(res.grad_norms) == 25
    assert all(math.isfinite(v) for v in res.losses)
    # 25 steps bring both splits below the uniform baseline
    assert evaluate(model, tr) < math.log(48) - 0.3
    assert evaluate(model, va) < math.log(48) - 0.1
    assert np.mean(res.losses[-5:]) < np.mean(res.losses[:5]) - 1.0
    assert res.seconds > 0


def test_train_matches_the_chapters_loop_written_out(corpus):
    """train() is exactly the chapter's loop: get_batch, forward, zero_grad, backward, clip, step."""
    tok, tr, _ = corpus
    cfg = small_config(tok.vocab_size)
    a = GPT(cfg, seed=3)
    res = train(a, tr, steps=6, batch_size=8, lr=3e-3, seed=5)

    b = GPT(cfg, seed=3)
    g = np.random.default_rng(5)
    opt = AdamW(list(b.parameters()), lr=3e-3)
    ref = []
    for _ in range(6):
        x, y = get_batch(tr, cfg.block_size, 8, g)
        _, loss = b(x, y)
        opt.zero_grad()
        loss.backward()
        clip_grad_norm_(list(b.parameters()), 1.0)
        opt.step()
        ref.append(loss.item())
    assert res.losses == ref
    sa, sb = a.state_dict(), b.state_dict()
    assert all(np.array_equal(sa[k], sb[k]) for k in sa)



@pytest.mark.parametrize("clip", [None, 0.5])
def test_recorded_gradient_norm_is_the_total_norm_before_clipping(corpus, clip):
    """grad_norms[i] is sqrt(sum of every squared gradient) BEFORE clipping (PyTorch's
    clip_grad_norm_ return value); clip=None measures it and leaves the gradients alone."""
    tok, tr, _ = corpus
    cfg = small_config(tok.vocab_size, dtype="float64")
    model = GPT(cfg, seed=3)
    x, y = get_batch(tr, cfg.block_size, 8, np.random.default_rng(5))  # train's first batch
    _, loss = model(x, y)
    loss.backward()
    expected = math.sqrt(sum(float(np.sum(p.grad ** 2)) for p in model.parameters()))
    assert expected > 0.5                                          # so clipping at 0.5 acts
    model.zero_grad()
    res = train(model, tr, steps=1, batch_size=8, seed=5, clip=clip)
    assert res.grad_norms[0] == pytest.approx(expected, rel=1e-10)
    after = math.sqrt(sum(float(np.sum(p.grad ** 2)) for p in model.parameters()))
    assert after == pytest.approx(expected if clip is None else 0.5, rel=1e-6)

def test_same_arguments_same_numbers(corpus):
    tok, tr, va = corpus
    cfg = small_config(tok.vocab_size, norm="rms", mlp="swiglu")
    runs = []
    for _ in range(2):
        m = GPT(cfg, seed=1)
        r = train(m, tr, steps=5, batch_size=8, seed=2)
        runs.append((r.losses, r.grad_norms, evaluate(m, va)))
    assert runs[0] == runs[1]
    other = train(GPT(cfg, seed=1), tr, steps=5, batch_size=8, seed=3)
    assert other.losses != runs[0][0]


def test_evaluate_equals_mean_of_model_losses_on_disjoint_windows(corpus):
    tok, tr, _ = corpus
    cfg = small_config(tok.vocab_size, dtype="float64")
    model = GPT(cfg, seed=0)
    T = cfg.block_size
    data = tr[: 7 * T + 1]  # exactly 7 disjoint windows, no tail window
    with minigrad.no_grad():
        losses = []
        for i in range(7):
            x = data[i * T:(i + 1) * T][None]
            y = data[i * T + 1:(i + 1) * T + 1][None]
            losses.append(model(x, y)[1].item())
    ev = evaluate(model, data, batch_size=3)
    assert ev == pytest.approx(np.mean(losses), rel=1e-12)
    # batching is a memory choice only
    assert evaluate(model, tr, batch_size=1) == pytest.approx(evaluate(model, tr, batch_size=64),
                                                              rel=1e-12)


def test_evaluate_counts_each_position_once_with_tail_window(corpus):
    tok, tr, _ = corpus
    cfg = small_config(tok.vocab_size, dtype="float64")
    model = GPT(cfg, seed=0)
    T = cfg.block_size
    data = tr[: 2 * T + 6]  # two disjoint windows cover targets 1..2T; a tail window adds 5
    with minigrad.no_grad():
        nll = []
        for s in (0, T):
            logits = model(data[s:s + T][None])[0].numpy()[0].astype(np.float64)
            logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1,
                                   keepdims=True)) - logits.max(-1, keepdims=True)
            nll += [-logp[t, data[s + t + 1]] for t in range(T)]
        s = len(data) - T - 1
        logits = model(data[s:s + T][None])[0].numpy()[0].astype(np.float64)
        logp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1,
                               keepdims=True)) - logits.max(-1, keepdims=True)
        nll += [-logp[t, data[s + t + 1]] for t in range(T - 5, T)]
    assert len(nll) == len(data) - 1
    assert evaluate(model, data) == pytest.approx(np.mean(nll), rel=1e-12)


def test_estimate_loss_is_one_batch_of_the_stream(corpus):
    tok, tr, _ = corpus
    model = GPT(small_config(tok.vocab_size), seed=0)
    est = estimate_loss(model, tr, np.random.default_rng(9), batch_size=4)
    x, y = get_batch(tr, 16, 4, np.random.default_rng(9))
    with minigrad.no_grad():
        assert est == model(x, y)[1].item()


class _PoisonAt:
    """Wraps a GPT; its loss becomes NaN from the given call on."""

    def __init__(self, model, call, value=float("nan")):
        self.model, self.call, self.value, self.n = model, call, value, 0
        self.config = model.config

    def parameters(self):
        return self.model.parameters()

    def train(self, mode=True):
        return self.model.train(mode)

    def __call__(self, x, y=None):
        self.n += 1
        logits, loss = self.model(x, y)
        if self.n >= self.call:
            loss = loss * self.value
        return logits, loss


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_nonfinite_loss_stops_naming_the_step(corpus, value):
    tok, tr, _ = corpus
    inner = GPT(small_config(tok.vocab_size), seed=0)
    model = _PoisonAt(inner, call=4, value=value)
    with pytest.raises(TrainingDiverged, match="loss became .* at step 4") as ei:
        train(model, tr, steps=10, batch_size=4)
    e = ei.value
    assert e.step == 4 and e.what == "loss" and len(e.losses) == 3
    assert all(math.isfinite(v) for v in e.losses)
    # the parameters were not touched by the bad step
    assert all(np.isfinite(p.data).all() for p in inner.parameters())


def test_huge_learning_rate_diverges_with_a_named_step(corpus):
    tok, tr, _ = corpus
    model = GPT(small_config(tok.vocab_size), seed=0)
    with pytest.raises(TrainingDiverged, match=r"at step \d+"):
        train(model, tr, steps=50, batch_size=4, lr=1e30)


def test_train_bad_arguments(corpus):
    tok, tr, _ = corpus
    model = GPT(small_config(tok.vocab_size), seed=0)
    with pytest.raises(ValueError, match="steps"):
        train(model, tr, steps=0)
    with pytest.raises(ValueError, match="batch_size"):
        train(model, tr, steps=1, batch_size=-1)
    with pytest.raises(ValueError, match="lr"):
        train(model, tr, steps=1, lr=float("nan"))
    with pytest.raises(ValueError, match="training split"):
        train(model, tr[:16], steps=1)
    with pytest.raises(TypeError, match="Generator"):
        train(model, tr, steps=1, rng=np.random.RandomState(0))
