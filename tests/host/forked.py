"""Real concurrency in the host tier: functions run in forked processes,
which take the test's state with them (the fake kernel installed by
monkeypatch, the fixtures' trees), so that two pycgpu runs meet for real."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any

FORK = multiprocessing.get_context("fork")


def start(target: Callable[..., None], *args: Any) -> Any:
    """@target(*@args) in a new forked process, started."""
    p = FORK.Process(target=target, args=args)
    p.start()
    return p


def finish(*procs: Any, timeout: float = 30) -> list[int]:
    """The exit codes of @procs once ended (-N: ended by signal N); a
    process still running after @timeout is killed."""
    for p in procs:
        p.join(timeout)
        if p.is_alive():
            p.kill()
            p.join()
    return [p.exitcode for p in procs]
