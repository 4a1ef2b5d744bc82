"""``pycgpu show``: the gpu.* files of a group (or subtree), as text or as
the ``pycgpu.show/v1`` JSON document (:mod:`pycgpu.core.schemas`)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

import click

from ...core.formats import DevT, printable_name
from .common import BadValue, State, complete_path, pass_state, translated


def _labels(names: Mapping[DevT, str]) -> Callable[[str], str]:
    """A device or memory region key of a show/v1 item (``226:128``,
    ``226:128:vram0``) as text output names it: ``renderD128 (226:128)``,
    ``renderD128:vram0 (226:128)``."""
    from ...core.memory import label

    return lambda key: label(key, names)


def _devices(d: dict[str, Any], dev: Callable[[str], str], fmt: Any = str) -> str:
    return ", ".join(f"{dev(key)} {fmt(v)}" for key, v in d.items()) or "-"


def _counters(d: dict[str, dict[str, int]], dev: Callable[[str], str]) -> str:
    return "; ".join(
        f"{dev(key)} " + " ".join(f"{k}={v}" for k, v in keys.items()) for key, keys in d.items()
    ) or "-"


def render(item: dict[str, Any], names: Mapping[DevT, str] | None = None) -> list[str]:
    """The text lines of one show/v1 item; @names (render node names by
    device number) name the devices, MAJ:MIN beside."""
    from ...core.formats import format_size_human
    from ...core.snapshot import printable

    item = printable(item)
    dev = _labels(names or {})
    totals = item["path"] == "/" and ("stat" in item or "memory" in item)
    if not item["gpu_enabled"] and not totals:
        note = "root: no gpu.* files" if item["path"] == "/" else "gpu not enabled"
        if "memory" not in item:
            return [f"{item['path']}  ({note})"]
        # dmem without gpu (a kernel without the gpu controller): the memory only
        lines = [f"{item['path']}  ({note})"]
    else:
        # the root has the devices' totals only (gpu.stat, the memory in use)
        lines = [f"{item['path']}  (device totals)" if totals else item["path"]]

    def add(label: str, text: str) -> None:
        lines.append(f"  {label:<21}{text}")

    if "weight" in item:
        w = item["weight"]
        overrides = _devices(w["devices"], dev) if w["devices"] else ""
        add("weight", f"default {w['default']}" + (f", {overrides}" if overrides else ""))
    inherited = item.get("priority_inherited", False)
    if "priority" in item or inherited:
        eff = item.get("priority_effective")
        note = "" if eff is None else f" (effective {eff}"
        if item.get("priority_capped_by"):
            how = "inherited from" if inherited else "capped by"
            note += f", {how} {item['priority_capped_by']}"
        own = "default" if inherited else f"{item['priority']}"
        add("priority", own + (note + ")" if note else ""))
    if "max" in item:
        from ...core.formats import Cap, format_cap

        def cap(c: dict[str, Any]) -> str:
            return format_cap(Cap(c["max_us"], c["period_us"]))

        caps = item["max"]
        overrides = _devices(caps["devices"], dev, cap) if caps["devices"] else ""
        add("max", f"default {cap(caps['default'])}" + (f", {overrides}" if overrides else ""))
    memory = item.get("memory", {})
    for key in ("max", "min", "low", "current", "peak"):
        if key in memory:
            add(f"memory.{key}", _devices(memory[key], dev, format_size_human))
    for key, label in (("events", "memory.events"), ("events_local", "memory.events.local")):
        if key in memory:
            add(label, _counters(memory[key], dev))
    if "stat" in item:
        add("stat", _counters(item["stat"], dev))
    return lines


@click.command("show", short_help="Show gpu.* knobs and counters of a group (or subtree).")
@click.argument("path", default="/", required=False, shell_complete=complete_path)
@click.option("--recursive", "-r", is_flag=True, help="Show the descendants too.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the pycgpu.show/v1 JSON document (its schema: pycgpu schema show).")
@pass_state
def show(state: State, path: str, recursive: bool, as_json: bool) -> None:
    """Show the gpu.* knobs and counters of the cgroup PATH (default: the root).

    Files this kernel does not have (gpu.memory.* before the memory support,
    for example) are left out. Devices are named by their render node with
    MAJ:MIN beside, renderD128 (226:128); sizes are shown as 512M/1536M
    where exact, else rounded to one decimal (976.6K). The JSON has numbers
    (bytes, microseconds), null for max, and devices keyed MAJ:MIN. A group
    without a priority of its own shows "default" and the ancestor its
    effective priority comes from (JSON: priority_inherited). With -r,
    a group below PATH whose files cannot be read or parsed is left out with
    a warning on stderr, and one removed during the walk is left out quietly.

    \b
    Examples:
      pycgpu show ai/train
      pycgpu show -r ai
      pycgpu show -r --json / | jq '.cgroups[] | {path, priority_effective}'
    """
    from ...core import snapshot

    cg = state.cgroup(path)
    if not cg.exists():
        raise BadValue(f"cgroup {cg.name} does not exist")
    regions = state.memory()
    with translated(path):
        # a descendant that cannot be read or parsed is left out with a
        # warning (as stat does); one that went away, quietly
        items = list(snapshot.walk(state.mount, cg.name, recursive, regions,
                                   skipped=lambda why: click.echo(
                                       f"warning: {printable_name(why)}", err=True)))
        snapshot.add_capped_by(state.mount, items)
    if as_json:
        import json

        # indented for people; compact (C encoder, several times faster) for pipes
        indent = 2 if sys.stdout.isatty() else None
        click.echo(json.dumps(snapshot.document(state.mount, items, regions), indent=indent))
        return
    names = state.device_names()
    for item in items:
        click.echo("\n".join(render(item, names)))
