"""The learner's code, run under guard: what it may raise, and a time limit a case may take
(``guarded``), shared by the check (``grading.py``) and its re-runs (``trace.py``)."""
import contextlib
import signal
import sys

TIME_LIMIT = 10.0   # seconds a case may take
LEARNERS = (Exception, SystemExit)   # what the learner's code may raise: all but a Ctrl-C


class Hang(BaseException):
    """A case took more than ``TIME_LIMIT`` seconds (a BaseException: the learner's own
    ``except Exception`` does not catch it)."""


@contextlib.contextmanager
def guarded(tracer=None):
    """The learner's code: its prints on stderr, ``Hang`` after ``TIME_LIMIT`` seconds unless a
    debugger runs (a ``breakpoint()`` of the learner's). ``tracer``: ours (``trace.py``), set
    for the time; it keeps the limit, another that replaces it (a debugger's) does not."""
    def alarm(*_):
        if sys.gettrace() in (None, tracer):
            raise Hang
    old, old_tracer = signal.signal(signal.SIGALRM, alarm), sys.gettrace()
    signal.setitimer(signal.ITIMER_REAL, TIME_LIMIT)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            if tracer:
                sys.settrace(tracer)
            yield
    finally:
        if tracer:
            sys.settrace(old_tracer)
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
