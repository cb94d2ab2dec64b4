"""What every command shares: argument types, one-line errors and exit statuses, output files
written whole, progress lines, BLAS threads, and the executor that trains several runs at once.

A command module reads::

    def run(argv) -> int:
        args = cli.ArgumentParser(prog=PROG, description=...).parse_args(argv)
        ...                                  # the work; bad input raises cli.UsageError
        cli.write_outputs(out_dir, {...})    # each file complete or absent
        return 0

    if __name__ == "__main__":
        with cli.errors(PROG):
            sys.exit(run(sys.argv[1:]))

Exit statuses: 0 done; 1 a run diverged, or an output file could not be written; 2 bad input
(one line on stderr); 130 Ctrl-C (one line). Standard library only.
"""
import argparse
import bdb
import collections
import concurrent.futures
import contextlib
import ctypes
import multiprocessing
import os
import re
import signal
import sys
import tempfile
from pathlib import Path


CONNECT_TIMEOUT = 10   # seconds to reach a Dask scheduler (Dask's default: 30)
_made = []   # the folders output_dir made, removed at the end if left empty


class UsageError(Exception):
    """Bad input, named in one line; ``errors`` prints it and exits with status 2."""


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Each option's default, unless its help says it (a default or what "none" means) or the
    option is a flag (its help says what it turns on or off)."""

    def _get_help_string(self, action):
        if action.nargs == 0 or any(w in action.help.lower() for w in ("default", "none")):
            return action.help
        return super()._get_help_string(action)


class ArgumentParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose errors raise ``UsageError`` (one line, no usage block)
    and whose ``--help`` shows each option's default."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, formatter_class=HelpFormatter, allow_abbrev=False, **kwargs)

    def error(self, message):
        raise UsageError(message)


def bounded_int(lo, hi=None, unit=""):
    """An argument type: an integer in ``lo .. hi`` (no upper bound when ``hi`` is None);
    ``argparse.ArgumentTypeError`` names what is wrong ("2000000 is more than the maximum of
    1,000,000 steps")."""
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"expected an integer >= {lo}, got {text!r}")
        if hi is not None and v > hi:
            raise argparse.ArgumentTypeError(f"{v} is more than the maximum of {hi:,}"
                                             + (f" {unit}" if unit else ""))
        return v
    return parse


positive_int, nonnegative_int = bounded_int(1), bounded_int(0)


def cpus():
    """The CPUs this process may run on: its affinity where the system reports it (Linux),
    else ``os.cpu_count()``."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        os.cpu_count() or 1


def up_to_cpus(text):
    """An argument type (``--threads``, ``--jobs``): an integer from 1 to ``cpus()``; more
    threads or processes than CPUs only wait for one another."""
    return bounded_int(1, cpus(), "(the CPUs this process may use)")(text)


def bounded_float(lo, allow_lo):
    """An argument type: a finite number > ``lo`` (>= with ``allow_lo``)."""
    def parse(text):
        try:
            v = float(text)
        except ValueError:
            v = float("nan")
        if not (v == v and abs(v) != float("inf") and (v > lo or allow_lo and v == lo)):
            raise argparse.ArgumentTypeError(
                f"expected a finite number {'>=' if allow_lo else '>'} {lo:g}, got {text!r}")
        return v
    return parse


positive_float, nonnegative_float = bounded_float(0.0, False), bounded_float(0.0, True)


def nonempty(text):
    """A non-empty string (``--scheduler ""`` would quietly train here)."""
    if not text:
        raise argparse.ArgumentTypeError("empty value")
    return text


def path_arg(text):
    """A non-empty path (``Path("")`` would quietly mean the current folder)."""
    if not text:
        raise argparse.ArgumentTypeError("empty path")
    return Path(text)


def output_dir(path):
    """Make the folder ``path`` and its missing parents, and check that this process can write
    a file into it (before any work, so that a folder that cannot be made or written is bad
    input, not a lost run); returns it. The check writes a temporary file, as ``os.access``
    says yes to root where a file system refuses (``/sys``). The folders it made are removed
    when the command ends (``errors``) if they are still empty. Raises ``UsageError`` naming
    the problem."""
    path = Path(path)
    missing = [p for p in (path, *path.parents) if not p.exists()]
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"output folder {path}: "
                         f"{'is a file' if path.is_file() else e.strerror}") from None
    _made.extend(missing)
    try:
        tempfile.TemporaryFile(dir=path).close()
    except OSError as e:
        raise UsageError(f"output folder {path}: cannot write into it: {e.strerror}") from None
    return path


def output_file(path):
    """``--json PATH``: make the folder of the file ``path`` (``output_dir``); returns ``path``.
    Raises ``UsageError`` when ``path`` is a folder or its folder cannot be made."""
    if Path(path).is_dir():
        raise UsageError(f"{path} is a folder: give a file name, e.g. {Path(path, 'out.json')}")
    output_dir(Path(path).parent)
    return Path(path)


def write_outputs(out_dir, files):
    """Write ``files`` (``{name: str | bytes | write(path)}``, in order) into ``out_dir``, each
    complete or absent: written under a temporary name beside it, then moved into place
    (``os.replace``). Nothing else in the folder is touched. A Ctrl-C meanwhile is held back
    until the last file is in place, then raised (``KeyboardInterrupt``), so that the folder
    holds one run's files, not some beside an earlier run's. Call it from the main thread (as
    ``signal.signal``). Raises the ``OSError`` of a file that cannot be written, with its name."""
    heard = []
    previous = signal.signal(signal.SIGINT, lambda *_: heard.append(True))
    try:
        for name, content in files.items():
            dest = Path(out_dir, name)
            tmp = dest.with_name(f".tmp-{os.getpid()}-{dest.name}")  # ends as dest: savez keeps it
            try:
                dest.parent.mkdir(parents=True, exist_ok=True)
                if callable(content):
                    content(tmp)
                else:
                    tmp.write_bytes(content.encode() if isinstance(content, str) else content)
                os.replace(tmp, dest)
            except BaseException as e:
                with contextlib.suppress(OSError):   # a folder that took no file has none
                    tmp.unlink()
                if isinstance(e, OSError):
                    e.filename = str(dest)
                raise
    finally:
        signal.signal(signal.SIGINT, previous)
        if heard:
            signal.raise_signal(signal.SIGINT)    # to the handler it held back


def not_written(out_dir, written):
    """The figures and checkpoints (``*.png``, ``*.npz``) in ``out_dir`` that are not among the
    names ``written``: an earlier run's, left as they were (a run removes nothing it did not
    write), for a command to name beside its own."""
    return sorted(p.name for p in Path(out_dir).iterdir()
                  if p.suffix in (".png", ".npz") and p.name not in written)


def progress(line):
    """One progress line on stderr."""
    print(line, file=sys.stderr, flush=True)


def blas_threads(n):
    """Set the threads of NumPy's OpenBLAS to ``n`` in this process, at run time (its
    ``openblas_set_num_threads``; the ``OPENBLAS_NUM_THREADS`` variable is read only when NumPy
    loads). Idle BLAS threads spin: on a small model with few cores one thread is faster, and a
    run's numbers depend on the count. Does nothing where NumPy uses another BLAS, or off Linux."""
    try:
        maps = open("/proc/self/maps").read()
    except OSError:
        return
    for path in sorted(set(re.findall(r"\S*openblas\S*\.so\S*", maps))):
        lib = ctypes.CDLL(path)
        for name in ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_",
                     "openblas_set_num_threads"):
            if hasattr(lib, name):
                getattr(lib, name)(n)
                break


def _start_worker(threads):
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the parent's to report
    blas_threads(threads)


def in_workers(fn, items, jobs, threads=1, client=None):
    """Yield ``fn(item)`` for each of ``items``, in order, computed in ``jobs`` spawned worker
    processes of a ``concurrent.futures.ProcessPoolExecutor`` (``threads`` BLAS threads each) or
    on the workers of a Dask cluster (``client``, from ``connect``; closed at the end), the same
    code for both (one job in the caller's process is builtin ``map``). Items are submitted as
    results come back, twice as many as the workers at most, so a Ctrl-C is heard at once at any
    sweep size; it cancels what is queued and stops the workers. Raises what ``fn`` raises."""
    pool = client.get_executor() if client else concurrent.futures.ProcessPoolExecutor(
        jobs, multiprocessing.get_context("spawn"), _start_worker, (threads,))
    width = 2 * (sum(client.nthreads().values()) if client else jobs)
    queued = collections.deque()
    try:
        for item in items:
            queued.append(pool.submit(fn, item))
            if len(queued) >= width:
                yield queued.popleft().result()
        while queued:
            yield queued.popleft().result()
    except BaseException:
        for future in queued:
            future.cancel()
        for process in (getattr(pool, "_processes", None) or {}).values():
            process.terminate()   # Python 3.14: pool.terminate_workers()
        raise
    finally:
        pool.shutdown()
        if client:
            client.close()


def connect(address):
    """A ``distributed.Client`` of the scheduler at ``address``; ``UsageError`` without the
    ``cluster`` extra or without a scheduler there."""
    try:
        import distributed
    except ImportError:
        raise UsageError('--scheduler needs dask\'s distributed: pip install -e ".[cluster]"') \
            from None
    try:
        return distributed.Client(address, timeout=CONNECT_TIMEOUT)
    except Exception as e:   # OSError, TimeoutError, ValueError (a bad address), ...
        raise UsageError(f"no Dask scheduler at {address}: {e}") from None


@contextlib.contextmanager
def errors(prog):
    """Around a command's run, its errors as exits: bad input (``UsageError``) is one line on
    stderr and status 2; an ``OSError`` (an output that cannot be written) one line naming the
    file, status 1; a ``MemoryError`` (a model too large for the machine) one line, status 2;
    Ctrl-C, or ``q`` at a ``breakpoint()``'s prompt, one line, status 130. A closed stdout
    (``| head``) ends the command quietly with status 141, as it ends ``cat``. However it ends,
    the folders ``output_dir`` made and nothing filled are removed."""
    try:
        yield
    except (KeyboardInterrupt, bdb.BdbQuit):
        progress(f"{prog}: interrupted")
        sys.exit(130)
    except BrokenPipeError:   # not SIGPIPE's default action: it would kill a worker pool's pipes
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(141)
    except UsageError as e:
        progress(f"{prog}: error: {e}")
        sys.exit(2)
    except OSError as e:
        progress(f"{prog}: error: {e.filename + ': ' if e.filename else ''}{e.strerror or e}")
        sys.exit(1)
    except MemoryError as e:   # a model or batch too large for this machine
        progress(f"{prog}: error: out of memory: {e}")
        sys.exit(2)
    finally:
        for folder in sorted(_made, key=lambda p: len(p.parts), reverse=True):  # deepest first
            with contextlib.suppress(OSError):   # one that holds anything stays
                folder.rmdir()
        _made.clear()
