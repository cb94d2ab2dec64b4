"""Atomic output for the commands: a run's files appear all together, or not at all.

- ``AtomicGroup``: stage several files beside their destinations, then move them all into
  place with ``os.replace``; a failure puts back what was moved, Ctrl-C cannot split the move.
- ``atomic_write_text``: the same for a single text file.
- ``check_replaceable``: refuse to replace a directory, a device, a FIFO or a socket.

A reader never sees a half-written file, and an interrupted run leaves none behind: each file
is written as a temporary file in its destination's directory (same filesystem, so
``os.replace`` is atomic) and removed if anything fails.
"""
from __future__ import annotations

import contextlib
import errno
import os
import signal
import stat
import tempfile
import threading
from pathlib import Path
from typing import Union

PathLike = Union[str, "os.PathLike[str]"]

__all__ = ["AtomicGroup", "InterruptedAfterCommit", "atomic_write_text", "check_replaceable"]


def check_replaceable(path: PathLike) -> None:
    """Raise unless ``path`` is absent, a regular file or a symbolic link: an atomic write must
    never swap a device (``/dev/full``), a FIFO or a socket for a regular file.

    Raises:
        IsADirectoryError: ``path`` is a directory.
        OSError: ``path`` is a device, FIFO or socket (``errno.EINVAL``).
    """
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISREG(mode) or stat.S_ISLNK(mode):
        return
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", str(path))
    raise OSError(errno.EINVAL, "not a regular file (a device, FIFO or socket); refusing to "
                                "replace it", str(path))


def atomic_write_text(path: PathLike, text: str, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``path`` atomically (temporary file + ``os.replace``).

    Raises:
        IsADirectoryError / OSError: as ``check_replaceable``, or from writing.
    """
    with AtomicGroup() as group:
        group.write_text(path, text, encoding=encoding)


class InterruptedAfterCommit(KeyboardInterrupt):
    """Ctrl-C that arrived while an ``AtomicGroup`` moved its files into place, raised once
    they all are: the files are complete. ``where`` is the file, or the folder of the files."""

    def __init__(self, where: str) -> None:
        super().__init__(where)
        self.where = where


class AtomicGroup:
    """Write several files as one step: all of them or none.

    Each file is staged as a temporary file beside its destination. Only when every one is
    written does the commit move them into place with ``os.replace``; before each move, an
    existing destination is kept as a hard link, so that if a later move fails every file
    already moved is put back (or removed, when it did not exist before). Ctrl-C (SIGINT)
    cannot split the commit, which takes milliseconds: it is held back, recorded in
    ``interrupted``, and raised when the commit is done as ``InterruptedAfterCommit`` (a
    ``KeyboardInterrupt`` naming where the complete files are; also for a Ctrl-C that lands
    just as the hold ends). ``committed`` says whether the files are in place. If anything
    fails before the commit, the temporary files are removed and no destination is touched.

    ``remove(dest)`` makes removing a file part of the same step (a file of the run's own name
    left by an earlier run): it disappears at the commit, and comes back if the commit fails.

    Use::

        with AtomicGroup() as group:
            save_checkpoint(model, group.stage(out / "model.npz"))
            group.write_text(out / "results.json", text)
        # all files are in place here

    Raises:
        OSError: from creating a temporary file, keeping a backup link, or ``os.replace`` (in
            which case nothing was changed).
    """

    def __init__(self) -> None:
        self._staged = []  # (tmp, dest); tmp None: remove dest
        self.interrupted = False
        self.committed = False

    def stage(self, dest: PathLike) -> Path:
        """A fresh temporary path in ``dest``'s directory that becomes ``dest`` on commit."""
        dest = Path(dest)
        check_replaceable(dest)
        with _sigint_held() as pending:  # a Ctrl-C here must not leave an untracked file
            fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp",
                                       dir=str(dest.parent))
            self._staged.append((Path(tmp), dest))  # removed by the group from here on
            os.close(fd)
        if pending:
            raise KeyboardInterrupt
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the usual permissions
        return Path(tmp)

    @property
    def destinations(self):
        """The paths staged so far to be written (not those to be removed)."""
        return [dest for tmp, dest in self._staged if tmp is not None]

    def unstage(self, dest: PathLike) -> None:
        """Take ``dest`` out of the group again: its temporary file is removed, and the commit
        leaves ``dest`` as it is."""
        dest = Path(dest)
        for tmp, d in [(t, d) for t, d in self._staged if t is not None and d == dest]:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            self._staged.remove((tmp, d))

    def remove(self, dest: PathLike) -> None:
        """Remove ``dest`` (if it exists then) at the commit, as part of the group."""
        check_replaceable(dest)
        self._staged.append((None, Path(dest)))

    def write_text(self, dest: PathLike, text: str, encoding: str = "utf-8") -> None:
        """Stage ``text`` for ``dest``."""
        with open(self.stage(dest), "w", encoding=encoding, newline="\n") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())

    def __enter__(self) -> "AtomicGroup":
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        try:
            if exc_type is None:
                try:
                    with _sigint_held() as pending:
                        self._commit()
                        self.committed = True
                    self.interrupted = bool(pending)
                    if pending:  # held back while the files were moved: raised now they are
                        raise KeyboardInterrupt
                except KeyboardInterrupt:
                    if self.committed:
                        raise InterruptedAfterCommit(self._where()) from None
                    raise
        finally:
            self._discard()
        return False

    def raise_if_committed(self, where: PathLike) -> None:
        """For a caller's ``except KeyboardInterrupt`` around the group: when the files are
        already in place, raise ``InterruptedAfterCommit(where)`` instead (``run_main`` then
        says where they are, not "nothing written"); else return."""
        if self.committed:
            raise InterruptedAfterCommit(str(Path(where).resolve())) from None

    def _where(self) -> str:
        dests = self.destinations
        if len(dests) == 1:
            return str(dests[0].resolve())
        return os.path.commonpath([str(d.resolve().parent) for d in dests]) if dests else ""

    def _commit(self) -> None:
        for tmp, _ in self._staged:  # on disk before it replaces anything (a file written to
            if tmp is not None:      # a stage() path, e.g. a checkpoint, was not synced)
                _fsync(tmp)
        moved = []  # (dest, backup or None), in order
        backups = []
        try:
            for tmp, dest in self._staged:
                backup = None
                if tmp is None and not os.path.lexists(dest):
                    continue  # nothing to remove
                if os.path.lexists(dest):
                    backup = dest.with_name(f".{dest.name}.{os.getpid()}.bak")
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(backup)
                    os.link(dest, backup)
                    backups.append(backup)
                if tmp is None:
                    os.unlink(dest)
                else:
                    os.replace(tmp, dest)
                moved.append((dest, backup))
        except BaseException:
            for dest, backup in reversed(moved):  # put every moved file back
                with contextlib.suppress(OSError):
                    if backup is not None:
                        os.replace(backup, dest)
                    else:
                        os.unlink(dest)
            raise
        finally:
            for b in backups:
                with contextlib.suppress(OSError):
                    os.unlink(b)

    def _discard(self) -> None:
        for tmp, _ in self._staged:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        self._staged = []


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def _sigint_held():
    """Hold SIGINT back for the duration of the block (main thread only); yields a list that
    records the signals that arrived."""
    pending = []
    if threading.current_thread() is not threading.main_thread():
        yield pending
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: pending.append(signum))
    try:
        yield pending
    finally:
        signal.signal(signal.SIGINT, previous)
