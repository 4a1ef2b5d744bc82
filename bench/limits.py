"""Resource limits for the benchmarks: a fresh machine (or a VM booted over
9p) has a low RLIMIT_NOFILE soft limit, a process limit, little memory. A
benchmark raises what it may and stops spawning at a limit instead of
crashing: it reports what it measured and extrapolates from there.
"""

from __future__ import annotations

import contextlib
import errno
import resource
import time
from collections.abc import Callable
from dataclasses import dataclass

# errors that mean "a limit is reached", not "the benchmark is broken":
# per-process and system-wide file tables, processes (RLIMIT_NPROC, pid_max),
# memory
LIMIT_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.EAGAIN, errno.ENOMEM})


def raise_nofile() -> tuple[int, int]:
    """Raise RLIMIT_NOFILE's soft limit to the hard limit where allowed;
    returns the (soft, hard) limits in force afterwards."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        # an unlimited hard limit is capped by fs.nr_open: ask for that
        want = hard
        if hard == resource.RLIM_INFINITY:
            try:
                with open("/proc/sys/fs/nr_open") as f:
                    want = int(f.read())
            except (OSError, ValueError):
                return soft, hard
        with contextlib.suppress(ValueError, OSError):  # not allowed: keep the soft limit
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


@dataclass
class Spawned:
    """What :func:`spawn_until` could start, and why it stopped early."""

    started: int = 0
    stopped_by: str | None = None  # "budget", or the limit's error
    seconds: float = 0.0


def spawn_until(n: int, spawn: Callable[[], None], budget_s: float) -> Spawned:
    """Call @spawn (which starts one process and records it) until @n are
    started, @budget_s seconds are spent, or a limit is reached
    (:data:`LIMIT_ERRNOS`: the error is kept in ``stopped_by``, not raised;
    any other error is)."""
    out = Spawned()
    t0 = time.monotonic()
    while out.started < n:
        try:
            spawn()
        except OSError as e:
            if e.errno not in LIMIT_ERRNOS:
                raise
            soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
            out.stopped_by = (f"{errno.errorcode.get(e.errno or 0, e.errno)} "
                              f"({e.strerror}; RLIMIT_NOFILE {soft})")
            break
        out.started += 1
        if out.started % 100 == 0 and time.monotonic() - t0 > budget_s:
            out.stopped_by = f"budget ({budget_s:.0f} s)"
            break
    out.seconds = time.monotonic() - t0
    return out
