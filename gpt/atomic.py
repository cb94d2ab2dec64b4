"""Atomic file writes: a temporary file in the destination's directory, then ``os.replace``.

A reader never sees a half-written file, and an interrupted write leaves no file behind. Used
by ``gpt.checkpoint`` and by the command-line tools in ``experiments``.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import IO, Iterator, Union

PathLike = Union[str, "os.PathLike[str]"]

__all__ = ["atomic_writer", "atomic_write_text", "atomic_write_bytes", "AtomicGroup"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_writer(path: PathLike, mode: str = "w", encoding: str = "utf-8") -> Iterator[IO]:
    """Context manager yielding a file object whose content replaces ``path`` atomically on exit.

    The temporary file lives in ``path``'s directory (same filesystem, so ``os.replace`` is
    atomic); it is removed if the block raises. ``mode`` is ``"w"`` (text) or ``"wb"``.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"mode must be 'w' or 'wb', got {mode!r}")
    dest = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=str(dest.parent))
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the usual permissions
        if mode == "w":
            f = os.fdopen(fd, "w", encoding=encoding, newline="\n")
        else:
            f = os.fdopen(fd, "wb")
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: PathLike, text: str, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``path`` atomically (temporary file + ``os.replace``)."""
    with atomic_writer(path, "w", encoding=encoding) as f:
        f.write(text)


def atomic_write_bytes(path: PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temporary file + ``os.replace``)."""
    with atomic_writer(path, "wb") as f:
        f.write(data)


class AtomicGroup:
    """Write several files as one step: each is staged as a temporary file beside its
    destination, and only when every one is written are they all moved into place with
    ``os.replace``. If anything fails (or is interrupted) before that, the temporary files are
    removed and no destination is touched.

    Use::

        with AtomicGroup() as group:
            save_checkpoint(model, group.stage(out / "model.npz"))
            group.write_text(out / "results.json", text)
        # all files are in place here

    Raises:
        OSError: from creating a temporary file or from ``os.replace``.
    """

    def __init__(self) -> None:
        self._staged = []  # (tmp, dest)

    def stage(self, dest: PathLike) -> Path:
        """A fresh temporary path in ``dest``'s directory that becomes ``dest`` on commit."""
        dest = Path(dest)
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=str(dest.parent))
        os.close(fd)
        os.chmod(tmp, 0o666 & ~_umask())
        self._staged.append((Path(tmp), dest))
        return Path(tmp)

    def write_text(self, dest: PathLike, text: str, encoding: str = "utf-8") -> None:
        """Stage ``text`` for ``dest``."""
        with open(self.stage(dest), "w", encoding=encoding, newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())

    def __enter__(self) -> "AtomicGroup":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            try:
                for tmp, dest in self._staged:
                    os.replace(tmp, dest)
            finally:
                self._discard()
        else:
            self._discard()
        return False

    def _discard(self) -> None:
        for tmp, _ in self._staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        self._staged = []
