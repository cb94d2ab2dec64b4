"""Tests of nanoGPT's recipe in gpt: the learning-rate schedule, weight decay on the 2-D
parameters only, GPT-2's initialisation, continuing a run (train(start=...)), and checkpoints
that carry the optimizer's state."""
import math

import numpy as np
import pytest

from gpt import GPT, GPTConfig
from gpt.checkpoint import load_checkpoint, load_training_state, save_checkpoint
from gpt.data import CharTokenizer, get_batch, load_corpus, train_val_split
from gpt.train import configure_optimizers, estimate_loss, get_lr, train


@pytest.fixture(scope="module")
def data():
    text = load_corpus()
    tok = CharTokenizer(text)
    return tok, *train_val_split(tok.encode(text))


def small(vocab_size, **kw):
    return GPTConfig(**{**dict(vocab_size=vocab_size, block_size=8, n_layers=2, n_heads=2,
                               d_model=16), **kw})


# ---------------------------------------------------------------- the schedule

LR, MIN_LR, WARMUP, DECAY = 1e-3, 1e-4, 100, 2000


@pytest.mark.parametrize("it, expected", [
    (0, LR * 1 / 101),                  # warmup: lr (it + 1) / (warmup + 1)
    (49, LR * 50 / 101),
    (99, LR * 100 / 101),               # the last warmup step
    (100, LR),                          # cosine at 0: cos(0) = 1
    (1050, (LR + MIN_LR) / 2),          # half way: cos(pi / 2) = 0
    (575, MIN_LR + (LR - MIN_LR) * (2 + math.sqrt(2)) / 4),   # a quarter: cos(pi / 4)
    (2000, MIN_LR),                     # the end of the decay: cos(pi) = -1
    (2001, MIN_LR), (10**6, MIN_LR),    # after it
])
def test_the_schedule_at_known_iterations(it, expected):
    """nanoGPT's get_lr with its shakespeare_char values, against closed forms."""
    assert get_lr(it, LR, MIN_LR, WARMUP, DECAY) == pytest.approx(expected, rel=1e-12, abs=1e-18)


def test_the_schedule_is_continuous_and_falls_after_warmup():
    lrs = [get_lr(it, LR, MIN_LR, WARMUP, DECAY) for it in range(2100)]
    assert all(a < b for a, b in zip(lrs[:100], lrs[1:101]))            # rises in the warmup
    assert all(a >= b for a, b in zip(lrs[100:2001], lrs[101:2002]))    # then only falls
    assert max(abs(a - b) for a, b in zip(lrs, lrs[1:])) < LR / 100     # no jump


def test_min_lr_equal_to_lr_is_the_constant_rate_exactly():
    assert {get_lr(it, 3e-3, 3e-3, 0, 200) for it in range(300)} == {3e-3}


def test_warmup_not_below_the_decay_is_refused():
    with pytest.raises(ValueError, match="warmup_iters"):
        get_lr(0, LR, MIN_LR, 100, 100)


def test_train_sets_each_steps_rate_from_the_schedule(data):
    tok, tr, _ = data
    model = GPT(small(tok.vocab_size), seed=0)
    opt = configure_optimizers(model, LR, 0.1, decay="2d")
    seen = []
    train(model, tr, steps=7, batch_size=4, optimizer=opt, start=3,
          lr_at=lambda it: get_lr(it, LR, MIN_LR, 2, 9),
          on_step=lambda step, loss: seen.append((step, [g["lr"] for g in opt.param_groups])))
    assert [s for s, _ in seen] == [4, 5, 6, 7, 8, 9, 10]     # counted from the run's start
    for step, lrs in seen:   # step s uses the rate of iteration s - 1, in every group
        assert lrs == [get_lr(step - 1, LR, MIN_LR, 2, 9)] * 2


# ---------------------------------------------------------------- weight decay

def test_decay_2d_puts_weight_decay_on_the_matrices_only(data):
    tok = data[0]
    model = GPT(small(tok.vocab_size), seed=0)
    opt = configure_optimizers(model, LR, 0.1, decay="2d")
    decayed, other = opt.param_groups
    assert decayed["weight_decay"] == 0.1 and other["weight_decay"] == 0.0
    names = {id(p): n for n, p in model.named_parameters()}
    assert sorted(names[id(p)] for p in decayed["params"]) == sorted(
        n for n, p in model.named_parameters() if p.ndim == 2)
    assert {names[id(p)].rsplit(".", 1)[-1] for p in other["params"]} == {"weight", "bias"}
    assert all(p.ndim == 1 for p in other["params"])
    # one step with zero gradients: Adam moves nothing, so only the decay acts
    before = model.state_dict()
    for p in model.parameters():
        p.grad = np.zeros_like(p.data)
    opt.step()
    for n, p in model.named_parameters():
        factor = np.float32(1 - LR * 0.1) if p.ndim == 2 else np.float32(1)
        np.testing.assert_array_equal(p.data, before[n] * factor, err_msg=n)


def test_decay_all_is_the_chapters_single_group(data):
    model = GPT(small(data[0].vocab_size), seed=0)
    opt = configure_optimizers(model, 3e-3, 0.01)
    assert len(opt.param_groups) == 1 and opt.param_groups[0]["weight_decay"] == 0.01
    assert opt.param_groups[0]["betas"] == (0.9, 0.999)
    with pytest.raises(ValueError, match="decay"):
        configure_optimizers(model, 3e-3, 0.01, decay="1d")


# ---------------------------------------------------------------- initialisation

@pytest.mark.parametrize("mlp", ["gelu", "swiglu"])
def test_gpt2_init_is_nanogpts(mlp):
    L = 3
    model = GPT(GPTConfig(vocab_size=65, block_size=64, n_layers=L, n_heads=4, d_model=128,
                          mlp=mlp), seed=1, init="gpt2")
    residual = ("attn.c_proj.weight", "mlp.c_proj.weight", "mlp.down_proj.weight")
    for name, p in model.named_parameters():
        w = p.data.astype(np.float64)
        if p.ndim == 2:   # N(0, 0.02), the residual projections N(0, 0.02 / sqrt(2 L))
            std = 0.02 / math.sqrt(2 * L) if name.endswith(residual) else 0.02
            assert abs(w.mean()) < 4 * std / math.sqrt(w.size), name
            assert w.std() == pytest.approx(std, rel=0.05), name
        elif name.endswith("bias"):
            assert not w.any(), name
        else:
            assert (w == 1).all(), name   # norm gains
    assert sum(n.endswith(residual) for n, _ in model.named_parameters()) == 2 * L


def test_gpt2_init_starts_at_about_ln_v_and_pytorch_far_above(data):
    tok, tr, _ = data
    x, y = get_batch(tr, 32, 16, np.random.default_rng(0))
    gpt2 = GPT(GPTConfig(tok.vocab_size), seed=0, init="gpt2")(x, y)[1].item()
    pytorch = GPT(GPTConfig(tok.vocab_size), seed=0)(x, y)[1].item()
    assert abs(gpt2 - math.log(tok.vocab_size)) < 0.05
    assert pytorch > 5 * math.log(tok.vocab_size)   # the N(0, 1) tied embedding: var ~ d_model


def test_an_unknown_init_is_refused():
    with pytest.raises(ValueError, match="init"):
        GPT(GPTConfig(10), init="xavier")


# ---------------------------------------------------------------- continuing a run

def test_train_in_two_calls_equals_one(data):
    tok, tr, _ = data
    cfg = small(tok.vocab_size)

    def run(splits):
        model = GPT(cfg, seed=2, init="gpt2")
        opt = configure_optimizers(model, LR, 0.1, betas=(0.9, 0.99), decay="2d")
        rng, losses, done = np.random.default_rng(5), [], 0
        for n in splits:
            losses += train(model, tr, steps=n, batch_size=4, rng=rng, optimizer=opt,
                            start=done, lr_at=lambda it: get_lr(it, LR, MIN_LR, 2, 8)).losses
            done += n
        return losses, model.state_dict()

    (l1, s1), (l2, s2) = run([8]), run([3, 5])
    assert l1 == l2
    assert all(np.array_equal(s1[k], s2[k]) for k in s1)


def test_checkpoint_round_trips_the_optimizer_state(data, tmp_path):
    tok, tr, _ = data
    model = GPT(small(tok.vocab_size), seed=0)
    opt = configure_optimizers(model, LR, 0.1, decay="2d")
    train(model, tr, steps=3, batch_size=4, optimizer=opt)
    path = tmp_path / "c.npz"
    save_checkpoint(model, path, tokenizer=tok, optimizer=opt, train_state={"step": 3})
    state, extra = load_training_state(path)
    assert extra == {"step": 3}
    fresh = GPT(small(tok.vocab_size), seed=9)
    opt2 = configure_optimizers(fresh, 0.5, 0.5, decay="2d")
    opt2.load_state_dict(state)    # loads into an optimizer built the same way
    ref, got = opt.state_dict(), opt2.state_dict()
    assert got["param_groups"] == ref["param_groups"]     # lr, betas, weight_decay restored
    assert sorted(got["state"]) == sorted(ref["state"])
    for i, s in ref["state"].items():
        assert got["state"][i]["step"] == s["step"] == 3
        for name in ("exp_avg", "exp_avg_sq"):
            np.testing.assert_array_equal(got["state"][i][name], s[name])
    # the model loads without the optimizer's arrays, and the chapter's checkpoint has none
    loaded = load_checkpoint(path)
    assert all(np.array_equal(loaded.state_dict()[k], v) for k, v in model.state_dict().items())
    save_checkpoint(model, tmp_path / "plain.npz")
    assert load_training_state(tmp_path / "plain.npz") == (None, None)


def test_estimate_loss_is_the_mean_over_eval_iters_batches(data):
    tok, _, va = data
    model = GPT(small(tok.vocab_size, dtype="float64"), seed=0)
    rng = np.random.default_rng(3)
    four = [estimate_loss(model, va, rng, batch_size=4) for _ in range(4)]
    assert len(set(four)) == 4
    assert estimate_loss(model, va, np.random.default_rng(3), batch_size=4,
                         eval_iters=4) == pytest.approx(np.mean(four), rel=1e-12)
