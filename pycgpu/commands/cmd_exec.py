"""``pycgpu exec``: run a command inside a cgroup."""

from __future__ import annotations

import os
import sys

import click

from .common import (
    EXIT_CANNOT_EXECUTE,
    EXIT_NOT_FOUND,
    BadValue,
    State,
    complete_path,
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

    \b
    Examples:
      pycgpu exec ai/train -- python train.py --epochs 3
      pycgpu exec ai/infer -- sh -c 'cat /proc/self/cgroup'
      pycgpu exec --dry-run ai/train -- ./bench
    """
    if command[0] == "--":  # click keeps the -- that follows PATH: it is ours
        command = command[1:]
        if not command:
            raise BadValue("no COMMAND after --")
    cg = state.cgroup(path)
    if not cg.exists():
        raise BadValue(f"cgroup {cg.name} does not exist (create it: pycgpu create {cg.name})")
    pid = os.getpid()
    if dry_run:
        click.echo(f"would write '{pid}' to {cg.path / 'cgroup.procs'}")
        click.echo(f"would exec {' '.join(command)}")
        return
    with translated(path):
        cg.add_proc(pid)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvp(command[0], list(command))
    except FileNotFoundError:
        click.echo(f"Error: {command[0]}: command not found", err=True)
        sys.exit(EXIT_NOT_FOUND)
    except OSError as e:
        click.echo(f"Error: cannot execute {command[0]}: {e.strerror}", err=True)
        sys.exit(EXIT_CANNOT_EXECUTE)
