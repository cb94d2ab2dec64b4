"""What every command shares: arguments, one-line errors, exit statuses, Ctrl-C, output files.

A command module reads::

    PROG = "python -m experiments.<command>"

    def run(argv) -> int:
        args = cli.ArgumentParser(prog=PROG, description=...).parse_args(argv)
        ...                                  # the work; bad input raises cli.UsageError
        cli.write_outputs(out_dir, {...})    # each file complete or absent
        return cli.EXIT_OK

    if __name__ == "__main__":
        cli.main(PROG, run)

``main`` is the one place where errors become exit statuses: bad input is one line on stderr
and status 2, Ctrl-C one line and status 130, a closed pipe quiet and status 141, as for
``cat``. Standard library only.
"""
import argparse
import concurrent.futures
import errno
import io
import json
import math
import multiprocessing
import os
import signal
import sys
import tempfile
from pathlib import Path

EXIT_OK = 0
EXIT_DIVERGED = 1  # a run's loss became NaN or infinite
EXIT_USAGE = 2  # bad input, or an output that cannot be written (argparse's convention)
EXIT_INTERRUPTED = 130  # Ctrl-C: 128 + SIGINT, the shell's convention
EXIT_BROKEN_PIPE = 141  # the reader of stdout went away (| head): 128 + SIGPIPE, as cat's

BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
# glibc keeps freed arrays (up to 32 MiB each, 256 MiB in all) instead of handing them back and
# faulting them in again every step: the tiny bench step 36-45 -> 19-22 ms with the layers'
# plain formulas (docs/performance.md, "Issue 17"). A caller's own setting wins.
MALLOC_SETTINGS = (("MALLOC_MMAP_THRESHOLD_", "33554432"), ("MALLOC_TRIM_THRESHOLD_", "268435456"))


class UsageError(Exception):
    """Bad input (a value out of range, an unreadable corpus, an output folder that is a file);
    its message is one line naming the problem. ``main`` prints it and exits with status 2."""


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Appends "(default: X)" to an option's help unless the help names its default itself."""

    def _get_help_string(self, action):
        if "default" in (action.help or ""):
            return action.help
        return super()._get_help_string(action)


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose ``error`` raises ``UsageError`` (so ``main`` prints one
    line, without the usage block) and whose ``--help`` shows every option's default."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _HelpFormatter)
        kwargs.setdefault("allow_abbrev", False)  # --norm must not quietly mean --norm-cost
        super().__init__(*args, **kwargs)

    def error(self, message):
        raise UsageError(message)


def _int(text):
    s = text.strip()
    if not (s[1:] if s[:1] in "+-" else s).isdigit():
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}")
    return int(s)


def bounded_int(lo, hi, unit=""):
    """An argument type: an integer in ``lo .. hi``, e.g. ``bounded_int(1, 10**6, "steps")``.

    Returns ``parse(text) -> int``, which raises ``argparse.ArgumentTypeError`` ("expected an
    integer >= 1, got '0'", "2000000 is more than the maximum of 1,000,000 steps").
    """
    def parse(text):
        v = _int(text)
        if v < lo:
            raise argparse.ArgumentTypeError(f"expected an integer >= {lo}, got {text!r}")
        if v > hi:
            raise argparse.ArgumentTypeError(f"{text} is more than the maximum of {hi:,}"
                                             + (f" {unit}" if unit else ""))
        return v
    return parse


def positive_int(text):
    """An integer >= 1 (``argparse.ArgumentTypeError`` otherwise)."""
    return bounded_int(1, math.inf)(text)


def nonnegative_int(text):
    """An integer >= 0 (``argparse.ArgumentTypeError`` otherwise)."""
    return bounded_int(0, math.inf)(text)


def _float(text, lo, allow_lo):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(v) or v < lo or (v == lo and not allow_lo):
        raise argparse.ArgumentTypeError(
            f"expected a finite number {'>=' if allow_lo else '>'} {lo:g}, got {text!r}")
    return v


def positive_float(text):
    """A finite float > 0 (``argparse.ArgumentTypeError`` otherwise)."""
    return _float(text, 0.0, allow_lo=False)


def nonnegative_float(text):
    """A finite float >= 0 (``argparse.ArgumentTypeError`` otherwise)."""
    return _float(text, 0.0, allow_lo=True)


def path_arg(text):
    """A non-empty path as a ``Path`` (``Path("")`` would quietly mean the current folder)."""
    if not text:
        raise argparse.ArgumentTypeError("empty path")
    return Path(text)


def available_cpus():
    """The number of CPUs this process may run on (its affinity mask; ``os.cpu_count()`` where
    there is none)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def given_options(parser, argv):
    """The destinations of the options ``argv`` gives explicitly (even at their default value),
    so that a preset or a checkpoint can fill in the others: ``parser.parse_args`` into a
    namespace whose every attribute is a marker, which argparse keeps where nothing was given.

    Raises:
        UsageError: as ``parser.parse_args`` (through ``ArgumentParser.error``).
    """
    unset = object()
    dests = vars(parser.parse_args(argv))
    given = parser.parse_args(argv, argparse.Namespace(**{k: unset for k in dests}))
    return {k for k, v in vars(given).items() if v is not unset}


def add_threads_option(parser):
    """Add ``--threads N``: the BLAS threads of the command (``main`` applies it), at most the
    CPUs this process may use (more threads than CPUs only wait for each other)."""
    cpus = available_cpus()
    parser.add_argument("--threads", type=bounded_int(1, cpus, "threads, the CPUs this process "
                                                                "may use"),
                        default=1, metavar="N", help="BLAS threads (OPENBLAS_NUM_THREADS) of the "
                        f"processes that train, at most the {cpus} CPUs this process may use")


def _blas_threads(argv):
    """Set ``OPENBLAS_NUM_THREADS`` from ``--threads N`` in ``argv``, else to 1 unless the
    environment already chose a count. NumPy reads it when it loads: the value reaches the
    worker processes and subprocesses a command starts, not a NumPy already imported."""
    value = None
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--threads="):
            value = arg.partition("=")[2]
    if value is not None and value.isdigit() and int(value) >= 1:
        os.environ["OPENBLAS_NUM_THREADS"] = value
    elif not any(os.environ.get(name) for name in BLAS_THREAD_VARIABLES):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"


def _say(line):
    """``line`` on stderr, if stderr can be written (``2>/dev/full``: the status tells)."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except OSError:
        pass


def _error(prog, message):
    _say(f"{prog}: error: {' '.join(str(message).split())}")
    return EXIT_USAGE


def _silence_stdout():
    """Point stdout at /dev/null, so Python's final flush of a closed pipe is quiet."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # not a real file (a test's capture)
        pass


def main(prog, run, argv=None):
    """The top of every command: set the BLAS threads, call ``run(argv) -> status``, exit.

    - ``UsageError``, and an ``OSError`` or ``MemoryError`` (an output folder that cannot be
      written, a full disk): ``<prog>: error: <message>``, one line on stderr, status 2.
    - Ctrl-C (``KeyboardInterrupt``) at any stage of ``run``: ``<prog>: interrupted``, one line
      on stderr, status 130 (files are written by ``write_outputs``: each complete or absent).
    - A closed stdout or stderr (``| head``): the command stops at its next write, quiet,
      status 141 (128 + SIGPIPE, as ``cat``); stdout or stderr that cannot be written (a full
      disk): ``<prog>: error: cannot write to stdout: <reason>`` where stderr can say it,
      status 2.
    - A character that stdout's encoding lacks (``PYTHONIOENCODING=ascii``) is written as a
      backslash escape (``\\xe9``), not raised.

    Args:
        prog: the command's name for messages, e.g. ``"python -m experiments.four_variants"``.
        run: ``run(argv) -> int``, the command.
        argv: the arguments (default ``sys.argv[1:]``).
    Raises:
        SystemExit: always, with the status.
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    status = EXIT_OK
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")
    try:
        _blas_threads(argv)
        for name, value in MALLOC_SETTINGS:  # read by the worker processes' glibc when they start
            os.environ.setdefault(name, value)
        status = run(argv)
    except KeyboardInterrupt:
        _say(f"{prog}: interrupted")
        status = EXIT_INTERRUPTED
    except UsageError as e:
        status = _error(prog, e)
    except BrokenPipeError:
        _silence_stdout()
        status = EXIT_BROKEN_PIPE
    except OSError as e:  # a file names itself; a full disk without a name is stdout's
        stdout = e.errno in (errno.ENOSPC, errno.EIO, errno.EDQUOT) and not e.filename
        status = _error(prog, f"{e.filename}: {e.strerror}" if e.filename else
                        f"cannot write to stdout: {e.strerror}" if stdout else e.strerror or e)
        if stdout:
            _silence_stdout()
    except MemoryError as e:
        status = _error(prog, f"out of memory {e}".strip())
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _silence_stdout()
        status = EXIT_BROKEN_PIPE
    except OSError as e:  # a full disk, /dev/full
        _silence_stdout()
        status = _error(prog, f"cannot write to stdout: {e.strerror or e}")
    sys.exit(status)


def start_worker():
    """A worker's first step: Ctrl-C is the parent's to handle (no traceback from a worker)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def in_workers(fn, arg_lists, workers=1, executor=None):
    """Yield ``fn(*args)`` for each ``args`` of ``arg_lists``, in order, each computed in a
    spawned worker process, ``workers`` at a time, or on ``executor`` (a Dask cluster's
    ``Client.get_executor()``).

    A spawned worker is a fresh interpreter: its NumPy reads the BLAS threads and its glibc the
    allocator settings that ``main`` put in the environment, which this process's NumPy, loaded
    before ``main`` ran, cannot (two BLAS threads on a busy 2-core machine made a run 5 times
    slower: docs/performance.md). SIGINT is held while the workers start and ignored in them;
    on a Ctrl-C or an error here they are stopped at once (SIGTERM; a Dask executor cancels its
    futures, and a task already running finishes there, unread). Raises what ``fn`` raises.
    """
    if executor is None:
        pool = concurrent.futures.ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("spawn"), initializer=start_worker)

        def stop():
            for process in list(pool._processes.values()):  # Python 3.14: terminate_workers()
                process.terminate()
    else:
        pool = executor

        def stop():
            pool.shutdown(wait=False)  # cancels every task queued or running
    with pool:
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:  # submit, not map: map cancels the queued tasks on a Ctrl-C, and Python 3.11's
            # pool then fails to mark them broken (an InvalidStateError traceback)
            futures = [pool.submit(fn, *args) for args in arg_lists]
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        try:
            for future in futures:
                yield future.result()
        except BaseException:
            stop()
            raise


def run_in_worker(fn, *args):
    """``fn(*args)`` in one spawned worker process (``in_workers``): returns what ``fn``
    returns and raises what it raises."""
    [result] = in_workers(fn, [args])
    return result


def check_output_dir(path, names=()):
    """Check, before any work, that the folder ``path`` is or can be made writable (a temporary
    file can be made in its nearest existing ancestor, and is removed) and that none of
    ``names`` in it is a folder, a FIFO or a device; returns it as a ``Path``.

    Raises:
        UsageError: ``path`` is a file or lies under one, cannot be written, or a name in it
            is not a regular file.
    """
    path = Path(path)
    existing = next(p for p in (path, *path.parents) if p.exists() or p == Path(p.anchor))
    if not existing.is_dir():
        raise UsageError(f"output folder {path}: {existing} is not a directory")
    try:  # a real write: root passes os.access on /proc and /sys
        tempfile.TemporaryFile(dir=existing).close()
    except OSError as e:
        raise UsageError(f"output folder {path}: {existing} is not writable ({e.strerror})")
    for name in names:
        dest = path / name
        if os.path.lexists(dest) and not (dest.is_file() or dest.is_symlink()):
            raise UsageError(f"cannot write {dest}: it is not a regular file")
    return path


def write_outputs(out_dir, files):
    """Write ``files`` into ``out_dir`` (created if needed), in order, each complete or absent.

    Each file is written under a temporary name beside its destination and moved into place
    with ``os.replace``. On an error or a Ctrl-C the temporary file being written is removed;
    the files already moved stay. Nothing else in ``out_dir`` is ever removed: put
    ``results.json`` (naming the files of the run) last. A destination that is a folder, a
    FIFO or a device is refused before anything is written (``UsageError``).

    Args:
        out_dir: the folder (str or Path).
        files: ``{name: content}`` in writing order; ``name`` may hold a subfolder
            (``"checkpoints/ln_gelu.npz"``); ``content`` is ``str`` (written as UTF-8),
            ``bytes``, or ``callable(path)`` that writes the file at ``path`` (its name ends
            like ``name``, so ``np.savez`` and ``savefig`` keep the format).
    Raises:
        OSError: a file cannot be written (``main`` reports it as one line, status 2).
        UsageError: a destination is not a regular file, or no file can be made in its folder
            ("cannot write in /proc: ...").
    """
    check_output_dir(out_dir, files)
    mask = os.umask(0)
    os.umask(mask)
    for name, content in files.items():
        dest = Path(out_dir, name)
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=".tmp-", suffix="-" + dest.name)
        except OSError as e:  # the temporary name is ours: name the folder the user gave
            raise UsageError(f"cannot write in {dest.parent}: {e.strerror or e}") from None
        try:
            with os.fdopen(fd, "wb") as f:
                if isinstance(content, str):
                    f.write(content.encode("utf-8"))
                elif isinstance(content, bytes):
                    f.write(content)
            if callable(content):
                content(tmp)
            os.chmod(tmp, 0o666 & ~mask)
            os.replace(tmp, dest)
        except BaseException as e:
            if os.path.exists(tmp):
                os.unlink(tmp)
            if isinstance(e, OSError) and not e.filename:
                e.filename = str(dest)  # a write that failed half-way names its file
            raise


def write_json(path, obj):
    """Write ``obj`` as indented strict JSON (no NaN) to ``path``, complete or absent."""
    path = Path(path)
    write_outputs(path.parent, {path.name: json.dumps(obj, indent=2, allow_nan=False) + "\n"})


def progress(line):
    """One progress line on stderr, flushed (one write, so lines of several processes do not
    interleave). Raises the OSError of a stderr that cannot be written, named "<stderr>"."""
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except OSError as e:  # 2>/dev/full: main's status 2, without taking it for stdout's error
        raise type(e)(e.errno, e.strerror, "<stderr>") from None
