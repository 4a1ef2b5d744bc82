"""SIGINT and SIGTERM during a change that must be all or none.

While :func:`deferred` is active (in the main thread), the two signals do
not stop the process wherever it is: the handler only records the first
one, and :meth:`Signals.check`, called between two steps, raises
:class:`Interrupted` for it, so the caller undoes the steps done so far
and no step is ever half recorded. A signal that arrives after the last
check (the change is complete) is delivered again once the previous
handlers are back, so it then acts as it would have without pycgpu.
SIGKILL cannot be caught: what it can leave is in docs/cli.md.

:func:`stop_event` is the other use: a service (the exporter, the device
plugin) that runs until the first SIGINT or SIGTERM.
"""

from __future__ import annotations

import errno
import signal
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import FrameType

from .cgroup import CgroupError

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(CgroupError):
    """A signal stopped a change between two steps (``signum``: which)."""

    def __init__(self, signum: int) -> None:
        super().__init__(errno.EINTR, f"interrupted by {signal.Signals(signum).name}")
        self.signum = signum


class Signals:
    """The signals recorded while :func:`deferred` is active."""

    def __init__(self) -> None:
        self.pending: int | None = None
        self.raised = False

    def record(self, signum: int, frame: FrameType | None = None) -> None:
        if self.pending is None:
            self.pending = signum

    def check(self) -> None:
        """Raise :class:`Interrupted` for a signal recorded so far (once)."""
        if self.pending is not None and not self.raised:
            self.raised = True
            raise Interrupted(self.pending)


@contextmanager
def deferred() -> Iterator[Signals]:
    """Record SIGINT and SIGTERM instead of acting on them, until the end of
    the block (outside the main thread, where Python cannot handle signals,
    nothing is installed and nothing is recorded; a signal the process
    ignores is left ignored)."""
    signals = Signals()
    if threading.current_thread() is not threading.main_thread():
        yield signals
        return
    # a signal the process ignores (nohup, a runtime's setting) stays ignored
    previous = {s: signal.signal(s, signals.record) for s in SIGNALS
                if signal.getsignal(s) is not signal.SIG_IGN}
    try:
        yield signals
    finally:
        for s, handler in previous.items():  # None: not installed from Python
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
        if signals.pending is not None and not signals.raised:
            signal.raise_signal(signals.pending)


@contextmanager
def stop_event(signals: Iterable[int] = SIGNALS) -> Iterator[threading.Event]:
    """An event set by the first of @signals, for a service that runs until
    asked to stop; call it before the service starts any thread.

    ``Event.set()`` cannot be called from a Python signal handler: the
    handler runs in the main thread between two bytecodes, possibly while
    that thread holds the event's own (non-reentrant) lock inside
    ``Event.wait()``, and then waits for that lock forever. So the signals
    are blocked in the calling thread, and in every thread it starts inside
    the block (threads inherit the mask), and one helper thread takes them
    with ``sigwait()`` and sets the event from ordinary thread context. At
    the end of the block the mask is restored: a signal sent again during
    the shutdown then acts as it would without pycgpu. A signal the process
    ignores (nohup, a shell's background job) stays ignored: a blocked
    signal would be taken, not ignored."""
    wanted = {s for s in signals if signal.getsignal(s) is not signal.SIG_IGN}
    stop = threading.Event()
    if not wanted:
        yield stop
        return
    lock = threading.Lock()
    state = {"taken": False, "closing": False}

    def take() -> None:
        signal.sigwait(wanted)
        with lock:
            state["taken"] = True
            if not state["closing"]:
                stop.set()

    previous = signal.pthread_sigmask(signal.SIG_BLOCK, wanted)
    taker = threading.Thread(target=take, name="pycgpu-signals", daemon=True)
    taker.start()
    try:
        yield stop
    finally:
        with lock:  # the taker is alive until it has taken the lock
            state["closing"] = True
            if not state["taken"] and taker.ident is not None:
                signal.pthread_kill(taker.ident, next(iter(wanted)))  # to it alone
        taker.join()
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
