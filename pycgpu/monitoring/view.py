"""What ``pycgpu top``, ``stat`` and ``exporter`` show: one row per (cgroup,
device) with the container the cgroup belongs to, and the renderers (the
``pycgpu.stat/v1`` JSON document, and the table of top and stat, drawn by
:mod:`pycgpu.monitoring.tables`).

Which groups: by default the leaves (groups without gpu-reporting children:
the containers themselves, as ``gpu.stat`` of inner groups includes their
children); ``all_groups`` adds the inner ones. An optional subtree limits
the rows to a path and its descendants.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.formats import UNSET, DevT, format_size_human, printable_name
from . import DeviceUsage, GroupUsage, Rates, Sample, Source, rates
from .containers import Container, Resolver, identify

if TYPE_CHECKING:
    from rich.table import Table

SCHEMA = "pycgpu.stat/v1"  # = schemas.STAT_V1


def _basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1] or "/"


@dataclass
class Row:
    group: GroupUsage
    container: Container | None
    devt: DevT
    usage: DeviceUsage
    rates: Rates | None

    @property
    def path(self) -> str:
        return self.group.path

    @property
    def name(self) -> str:
        """The container's name (or short ID), else the cgroup's last component."""
        return self.container.display_name if self.container else _basename(self.path)

    @property
    def pod(self) -> str:
        c = self.container
        if c is None:
            return ""
        return c.pod or c.pod_uid or ""

    @property
    def namespace(self) -> str:
        return (self.container.namespace if self.container else None) or ""

    @property
    def unused(self) -> bool:
        """Nothing ever ran or was allocated here, and no limit is set: the
        kernel lists every device for every group; most rows of a big host
        are these."""
        du = self.usage
        if du.clients or du.gpu_time_ns or (du.cap is not None and du.cap.max_us is not None):
            return False
        # the device's memory, or each of its regions (a device with several)
        return all(not m.get("current") and not m.get("peak") and not m.get("limit_hits")
                   and m.get("max") is None
                   for m in (du.memory, *du.memory_regions.values()))

    @property
    def gpu_percent(self) -> float | None:
        return self.rates.gpu_percent if self.rates else None

    @property
    def wait_percent(self) -> float | None:
        return self.rates.wait_percent if self.rates else None

    @property
    def throttled_percent(self) -> float | None:
        return self.rates.throttled_percent if self.rates else None

    @property
    def cap_percent(self) -> float | None:
        """The device's gpu.max as a part of each engine; None: no cap (or no gpu.max)."""
        return None if self.usage.cap is None else self.usage.cap.percent


class Monitor:
    """A source plus what the views need between refreshes: the previous
    sample (for percentages) and the container name resolver."""

    def __init__(self, source: Source, resolver: Resolver | None = None,
                 all_groups: bool = False, subtree: str | None = None) -> None:
        self.source = source
        self.resolver = resolver
        self.all_groups = all_groups
        self.subtree = None if subtree in (None, "", "/") else "/" + subtree.strip("/")
        self.prev: Sample | None = None
        self.sample: Sample | None = None
        self.rates: dict[tuple[str, DevT], Rates] = {}
        self._ids: dict[str, Container | None] = {}

    def refresh(self, with_rates: bool = True) -> Sample:
        """A new sample; the percentages since the previous one unless
        @with_rates is False (the exporter serves counters only)."""
        cur = self.source.sample()
        self.prev, self.sample = self.sample, cur
        self.rates = rates(self.prev, cur) if with_rates else {}
        if len(self._ids) > 2 * len(cur.groups) + 1024:  # containers come and go
            self._ids = {p: c for p, c in self._ids.items() if p in cur.groups}
        return cur

    def measure(self, interval_s: float) -> Sample:
        """Two samples @interval_s apart (one if it is 0): the rates cover it."""
        sample = self.refresh()
        if interval_s > 0:
            elapsed = (self.source.clock() - sample.time_ns) / 1e9
            time.sleep(max(0.0, interval_s - elapsed))
            sample = self.refresh()
        return sample

    def container(self, path: str) -> Container | None:
        if path not in self._ids:
            c = identify(path)
            if self.resolver is not None:
                c = self.resolver.resolve(c)
            self._ids[path] = c
        c = self._ids[path]
        if c is not None and self.resolver is not None and c.name is None:
            c = self._ids[path] = self.resolver.resolve(c)
        return c

    def groups(self) -> list[GroupUsage]:
        assert self.sample is not None
        out = []
        sub = self.subtree
        for path in sorted(self.sample.groups):
            group = self.sample.groups[path]
            if sub and path != sub and not path.startswith(sub + "/"):
                continue
            if group.leaf or self.all_groups:
                out.append(group)
        return out

    def rows(self, unused: bool = True) -> list[Row]:
        """One row per group and device; without @unused, the rows of
        devices a group never used (:attr:`Row.unused`) are left out."""
        rows = []
        for group in self.groups():
            rows += self.rows_of(group, self.container(group.path), unused)
        return rows

    def rows_of(self, group: GroupUsage, c: Container | None, unused: bool = True) -> list[Row]:
        out = []
        for devt, du in group.devices.items():
            row = Row(group, c, devt, du, self.rates.get((group.path, devt)))
            if unused or not row.unused:
                out.append(row)
        return out


# sorting ---------------------------------------------------------------------------


def _num(v: float | int | None) -> float:
    return float("-inf") if v is None else float(v)


SORT_KEYS: dict[str, Any] = {
    # numbers: the biggest first
    "gpu": lambda r: -_num(r.gpu_percent),
    "wait": lambda r: -_num(r.wait_percent),
    "memory": lambda r: -_num(r.usage.memory.get("current")),
    "max": lambda r: -(float("inf") if "max" in r.usage.memory and r.usage.memory["max"] is None
                       else _num(r.usage.memory.get("max"))),
    "hits": lambda r: -_num(r.usage.memory.get("limit_hits")),
    # no cap is the largest: the tightest caps last (--reverse: first)
    "cap": lambda r: -(_num(r.cap_percent) if r.cap_percent is not None else float("inf")),
    "throttled": lambda r: -_num(r.throttled_percent),
    "time": lambda r: -_num(r.usage.gpu_time_ns),
    "weight": lambda r: -_num(r.usage.weight),
    "priority": lambda r: -_num(r.group.priority_effective),
    # text: alphabetical
    "container": lambda r: r.name,
    "pod": lambda r: (r.namespace, r.pod),
    "device": lambda r: r.devt,
    "cgroup": lambda r: r.path,
}


def sort_rows(rows: list[Row], key: str, reverse: bool = False) -> list[Row]:
    """Rows by @key (see SORT_KEYS), ties by cgroup path and device."""
    fn = SORT_KEYS[key]
    out = sorted(rows, key=lambda r: (r.path, r.devt))
    out.sort(key=fn)
    if reverse:
        out.reverse()
    return out


# JSON -------------------------------------------------------------------------------


def _device_json(du: DeviceUsage, r: Rates | None, with_rates: bool) -> dict[str, Any]:
    d: dict[str, Any] = {}
    if du.gpu_time_ns is not None:
        d["usage_usec"] = d["gpu_time_usec"] = du.gpu_time_ns // 1000
    if du.wait_ns is not None:
        d["wait_usec"] = du.wait_ns // 1000
    if du.cap is not None:
        d["cap"] = {"max_us": du.cap.max_us, "period_us": du.cap.period_us}
    if du.periods is not None:
        d["nr_periods"] = du.periods
    if du.throttled is not None:
        d["nr_throttled"] = du.throttled
    if du.throttled_ns is not None:
        d["throttled_usec"] = du.throttled_ns // 1000
    if with_rates:  # and the interval its percentages cover
        d["interval_s"] = None if r is None else round(r.interval_s, 3)
        if du.gpu_time_ns is not None:
            d["gpu_percent"] = None if r is None or r.gpu_percent is None else round(
                r.gpu_percent, 2)
        if du.wait_ns is not None:
            d["wait_percent"] = None if r is None or r.wait_percent is None else round(
                r.wait_percent, 2)
        if du.throttled_ns is not None:
            d["throttled_percent"] = (None if r is None or r.throttled_percent is None
                                      else round(r.throttled_percent, 2))
    if du.engines:
        d["engines"] = {}
        for name, e in du.engines.items():
            item: dict[str, Any] = {"busy_ns": e.busy_ns, "capacity": e.capacity}
            if with_rates:
                pct = r.engines.get(name) if r else None
                item["percent"] = None if pct is None else round(pct, 2)
            d["engines"][name] = item
    if du.memory:
        d["memory"] = dict(du.memory)
    if du.memory_regions:
        d["memory_regions"] = {k: dict(v) for k, v in du.memory_regions.items()}
    if du.regions:
        d["regions"] = {k: dict(v) for k, v in du.regions.items()}
    if du.weight is not None:
        d["weight"] = du.weight
    if du.clients is not None:
        d["clients"] = du.clients
    if du.driver is not None:
        d["driver"] = du.driver
    return d


def _total_json(du: DeviceUsage) -> dict[str, Any]:
    """A device's totals (the root cgroup's files), in gpu.stat's names."""
    out: dict[str, Any] = {}
    if du.gpu_time_ns is not None:
        out["usage_usec"] = du.gpu_time_ns // 1000
    if du.wait_ns is not None:
        out["wait_usec"] = du.wait_ns // 1000
    if du.memory.get("current") is not None:
        out["memory_current"] = du.memory["current"]
    if du.memory_regions:
        out["memory_regions"] = {k: dict(v) for k, v in du.memory_regions.items()}
    return out


def stat_document(monitor: Monitor, cgroup_root: str | None, interval_s: float,
                  device_names: dict[DevT, str] | None = None,
                  unused: bool = True) -> dict[str, Any]:
    """The pycgpu.stat/v1 document of the monitor's latest sample; without
    @unused, the devices a group never used are left out of its item."""
    sample = monitor.sample
    assert sample is not None
    with_rates = monitor.prev is not None
    groups = []
    for group in monitor.groups():
        c = monitor.container(group.path)
        item: dict[str, Any] = {"path": printable_name(group.path), "leaf": group.leaf,
                                "container": c.to_json() if c else None}
        if group.time_ns is not None:  # when its counters were read
            item["time"] = round(sample.wall_time + (group.time_ns - sample.time_ns) / 1e9, 3)
        if group.priority is UNSET:
            item["priority_inherited"] = True
        elif group.priority is not None:
            item["priority"] = group.priority
        if group.priority_effective is not None:
            item["priority_effective"] = group.priority_effective
        if sample.source == "fdinfo":
            item["pids"] = list(group.pids)
        used = {r.devt for r in monitor.rows_of(group, c, unused)}
        item["devices"] = {
            str(devt): _device_json(du, monitor.rates.get((group.path, devt)), with_rates)
            for devt, du in group.devices.items() if devt in used}
        groups.append(item)
    seen = sorted({d for g in monitor.groups() for d in g.devices} | set(sample.totals)
                  | set(sample.capacity))
    names = device_names or {}
    devices: dict[str, dict[str, Any]] = {}
    for d in seen:
        devices[str(d)] = {"node": names.get(d)}
        total = sample.totals.get(d)
        if total is not None:
            devices[str(d)]["total"] = _total_json(total)
        if d in sample.capacity:
            devices[str(d)]["memory_capacity"] = dict(sample.capacity[d])
    return {
        "schema": SCHEMA,
        "source": sample.source,
        "cgroup_root": None if cgroup_root is None else printable_name(cgroup_root),
        "time": round(sample.wall_time, 3),
        "interval_s": round((sample.time_ns - monitor.prev.time_ns) / 1e9, 3)
        if monitor.prev is not None else None,
        "devices": devices,
        "groups": groups,
        "errors": [printable_name(e) for e in sample.errors],
    }


# text ---------------------------------------------------------------------------------


def pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def engine_names(rows: list[Row]) -> list[str]:
    names: list[str] = []
    for r in rows:
        for n in r.usage.engines:
            if n not in names:
                names.append(n)
    return names


def _max_text(du: DeviceUsage) -> str:
    """The MAX cell: the device's limit, or the limits of a device with
    several regions, by region (vram0=2G,vram1=1G); "-" for none."""
    if du.memory_regions:
        return ",".join(f"{name}={format_size_human(m['max'])}"
                        for name, m in du.memory_regions.items()
                        if m.get("max") is not None) or "-"
    return format_size_human(du.memory["max"]) if "max" in du.memory else "-"


def columns(rows: list[Row], device_names: dict[DevT, str] | None = None,
            wide: bool = False) -> tuple[list[str], list[list[str]]]:
    """Header and cells of the table top and stat print."""
    names = device_names or {}
    engines = engine_names(rows)
    kernel = any(r.usage.wait_ns is not None for r in rows)
    memory = any(r.usage.memory for r in rows)
    # the hard cap's columns where a row has one
    capped = any(r.cap_percent is not None for r in rows)
    header = ["CONTAINER", "POD", "DEVICE", "GPU%"] + [f"{e.upper()}%" for e in engines]
    if kernel:
        header += ["WAIT%"]
    if capped:
        header += ["CAP%", "THR%"]
    if memory:
        header += ["MEMORY"]
    if kernel:
        header += ["MAX", "HITS", "WEIGHT", "PRIO"]
    if not kernel and rows:
        header += ["CLIENTS"]
    if wide:
        header += ["RUNTIME", "CGROUP"]
    cells = []
    for r in rows:
        pod = r.pod
        if r.namespace:
            pod = f"{r.namespace}/{pod}"
        elif r.container and not r.container.pod and r.container.pod_uid:
            pod = r.container.pod_uid[:8]
        line = [printable_name(r.name), pod or "-", names.get(r.devt, str(r.devt)),
                pct(r.gpu_percent)]
        line += [pct(r.rates.engines.get(e) if r.rates else None)
                 if e in r.usage.engines else "-" for e in engines]
        mem = r.usage.memory
        if kernel:
            line += [pct(r.wait_percent)]
        if capped:
            line += [pct(r.cap_percent), pct(r.throttled_percent)]
        if memory:
            cur = mem.get("current")
            line += ["-" if cur is None else format_size_human(cur)]
        if kernel:
            line += [_max_text(r.usage),
                     str(mem.get("limit_hits", "-")),
                     str(r.usage.weight) if r.usage.weight is not None else "-",
                     str(r.group.priority_effective)
                     if r.group.priority_effective is not None else "-"]
        if not kernel and rows:
            line += [str(r.usage.clients or 0)]
        if wide:
            line += [r.container.runtime if r.container else "-", printable_name(r.path)]
        cells.append(line)
    return header, cells


# text columns, left-aligned; the others are numbers
TEXT_COLUMNS = frozenset({"CONTAINER", "POD", "DEVICE", "RUNTIME", "CGROUP"})


def table(header: list[str], cells: list[list[str]], *, header_style: str = "bold") -> Table:
    """The rich table of @header and @cells (:func:`columns`): text on the
    left, numbers on the right; drawn narrower than its natural width (top's
    live view), the cgroup path gives way first."""
    from .tables import table as rich_table

    return rich_table(header, cells, left=TEXT_COLUMNS, cut={"CGROUP"},
                      header_style=header_style)


def summary(monitor: Monitor, rows: list[Row], device_names: dict[DevT, str]) -> str:
    """The first line of a top frame."""
    sample = monitor.sample
    assert sample is not None
    stamp = time.strftime("%H:%M:%S", time.localtime(sample.wall_time))
    devices = sorted({r.devt for r in rows})
    parts = [f"pycgpu top - {stamp}", f"source {sample.source}",
             f"{len({r.path for r in rows})} groups", f"{len(devices)} devices"]
    for d in devices:  # leaves only: inner groups' counters include their children's
        leaves = [r for r in rows if r.devt == d and r.group.leaf]
        total = sum(r.gpu_percent or 0.0 for r in leaves)
        mem = sum(r.usage.memory.get("current") or 0 for r in leaves)
        name = device_names.get(d, str(d))
        parts.append(f"{name} GPU {total:.1f}% mem {format_size_human(mem)}")
    return "  |  ".join(parts)
