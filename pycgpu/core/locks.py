"""Exclusive locks that serialize pycgpu's changes across processes.

- :func:`tree_lock`: flock(2) on the cgroup root directory, held by
  ``pycgpu create``/``set``/``rm`` and by the createRuntime hook from the
  plan to the end of its apply (:mod:`pycgpu.core.knobs`; ``rm`` over its
  removal, so it cannot interleave with a create's rollback). The root, not the topmost
  group a plan enables: every plan has a root, one that enables nothing
  (``set``) still reads the ancestors' values it may change, and two plans
  that share no group take microseconds each, so one lock per tree costs
  nothing and needs no ordering between locks.
- :func:`file_lock`: flock(2) on a lock file beside a file that is read,
  changed and replaced (``config.json``): the file itself cannot carry the
  lock, as :func:`pycgpu.runtime.oci.atomic_write` renames a new file over it.

A flock belongs to the open file: the kernel drops it when the holder
exits, however it ends (SIGKILL included), so no lock is ever left stale.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from .cgroup import CgroupError
from .errors import file_error

if TYPE_CHECKING:
    from .interrupts import Signals


def _hold(fd: int, signals: Signals | None = None) -> Iterator[None]:
    try:
        if signals is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:  # the signals are blocked: they cannot interrupt flock(), so poll
            pause = 0.001
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    signals.wait(pause)
                    pause = min(pause * 2, 0.05)
        yield
    finally:
        os.close(fd)  # drops the lock


@contextmanager
def tree_lock(mount: Path, signals: Signals | None = None) -> Iterator[None]:
    """An exclusive lock on the cgroup tree at @mount, waited for;
    :class:`CgroupError` if its root directory cannot be opened. With
    @signals (inside :func:`pycgpu.core.interrupts.deferred`), a held-off
    signal ends the wait: :class:`~pycgpu.core.interrupts.Interrupted`."""
    try:
        fd = os.open(mount, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as e:
        raise CgroupError(e.errno or 0, f"locking {mount}: {e.strerror}") from None
    yield from _hold(fd, signals)


def lock_path(path: Path) -> Path:
    """The lock file of @path: ``.NAME.lock`` in the directory of the file
    it is, symlinks followed (the file that is replaced)."""
    real = Path(os.path.realpath(path))
    return real.parent / f".{real.name}.lock"


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on @path (created empty if missing, never through a
    symlink), waited for; :class:`pycgpu.core.errors.FileError` naming the
    lock file if it cannot be opened (:class:`~pycgpu.core.errors.FileMissing`,
    a FileNotFoundError, when its directory does not exist). The lock file
    stays: removing it would let a later process lock a new file while
    another still holds the old one."""
    lock = lock_path(path)
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o644)
    except OSError as e:
        raise file_error(OSError(e.errno, e.strerror, str(lock))) from None
    yield from _hold(fd)
