"""Issue 39, item 4: every signal whose default action ends the process is
held off or rolled back as SIGINT is (pycgpu.core.interrupts), not only
SIGINT and SIGTERM: SIGHUP (a dropped ssh connection), SIGQUIT, SIGUSR1, ...
And a signal that comes after the last write, when the change is complete,
is not reported as a rollback ("Aborted!", exit 1): the run says the change
is complete and exits 0."""

from __future__ import annotations

import signal

import pytest
from forked import FORK, finish, start
from test_concurrency import _signal_on_write, invoke

from pycgpu.core import cgroup as cgroup_mod
from pycgpu.core import interrupts, knobs
from pycgpu.core.cgroup import Cgroup

# a signal of each kind: terminate, terminate with a core dump, real-time
ENDING = [signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM,
          signal.SIGPIPE, signal.SIGVTALRM, signal.SIGPROF, signal.SIGXCPU, signal.SIGIO,
          signal.SIGPWR, signal.SIGRTMIN, signal.SIGRTMAX, signal.SIGTERM, signal.SIGINT]


def test_the_deferred_signals_are_every_one_that_ends_the_process():
    assert set(ENDING) <= set(interrupts.DEFERRED)
    # cannot be caught, or are faults of the process itself (a handler cannot make them safe)
    for s in (signal.SIGKILL, signal.SIGSTOP, signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE,
              signal.SIGILL, signal.SIGCHLD, signal.SIGWINCH, signal.SIGCONT, signal.SIGTSTP):
        assert s not in interrupts.DEFERRED


@pytest.mark.parametrize("signum", ENDING, ids=lambda s: signal.Signals(s).name)
@pytest.mark.parametrize("command", ["set", "create"])
def test_any_ending_signal_between_two_writes_is_rolled_back(cli, signum, command):
    cli.fake.make("a")
    before = cli.fake.snapshot()
    out = FORK.Queue()
    args = [command, "a" if command == "set" else "x/y", "--weight", "300", "--priority", "5"]
    n = 1 if command == "set" else 2  # after the first knob's write (create: +gpu in x first)

    def child() -> None:
        # as in a shell: the signals' default actions (Python ignores SIGPIPE and SIGXFSZ)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        cgroup_mod._write_file = _signal_on_write(n, signum)
        out.put(invoke(cli.env, *args))

    assert finish(start(child)) == [0]
    code, output = out.get(timeout=5)
    name = signal.Signals(signum).name
    assert (code, output) == (128 + signum, f"Error: interrupted by {name}; nothing was changed\n")
    assert cli.fake.snapshot() == before


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP],
                         ids=lambda s: signal.Signals(s).name)
def test_a_signal_after_the_last_write_says_the_change_is_complete(cli, signum):
    """Not 'Aborted!' and exit 1 (a rollback, as documented) when all was written."""
    cli.fake.make("a")
    out = FORK.Queue()

    def child() -> None:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        cgroup_mod._write_file = _signal_on_write(2, signum)  # the last of two writes
        out.put(invoke(cli.env, "set", "a", "--weight", "300", "--priority", "5"))

    assert finish(start(child)) == [0]
    code, output = out.get(timeout=5)
    name = signal.Signals(signum).name
    assert code == 0
    assert output == (f"warning: {name} came after the last write: the change is complete, "
                      "nothing was undone\n")
    assert cli.fake.read("a/gpu.weight") == "default 300\n"
    assert cli.fake.read("a/gpu.priority") == "5\n"


def test_sigint_before_the_first_write_is_not_aborted_exit_1(cli, monkeypatch):
    """Ctrl-C while the change is planned: nothing was written; exit 130
    with the line that says so, not click's 'Aborted!' and exit 1."""
    import os

    cli.fake.make("a")
    before = cli.fake.snapshot()
    out = FORK.Queue()
    real = knobs.plan_set

    def plan_set(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGINT)
        return real(*args, **kwargs)

    def child() -> None:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        knobs.plan_set = plan_set
        out.put(invoke(cli.env, "set", "a", "--weight", "300"))

    assert finish(start(child)) == [0]
    assert out.get(timeout=5) == (130, "Error: interrupted by SIGINT; nothing was changed\n")
    assert cli.fake.snapshot() == before


def test_the_library_still_delivers_a_late_signal_once_done(fake):
    """knobs.apply without a late handler: a signal after the last step acts
    as it would without pycgpu, once the previous handlers are back."""
    fake.make("a")
    got = []

    def child() -> None:
        signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))
        cgroup_mod._write_file = _signal_on_write(2, signal.SIGUSR1)
        knobs.apply(knobs.plan_set(Cgroup(fake.root, "a"), knobs.Settings(weight=3, priority=1)))
        assert got == [signal.SIGUSR1]

    assert finish(start(child)) == [0]
    assert fake.read("a/gpu.priority") == "1\n"


def test_previous_handlers_of_every_deferred_signal_are_back(fake):
    fake.make("a")
    before = {s: signal.getsignal(s) for s in interrupts.DEFERRED}
    knobs.apply(knobs.plan_set(Cgroup(fake.root, "a"), knobs.Settings(weight=3)))
    assert {s: signal.getsignal(s) for s in interrupts.DEFERRED} == before
