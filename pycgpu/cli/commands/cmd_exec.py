"""``pycgpu exec``: run a command inside a cgroup."""

from __future__ import annotations

import os
import shlex
import shutil
import sys

import click

from ...core.cgroup import Cgroup, read_interface
from ...core.formats import printable_name
from .common import (
    EXIT_CANNOT_EXECUTE,
    EXIT_NOT_FOUND,
    BadValue,
    Refused,
    State,
    complete_path,
    exec_failed,
    pass_state,
    translated,
)


@click.command(
    "exec", short_help="Run a command inside a group.",
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option("--dry-run", is_flag=True, help="Print what would be done, run nothing.")
@click.argument("path", shell_complete=complete_path)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@pass_state
def exec_(state: State, path: str, command: tuple[str, ...], dry_run: bool) -> None:
    """Run COMMAND inside the cgroup PATH.

    pycgpu writes its own pid to PATH/cgroup.procs and then replaces itself
    with COMMAND (execvp, searching $PATH), so COMMAND and its children are
    in the group from their first instruction, GPU memory they allocate is
    charged to it, and the exit status is COMMAND's own (126: it cannot be
    executed, 127: not found). Put -- before COMMAND when it has options.

    --dry-run (before or after PATH) writes nothing and runs nothing: it
    checks that the group exists and takes processes and that COMMAND is
    found and executable, and prints the two steps.

    \b
    Examples:
      pycgpu exec ai/train -- python train.py --epochs 3
      pycgpu exec ai/infer -- sh -c 'cat /proc/self/cgroup'
      pycgpu exec ai/train --dry-run -- ./bench
    """
    dry_run, command = _own_options(dry_run, command)
    cg = state.cgroup(path)
    if not cg.exists():
        raise BadValue(f"cgroup {cg.name} does not exist (create it: pycgpu create {cg.name})")
    pid = os.getpid()
    if dry_run:
        _dry_run(cg, command, pid)
        return
    with translated(path):
        cg.add_proc(pid)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvp(command[0], list(command))
    except OSError as e:
        sys.exit(exec_failed(command[0], e))


def _own_options(dry_run: bool, command: tuple[str, ...]) -> tuple[bool, tuple[str, ...]]:
    """pycgpu's options between PATH and COMMAND (``PATH --dry-run -- CMD``):
    click passes them on as COMMAND words, as it stops parsing at PATH."""
    words = list(command)
    while words and words[0].startswith("-"):
        word = words.pop(0)
        if word == "--":
            break
        if word == "--dry-run":
            dry_run = True
            continue
        raise BadValue(f"no such option {word!r} before COMMAND (put -- before a COMMAND "
                       "that starts with -)")
    if not words:
        raise BadValue("no COMMAND given (pycgpu exec PATH -- COMMAND [ARG]...)")
    return dry_run, tuple(words)


def _dry_run(cg: Cgroup, command: tuple[str, ...], pid: int) -> None:
    """Check what exec would do without doing it: the group takes processes
    and COMMAND is found and executable; print the two steps."""
    procs = cg.path / "cgroup.procs"
    if not cg.is_root:
        with translated():
            inner = (read_interface(cg.path / "cgroup.subtree_control") or "").split()
        if inner:
            raise Refused(f"cgroup {cg.name} has controllers enabled for its children "
                          f"({' '.join(sorted(inner))}): the kernel keeps processes out of it "
                          "(fix: use a leaf group)")
    if not os.access(procs, os.W_OK):
        raise Refused(f"cannot write {procs}: permission denied (fix: run as root, or inside a "
                      "cgroup subtree delegated to you)")
    program = shutil.which(command[0]) if "/" not in command[0] else command[0]
    if program is None or not os.path.exists(program):
        click.echo(f"Error: {printable_name(command[0])}: command not found", err=True)
        sys.exit(EXIT_NOT_FOUND)
    if os.path.isdir(program) or not os.access(program, os.X_OK):
        click.echo(f"Error: cannot execute {printable_name(command[0])}: permission denied",
                   err=True)
        sys.exit(EXIT_CANNOT_EXECUTE)
    click.echo(f"would write '{pid}' to {printable_name(str(procs))}")
    click.echo(printable_name(f"would exec {' '.join(shlex.quote(w) for w in command)} "
                              f"({program})"))
