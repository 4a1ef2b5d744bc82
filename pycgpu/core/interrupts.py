"""SIGINT and SIGTERM during a change that must be all or none.

While :func:`deferred` is active (in the main thread), the two signals do
not stop the process wherever it is: the handler only records the first
one, and :meth:`Signals.check`, called between two steps, raises
:class:`Interrupted` for it, so the caller undoes the steps done so far
and no step is ever half recorded. A signal that arrives after the last
check (the change is complete) is delivered again once the previous
handlers are back, so it then acts as it would have without pycgpu.
SIGKILL cannot be caught: what it can leave is in docs/cli.md.
"""

from __future__ import annotations

import errno
import signal
import threading
from collections.abc import Iterator
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
