"""Grad mode in every form PyTorch has (torch.no_grad / enable_grad / set_grad_enabled):
context managers, decorators on functions and generator functions, nesting, the plain call
``set_grad_enabled(False)``, and per-thread state. Expected values are PyTorch's documented
behaviour; the torch test at the end replays the same script on torch."""
import threading

import numpy as np
import pytest

import minigrad as mg
from minigrad import Tensor


@pytest.fixture(autouse=True)
def _restore_mode():
    yield
    mg.set_grad_enabled(True)


def _x():
    return Tensor(np.ones(2), requires_grad=True)


def test_decorated_generator_runs_each_resume_in_the_mode():
    @mg.no_grad()
    def gen(x):
        for _ in range(2):
            yield mg.is_grad_enabled(), (x * 2).requires_grad

    it = gen(_x())
    assert next(it) == (False, False)
    assert mg.is_grad_enabled()                 # the caller's mode between resumes
    assert next(it) == (False, False)
    assert list(it) == [] and mg.is_grad_enabled()


def test_generator_send_throw_close_and_return_value():
    seen = []

    @mg.enable_grad()
    def gen():
        try:
            got = yield 1
            seen.append((got, mg.is_grad_enabled()))
            yield 2
        except KeyError:
            seen.append(("thrown", mg.is_grad_enabled()))
            yield 3
        finally:
            seen.append(("closed", mg.is_grad_enabled()))
        return 7

    with mg.no_grad():
        g = gen()
        assert next(g) == 1 and not mg.is_grad_enabled()
        assert g.send("hi") == 2 and not mg.is_grad_enabled()
        g.close()
        h = gen()
        next(h)
        assert h.throw(KeyError()) == 3 and not mg.is_grad_enabled()
        with pytest.raises(StopIteration) as stop:
            next(h)
        assert stop.value.value == 7
    assert seen == [("hi", True), ("closed", True), ("thrown", True), ("closed", True)]


def test_plain_call_takes_effect_and_with_restores_the_mode_before_the_call():
    mg.set_grad_enabled(False)
    assert not mg.is_grad_enabled()
    assert not (_x() * 2).requires_grad
    mg.set_grad_enabled(True)
    assert mg.is_grad_enabled()
    with mg.set_grad_enabled(False):
        assert not mg.is_grad_enabled()
        with mg.set_grad_enabled(True):
            assert mg.is_grad_enabled()
        assert not mg.is_grad_enabled()
    assert mg.is_grad_enabled()


def test_set_grad_enabled_as_decorator_leaves_the_current_mode():
    @mg.set_grad_enabled(False)
    def f():
        return mg.is_grad_enabled()

    assert mg.is_grad_enabled()                 # decorating changed nothing
    assert f() is False and mg.is_grad_enabled()
    with mg.no_grad():
        assert mg.set_grad_enabled(True)(lambda: mg.is_grad_enabled())() is True
        assert not mg.is_grad_enabled()


def test_nesting_every_way_and_restore_on_error():
    with mg.no_grad():
        with mg.enable_grad():
            with mg.set_grad_enabled(False):
                assert not mg.is_grad_enabled()
            assert mg.is_grad_enabled()
        assert not mg.is_grad_enabled()
    with pytest.raises(ZeroDivisionError):
        with mg.no_grad():
            1 / 0
    assert mg.is_grad_enabled()

    @mg.no_grad
    def boom():
        raise ValueError
    with pytest.raises(ValueError):
        boom()
    assert mg.is_grad_enabled()


def test_mode_is_per_thread():
    out = {}
    ready, done = threading.Event(), threading.Event()

    def worker():
        mg.set_grad_enabled(False)
        ready.set()
        done.wait(5)
        out["worker"] = mg.is_grad_enabled()

    th = threading.Thread(target=worker)
    th.start()
    ready.wait(5)
    out["main"] = mg.is_grad_enabled()
    done.set()
    th.join()
    assert out == {"main": True, "worker": False}


def _run_overlapping(run_a, run_b):
    """Thread A enters, then B enters, then A leaves, then B leaves (not LIFO across threads).
    A's mode before was True, B's False: a shared "previous mode" slot would swap them.
    ``run_x(body)`` runs ``body()`` inside the grad-mode form under test."""
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def body_a():
        a_in.set()
        b_in.wait(5)
        seen["a inside"] = mg.is_grad_enabled()

    def body_b():
        b_in.set()
        a_out.wait(5)
        seen["b inside"] = mg.is_grad_enabled()

    def a():
        run_a(body_a)
        seen["a after"] = mg.is_grad_enabled()
        a_out.set()

    def b():
        mg.set_grad_enabled(False)
        a_in.wait(5)
        run_b(body_b)
        seen["b after"] = mg.is_grad_enabled()

    ts = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return seen


def test_one_instance_shared_by_two_threads():
    want = {"a inside": False, "a after": True, "b inside": False, "b after": False}
    ctx = mg.no_grad()                               # one context-manager instance

    def in_with(body):
        with ctx:
            body()
    assert _run_overlapping(in_with, in_with) == want

    @mg.no_grad()                                    # one decorated function, two threads
    def decorated(body):
        body()
    assert _run_overlapping(decorated, decorated) == want


def test_inference_mode_forms():
    with mg.inference_mode():
        assert not mg.is_grad_enabled() and not (_x() * 2).requires_grad
    assert mg.is_grad_enabled()

    @mg.inference_mode
    def f():
        return mg.is_grad_enabled()

    @mg.inference_mode()
    def gen():
        yield mg.is_grad_enabled()
    assert f() is False and list(gen()) == [False] and mg.is_grad_enabled()
    with mg.inference_mode(False):                      # grad mode = not mode, as torch
        assert mg.is_grad_enabled()
    with mg.no_grad(), mg.inference_mode(False):
        assert mg.is_grad_enabled()
    assert mg.is_grad_enabled()
    with pytest.raises(TypeError, match="bool"):
        mg.inference_mode(1)


@pytest.mark.slow  # runs PyTorch; leave out with -m "not slow"
def test_same_script_on_torch():
    torch = pytest.importorskip("torch")
    try:
        @torch.no_grad()
        def gen(x):
            yield torch.is_grad_enabled(), (x * 2).requires_grad
        assert list(gen(torch.ones(2, requires_grad=True))) == [(False, False)]
        torch.set_grad_enabled(False)
        assert not torch.is_grad_enabled()
        torch.set_grad_enabled(True)

        @torch.set_grad_enabled(False)
        def f():
            return torch.is_grad_enabled()
        assert torch.is_grad_enabled() and f() is False
        with torch.no_grad(), torch.inference_mode(False):
            assert torch.is_grad_enabled()
        with torch.inference_mode(False):
            assert torch.is_grad_enabled()
    finally:
        torch.set_grad_enabled(True)
