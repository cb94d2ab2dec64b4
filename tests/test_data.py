"""Tests of gpt.data: built-in corpus, tokenizer, split, batches, evaluation windows."""
import math

import numpy as np
import pytest

from gpt.data import (
    BUILTIN_CORPUS_PATH,
    CharTokenizer,
    eval_windows,
    get_batch,
    load_corpus,
    train_val_split,
    uniform_baseline,
)


# ---------------------------------------------------------------- built-in corpus


def test_builtin_corpus_has_48_distinct_characters():
    text = load_corpus()
    assert len(set(text)) == 48
    # ln 48 = 3.8712, the chapter's uniform baseline
    assert round(uniform_baseline(len(set(text))), 4) == 3.8712


def test_builtin_corpus_size_and_source_file():
    text = load_corpus()
    assert 1500 <= len(text.encode("utf-8")) <= 2100  # "about 1.8 KB"
    assert text.startswith("It is a truth universally acknowledged")
    source = (BUILTIN_CORPUS_PATH.parent / "SOURCE.txt").read_text(encoding="utf-8")
    assert "Pride and Prejudice" in source and "Gutenberg" in source


def test_load_corpus_reads_exact_text(tmp_path):
    p = tmp_path / "c.txt"
    p.write_bytes("ab\r\ncé\n".encode("utf-8"))
    assert load_corpus(p) == "ab\r\ncé\n"  # no newline translation


@pytest.mark.parametrize(
    "content, exc, words",
    [
        (b"", ValueError, "empty"),
        (b"abc\xff\xfe", ValueError, "UTF-8"),
    ],
)
def test_load_corpus_bad_files(tmp_path, content, exc, words):
    p = tmp_path / "c.txt"
    p.write_bytes(content)
    with pytest.raises(exc, match=words):
        load_corpus(p)


def test_load_corpus_missing_and_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        load_corpus(tmp_path / "nope.txt")
    with pytest.raises(IsADirectoryError, match="directory"):
        load_corpus(tmp_path)


# ---------------------------------------------------------------- tokenizer


def test_tokenizer_vocab_is_sorted_distinct_characters():
    tok = CharTokenizer("hello world")
    assert tok.chars == [" ", "d", "e", "h", "l", "o", "r", "w"]
    assert tok.vocab_size == 8
    assert tok.stoi["h"] == 3 and tok.itos[3] == "h"


def test_tokenizer_round_trip_builtin_and_unicode():
    text = load_corpus()
    tok = CharTokenizer(text)
    ids = tok.encode(text)
    # 48 characters: the smallest integer type holding the ids is uint8 (issue 11)
    assert ids.dtype == np.uint8 and ids.shape == (len(text),)
    assert ids.min() == 0 and ids.max() == 47
    assert tok.decode(ids) == text
    # independent reference: the chapter's per-character dict lookup
    assert ids.tolist() == [tok.stoi[c] for c in text]
    uni = "naïve — 日本語 😀 naïve"
    tu = CharTokenizer(uni)
    assert tu.decode(tu.encode(uni)) == uni
    assert tu.encode(uni).tolist() == [tu.stoi[c] for c in uni]


def test_tokenizer_unknown_character_error():
    tok = CharTokenizer("abc")
    with pytest.raises(ValueError, match=r"'z' at position 2"):
        tok.encode("abz")
    with pytest.raises(ValueError, match="not in the vocabulary"):
        tok.encode("a\U0001F600")  # code point beyond the lookup table


def test_tokenizer_bad_inputs():
    with pytest.raises(ValueError, match="non-empty"):
        CharTokenizer("")
    with pytest.raises(TypeError):
        CharTokenizer(b"abc")
    tok = CharTokenizer("abc")
    with pytest.raises(ValueError, match="outside"):
        tok.decode([0, 3])
    with pytest.raises(ValueError, match="outside"):
        tok.decode([-1])
    with pytest.raises(TypeError):
        tok.decode(np.array([0.0, 1.0]))
    assert tok.encode("") .shape == (0,)
    assert tok.decode([]) == ""


# ---------------------------------------------------------------- split


def test_split_sizes_90_10():
    data = np.arange(1773)
    tr, va = train_val_split(data)
    assert len(tr) == 1595 and len(va) == 178  # int(0.9 * 1773) = 1595
    assert np.array_equal(np.concatenate([tr, va]), data)
    tr, va = train_val_split(np.arange(10))
    assert len(tr) == 9 and len(va) == 1
    with pytest.raises(ValueError):
        train_val_split(data, 1.0)
    with pytest.raises(ValueError):
        train_val_split(np.zeros((2, 3)))


# ---------------------------------------------------------------- get_batch


def test_get_batch_shapes_targets_and_windows():
    data = np.arange(100, 200)  # value = 100 + position: windows are recognisable
    x, y = get_batch(data, 8, 5, np.random.default_rng(0))
    assert x.shape == (5, 8) and y.shape == (5, 8)
    assert x.dtype == np.int64 and y.dtype == np.int64
    assert np.array_equal(y[:, :-1], x[:, 1:])  # targets shifted by one
    assert np.array_equal(y[:, -1], x[:, -1] + 1)
    # each row is a run of consecutive positions inside the data
    assert np.array_equal(np.diff(x, axis=1), np.ones((5, 7)))
    assert x.min() >= 100 and y.max() <= 199


def test_get_batch_deterministic_and_seed_dependent():
    data = np.arange(1000)
    a = get_batch(data, 16, 32, np.random.default_rng(7))
    b = get_batch(data, 16, 32, np.random.default_rng(7))
    c = get_batch(data, 16, 32, np.random.default_rng(8))
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert not np.array_equal(a[0], c[0])


def test_get_batch_reaches_both_ends():
    # N = T + 2: two possible windows, starting at 0 and at 1; both must be drawn.
    data = np.arange(10)
    x, _ = get_batch(data, 8, 200, np.random.default_rng(0))
    assert set(x[:, 0].tolist()) == {0, 1}
    # N = T + 1: exactly one window
    x, y = get_batch(np.arange(9), 8, 3, np.random.default_rng(0))
    assert np.array_equal(x, np.tile(np.arange(8), (3, 1)))
    assert np.array_equal(y, np.tile(np.arange(1, 9), (3, 1)))


def test_get_batch_errors():
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="block_size \\+ 1"):
        get_batch(np.arange(8), 8, 2, rng)
    with pytest.raises(TypeError, match="Generator"):
        get_batch(np.arange(100), 8, 2, np.random.RandomState(0))
    with pytest.raises(ValueError, match="batch_size"):
        get_batch(np.arange(100), 8, 0, rng)
    with pytest.raises(ValueError, match="block_size"):
        get_batch(np.arange(100), 0, 2, rng)


# ---------------------------------------------------------------- evaluation windows


@pytest.mark.parametrize("n, T", [(9, 8), (17, 8), (18, 8), (30, 8), (178, 32), (1595, 32), (100, 1)])
def test_eval_windows_cover_every_target_exactly_once(n, T):
    data = np.arange(n) * 3 + 5  # distinct values, position = (value - 5) / 3
    x, y, mask = eval_windows(data, T)
    assert x.shape == y.shape == mask.shape and x.shape[1] == T
    assert np.array_equal(y[:, :-1], x[:, 1:])
    counted = ((y[mask] - 5) // 3).tolist()
    assert sorted(counted) == list(range(1, n))  # positions 1..n-1, each once
    # every window is a real window of the data
    pos = (x - 5) // 3
    assert np.array_equal(np.diff(pos, axis=1), np.ones((x.shape[0], T - 1), dtype=np.int64))
    assert pos.min() == 0 and ((y - 5) // 3).max() == n - 1


def test_eval_windows_deterministic_layout():
    x, y, mask = eval_windows(np.arange(30), 8)
    assert x[:, 0].tolist() == [0, 8, 16, 21]  # stride T, last aligned to the end
    assert mask[:3].all()
    assert mask[3].tolist() == [False] * 3 + [True] * 5  # targets 25..29 are new
    with pytest.raises(ValueError, match="fewer than block_size"):
        eval_windows(np.arange(8), 8)


def test_uniform_baseline():
    assert uniform_baseline(48) == pytest.approx(math.log(48))
    with pytest.raises(ValueError):
        uniform_baseline(0)


# ---------------------------------------------------------------- corpora by name

@pytest.mark.parametrize("name, chars, distinct, sha256", [
    ("shakespeare", 1_115_394, 65,
     "86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed"),
    ("pride", 683_934, 74, "598a662b54193fed9ddc1065861f4a3ae206b22d449443e8c3ae6a6bf6b88e7b"),
])
def test_corpora_by_name(name, chars, distinct, sha256):
    """The sizes and hashes SOURCE.txt gives for each file (its copy of the upstream file)."""
    import hashlib
    from gpt.data import CORPORA
    text = load_corpus(name)
    assert len(text) == chars and len(set(text)) == distinct
    assert hashlib.sha256(text.encode("utf-8")).hexdigest() == sha256
    source = (BUILTIN_CORPUS_PATH.parent / "SOURCE.txt").read_text(encoding="utf-8")
    assert CORPORA[name].name in source and sha256 in source and f"{chars:,}" in source
    tr, va = train_val_split(CharTokenizer(text).encode(text))
    assert (len(tr), len(va)) == (chars * 9 // 10, chars - chars * 9 // 10)  # first 90%, last 10%
    assert text.startswith({"shakespeare": "First Citizen:", "pride": "Chapter 1"}[name])


def test_the_corpora_ship_as_package_data():
    import re
    from pathlib import Path
    from gpt.data import CORPORA
    toml = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    globs = re.findall(r'"([^"]+)"', re.search(r"\[tool.setuptools.package-data\]\ngpt = \[(.*)\]",
                                               toml).group(1))
    assert globs
    for path in [BUILTIN_CORPUS_PATH, BUILTIN_CORPUS_PATH.parent / "SOURCE.txt",
                 *CORPORA.values()]:
        assert any(path.relative_to(BUILTIN_CORPUS_PATH.parents[1]).match(g) for g in globs)


def test_a_path_that_is_not_a_name_is_a_path(tmp_path, monkeypatch):
    (tmp_path / "shakespeare").write_text("a local file")
    monkeypatch.chdir(tmp_path)
    assert len(load_corpus("shakespeare")) == 1_115_394    # the name wins ...
    assert load_corpus("./shakespeare") == "a local file"   # ... a path says it is one
