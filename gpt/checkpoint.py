"""Checkpoints: a ``gpt.GPT`` as one ``.npz`` file, readable without pickle.

Layout of the archive (``numpy.savez``, uncompressed):

- one array per parameter, keyed by its PyTorch name (``token_embedding.weight``,
  ``blocks.0.attn.c_attn.weight``, ...; the tied ``lm_head.weight`` is not stored, as in
  ``model.state_dict()``), in the model's dtype and PyTorch's layout, so the file maps onto the
  PyTorch reference model without renaming;
- ``__minigrad_gpt__``: a 0-d unicode array holding a JSON object
  ``{"format": "minigrad-gpt-checkpoint", "version": 1, "config": GPTConfig.to_dict(),
  "vocab": ["\n", " ", "!", ...]}``. Parameter names never start with ``__``, so the key
  cannot collide. ``vocab`` is the character vocabulary in id order (``CharTokenizer.chars``,
  id i is ``vocab[i]``), and ``"run_id"``: the id of the run that wrote it (the study commands
  write the same id into their ``results.json``). Both are optional: checkpoints written
  before they existed, or without a tokenizer, lack them, still load with ``load_checkpoint``,
  and ``load_tokenizer`` says what is missing; ``load_checkpoint(path).run_id`` is None for a
  checkpoint without a run id. A config without ``bias`` (written before ``GPTConfig`` had it)
  loads as ``bias=True``, what every model was then.
- optionally (``save_checkpoint(..., optimizer=, train_state=)``, what ``experiments.train_gpt``
  writes to resume a run): the optimizer's state, as ``Optimizer.state_dict()`` lays it out,
  its arrays keyed ``__optimizer__.state.<i>.<name>`` (``exp_avg``, ``exp_avg_sq`` of parameter
  i) and the rest in the metadata's ``"optimizer"`` (``param_groups``, and ``steps``: i -> the
  parameter's step count); and ``"train"``, a JSON object the training command chooses (its
  step, options, generator states, history). ``load_training_state`` reads both.

Everything loads with ``np.load(path, allow_pickle=False)``. ``save_checkpoint`` is a plain write
of the file it is given, as ``torch.save`` is: not atomic. The commands of ``experiments/`` stage
it atomically (``experiments.cli.write_outputs`` with ``lambda path: save_checkpoint(model, path)``).
"""
from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from typing import Union

import numpy as np

__all__ = ["META_KEY", "CHECKPOINT_FORMAT", "CHECKPOINT_VERSION", "save_checkpoint",
           "load_checkpoint", "load_config", "load_tokenizer", "load_training_state"]

META_KEY = "__minigrad_gpt__"
OPTIMIZER_PREFIX = "__optimizer__."
CHECKPOINT_FORMAT = "minigrad-gpt-checkpoint"
CHECKPOINT_VERSION = 1

PathLike = Union[str, "os.PathLike[str]"]


def save_checkpoint(model, path: PathLike, tokenizer=None, run_id=None, optimizer=None,
                    train_state=None) -> Path:
    """Write ``model``'s parameters and config to ``path`` (an ``.npz`` archive).

    A plain write, as ``torch.save``: not atomic (an interrupted write leaves a partial file);
    the commands of ``experiments/`` write it complete or absent (``experiments.cli.write_outputs``).

    Args:
        model: a ``gpt.GPT`` (``state_dict()`` name -> ndarray, ``config.to_dict()``).
        path: destination file; written as given (no ``.npz`` is appended).
        tokenizer: the ``gpt.data.CharTokenizer`` the model was trained with; its characters
            are stored (``vocab``) so that ``experiments.generate`` can turn text into ids and
            back. None stores no vocabulary.
        run_id: a string naming the run that made the model (stored as ``"run_id"``), or None.
        optimizer: a ``minigrad.optim.Optimizer`` whose state is stored (to resume training),
            or None.
        train_state: a JSON-serialisable dict stored as ``"train"``, or None.

    Returns:
        ``Path`` of the written file.

    Raises:
        ValueError: a parameter name collides with the reserved metadata key, or the
            tokenizer's vocab_size differs from the model's.
        TypeError: ``tokenizer`` is not a CharTokenizer.
        OSError: the path cannot be opened for writing (no such directory, not writable, a
            directory).
    """
    from .data import CharTokenizer

    dest = Path(path)
    state = model.state_dict()
    if META_KEY in state:
        raise ValueError(f"parameter name {META_KEY!r} is reserved for checkpoint metadata")
    meta = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION,
            "config": model.config.to_dict()}
    if tokenizer is not None:
        if not isinstance(tokenizer, CharTokenizer):
            raise TypeError(f"tokenizer must be a gpt.data.CharTokenizer, got "
                            f"{type(tokenizer).__name__}")
        if tokenizer.vocab_size != model.config.vocab_size:
            raise ValueError(f"the tokenizer has {tokenizer.vocab_size} characters but the model's "
                             f"vocab_size is {model.config.vocab_size}")
        meta["vocab"] = list(tokenizer.chars)
    if run_id is not None:
        if not isinstance(run_id, str) or not run_id:
            raise TypeError(f"run_id must be a non-empty str, got {run_id!r}")
        meta["run_id"] = run_id
    arrays = {name: np.asarray(a) for name, a in state.items()}
    if optimizer is not None:
        sd = optimizer.state_dict()
        meta["optimizer"] = {"param_groups": sd["param_groups"], "steps": {
            str(i): s["step"] for i, s in sd["state"].items()}}
        for i, s in sd["state"].items():
            for name in ("exp_avg", "exp_avg_sq"):
                arrays[f"{OPTIMIZER_PREFIX}state.{i}.{name}"] = s[name]
    if train_state is not None:
        meta["train"] = train_state
    arrays[META_KEY] = np.array(json.dumps(meta, sort_keys=True))  # 0-d '<U..' array, no pickle
    with open(dest, "wb") as f:  # a file object: np.savez would append ".npz" to a path
        np.savez(f, **arrays)
    return dest


def load_config(path: PathLike):
    """The ``gpt.GPTConfig`` stored in a checkpoint, read without its parameter arrays (so a
    caller can check what building the model would take before ``load_checkpoint`` does).

    Raises:
        FileNotFoundError / IsADirectoryError / ValueError: as ``load_checkpoint``.
        ValueError / TypeError: the stored config is not a valid ``GPTConfig``
            ("checkpoint P has an invalid config: ...").
    """
    p = Path(path)
    meta, _ = _read(p, arrays=False)
    return _config(p, meta)


def load_tokenizer(path: PathLike):
    """The ``gpt.data.CharTokenizer`` stored in a checkpoint (its ``vocab``).

    Returns:
        A ``CharTokenizer`` whose ids are the model's token ids.

    Raises:
        FileNotFoundError / IsADirectoryError / ValueError: as ``load_checkpoint``.
        ValueError: the checkpoint carries no vocabulary (written before checkpoints stored
            one, or without a tokenizer), or a malformed one.
    """
    from .data import CharTokenizer

    meta, _ = _read(Path(path), arrays=False)
    vocab = meta.get("vocab")
    if vocab is None:
        raise ValueError(
            f"checkpoint {path} carries no character vocabulary (it was saved without one, e.g. "
            f"before checkpoints stored it), so its token ids cannot be mapped to text; save it "
            f"again with save_checkpoint(model, path, tokenizer=CharTokenizer(training_text))")
    config = meta.get("config")
    V = config.get("vocab_size") if isinstance(config, dict) else None
    ok = (isinstance(vocab, list) and all(isinstance(c, str) and len(c) == 1 for c in vocab)
          and vocab == sorted(set(vocab)) and len(vocab) == V)
    if not ok:
        raise ValueError(f"checkpoint {path} has a malformed vocabulary (expected {V} distinct "
                         f"single characters in sorted order)")
    return CharTokenizer("".join(vocab))


def load_training_state(path: PathLike):
    """What ``save_checkpoint(..., optimizer=, train_state=)`` stored to resume training.

    Returns:
        ``(optimizer_state, train_state)``: the first a dict for ``Optimizer.load_state_dict``
        (``"state"``: i -> {``step``, ``exp_avg``, ``exp_avg_sq``}, ``"param_groups"``), the
        second the stored dict; each None when the checkpoint does not hold it.

    Raises:
        FileNotFoundError / IsADirectoryError / ValueError: as ``load_checkpoint``; ValueError:
            an optimizer state with arrays missing.
    """
    meta, arrays = _read(Path(path))
    opt = meta.get("optimizer")
    if opt is not None:
        try:
            groups = [{**g, "betas": tuple(g["betas"])} if "betas" in g else g  # JSON: a list
                      for g in opt["param_groups"]]
            opt = {"param_groups": groups, "state": {
                int(i): {"step": step, **{name: arrays[f"{OPTIMIZER_PREFIX}state.{i}.{name}"]
                                          for name in ("exp_avg", "exp_avg_sq")}}
                for i, step in opt["steps"].items()}}
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ValueError(f"checkpoint {path} has a malformed optimizer state ({e!r})") from None
    return opt, meta.get("train")


def load_checkpoint(path: PathLike):
    """Rebuild a ``gpt.GPT`` from a file written by ``save_checkpoint``.

    Returns:
        A ``gpt.GPT`` with the stored config and parameters (same logits as the saved model).
        Its ``run_id`` attribute names the run that wrote the checkpoint (the ``run_id`` of
        that run's ``results.json``), None when the checkpoint does not record one.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        IsADirectoryError: ``path`` is a directory.
        ValueError: the file is not an ``.npz`` archive, lacks or has malformed metadata, holds a
            pickled (object) array, or its arrays do not match the config's parameters (missing,
            unexpected, wrong shape: one line, each kind counted and its first named).
        ValueError / TypeError: the stored config is not a valid ``GPTConfig`` ("checkpoint P
            has an invalid config: ...").
    """
    from . import GPT  # local import: gpt/__init__ imports this module

    p = Path(path)
    meta, arrays = _read(p)
    arrays = {k: v for k, v in arrays.items() if not k.startswith(OPTIMIZER_PREFIX)}
    model = GPT(_config(p, meta))
    mismatch = _mismatch({k: v.shape for k, v in model.state_dict().items()}, arrays)
    if mismatch:
        raise ValueError(f"checkpoint {p} does not match its config: {mismatch}")
    model.load_state_dict(arrays)  # casts to the model's dtype
    run_id = meta.get("run_id")
    model.run_id = run_id if isinstance(run_id, str) else None
    return model


def _mismatch(shapes, arrays):
    """How the stored ``arrays`` differ from the parameter ``shapes`` of the config's model, in
    one line (each kind counted, its first named), or "" when they match."""
    missing = [k for k in shapes if k not in arrays]
    unexpected = [k for k in arrays if k not in shapes]
    other = [k for k in shapes if k in arrays and arrays[k].shape != shapes[k]]
    parts = []
    if missing:
        parts.append(f"{len(missing)} of its parameters not stored ({missing[0]}"
                     + (", ..." if len(missing) > 1 else "") + ")")
    if unexpected:
        parts.append(f"{len(unexpected)} stored that it does not have ({unexpected[0]}"
                     + (", ..." if len(unexpected) > 1 else "") + ")")
    if other:
        k = other[0]
        parts.append(f"{len(other)} of another shape ({k}: {tuple(arrays[k].shape)} stored, "
                     f"{tuple(shapes[k])} in its config" + (", ..." if len(other) > 1 else "")
                     + ")")
    return "; ".join(parts)


def _config(p: Path, meta):
    """The ``GPTConfig`` of a checkpoint's metadata; an invalid one raises the same exception
    type with a message that names the file."""
    from . import GPTConfig  # local import: gpt/__init__ imports this module

    try:
        return GPTConfig.from_dict(meta.get("config", {}))
    except ValueError as e:
        raise ValueError(f"checkpoint {p} has an invalid config: {e}") from None
    except TypeError as e:
        raise TypeError(f"checkpoint {p} has an invalid config: {e}") from None


def _read(p: Path, arrays: bool = True):
    """(metadata dict, name -> array) of a checkpoint file, every format check done; with
    ``arrays=False`` only the metadata entry is read (the dict is empty)."""
    if p.is_dir():
        raise IsADirectoryError(f"checkpoint path is a directory, not a file: {p}")
    if not p.exists():
        raise FileNotFoundError(f"checkpoint file not found: {p}")
    if not p.is_file():  # a FIFO or a device: opening it could block, and it is no archive
        raise ValueError(f"checkpoint {p} is not a regular file")
    if not zipfile.is_zipfile(p):
        raise ValueError(f"cannot read checkpoint {p}: not a valid .npz (zip) archive")
    try:
        with np.load(p, allow_pickle=False) as npz:  # an object array raises ValueError
            data = {n: npz[n] for n in npz.files if arrays or n == META_KEY}
    except ValueError as e:
        raise ValueError(f"cannot read checkpoint {p}: {e}") from None
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise ValueError(f"cannot read checkpoint {p}: not a valid .npz archive ({e})") from None
    meta_arr = data.pop(META_KEY, None)
    if meta_arr is None:
        raise ValueError(f"{p} is not a minigrad-gpt checkpoint (no {META_KEY!r} entry)")
    try:
        meta = json.loads(str(meta_arr[()]))
    except (json.JSONDecodeError, TypeError, IndexError) as e:
        raise ValueError(f"checkpoint {p} has malformed metadata: {e}") from None
    if not isinstance(meta, dict) or meta.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"checkpoint {p} has metadata of an unknown format")
    if meta.get("version") != CHECKPOINT_VERSION:
        raise ValueError(f"checkpoint {p} has version {meta.get('version')!r}, "
                         f"this code reads version {CHECKPOINT_VERSION}")
    return meta, data
