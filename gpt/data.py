"""Character-level data: corpus loading, tokenizer, train/val split, batches, evaluation windows.

The recipe is the chapter's (chapter "The Details That Matter", project 5 helpers ``char_tokenizer``,
``encode``, ``get_batch``): the vocabulary is the sorted set of distinct characters of the corpus,
the first 90% of the token ids train and the last 10% validate, and a batch is ``batch_size``
random windows of ``block_size + 1`` consecutive tokens, split into inputs ``x`` and targets ``y``
shifted by one.

Shapes: N tokens in a split, B = batch_size, T = block_size. ``CharTokenizer.encode`` returns
ids in the smallest unsigned integer type that holds the vocabulary (``uint8`` up to 256
characters, else ``uint16``, else ``uint32``): a 100 MB corpus is 100 MB of ids, not 800 MB of
``int64``. Batches and evaluation windows are ``np.int64``.

Large corpora: the vocabulary and the ids are computed with NumPy over the text's UTF-32 code
points, 256 Ki characters at a time (``np.bincount`` for the character set, a lookup table for
the ids), never with a Python loop over characters. ``eval_windows(..., max_tokens=N)`` bounds
an evaluation to about N target positions spread evenly over the split.

Built-in corpus: ``gpt/corpus/pride_and_prejudice.txt``, the opening of Jane Austen's "Pride and
Prejudice" (1813; Project Gutenberg eBook #1342, public domain), 1773 characters with exactly 48
distinct ones. Two larger corpora ship beside it, named in ``CORPORA``: ``"shakespeare"``, Tiny
Shakespeare (1,115,394 characters, 65 distinct; the corpus of nanoGPT's shakespeare_char) and
``"pride"``, the whole novel (683,934 characters, 74 distinct; the same transcription as the
opening). ``gpt/corpus/SOURCE.txt`` names the source of each.
"""
from __future__ import annotations

import math
import os
import stat
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from layers.checks import positive_int

__all__ = [
    "BUILTIN_CORPUS_PATH",
    "CORPORA",
    "CharTokenizer",
    "load_corpus",
    "train_val_split",
    "get_batch",
    "eval_windows",
    "check_split_length",
    "uniform_baseline",
    "id_dtype",
    "NotARegularFile",
]

#: Characters per chunk when scanning or encoding a text (bounds the temporary UTF-32 copy).
CHUNK_CHARS = 1 << 18  # 256 Ki: 1 MB of UTF-32 a chunk; fastest of 2^14..2^24 measured
#: One past the largest Unicode code point.
N_CODE_POINTS = 0x110000

#: Path of the built-in corpus (package data).
BUILTIN_CORPUS_PATH = Path(__file__).resolve().parent / "corpus" / "pride_and_prejudice.txt"
#: The corpora that ship with the package, by name (``load_corpus("shakespeare")``).
CORPORA = {"shakespeare": BUILTIN_CORPUS_PATH.parent / "tiny_shakespeare.txt",
           "pride": BUILTIN_CORPUS_PATH.parent / "pride_and_prejudice_full.txt"}

PathLike = Union[str, "os.PathLike[str]"]


def id_dtype(vocab_size: int) -> np.dtype:
    """The smallest unsigned integer dtype holding ids ``0 .. vocab_size - 1``."""
    for dt in (np.uint8, np.uint16, np.uint32):
        if vocab_size - 1 <= np.iinfo(dt).max:
            return np.dtype(dt)
    raise ValueError(f"vocab_size {vocab_size} does not fit in uint32")


def _code_points(text: str):
    """Yield the text's code points as ``uint32`` arrays of at most ``CHUNK_CHARS`` each."""
    for i in range(0, len(text), CHUNK_CHARS):
        chunk = text[i:i + CHUNK_CHARS].encode("utf-32-le", "surrogatepass")
        yield np.frombuffer(chunk, dtype=np.uint32)


class CharTokenizer:
    """Character-level tokenizer: id ``i`` is the ``i``-th character of the sorted distinct set.

    Same mapping as the chapter's ``char_tokenizer(text) -> (stoi, itos, vocab_size)`` with
    ``chars = sorted(set(text))``.

    Args:
        text: the corpus (a non-empty ``str``) whose characters form the vocabulary.

    Attributes:
        chars: the sorted distinct characters (``list[str]``).
        stoi / itos: character -> id and id -> character dicts.
        vocab_size: ``len(chars)``.

    Raises:
        TypeError: ``text`` is not a ``str``.  ValueError: ``text`` is empty.
    """

    def __init__(self, text: str) -> None:
        if not isinstance(text, str):
            raise TypeError(f"CharTokenizer expects a str, got {type(text).__name__}")
        if not text:
            raise ValueError("CharTokenizer needs a non-empty text to build its vocabulary")
        seen = np.zeros(N_CODE_POINTS, dtype=bool)
        for cps in _code_points(text):
            top = int(cps.max()) + 1  # bincount only up to the chunk's largest code point
            seen[:top] |= np.bincount(cps, minlength=top).astype(bool)
        codes = np.flatnonzero(seen)  # sorted distinct code points = sorted(set(text))
        self.chars: List[str] = [chr(int(c)) for c in codes]
        self.stoi: Dict[str, int] = {c: i for i, c in enumerate(self.chars)}
        self.itos: Dict[int, str] = {i: c for i, c in enumerate(self.chars)}
        self.id_dtype = id_dtype(len(self.chars))
        # Lookup tables over every code point: id of a character, and whether it is known.
        self._known = seen
        self._lut = np.zeros(N_CODE_POINTS, dtype=self.id_dtype)
        self._lut[codes] = np.arange(len(codes), dtype=self.id_dtype)
        self._chars_arr = np.array(self.chars)

    @property
    def vocab_size(self) -> int:
        """Number of distinct characters (``int``)."""
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        """Map a string to its token ids, shape ``(len(text),)``, dtype ``self.id_dtype`` (the
        smallest unsigned integer type holding ``vocab_size`` ids: ``uint8`` up to 256).

        Vectorised: a lookup table indexed by code point, 256 Ki characters at a time.

        Raises:
            TypeError: ``text`` is not a ``str``.
            ValueError: ``text`` holds a character outside the vocabulary (named with its position).
        """
        if not isinstance(text, str):
            raise TypeError(f"encode expects a str, got {type(text).__name__}")
        ids = np.empty(len(text), dtype=self.id_dtype)
        start = 0
        for cps in _code_points(text):
            known = self._known[cps]
            if not known.all():
                bad = np.flatnonzero(~known)
                pos = start + int(bad[0])
                total = bad.size + sum(int((~self._known[c]).sum())
                                       for c in _code_points(text[start + len(cps):]))
                raise ValueError(
                    f"character {text[pos]!r} at position {pos} is not in the vocabulary "
                    f"({total} unknown character(s) in total)"
                )
            np.take(self._lut, cps, out=ids[start:start + len(cps)])
            start += len(cps)
        return ids

    def decode(self, ids: Union[Sequence[int], np.ndarray]) -> str:
        """Map token ids (any integer sequence or 1-D array) back to a string.

        Raises:
            TypeError: ``ids`` are not integers.  ValueError: an id is outside ``[0, vocab_size)``.
        """
        arr = np.asarray(ids)
        if arr.size == 0:
            return ""
        if arr.ndim != 1:
            raise ValueError(f"decode expects a 1-D sequence of ids, got shape {arr.shape}")
        if not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"decode expects integer ids, got dtype {arr.dtype}")
        bad = np.flatnonzero((arr < 0) | (arr >= self.vocab_size))
        if bad.size:
            raise ValueError(
                f"token id {int(arr[bad[0]])} at position {int(bad[0])} is outside "
                f"[0, {self.vocab_size})"
            )
        return "".join(self._chars_arr[arr].tolist())

    def __repr__(self) -> str:
        return f"CharTokenizer(vocab_size={self.vocab_size})"


class NotARegularFile(ValueError):
    """The corpus path names a FIFO, a device, a socket or ``/dev/stdin`` fed by a pipe."""


def load_corpus(path: Optional[PathLike] = None) -> str:
    """Read a UTF-8 text corpus: ``None`` the built-in one, a name of ``CORPORA``
    (``"shakespeare"``, ``"pride"``) that corpus, anything else a path (a file called
    ``shakespeare`` in the current folder is ``"./shakespeare"``).

    Only a regular file (after following symbolic links) is read: a FIFO, a character device or
    ``/dev/stdin`` fed by a pipe is refused before it is opened, since opening a FIFO blocks until
    something writes to it and a stream cannot be read twice or sized. (``/dev/stdin`` redirected
    from a file, ``< book.txt``, is that regular file and is read.)

    Returns:
        The text (``str``), exactly as stored (no newline translation: every character counts).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        IsADirectoryError: ``path`` is a directory.
        NotARegularFile (a ValueError): ``path`` is a FIFO, device or socket.
        ValueError: the file is not valid UTF-8, or is empty.
        OSError: the file cannot be read (e.g. permission denied).
    """
    p = BUILTIN_CORPUS_PATH if path is None else CORPORA.get(path) or Path(path)
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        raise FileNotFoundError(f"corpus file not found: {p}") from None
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(f"corpus path is a directory, not a text file: {p}")
    if not stat.S_ISREG(mode):
        kind = ("a FIFO or pipe" if stat.S_ISFIFO(mode) else
                "a character device" if stat.S_ISCHR(mode) else
                "a block device" if stat.S_ISBLK(mode) else
                "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
        raise NotARegularFile(f"corpus {p} is {kind}; give a regular file (save the text to a "
                              f"file first)")
    raw = p.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"corpus file is not valid UTF-8: {p} (bad byte at offset {e.start})") from None
    del raw
    if text.startswith("\ufeff"):  # a UTF-8 byte-order mark is not text
        text = text[1:]
    if not text:
        raise ValueError(f"corpus file is empty: {p}")
    return text


def train_val_split(data: np.ndarray, train_fraction: float = 0.9) -> Tuple[np.ndarray, np.ndarray]:
    """Split token ids into the first ``int(train_fraction * N)`` and the rest (the chapter's 90/10).

    Returns views, not copies: ``(data[:n_train], data[n_train:])``.

    Raises:
        ValueError: ``data`` is not 1-D, or ``train_fraction`` is not in (0, 1).
    """
    data = np.asarray(data)
    if data.ndim != 1:
        raise ValueError(f"train_val_split expects 1-D token ids, got shape {data.shape}")
    if not (isinstance(train_fraction, (int, float)) and 0.0 < train_fraction < 1.0):
        raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction!r}")
    n_train = int(train_fraction * len(data))
    return data[:n_train], data[n_train:]


def check_split_length(data: np.ndarray, block_size: int, name: str = "split") -> None:
    """Raise ValueError unless ``data`` holds at least ``block_size + 1`` tokens (one window).

    Args:
        data: 1-D token ids.  block_size: context length T.  name: the split's name for the message.
    """
    block_size = positive_int(block_size, "block_size", "check_split_length")
    n = len(data)
    if n < block_size + 1:
        raise ValueError(
            f"{name} has {n} tokens, fewer than block_size + 1 = {block_size + 1} "
            f"(one input window and its shifted targets)"
        )


def get_batch(
    data: np.ndarray, block_size: int, batch_size: int, rng: np.random.Generator
) -> Tuple[np.ndarray, np.ndarray]:
    """Draw ``batch_size`` random windows: inputs ``x`` and targets ``y = x`` shifted by one.

    Start offsets ``i ~ Uniform{0, ..., N - T - 1}`` from ``rng.integers``; ``x[b] = data[i:i+T]``,
    ``y[b] = data[i+1:i+T+1]``, gathered with one fancy index (no loop over the batch).
    Every window of the split can be drawn; the chapter's ``torch.randint(len(data) - T - 1)``
    never draws the last one.

    Args:
        data: 1-D integer token ids, length N >= T + 1.
        block_size: T.  batch_size: B.  rng: a ``numpy.random.Generator`` (advanced in place).

    Returns:
        ``(x, y)``, each shape ``(B, T)``, dtype ``int64``.

    Raises:
        TypeError: ``rng`` is not a Generator, or a size is not an int.  ValueError: ``data`` is
        too short or a size is <= 0.
    """
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    batch_size = positive_int(batch_size, "batch_size", "get_batch")
    data = np.asarray(data)
    check_split_length(data, block_size)
    starts = rng.integers(0, len(data) - block_size, size=batch_size)  # (B,)
    offsets = np.arange(block_size + 1)  # (T+1,)
    windows = data[starts[:, None] + offsets[None, :]].astype(np.int64, copy=False)  # (B, T+1)
    return windows[:, :-1], windows[:, 1:]


def eval_windows(data: np.ndarray, block_size: int, max_tokens: Optional[int] = None
                 ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The fixed evaluation windows of a split.

    When the split has at most ``max_tokens`` target positions (or ``max_tokens`` is None),
    every target position is counted exactly once: windows start at ``0, T, 2T, ...`` while a
    full window fits; if the split's tail is not covered, one last window is aligned to the end
    (start ``N - T - 1``) and only its targets not already covered are counted, so every
    position ``1..N-1`` is the target of exactly one counted prediction.

    Otherwise (a large split) ``W = max(1, max_tokens // T)`` non-overlapping windows are spread
    evenly over the split (starts ``round(linspace(0, N - T - 1, W))``) and all their ``W * T``
    targets count: a deterministic sample of the whole split, not just its beginning.

    Args:
        data: 1-D token ids, length N >= T + 1.  block_size: T.
        max_tokens: cap on the number of counted target positions (>= 1), or None.

    Returns:
        ``(x, y, mask)``: ``x`` and ``y`` shape ``(W, T)`` int64 (``y`` is ``x`` shifted by one),
        ``mask`` shape ``(W, T)`` bool, True where the target counts (``mask.sum()`` is the
        number of tokens the evaluation covers).

    Raises:
        ValueError: the split is shorter than ``block_size + 1``, or ``max_tokens`` < 1.
    """
    data = np.asarray(data)
    check_split_length(data, block_size)
    n = len(data)
    last = n - block_size - 1  # last possible start
    if max_tokens is not None:
        max_tokens = positive_int(max_tokens, "max_tokens", "eval_windows")
    if max_tokens is not None and n - 1 > max_tokens:
        w = max(1, int(max_tokens) // block_size)
        starts = np.rint(np.linspace(0, last, w)).astype(np.int64) if w > 1 \
            else np.zeros(1, dtype=np.int64)
        mask = np.ones((w, block_size), dtype=bool)
    else:
        starts = np.arange(0, last + 1, block_size)  # (W,)
        mask = np.ones((len(starts), block_size), dtype=bool)
        covered_to = int(starts[-1]) + block_size  # targets 1..covered_to are covered
        if covered_to < n - 1:
            starts = np.append(starts, last)
            tail = np.zeros((1, block_size), dtype=bool)
            # the last window's targets are positions last+1 .. n-1; keep those > covered_to
            tail[0, covered_to - last:] = True
            mask = np.concatenate([mask, tail], axis=0)
    offsets = np.arange(block_size + 1)
    windows = data[starts[:, None] + offsets[None, :]].astype(np.int64, copy=False)  # (W, T+1)
    return windows[:, :-1], windows[:, 1:], mask


def uniform_baseline(vocab_size: int) -> float:
    """Cross-entropy of the uniform distribution over ``vocab_size`` classes: ``ln(vocab_size)``."""
    vocab_size = positive_int(vocab_size, "vocab_size", "uniform_baseline")
    return math.log(vocab_size)

