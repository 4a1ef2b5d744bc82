"""``pycgpu create``, ``pycgpu set`` and ``pycgpu rm``: the commands that
change the cgroup tree. Values are validated before anything is written, and
create/set apply all their knobs or none (:mod:`pycgpu.core.knobs`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

from ...core.cgroup import Cgroup
from ...core.formats import printable_name
from .common import (
    BadValue,
    Refused,
    State,
    advised,
    complete_dev_value,
    complete_path,
    pass_state,
    settings_from_options,
    stopped,
    translated,
)

if TYPE_CHECKING:
    from ...core.knobs import Plan, Settings

F = TypeVar("F", bound=Callable[..., Any])

KNOBS_HELP = """
\b
Knobs (each may be combined; DEV is renderD128, /dev/dri/renderD128, card0,
a PCI address like 0000:00:02.0 or 00:02.0, or MAJ:MIN like 226:128):
  --weight W            default share of GPU time, 1..10000 (default 100)
  --weight DEV=W        the share on one device; DEV=default drops the override
  --priority N          -1023..1023: takes effect up to the parent's effective
                        priority (--raise-ancestors lifts the ancestors)
  --priority default    none of its own (a new group's): the group inherits its
                        parent's effective priority, 0 under the root
  --memory-max DEV=SIZE GPU memory limit on DEV: bytes, 512K, 512M, 2G, 1T, or max
                        (gpu.memory.max, or on a kernel with the dmem controller
                        dmem.max of DEV's memory region)
  --memory-max DEV:REGION=SIZE
                        on dmem, the limit in one of DEV's several regions
                        (renderD128:vram0=2G); pycgpu devices lists them
  --max CAP             hard cap on GPU time (gpu.max's default line, also
                        default=CAP): at most CAP of each engine, even when the
                        GPU is idle, on every device that can hold work back
  --max DEV=CAP         the cap on one device; DEV=default drops the override
                        CAP: 30% (of every 100 ms), 12.5%/50ms, 30ms/100ms,
                        30000/100000 (µs), or max (no cap)
"""


def raise_option(f: F) -> F:
    return click.option(
        "--raise-ancestors", is_flag=True,
        help="With --priority N: also raise to N the ancestors that cap it below N (a "
             "gpu.priority below N; a top-level group's default, 0), in the same "
             "all-or-none step.")(f)


def knob_options(f: F) -> F:
    f = click.option("--dry-run", is_flag=True,
                     help="Validate, print what would be written, write nothing.")(f)
    f = click.option("--max", "caps", multiple=True, metavar="[DEV=]CAP",
                     shell_complete=complete_dev_value,
                     help="Hard cap on GPU time: 30%, 30ms/100ms or max, for all devices or "
                          "DEV=CAP for one. Repeatable.")(f)
    f = click.option("--memory-max", "memory_max", multiple=True, metavar="DEV=SIZE",
                     shell_complete=complete_dev_value,
                     help="GPU memory limit on DEV (512M, 2G, max), or with dmem on one of "
                          "its regions, DEV:REGION=SIZE. Repeatable.")(f)
    # repeatable to refuse a second one, as a second default --weight is
    f = click.option("--priority", "priority", multiple=True, metavar="N",
                     help="Priority, -1023..1023, or default (none of its own: inherit "
                          "the parent's).")(f)
    f = click.option("--weight", "weights", multiple=True, metavar="[DEV=]W",
                     shell_complete=complete_dev_value,
                     help="GPU time weight 1..10000, for all devices or DEV=W for one. "
                          "Repeatable.")(f)
    return f


def with_cap_notes(state: State, settings: Settings, make_plan: Callable[[], Plan]
                    ) -> Callable[[], Plan]:
    """@make_plan, whose plan warns when gpu.max's default line will not act
    on a device (its driver cannot hold work back: the kernel takes the
    line and ignores it there; a cap of that device's own is refused)."""
    default = settings.caps.get(None)
    if default is None or default.max_us is None:
        return make_plan

    def plan() -> Plan:
        from ...core.capabilities import cap_caveat, cap_enforced, cap_not_enforced_why
        from ...core.errors import Error
        from ...core.knobs import Notice

        made = make_plan()
        try:
            devices = state.devices()
        except (Error, OSError, click.ClickException):  # no sysfs to tell: no note
            return made
        # a device's own cap is refused by the kernel; DEV=default leaves it on the default line
        idle = [f"{d.name} ({d.driver or 'unknown driver'}: {cap_not_enforced_why(d.driver)})"
                for d in devices if not cap_enforced(d.driver)
                and settings.caps.get(d.devt) is None]
        if idle:
            made.warnings.append(Notice(
                "the default cap does not act on " + ", ".join(idle) + ": its engines cannot "
                "hold work back (the kernel README's driver table)"))
        for d in devices:
            caveat = cap_caveat(d.driver)
            if caveat and settings.caps.get(d.devt) is None:
                made.warnings.append(Notice(f"the default cap acts on {d.name} ({d.driver}) "
                                            f"{caveat}"))
        return made

    return plan


def plan_and_run(state: State, path: str, dry_run: bool, make_plan: Callable[[], Plan],
                 late: list[int] | None = None) -> None:
    """Plan and apply under the tree's lock (:func:`pycgpu.core.locks.tree_lock`),
    so that no other pycgpu process changes the groups in between; a dry run
    only plans, without waiting for the lock. The wait for the lock, the
    plan, the apply and the report are one :func:`pycgpu.core.interrupts.deferred`
    block, so that what the run says is what happened whenever a signal that
    would end it comes: before the last write, nothing was changed (exit
    128 + the number of the first, every one named); after it, the change is
    complete, which a warning naming them says (exit 0), or, given @late,
    they are added to it for the caller to answer (run); with a failure
    (exit 1, 2), a warning names them and the failure stands."""
    import signal

    from ...core import interrupts, knobs, locks

    if dry_run:
        try:
            with translated(path):
                plan = make_plan()
        except KeyboardInterrupt:
            raise stopped("interrupted by SIGINT; nothing was changed", signal.SIGINT) from None
        for step in plan.steps():
            click.echo(f"would {step}")
        for warning in plan.warnings:
            click.echo(f"warning: {advised(warning)}", err=True)
        return
    applied = False
    try:
        with interrupts.deferred() as signals:
            try:
                with translated(path, signals), locks.tree_lock(state.mount, signals):
                    plan = make_plan()
                    knobs.apply(plan)
                    applied = True
            except click.ClickException:  # refused, or a bad value: nothing was changed
                if came := signals.take():
                    click.echo(f"warning: {interrupts.names(came)} came as the run failed: "
                               "it ends with its error", err=True)
                raise
            for warning in plan.warnings:  # once the change is done
                click.echo(f"warning: {advised(warning)}", err=True)
            while came := signals.take():  # until the last line is out
                if late is not None:  # the caller answers them (run)
                    late += came
                    continue
                click.echo(f"warning: {interrupts.names(came)} came after the last write: "
                           "the change is complete, nothing was undone", err=True)
    except KeyboardInterrupt:  # SIGINT just before the block, or just as it ends
        if late is not None and applied:
            late.append(signal.SIGINT)
            return
        if not applied:
            raise stopped("interrupted by SIGINT; nothing was changed", signal.SIGINT) from None
        click.echo("warning: SIGINT came after the last write: the change is complete, "
                   "nothing was undone", err=True)


@click.command("create", short_help="Create a group, enable gpu along its path, set knobs.",
               epilog=KNOBS_HELP)
@click.argument("path", shell_complete=complete_path)
@knob_options
@click.option("--exist-ok", is_flag=True,
              help="Succeed if PATH exists: still enable gpu along the path and set the knobs.")
@raise_option
@pass_state
def create(state: State, path: str, weights: tuple[str, ...], priority: tuple[str, ...],
           memory_max: tuple[str, ...], caps: tuple[str, ...], dry_run: bool, exist_ok: bool,
           raise_ancestors: bool) -> None:
    """Create the cgroup PATH with its missing parents, enable the gpu
    controller along the path, and set the knobs given.

    PATH is relative to the cgroup root (a leading / is optional; an absolute
    path under the root works too). If the kernel refuses a value, the
    groups created are removed again and nothing is left behind.

    \b
    Examples:
      pycgpu create ai/train --weight 300
      pycgpu create ai/infer --priority 100 --memory-max renderD128=2G
      pycgpu create ai/batch --weight 50 --weight 0000:03:00.0=10 --dry-run
      pycgpu create system.slice/app.scope --exist-ok --priority -10
      pycgpu create batch/render --weight 50 --max 30%
    """
    from ...core import knobs

    cg = state.cgroup(path)
    settings = settings_from_options(state, weights, priority, memory_max, caps)
    plan_and_run(state, path, dry_run, with_cap_notes(state, settings, lambda: knobs.plan_create(
        cg, settings, exist_ok=exist_ok, raise_ancestors=raise_ancestors)))


@click.command("set", short_help="Change knobs of a group, all or none.",
               epilog=KNOBS_HELP)
@click.argument("path", shell_complete=complete_path)
@knob_options
@raise_option
@pass_state
def set_(state: State, path: str, weights: tuple[str, ...], priority: tuple[str, ...],
         memory_max: tuple[str, ...], caps: tuple[str, ...], dry_run: bool,
         raise_ancestors: bool) -> None:
    """Change knobs of the existing cgroup PATH: all of them or, if the
    kernel refuses one, none (the ones already written are restored).

    A group's effective priority is its gpu.priority up to its parent's
    effective one; a group without one of its own (default) inherits its
    parent's, and a top-level group's default is 0. set warns, naming the
    ancestor, when the priority asked for will not take effect;
    --raise-ancestors lifts those ancestors to it in the same all-or-none
    step.

    \b
    Examples:
      pycgpu set ai/train --weight 500
      pycgpu set ai/train --weight renderD128=800 --weight card1=default
      pycgpu set ai/infer --priority 200 --memory-max 226:128=max
      pycgpu set ai/infer --memory-max renderD128=512M --dry-run
      pycgpu set ai/infer --priority 500 --raise-ancestors
      pycgpu set ai/infer/worker --priority default
      pycgpu set batch/render --max renderD128=20ms/100ms --max card1=default
      pycgpu set batch/render --max max
    """
    from ...core import knobs

    cg = state.cgroup(path)
    settings = settings_from_options(state, weights, priority, memory_max, caps)
    plan_and_run(state, path, dry_run, with_cap_notes(state, settings, lambda: knobs.plan_set(
        cg, settings, raise_ancestors=raise_ancestors)))


@click.command("rm", short_help="Remove a group (--recursive: with descendants).")
@click.argument("path", shell_complete=complete_path)
@click.option("--recursive", "-r", is_flag=True, help="Remove the child groups too.")
@click.option("--dry-run", is_flag=True, help="Print what would be removed, remove nothing.")
@pass_state
def rm(state: State, path: str, recursive: bool, dry_run: bool) -> None:
    """Remove the cgroup PATH (with --recursive, its descendants first).

    Groups that still have processes are not removed: move the processes
    out first. Like create and set, rm waits for other pycgpu runs that
    change the tree (the tree's lock; --dry-run does not wait). GPU buffers
    charged to a removed group keep it alive (invisibly) until they are freed.

    \b
    Examples:
      pycgpu rm ai/train
      pycgpu rm -r ai --dry-run
    """
    from contextlib import nullcontext

    from ...core import locks

    cg = state.cgroup(path)
    if cg.is_root:
        raise BadValue("the root cgroup cannot be removed: name a child group")
    # under the tree's lock, as create and set: a removal cannot interleave
    # with their plan and apply (and break a rollback); a dry run does not wait
    with translated(path), nullcontext() if dry_run else locks.tree_lock(state.mount):
        if not cg.exists():
            raise BadValue(f"cgroup {cg.name} does not exist")
        order = _post_order(cg)
        if len(order) > 1 and not recursive:
            children = ", ".join(c.name for c in cg.children())
            raise BadValue(f"cgroup {cg.name} has child groups ({children}): "
                           "remove them first or pass --recursive")
        busy = [(g, g.procs()) for g in order]
        busy = [(g, p) for g, p in busy if p]
        if busy:
            g, pids = busy[0]
            shown = " ".join(map(str, pids[:5])) + (" ..." if len(pids) > 5 else "")
            raise Refused(f"cgroup {g.name} still has processes ({shown}): move them out "
                          f"first, e.g. echo PID > {state.mount / 'cgroup.procs'}")
        for g in order:
            if dry_run:
                click.echo(f"would rmdir {printable_name(str(g.path))}")
            else:
                g.remove()


def _post_order(cg: Cgroup) -> list[Cgroup]:
    out: list[Cgroup] = []
    for child in cg.children():
        out += _post_order(child)
    out.append(cg)
    return out
