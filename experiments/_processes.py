"""Worker processes of the commands: how they are started, and Ctrl-C while they run.

- ``start_method()``: ``fork`` on Linux when this process runs a single thread, else ``spawn``.
  A forked worker starts with NumPy and the project already imported (about 0.02 s); a spawned
  one imports them again (0.46 s, docs/performance.md, "Threads and jobs"). Forking a process
  that runs other threads (BLAS threads under ``--threads 2``, say) can copy a lock some thread
  holds, so it is used only when there is none. macOS and Windows always spawn.
- ``sigint_blocked()``: processes started inside it inherit SIGINT blocked, so a Ctrl-C to the
  terminal's process group never interrupts one half-way through its start-up; the parent takes
  the pending signal when the block ends and stops its workers.
- ``ignore_sigint()``: a worker's first step: Ctrl-C is the parent's to handle.
- ``run_in_processes(calls)``: each call in its own forked process, all at once (the figures).
"""
from __future__ import annotations

import contextlib
import multiprocessing
import signal
import sys
import time
from typing import Callable, List, Optional, Sequence

__all__ = ["start_method", "flush_std_streams", "sigint_blocked", "ignore_sigint",
           "run_in_processes"]


def _threads_in_this_process() -> Optional[int]:
    """The number of threads of this process (Linux's /proc), or None when unknown."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def start_method(wait: float = 0.1) -> str:
    """``"fork"`` on Linux when this process runs one thread, else ``"spawn"``.

    A thread that was just joined (a process pool's, after ``shutdown``) can stay listed for a
    millisecond or so while it exits: up to ``wait`` seconds are given for the count to drop.
    """
    if not sys.platform.startswith("linux") or \
            "fork" not in multiprocessing.get_all_start_methods():
        return "spawn"
    deadline = time.monotonic() + wait
    while True:
        threads = _threads_in_this_process()
        if threads == 1:
            return "fork"
        if threads is None or time.monotonic() >= deadline:
            return "spawn"
        time.sleep(0.002)


def flush_std_streams() -> None:
    """Flush stdout and stderr before forking: a forked child flushes what it inherited when it
    exits, so an unflushed line of the parent's would be written twice."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()


def ignore_sigint() -> None:
    """Ignore SIGINT in this (worker) process, then let signals through again."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


@contextlib.contextmanager
def sigint_blocked():
    """Hold SIGINT pending in this thread (and in processes started meanwhile, which inherit
    the mask) for the ``with`` block; a Ctrl-C that arrived is delivered when it ends."""
    if not hasattr(signal, "pthread_sigmask"):  # not POSIX: nothing to hold
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _child(call: Callable[[], Optional[str]], conn) -> None:
    ignore_sigint()
    try:
        conn.send(("ok", call()))
    except BaseException as e:  # raised again in the parent
        try:
            conn.send(("error", e))
        except Exception:  # an exception that cannot be pickled: its type and message
            conn.send(("error", RuntimeError(f"{type(e).__name__}: {e}")))
    finally:
        conn.close()


def run_in_processes(calls: Sequence[Callable[[], Optional[str]]]) -> List[Optional[str]]:
    """Run each call in its own process, all at once, and return what each returned (a str or
    None), in order. Forks when ``start_method()`` allows it; otherwise runs them here, one
    after the other. The calls' side effects (files written) are all that is shared.

    Raises:
        Exception: what a call raised, raised again here (RuntimeError naming it when it cannot
            be sent back); RuntimeError when a process died.
        KeyboardInterrupt: Ctrl-C; the processes are stopped first.
    """
    if len(calls) < 2 or start_method() != "fork":
        return [call() for call in calls]
    ctx = multiprocessing.get_context("fork")
    flush_std_streams()
    procs = []
    try:
        with sigint_blocked():
            for call in calls:
                receive, send = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_child, args=(call, send), daemon=True)
                proc.start()
                send.close()
                procs.append((proc, receive))
        results = []
        for proc, receive in procs:
            try:
                status, value = receive.recv()
            except EOFError:
                proc.join()
                raise RuntimeError(f"a worker process died (exit status {proc.exitcode})")
            if status == "error":
                raise value
            results.append(value)
    except BaseException:
        for proc, _ in procs:
            proc.terminate()
        raise
    finally:
        for proc, receive in procs:
            proc.join()
            receive.close()
    return results
