"""Signals during a change that must be all or none.

While :func:`deferred` is active (in the main thread), the signals of
:data:`DEFERRED` (SIGINT, SIGTERM, SIGHUP from a dropped ssh connection,
SIGQUIT, SIGUSR1, SIGALRM, the real-time signals, ...) that would end the
process (their action is the default one; SIGINT's also when it is Python's
KeyboardInterrupt) are blocked with ``pthread_sigmask``: none stops the
process wherever it is, they wait in the kernel. :meth:`Signals.check`,
called between two steps, takes every one pending and raises
:class:`Interrupted` naming them all, so the caller undoes the steps done so
far and no step is ever half recorded. No handler is changed: at the end of
the block the mask is restored, and a signal that came after the last check
(the change is complete), or during the undo, is delivered then to whatever
handler the process has (Python's, one installed in C such as
faulthandler's, or the default action), each signal that came, as it would
have been without pycgpu; for SIGINT that is KeyboardInterrupt, raised once
the change is complete or undone. A caller that must report them rather
than act on them (the CLI) takes them with :meth:`Signals.take` before the
block ends (blocks nest: an inner one leaves its signals pending for the
outer one). A signal the process ignores, or handles itself, is left alone:
its handler runs when it comes. SIGKILL and SIGSTOP cannot be caught, and
the faults of the process itself (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP,
SIGABRT, SIGSYS) are not deferred: they say the process is broken where it
is; what SIGKILL can leave is in docs/cli.md. The mask is the calling
thread's: a signal sent to the process while another thread has it
unblocked goes to that thread (the CLI and the hook have no other thread).

:func:`stop_event` is the other use: a service (the exporter, the device
plugin) that runs until the first SIGINT or SIGTERM.
"""

from __future__ import annotations

import errno
import signal
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from .cgroup import CgroupError

SIGNALS = (signal.SIGINT, signal.SIGTERM)

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


def names(signums: Iterable[int]) -> str:
    """SIGUSR1, SIGTERM: the names of @signums, in their order."""
    return ", ".join(name(s) for s in signums)


class Interrupted(CgroupError):
    """Signals stopped a change between two steps (``signums``: which,
    lowest number first; ``signum``: the first)."""

    def __init__(self, signums: Iterable[int]) -> None:
        self.signums = list(signums)
        self.signum = self.signums[0]
        super().__init__(errno.EINTR, f"interrupted by {names(self.signums)}")

    def add(self, signums: Iterable[int]) -> None:
        """Name @signums too (more that came while the change was undone)."""
        self.signums += [s for s in signums if s not in self.signums]
        self.strerror = f"interrupted by {names(self.signums)}"
        self.args = (self.errno, self.strerror)


def _ends_process(signum: int) -> bool:
    """Whether @signum, when it comes, ends the process (or raises
    KeyboardInterrupt): its action is the default one."""
    handler = signal.getsignal(signum)
    return handler is signal.SIG_DFL or (
        signum == signal.SIGINT and handler is signal.default_int_handler)


class Signals:
    """The signals held off while :func:`deferred` is active (``wanted``)."""

    def __init__(self, wanted: Iterable[int] = ()) -> None:
        self.wanted = frozenset(wanted)

    def take(self) -> list[int]:
        """The held-off signals that came so far, lowest number first; taken:
        they are not delivered at the end of the block."""
        if not self.wanted:
            return []
        got = []
        for s in sorted(signal.sigpending() & self.wanted):
            while signal.sigtimedwait([s], 0) is not None:  # a real-time one may be queued twice
                if s not in got:
                    got.append(s)
        return got

    def check(self) -> None:
        """Raise :class:`Interrupted` for the held-off signals that came so
        far (taken)."""
        got = self.take()
        if got:
            raise Interrupted(got)

    def wait(self, timeout: float) -> None:
        """Sleep up to @timeout seconds; :class:`Interrupted` as soon as a
        held-off signal comes (as :meth:`check`)."""
        if not self.wanted:
            threading.Event().wait(timeout)
            return
        got = signal.sigtimedwait(self.wanted, timeout)
        if got is not None:
            raise Interrupted(sorted({got.si_signo, *self.take()}))


# the signals the active blocks hold off, innermost last (main thread only)
_active: list[frozenset[int]] = []


@contextmanager
def deferred() -> Iterator[Signals]:
    """Block the signals of :data:`DEFERRED` that would end the process
    until the end of the block (see the module docstring); outside the main
    thread, where Python cannot handle signals, nothing is blocked. Inside
    another block, the outer one's signals are held off too."""
    if threading.current_thread() is not threading.main_thread():
        yield Signals()
        return
    # the mask first, then what is wanted: no signal is handled in between
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, DEFERRED)
    outer = _active[-1] if _active else frozenset()
    wanted = outer | {s for s in DEFERRED if s not in mask and _ends_process(s)}
    signal.pthread_sigmask(signal.SIG_SETMASK, set(mask) | wanted)
    _active.append(wanted)
    try:
        yield Signals(wanted)
    finally:
        _active.pop()
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # what came is delivered now


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
