"""``pycgpu run``: run a command in a new group made with knobs, and remove
the group when the command ends (a transient group, as ``systemd-run
--scope`` makes a transient scope)."""

from __future__ import annotations

import errno
import os
import shlex
import signal
import subprocess
import sys
from types import FrameType

import click

from ...core.cgroup import Cgroup, CgroupError
from ...core.formats import printable_name
from .cmd_tree import KNOBS_HELP, knob_options, plan_and_run, raise_option, with_cap_notes
from .common import (
    BadValue,
    Refused,
    State,
    complete_path,
    exec_failed,
    pass_state,
    settings_from_options,
    translated,
)

# passed on to COMMAND while it runs; SIGINT and SIGQUIT from a terminal
# reach it (its process group) already, so pycgpu ignores them while it
# waits, as system(3) does
FORWARDED = (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
IGNORED = (signal.SIGINT, signal.SIGQUIT)
# what execve(2) answers about COMMAND itself (exit 126)
EXEC_ERRORS = frozenset({errno.EACCES, errno.ENOEXEC, errno.ENOTDIR, errno.ELOOP, errno.E2BIG,
                         errno.ETXTBSY, errno.EISDIR, errno.ENAMETOOLONG, errno.EPERM})


@click.command(
    "run", short_help="Run a command in a new group with knobs, removed when it ends.",
    epilog=KNOBS_HELP,
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@knob_options
@raise_option
@click.option("--keep", is_flag=True,
              help="Leave the group in place when COMMAND ends (its counters stay readable).")
@click.argument("path", shell_complete=complete_path)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@pass_state
def run(state: State, path: str, command: tuple[str, ...], weights: tuple[str, ...],
        priority: tuple[str, ...], memory_max: tuple[str, ...], caps: tuple[str, ...],
        dry_run: bool, raise_ancestors: bool, keep: bool) -> None:
    """Create the cgroup PATH with the knobs given (as create does, all or
    none), run COMMAND in it, and remove the groups it created once COMMAND
    has ended.

    pycgpu's options go before PATH; everything after PATH is COMMAND (put
    -- before a COMMAND that starts with -). PATH must not exist. COMMAND
    is in the group from its first instruction, so the GPU time and memory
    of it and of its children are the group's. The exit status is
    COMMAND's (128+N if a signal N ended it; 126: it cannot be executed,
    127: not found, and the groups are removed all the same).

    While COMMAND runs, pycgpu passes SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2
    on to it and ignores SIGINT and SIGQUIT, which a terminal sends to
    COMMAND itself (and dies of them after the clean-up if COMMAND did, as
    a shell expects); a signal the caller ignores (nohup) stays ignored. A
    signal that comes while the group is made waits for it to be made, and
    then COMMAND does not run: the groups are removed and the status is
    128+N; one that comes before it is made stops run as it stops create.

    When COMMAND ends, the groups run created are removed, the deepest
    first; a group where processes remain (children COMMAND left running)
    is left in place, with a warning naming them. --keep leaves the groups
    in place, for their counters (pycgpu show PATH) to be read. What run
    changed in existing ancestors (gpu enabled in their subtree_control,
    priorities --raise-ancestors raised) stays, as after create.

    \b
    Examples:
      pycgpu run --max 30% batch/render -- blender -b scene.blend -a
      pycgpu run --weight 300 --priority 50 ai/job-42 -- python train.py
      pycgpu run --memory-max renderD128=2G --keep ai/try -- ./bench
      pycgpu run --max renderD128=20ms/100ms --dry-run batch/x -- ./render
    """
    from ...core import knobs

    command = _command(command)
    cg = state.cgroup(path)
    if cg.is_root:
        raise BadValue("run makes a group of its own: name a child group of the root")
    settings = settings_from_options(state, weights, priority, memory_max, caps)
    made: list[Cgroup] = []

    def plan() -> knobs.Plan:
        p = knobs.plan_create(cg, settings, raise_ancestors=raise_ancestors)
        made[:] = [g for kind, g in p.structure if kind == knobs.MKDIR]
        return p

    # a signal while the group is made is plan_and_run's, as for create (an
    # interrupted wait for the tree's lock, a change rolled back); one that
    # comes after its last write comes back in late: COMMAND does not run
    late: list[int] = []
    plan_and_run(state, path, dry_run, with_cap_notes(state, settings, plan), late=late)
    if dry_run:
        click.echo(printable_name(f"would run {' '.join(shlex.quote(w) for w in command)} "
                                  f"in {cg.path}"))
        if not keep:
            for g in reversed(made):
                click.echo(f"would rmdir {printable_name(str(g.path))} once it is empty")
        return
    # from here on the signals run handles are blocked, but while COMMAND
    # runs: one that comes during the removal waits for it
    watched = _watched()
    before = signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    code: int | None = None
    try:
        try:
            came = sorted(set(late) | (signal.sigpending() & set(watched)))
            while signal.sigtimedwait(came, 0) is not None:  # taken: answered here
                pass
            if came:  # as the group was made: COMMAND does not run, the groups go
                click.echo(f"Error: {signal.Signals(came[0]).name} came as the group was "
                           "made; COMMAND did not run", err=True)
                code = 128 + came[0]
            else:
                code = _run_in(cg, command, watched, before)
        finally:
            if not keep:
                _remove(state, made)
    finally:
        signum = code - 128 if code is not None and code > 128 else 0
        if signum in (signal.SIGINT, signal.SIGQUIT) and signum in watched:
            # as a shell's own child would: die of it, so that a script
            # around pycgpu stops too
            signal.signal(signum, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_SETMASK, before)
            os.kill(os.getpid(), signum)
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
    sys.exit(code)


def _watched() -> list[signal.Signals]:
    """The signals run handles: those the caller does not ignore (nohup's
    SIGHUP stays ignored, for pycgpu and for COMMAND)."""
    return [s for s in (*FORWARDED, *IGNORED) if signal.getsignal(s) != signal.SIG_IGN]


def _command(words: tuple[str, ...]) -> tuple[str, ...]:
    """COMMAND, after an optional --; an option word before it is a
    mistake (pycgpu's options go before PATH)."""
    if words and words[0] == "--":
        words = words[1:]
    elif words and words[0].startswith("-"):
        raise BadValue(f"{words[0]!r} after PATH: pycgpu's options go before PATH, and a "
                       "COMMAND that starts with - comes after --")
    if not words:
        raise BadValue("no COMMAND given (pycgpu run [OPTIONS] PATH [--] COMMAND [ARG]...)")
    return words


def _run_in(cg: Cgroup, command: tuple[str, ...], watched: list[signal.Signals],
            mask: set[int | signal.Signals]) -> int:
    """Start @command in @cg, pass the @watched signals on until it ends
    (they are blocked on entry and on return; @mask is the caller's): its
    exit status, as a shell gives it."""
    procs = cg.path / "cgroup.procs"
    if not os.access(procs, os.W_OK):
        raise Refused(f"cannot write {procs}: permission denied (fix: run as root, or inside a "
                      "cgroup subtree delegated to you)")
    old = {s: signal.getsignal(s) for s in watched}
    child: subprocess.Popen[bytes] | None = None

    def enter() -> None:  # in the child, before exec: the caller's signals back
        for s in watched:
            signal.signal(s, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        with open(procs, "w") as f:
            f.write(str(os.getpid()))

    def forward(signum: int, frame: FrameType | None) -> None:
        if child is not None:
            child.send_signal(signum)

    for s in watched:
        signal.signal(s, signal.SIG_IGN if s in IGNORED else forward)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            # preexec_fn is safe here: the CLI runs no other thread
            child = subprocess.Popen(list(command), preexec_fn=enter)
        except OSError as e:
            # no fork, no pipe: not COMMAND's fault
            if not isinstance(e, FileNotFoundError) and e.errno not in EXEC_ERRORS:
                raise Refused(f"cannot start {printable_name(command[0])}: "
                              f"{e.strerror}") from None
            return exec_failed(command[0], e)
        except subprocess.SubprocessError:
            raise Refused(f"cannot move COMMAND into {procs}") from None
        # a signal that came while COMMAND started is passed on now (one the
        # caller blocked stays blocked)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, set(watched) - set(mask))
        try:
            status = child.wait()
        finally:
            signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    finally:
        for s, handler in old.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)
    return 128 - status if status < 0 else status


def _remove(state: State, made: list[Cgroup]) -> None:
    """Remove the groups run made, the deepest first, under the tree's lock
    (as rm); say which stay."""
    from ...core import locks

    with locks.tree_lock(state.mount):
        for g in reversed(made):
            if not _rmdir(g):
                return


def _rmdir(g: Cgroup) -> bool:
    """Remove @g; if it cannot be, say so: whether it was."""
    try:
        with translated(g.name):
            g.remove()
        return True
    except (click.ClickException, CgroupError, OSError) as e:
        pids = _procs(g)
        if pids:
            shown = " ".join(map(str, pids[:5])) + (" ..." if len(pids) > 5 else "")
            why = f"processes remain ({shown})"
        else:
            why = e.format_message() if isinstance(e, click.ClickException) else str(e)
        click.echo(f"warning: cgroup {printable_name(g.name)} left in place: {why} "
                   f"(remove it with pycgpu rm {printable_name(g.name)})", err=True)
        return False


def _procs(g: Cgroup) -> list[int]:
    try:
        return g.procs()
    except (CgroupError, OSError):
        return []

