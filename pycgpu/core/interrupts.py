"""Signals during a change that must be all or none.

While :func:`deferred` is active (in the main thread), no signal whose
default action ends the process (:data:`DEFERRED`: SIGINT, SIGTERM, SIGHUP
from a dropped ssh connection, SIGQUIT, SIGUSR1, SIGALRM, the real-time
signals, ...) stops it wherever it is: the handler only records the first
one, and :meth:`Signals.check`, called between two steps, raises
:class:`Interrupted` for it, so the caller undoes the steps done so far and
no step is ever half recorded. A signal that arrives after the last check
(the change is complete) is delivered again once the previous handlers are
back, so it then acts as it would have without pycgpu, unless the caller
takes it (``late``: the CLI says the change is complete). SIGKILL and
SIGSTOP cannot be caught, and the faults of the process itself (SIGSEGV,
SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS) are not deferred: they
say the process is broken where it is; what SIGKILL can leave is in
docs/cli.md.

:func:`stop_event` is the other use: a service (the exporter, the device
plugin) that runs until the first SIGINT or SIGTERM.
"""

from __future__ import annotations

import errno
import signal
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from .cgroup import CgroupError

SIGNALS = (signal.SIGINT, signal.SIGTERM)

# what signal.signal() returns: a Python handler, SIG_DFL or SIG_IGN, or
# None (a handler not installed from Python)
_Handler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None

# every signal whose default action ends the process (signal(7): Term and
# Core) and that comes from outside it; signal.SIGSTKFLT and SIGPWR are Linux's
DEFERRED: tuple[int, ...] = (
    *(int(getattr(signal, name)) for name in (
        "SIGHUP", "SIGINT", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGPIPE", "SIGALRM", "SIGTERM",
        "SIGSTKFLT", "SIGXCPU", "SIGXFSZ", "SIGVTALRM", "SIGPROF", "SIGIO", "SIGPWR")
      if hasattr(signal, name)),
    *range(signal.SIGRTMIN, signal.SIGRTMAX + 1),
)


def name(signum: int) -> str:
    """SIGHUP, SIGRTMIN+3: a signal's name as kill -l gives it."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        if signal.SIGRTMIN < signum < signal.SIGRTMAX:
            return f"SIGRTMIN+{signum - signal.SIGRTMIN}"
        return f"signal {signum}"


class Interrupted(CgroupError):
    """A signal stopped a change between two steps (``signum``: which)."""

    def __init__(self, signum: int) -> None:
        super().__init__(errno.EINTR, f"interrupted by {name(signum)}")
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
def deferred(late: Callable[[int], None] | None = None) -> Iterator[Signals]:
    """Record the signals of :data:`DEFERRED` instead of acting on them,
    until the end of the block (outside the main thread, where Python cannot
    handle signals, nothing is installed and nothing is recorded; a signal
    the process ignores is left ignored). A signal recorded and never
    raised by :meth:`Signals.check` came after the last step: it is given to
    @late when given, else delivered again once the previous handlers are
    back.

    The handlers are changed with the signals blocked, so that none arrives
    while some are installed and others not (it waits, and is recorded
    once they all are)."""
    signals = Signals()
    if threading.current_thread() is not threading.main_thread():
        yield signals
        return
    # a signal the process ignores (nohup, a runtime's setting) stays ignored
    wanted = [s for s in DEFERRED if signal.getsignal(s) is not signal.SIG_IGN]
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, wanted)
    try:
        previous = {s: signal.signal(s, signals.record) for s in wanted}
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    try:
        yield signals
    finally:
        taken = _restore(previous, mask, signals, late is not None)
        if taken is not None and late is not None:
            late(taken)


def _restore(previous: dict[int, _Handler], mask: Iterable[int], signals: Signals,
             take: bool) -> int | None:
    """Put the @previous handlers back, the signals blocked meanwhile; a
    signal recorded but not raised is delivered to them once unblocked
    (returned instead with @take). A signal that came while they were
    blocked is one more request to stop a change that stopped already, or
    with @take a late one: taken; else left to act once unblocked."""
    wanted = list(previous)
    signal.pthread_sigmask(signal.SIG_BLOCK, wanted)
    try:
        # signal.signal() runs the handler of a signal already caught before it changes it
        for s, handler in previous.items():  # None: not installed from Python
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
        if signals.pending is not None or take:
            for s in sorted(signal.sigpending() & set(wanted)):
                signal.sigtimedwait([s], 0)
                signals.record(s)
        late = signals.pending if not signals.raised else None
        if late is not None and not take:
            signal.raise_signal(late)  # held until the mask is back
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    return late if take else None


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
