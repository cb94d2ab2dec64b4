"""Tests of gpt.checkpoint: .npz round trip without pickle, errors on bad files."""
import json
import zipfile

import numpy as np

import pytest

from gpt import GPT, GPTConfig
from gpt.checkpoint import META_KEY, load_checkpoint, load_config, save_checkpoint


def _perturbed(cfg, seed=4):
    """A model whose parameters are not the initialisation (so a loader that re-inits fails)."""
    model = GPT(cfg, seed=seed)
    rng = np.random.default_rng(seed + 100)
    sd = {k: (v + rng.normal(0, 0.05, v.shape)).astype(v.dtype) for k, v in
          model.state_dict().items()}
    model.load_state_dict(sd)
    return model


@pytest.mark.parametrize("kw", [
    dict(norm="ln", mlp="gelu"),
    dict(norm="rms", mlp="swiglu", pos="rope"),
    dict(norm="rms", mlp="relu2", dtype="float64"),
    dict(norm="ln", mlp="gelu", bias=False),
])
def test_round_trip_same_logits(tmp_path, kw):
    cfg = GPTConfig(vocab_size=11, block_size=8, n_layers=2, n_heads=2, d_model=16, **kw)
    model = _perturbed(cfg)
    path = save_checkpoint(model, tmp_path / "m.npz")
    loaded = load_checkpoint(path)
    assert loaded.config == cfg and load_config(path) == cfg
    idx = np.random.default_rng(0).integers(0, 11, (3, 8))
    a = model(idx)[0].numpy()
    b = loaded(idx)[0].numpy()
    assert a.dtype == b.dtype == np.dtype(cfg.dtype)
    assert np.array_equal(a, b)
    assert list(tmp_path.iterdir()) == [tmp_path / "m.npz"]  # no temporary file left


def test_readable_without_pickle_and_keyed_by_pytorch_names(tmp_path):
    cfg = GPTConfig(vocab_size=7, block_size=4, n_layers=1, n_heads=2, d_model=8)
    model = GPT(cfg, seed=0)
    save_checkpoint(model, tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz", allow_pickle=False) as z:
        files = set(z.files)
        sd = model.state_dict()
        assert files == set(sd) | {META_KEY}
        for k, v in sd.items():
            assert z[k].dtype == v.dtype and np.array_equal(z[k], v)
        meta = json.loads(str(z[META_KEY][()]))
    assert meta["config"] == cfg.to_dict()
    assert meta["format"] == "minigrad-gpt-checkpoint" and meta["version"] == 1
    # PyTorch names and layouts (Linear weight is (out_features, in_features)); lm_head is tied
    assert "token_embedding.weight" in files and "lm_head.weight" not in files
    with np.load(tmp_path / "m.npz", allow_pickle=False) as z:
        assert z["blocks.0.attn.c_attn.weight"].shape == (24, 8)


def _write_npz(path, **arrays):
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def test_a_checkpoint_without_bias_in_its_config_loads_with_biases(tmp_path):
    # written before GPTConfig had nanoGPT's bias field: its models all had biases
    cfg = GPTConfig(vocab_size=7, block_size=4, n_layers=1, n_heads=2, d_model=8)
    model = _perturbed(cfg)
    save_checkpoint(model, tmp_path / "new.npz")
    with np.load(tmp_path / "new.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays[META_KEY][()]))
    del meta["config"]["bias"]
    arrays[META_KEY] = np.array(json.dumps(meta))
    _write_npz(tmp_path / "old.npz", **arrays)
    loaded = load_checkpoint(tmp_path / "old.npz")
    assert loaded.config.bias is True and loaded.config == cfg
    idx = np.array([[0, 3, 6, 1]])
    assert np.array_equal(loaded(idx)[0].numpy(), model(idx)[0].numpy())


def test_bad_files(tmp_path):
    cfg = GPTConfig(vocab_size=7, block_size=4, n_layers=1, n_heads=2, d_model=8)
    model = GPT(cfg, seed=0)
    good = tmp_path / "good.npz"
    save_checkpoint(model, good)
    with np.load(good, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}

    with pytest.raises(FileNotFoundError, match="not found"):
        load_checkpoint(tmp_path / "missing.npz")

    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"this is not a zip archive")
    with pytest.raises(ValueError, match="cannot read checkpoint"):
        load_checkpoint(junk)

    no_meta = tmp_path / "no_meta.npz"
    _write_npz(no_meta, **{k: v for k, v in arrays.items() if k != META_KEY})
    with pytest.raises(ValueError, match="not a minigrad-gpt checkpoint"):
        load_checkpoint(no_meta)

    bad_json = tmp_path / "bad_json.npz"
    _write_npz(bad_json, **{**arrays, META_KEY: np.array("{not json")})
    with pytest.raises(ValueError, match="malformed metadata"):
        load_checkpoint(bad_json)

    missing = tmp_path / "missing_param.npz"
    _write_npz(missing, **{k: v for k, v in arrays.items() if k != "ln_f.weight"})
    with pytest.raises(ValueError, match=r"does not match its config: 1 of its parameters not "
                                         r"stored \(ln_f.weight\)$"):
        load_checkpoint(missing)

    wrong = tmp_path / "wrong_shape.npz"
    _write_npz(wrong, **{**arrays, "ln_f.weight": np.zeros(9, np.float32)})
    with pytest.raises(ValueError, match=r"1 of another shape \(ln_f.weight: \(9,\) stored, "
                                         r"\(8,\) in its config\)$"):
        load_checkpoint(wrong)

    pickled = tmp_path / "pickled.npz"
    obj = np.empty(1, dtype=object)
    obj[0] = {"a": 1}
    _write_npz(pickled, **{**arrays, "ln_f.bias": obj})
    with pytest.raises(ValueError, match="pickle"):
        load_checkpoint(pickled)

    assert zipfile.is_zipfile(good)


def test_load_checkpoint_of_a_directory_says_so(tmp_path):
    from gpt.checkpoint import load_checkpoint
    with pytest.raises(IsADirectoryError, match="directory"):
        load_checkpoint(tmp_path)
