"""Tests of gpt.sample.generate, checkpoints carrying the vocabulary, experiments.generate."""
import sys

import numpy as np
import pytest

from gpt import GPT, GPTConfig, load_checkpoint, save_checkpoint
from gpt.checkpoint import load_tokenizer
from gpt.data import CharTokenizer
from experiments import cli
from experiments import generate as generate_cli
from gpt.sample import generate

TEXT = "abcdefghijk"          # 11 characters, ids 0..10
BLOCK = 8


def _model(seed=3, scale=0.3):
    """A small model with perturbed weights (so its distribution is neither flat nor one-hot)."""
    cfg = GPTConfig(vocab_size=11, block_size=BLOCK, n_layers=1, n_heads=2, d_model=16,
                    dtype="float64")
    model = GPT(cfg, seed=seed)
    rng = np.random.default_rng(seed + 1)
    model.load_state_dict({k: v * scale + rng.normal(0, 0.3, v.shape)
                           for k, v in model.state_dict().items()})
    return model


def _main(argv):
    with cli.errors(generate_cli.PROG):
        sys.exit(generate_cli.run(argv))


def _softmax(z):
    e = np.exp(z - z.max())
    return e / e.sum()


def test_checkpoint_carries_the_vocabulary(tmp_path):
    model = _model()
    tok = CharTokenizer("kjihgfedcba" + "a")
    save_checkpoint(model, tmp_path / "m.npz", tokenizer=tok)
    back = load_tokenizer(tmp_path / "m.npz")
    assert back.chars == list(TEXT)
    assert back.decode(back.encode("hij")) == "hij"
    with pytest.raises(ValueError, match="vocab_size is 11"):
        save_checkpoint(model, tmp_path / "bad.npz", tokenizer=CharTokenizer("abc"))
    assert not (tmp_path / "bad.npz").exists()


def test_a_checkpoint_without_vocabulary_loads_and_generation_says_why_not(tmp_path, capsys):
    model = _model()
    path = tmp_path / "old.npz"
    save_checkpoint(model, path)          # the format before checkpoints carried a vocabulary
    loaded = load_checkpoint(path)
    idx = np.array([[1, 2, 3]])
    assert np.array_equal(loaded(idx)[0].numpy(), model(idx)[0].numpy())
    with pytest.raises(ValueError, match="carries no character vocabulary"):
        load_tokenizer(path)
    with pytest.raises(SystemExit) as e:
        _main(["--checkpoint", str(path), "--prompt", "abc"])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "carries no character vocabulary" in err[0]


def test_greedy_crops_the_context_to_block_size():
    model = _model()
    long = np.random.default_rng(0).integers(0, 11, (2, 13))          # T = 13 > block_size
    out = generate(model, long, 6, temperature=0)
    assert out.shape == (2, 19) and np.array_equal(out[:, :13], long)
    # only the last block_size tokens matter: the same continuation from the cropped prompt
    cropped = generate(model, long[:, -BLOCK:], 6, temperature=0)
    assert np.array_equal(out[:, 13:], cropped[:, BLOCK:])
    # each greedy token is the argmax of the model's last logits on the cropped context
    for t in range(13, 19):
        logits = model(out[:, t - BLOCK:t])[0].numpy()[:, -1, :]
        assert np.array_equal(out[:, t], logits.argmax(-1))


def test_top_k_1_is_greedy_and_same_seed_same_tokens():
    model = _model()
    idx = np.array([[0, 5, 2]])
    greedy = generate(model, idx, 10, temperature=0)
    assert np.array_equal(generate(model, idx, 10, temperature=1.3, top_k=1,
                                   rng=np.random.default_rng(5)), greedy)
    a = generate(model, idx, 10, temperature=1.0, rng=np.random.default_rng(1))
    b = generate(model, idx, 10, temperature=1.0, rng=np.random.default_rng(1))
    assert np.array_equal(a, b)


@pytest.mark.parametrize("temperature, top_k", [(0.7, None), (1.5, 3)])
def test_sampling_follows_softmax_of_logits_over_temperature(temperature, top_k):
    model = _model()
    prompt = np.array([3, 1, 4])
    z = model(prompt[None])[0].numpy()[0, -1]                  # (V,) logits of the next token
    p = _softmax(z / temperature)
    if top_k is not None:                                      # keep the top_k, renormalise
        keep = np.argsort(z)[-top_k:]
        p = np.zeros_like(p)
        p[keep] = _softmax(z[keep] / temperature)
    n = 4000
    out = generate(model, np.tile(prompt, (n, 1)), 1, temperature=temperature, top_k=top_k,
                   rng=np.random.default_rng(0))
    freq = np.bincount(out[:, -1], minlength=11) / n
    assert np.all(freq[p == 0] == 0)
    # binomial standard error <= sqrt(0.25 / 4000) = 0.0079; allow 4 of them
    np.testing.assert_allclose(freq, p, atol=0.032)
    assert p.max() < 0.9 and (p > 0.02).sum() >= 3          # a distribution worth testing


@pytest.mark.parametrize("kw, needle", [
    (dict(temperature=-1.0), "temperature"), (dict(temperature=float("nan")), "temperature"),
    (dict(top_k=0), "top_k"), (dict(max_new_tokens=-1), "max_new_tokens"),
])
def test_generate_rejects_bad_arguments(kw, needle):
    args = dict(max_new_tokens=2, temperature=1.0, top_k=None) | kw
    with pytest.raises(ValueError, match=needle):
        generate(_model(), np.array([[1]]), **args)
    with pytest.raises(IndexError, match=r"generate: token id 11 out of range \[0, 11\) in idx"):
        generate(_model(), np.array([[11]]), 1)      # as the model's own forward refuses it


@pytest.fixture()
def ckpt(tmp_path):
    path = tmp_path / "m.npz"
    save_checkpoint(_model(), path, tokenizer=CharTokenizer(TEXT))
    return path


def test_cli_prints_prompt_and_new_text(ckpt, capsys):
    assert generate_cli.run(["--checkpoint", str(ckpt), "--prompt", "hbc",
                              "--max-new-tokens", "7", "--temperature", "0"]) == 0
    text = capsys.readouterr().out
    assert text.endswith("\n") and len(text) == 3 + 7 + 1 and text.startswith("hbc")
    tok = CharTokenizer(TEXT)
    greedy = generate(load_checkpoint(ckpt), tok.encode("hbc")[None], 7, temperature=0)
    assert text[:-1] == tok.decode(greedy[0])
    for _ in range(2):
        generate_cli.run(["--checkpoint", str(ckpt), "--prompt", "abc", "--seed", "4",
                           "--top-k", "5", "--temperature", "0.9", "--max-new-tokens", "9"])
    a, b = capsys.readouterr().out.splitlines()
    assert a == b and len(a) == 12


@pytest.mark.parametrize("args, needle", [
    (["--prompt", "abz"], "--prompt: character 'z' at position 2 is not in the vocabulary"),
    (["--prompt", ""], "--prompt: empty value"),
    (["--prompt", "a", "--temperature", "-1"], "--temperature"),
    (["--prompt", "a", "--temperature", "inf"], "--temperature"),
    (["--prompt", "a", "--top-k", "0"], "--top-k"),
    (["--prompt", "a", "--max-new-tokens", "1.5"], "--max-new-tokens"),
    (["--prompt", "a", "--max-new-tokens", "1000001"], "maximum of 1,000,000"),
    (["--prompt", "a", "--seed", "-2"], "--seed"),
])
def test_cli_bad_input_is_one_line_exit_2(ckpt, args, needle, capsys):
    with pytest.raises(SystemExit) as e:
        _main(["--checkpoint", str(ckpt), *args])
    assert e.value.code == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and needle in err[0] and captured.out == ""


def test_cli_bad_checkpoint_is_one_line_exit_2(tmp_path, capsys):
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip")
    for path, needle in ((tmp_path / "missing.npz", "not found"), (junk, "cannot read"),
                         (tmp_path, "directory")):
        with pytest.raises(SystemExit) as e:
            _main(["--checkpoint", str(path), "--prompt", "a"])
        assert e.value.code == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0]


def _with_config(ckpt, dest, config):
    """A copy of checkpoint ``ckpt`` at ``dest`` whose metadata holds ``config`` instead."""
    import json
    from gpt.checkpoint import META_KEY
    with np.load(ckpt, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays[META_KEY][()]))
    meta["config"] = config(meta["config"])
    arrays[META_KEY] = np.array(json.dumps(meta))
    with open(dest, "wb") as f:
        np.savez(f, **arrays)
    return dest


@pytest.mark.parametrize("config, exc, needle", [
    (lambda c: [1, 2], TypeError, "from_dict expects a mapping, got list"),
    (lambda c: dict(c, n_heads=5), ValueError, "n_heads=5 does not divide d_model=16"),
    (lambda c: dict(c, width=3), ValueError, "unknown field(s) ['width']"),
])
def test_an_invalid_config_names_the_checkpoint(ckpt, tmp_path, capsys, config, exc, needle):
    """The library raises the same exception type, its message naming the file; the command
    prints that as one line and exits 2."""
    from gpt.checkpoint import load_config
    bad = _with_config(ckpt, tmp_path / "bad.npz", config)
    for load in (load_config, load_checkpoint):
        with pytest.raises(exc) as ei:
            load(bad)
        assert str(ei.value).startswith(f"checkpoint {bad} has an invalid config: ")
        assert needle in str(ei.value)
    with pytest.raises(SystemExit) as e:
        _main(["--checkpoint", str(bad), "--prompt", "a"])
    assert e.value.code == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert captured.out == "" and len(err) == 1
    assert err[0].startswith(f"python -m experiments.generate: error: checkpoint {bad} has an "
                             f"invalid config: ") and needle in err[0]



@pytest.mark.slow
def test_four_variants_checkpoints_generate_text(tmp_path, capsys):
    from experiments import four_variants, runner
    out = tmp_path / "fv"
    assert runner.run(four_variants.STUDY, ["--steps", "1", "--save-checkpoints", "--n-layers", "1",
                               "--output-dir", str(out)]) == 0
    capsys.readouterr()
    assert generate_cli.run(["--checkpoint", str(out / "rms_swiglu.npz"), "--prompt",
                              "It is a truth", "--max-new-tokens", "20"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("It is a truth") and len(text) == 13 + 20 + 1


def test_module_entry_point_one_line_no_traceback(ckpt):
    import os
    import subprocess
    import sys
    from pathlib import Path
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    proc = subprocess.run([sys.executable, "-m", "experiments.generate", "--checkpoint", str(ckpt),
                           "--prompt", "aé"], env=env, capture_output=True, text=True,
                          encoding="utf-8", timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "character 'é' at position 1" in proc.stderr


def test_the_text_streams_and_a_closed_pipe_stops_the_sampling(ckpt):
    """`| head -c 20`: the first 20 characters arrive while the sampling runs, and the reader
    going away ends it quietly with status 141, as for `cat`, long before its 1,000,000
    characters."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    proc = subprocess.Popen([sys.executable, "-m", "experiments.generate", "--checkpoint",
                             str(ckpt), "--prompt", "hbc", "--max-new-tokens", "1000000",
                             "--temperature", "0"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    head = proc.stdout.read(20).decode()
    proc.stdout.close()
    assert proc.wait(timeout=120) == 141 and proc.stderr.read() == b""
    tok = CharTokenizer(TEXT)
    greedy = generate(load_checkpoint(ckpt), tok.encode("hbc")[None], 17, temperature=0)
    assert head == tok.decode(greedy[0])


@pytest.mark.parametrize("dtype, weights, words", [
    ("float64", lambda v: np.full_like(v, np.nan), "the model produced non-finite logits (NaN or inf)"),
    ("float32", lambda v: v * 1e19, "overflow encountered in"),   # finite logits, but noise
    ("float64", lambda v: v * 1e160, "overflow encountered in"),
])
def test_a_diverged_model_is_one_line_and_status_1_as_a_diverged_run(dtype, weights, words,
                                                                      tmp_path, capsys):
    """Weights that overflow the forward pass, or give NaN logits: no NumPy warnings, no text
    on stdout, one line on stderr, status 1 (a run that diverged ends so)."""
    model = _model()
    config = GPTConfig(**{**model.config.to_dict(), "dtype": dtype})
    big = GPT(config)
    big.load_state_dict({k: weights(v) for k, v in model.state_dict().items()})
    path = tmp_path / "diverged.npz"
    save_checkpoint(big, path, tokenizer=CharTokenizer(TEXT))
    with pytest.raises(SystemExit) as e:
        _main(["--checkpoint", str(path), "--prompt", "abc"])
    captured = capsys.readouterr()
    assert e.value.code == 1 and captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith("python -m experiments.generate: the model has diverged: ")
    assert words in line and line.endswith("; no text sampled")


@pytest.mark.parametrize("config, words", [
    (lambda c: dict(c, n_layers=2), "12 of its parameters not stored (blocks.1.ln1.weight, ...)"),
    (lambda c: dict(c, d_model=32), "16 of another shape (token_embedding.weight: (11, 16) "
                                    "stored, (11, 32) in its config, ...)"),
    (lambda c: dict(c, mlp="swiglu"), "3 of its parameters not stored (blocks.0.mlp.gate_proj."
                                      "weight, ...); 4 stored that it does not have "
                                      "(blocks.0.mlp.c_fc.weight, ...)"),
])
def test_a_config_that_disagrees_with_the_weights_is_one_line(ckpt, tmp_path, capsys, config,
                                                             words):
    bad = _with_config(ckpt, tmp_path / "bad.npz", config)
    with pytest.raises(SystemExit) as e:
        _main(["--checkpoint", str(bad), "--prompt", "a"])
    captured = capsys.readouterr()
    assert e.value.code == 2 and captured.out == ""
    assert captured.err.splitlines() == [f"python -m experiments.generate: error: checkpoint "
                                         f"{bad} does not match its config: {words}"]
