"""Issue 39, item 4, after review: the signals of a change are held off by
blocking them (pycgpu.core.interrupts), not by swapping handlers, so that a
handler installed outside Python survives an apply; every signal that came
is delivered or reported, not only the first; and the CLI's lock, plan,
apply and report are one region, so that its status and message say what
happened whenever a signal comes."""

from __future__ import annotations

import faulthandler
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

from forked import FORK, finish, start
from test_concurrency import invoke

from pycgpu.core import cgroup as cgroup_mod
from pycgpu.core import knobs, locks
from pycgpu.core.cgroup import Cgroup

COMPLETE = "came after the last write: the change is complete, nothing was undone\n"


def _signals_on_write(n: int, *signums: int) -> Callable[[Path, bytes], None]:
    """The fake kernel's writer, sending @signums to this process, one after
    the other, right after the @n-th write."""
    real = cgroup_mod._write_file
    count = [0]

    def write(path: Path, data: bytes) -> None:
        real(path, data)
        count[0] += 1
        if count[0] == n:
            for s in signums:
                os.kill(os.getpid(), s)

    return write


def _shell_like() -> None:
    """The dispositions of a command run from a shell."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for s in (signal.SIGTERM, signal.SIGUSR1, signal.SIGHUP):
        signal.signal(s, signal.SIG_DFL)


def test_a_handler_installed_outside_python_survives_an_apply(fake, tmp_path):
    """faulthandler's SIGUSR1 (a C handler, which signal.getsignal() sees as
    None) is still there after knobs.apply: a later SIGUSR1 dumps the
    traceback and the process goes on, it is not ended by SIG_DFL."""
    fake.make("a")
    dump = tmp_path / "dump"

    def child() -> None:
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)
        with open(dump, "w") as f:
            faulthandler.register(signal.SIGUSR1, file=f)
            knobs.apply(knobs.plan_set(Cgroup(fake.root, "a"), knobs.Settings(weight=3)))
            os.kill(os.getpid(), signal.SIGUSR1)
            time.sleep(0.1)

    assert finish(start(child)) == [0]
    assert "child" in dump.read_text()
    assert fake.read("a/gpu.weight") == "default 3\n"


def test_every_late_signal_reaches_its_handler(fake):
    """Two signals after the last step: both reach the caller's handlers
    (not only the first)."""
    fake.make("a")

    def child() -> None:
        got: list[int] = []
        signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))
        signal.signal(signal.SIGTERM, lambda s, f: got.append(s))
        cgroup_mod._write_file = _signals_on_write(2, signal.SIGUSR1, signal.SIGTERM)
        knobs.apply(knobs.plan_set(Cgroup(fake.root, "a"), knobs.Settings(weight=3, priority=1)))
        assert sorted(got) == [signal.SIGUSR1, signal.SIGTERM]

    assert finish(start(child)) == [0]
    assert fake.read("a/gpu.priority") == "1\n"


def test_two_signals_between_two_writes_are_both_named(cli):
    cli.fake.make("a")
    before = cli.fake.snapshot()
    out = FORK.Queue()

    def child() -> None:
        _shell_like()
        cgroup_mod._write_file = _signals_on_write(1, signal.SIGTERM, signal.SIGUSR1)
        out.put(invoke(cli.env, "set", "a", "--weight", "300", "--priority", "5"))

    assert finish(start(child)) == [0]
    assert out.get(timeout=5) == (128 + signal.SIGUSR1, "Error: interrupted by SIGUSR1, "
                                  "SIGTERM; nothing was changed\n")
    assert cli.fake.snapshot() == before


def test_two_signals_after_the_last_write_are_both_named(cli):
    cli.fake.make("a")
    out = FORK.Queue()

    def child() -> None:
        _shell_like()
        cgroup_mod._write_file = _signals_on_write(2, signal.SIGTERM, signal.SIGUSR1)
        out.put(invoke(cli.env, "set", "a", "--weight", "300", "--priority", "5"))

    assert finish(start(child)) == [0]
    assert out.get(timeout=5) == (0, f"warning: SIGUSR1, SIGTERM {COMPLETE}")
    assert cli.fake.read("a/gpu.priority") == "5\n"


def _signal_after_apply(signum: int) -> Callable[..., None]:
    """knobs.apply, then @signum: in the CLI's gap between the apply and its report."""
    real = knobs.apply

    def apply(*args: object, **kwargs: object) -> None:
        real(*args, **kwargs)  # type: ignore[arg-type]
        os.kill(os.getpid(), signum)

    return apply


def test_sigint_right_after_the_apply_says_the_change_is_complete(cli):
    """Not 'nothing was changed', exit 130: everything was written."""
    cli.fake.make("a")
    out = FORK.Queue()

    def child() -> None:
        _shell_like()
        knobs.apply = _signal_after_apply(signal.SIGINT)
        out.put(invoke(cli.env, "set", "a", "--weight", "300"))

    assert finish(start(child)) == [0]
    assert out.get(timeout=5) == (0, f"warning: SIGINT {COMPLETE}")
    assert cli.fake.read("a/gpu.weight") == "default 300\n"


def test_sigterm_right_after_the_apply_does_not_kill_a_complete_change(cli):
    """Not ended by SIGTERM (143, no message) once everything is written."""
    cli.fake.make("a")
    out = FORK.Queue()

    def child() -> None:
        _shell_like()
        knobs.apply = _signal_after_apply(signal.SIGTERM)
        out.put(invoke(cli.env, "set", "a", "--weight", "300"))

    assert finish(start(child)) == [0]
    assert out.get(timeout=5) == (0, f"warning: SIGTERM {COMPLETE}")


def test_sigterm_while_waiting_for_the_lock_says_nothing_was_changed(cli):
    cli.fake.make("a")
    before = cli.fake.snapshot()
    out = FORK.Queue()
    locked = FORK.Event()

    def child() -> None:
        _shell_like()
        locked.wait(10)
        out.put(invoke(cli.env, "set", "a", "--weight", "300"))

    p = start(child)
    with locks.tree_lock(cli.fake.root):
        locked.set()
        time.sleep(0.5)
        assert p.is_alive()  # waits for the lock
        assert p.pid is not None
        os.kill(p.pid, signal.SIGTERM)
        assert finish(p) == [0]
    assert out.get(timeout=5) == (128 + signal.SIGTERM,
                                  "Error: interrupted by SIGTERM; nothing was changed\n")
    assert cli.fake.snapshot() == before


def test_a_signal_as_the_run_fails_is_named_and_the_failure_stands(cli):
    """The kernel refuses the last write, and SIGTERM comes meanwhile: the
    refusal's exit 1 and error stand (not a kill, 143), a warning names it."""
    import errno

    cli.fake.make("a")
    before = cli.fake.snapshot()
    out = FORK.Queue()
    real = cgroup_mod._write_file
    count = [0]

    def write(path: Path, data: bytes) -> None:
        count[0] += 1
        if count[0] == 2:
            os.kill(os.getpid(), signal.SIGTERM)
            raise OSError(errno.EINVAL, "Invalid argument")
        real(path, data)

    def child() -> None:
        _shell_like()
        cgroup_mod._write_file = write
        out.put(invoke(cli.env, "set", "a", "--weight", "300", "--priority", "5"))

    assert finish(start(child)) == [0]
    code, output = out.get(timeout=5)
    assert code == 1
    first, second = output.splitlines()
    assert first == "warning: SIGTERM came as the run failed: it ends with its error"
    assert second.startswith("Error: ") and "nothing was changed" in second
    assert cli.fake.snapshot() == before
