"""Prometheus metrics of per-container GPU usage, in the text exposition
format (version 0.0.4), served over HTTP from the standard library.

:class:`Exporter` reads the source when Prometheus scrapes: no background
thread, so a scrape sees the counters as they are now and an idle exporter
costs nothing. The text is written directly (each series' label set is
escaped once per row and shared by its families): a node with 2,000
containers on 2 GPUs is scraped in well under 200 ms (make bench-exporter).

Series are kept to what a fleet needs:

- one series per container, *used* device and metric family: a device a
  group never used (no GPU time, no memory, no limit: the kernel lists every
  device in every group) has none, and group-level families (priority,
  container info) exist only for groups that used a device;
- labels ``cgroup`` (path from the cgroup root), ``container`` (name, else
  short ID, unit name or last path component), ``pod`` (the pod *name*, or
  empty when unknown), ``namespace`` (under Kubernetes from the kubelet's
  PodResources API when its socket is mounted: :class:`PodLabels`), and
  ``device``: the render node's name (``renderD128``), what people and
  dashboards call the GPU; it is no more stable than ``MAJ:MIN`` (the minor
  is 128 + the DRM minor index, given in probe order: the same number), and
  the device's ``pci`` address, stable across reboots for a GPU in the same
  slot, is on ``pycgpu_gpu_device_info`` with ``maj_min`` and ``driver``;
  the pod UID, runtime, full ID and QoS class are on
  ``pycgpu_container_info``;
- every family can be summed over its labels (fdinfo memory per region has
  one family per kind, not a ``kind`` label);
- ``pycgpu_scrape_errors_total{cgroup}`` counts, per group, the scrapes in
  which its files could not be read or parsed (``cgroup=""``: errors not
  tied to one group); a broken group never fails the scrape.

:data:`METRICS` lists every family; docs/monitoring.md has the table.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from .. import __version__
from ..core.formats import DevT, printable_name
from . import Sample
from .view import Monitor, Row

if TYPE_CHECKING:
    from ..core.devices import Device

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LABELS = ("cgroup", "container", "pod", "namespace", "device")
GROUP_LABELS = ("cgroup", "container", "pod", "namespace")
REGION_KINDS = ("total", "shared", "resident", "purgeable", "active")


@dataclass(frozen=True)
class Family:
    type: str  # counter or gauge
    source: str  # kernel, fdinfo or both
    labels: tuple[str, ...]
    help: str


def _fam(type_: str, source: str, labels: tuple[str, ...], help_: str) -> Family:
    return Family(type_, source, labels, help_)


# per (group, used device)
DEVICE_FAMILIES: dict[str, Family] = {
    "pycgpu_gpu_time_seconds_total": _fam(
        "counter", "kernel, fdinfo", LABELS,
        "GPU time used by the group's work on the device (kernel: gpu.stat usage_usec, "
        "hierarchical; fdinfo: drm-engine-* summed over engines)."),
    "pycgpu_gpu_wait_seconds_total": _fam(
        "counter", "kernel", LABELS,
        "Time the group's queues were ready but waiting for the GPU (gpu.stat wait_usec)."),
    "pycgpu_gpu_memory_bytes": _fam(
        "gauge", "kernel, fdinfo", LABELS,
        "GPU buffer memory charged to the group (gpu.memory.current) or held by its DRM "
        "clients (drm-total-* over regions)."),
    "pycgpu_gpu_memory_max_bytes": _fam(
        "gauge", "kernel", LABELS,
        "The group's gpu.memory.max; absent when it is max (no limit)."),
    "pycgpu_gpu_memory_peak_bytes": _fam(
        "gauge", "kernel", LABELS, "High-water mark of the group's charge (gpu.memory.peak)."),
    "pycgpu_gpu_memory_limit_hits_total": _fam(
        "counter", "kernel", LABELS,
        "Allocations refused because the group or a descendant hit its gpu.memory.max "
        "(gpu.memory.events max)."),
    "pycgpu_gpu_weight": _fam(
        "gauge", "kernel", LABELS, "The group's gpu.weight on the device."),
    "pycgpu_gpu_max_ratio": _fam(
        "gauge", "kernel", LABELS,
        "The group's gpu.max on the device as a part of each engine (0.3: 30 ms of every "
        "100 ms); absent when it is max (no cap)."),
    "pycgpu_gpu_max_period_seconds": _fam(
        "gauge", "kernel", LABELS,
        "The period of the group's gpu.max on the device; absent when it is max."),
    "pycgpu_gpu_periods_total": _fam(
        "counter", "kernel", LABELS,
        "Periods of gpu.max in which the group's capped work used the device (gpu.stat "
        "nr_periods); absent while the group has no cap and none acted."),
    "pycgpu_gpu_throttled_periods_total": _fam(
        "counter", "kernel", LABELS,
        "Times the group's work on the device was held back by the group's own cap (a "
        "group held back by an ancestor's cap counts in the ancestor's) (gpu.stat "
        "nr_throttled)."),
    "pycgpu_gpu_throttled_seconds_total": _fam(
        "counter", "kernel", LABELS,
        "Time the group's work on the device was held back by its own cap, summed over the "
        "device's engines, counted when released (gpu.stat throttled_usec)."),
    "pycgpu_gpu_clients": _fam(
        "gauge", "fdinfo", LABELS,
        "Open DRM clients (distinct drm-client-id) of the group's processes."),
    "pycgpu_gpu_engine_busy_seconds_total": _fam(
        "counter", "fdinfo", (*LABELS, "engine"),
        "Busy time of an engine class for the group's DRM clients (drm-engine-<engine>, or "
        "drm-cycles-<engine> over drm-total-cycles-<engine>)."),
    **{f"pycgpu_gpu_memory_region_{kind}_bytes": _fam(
        "gauge", "fdinfo", (*LABELS, "region"),
        f"DRM client memory of the group per memory region (drm-{kind}-<region>).")
       for kind in REGION_KINDS},
    # a device with several dmem regions (its pycgpu_gpu_memory_bytes is their sum)
    "pycgpu_gpu_dmem_region_charged_bytes": _fam(
        "gauge", "kernel", (*LABELS, "region"),
        "GPU memory charged to the group in one region of a device with several "
        "(dmem.current)."),
    "pycgpu_gpu_dmem_region_max_bytes": _fam(
        "gauge", "kernel", (*LABELS, "region"),
        "The group's dmem.max of one region of a device with several; absent when it is max."),
    "pycgpu_gpu_dmem_region_peak_bytes": _fam(
        "gauge", "kernel", (*LABELS, "region"),
        "High-water mark of the group's charge in one region of a device with several "
        "(dmem.peak)."),
    "pycgpu_gpu_dmem_region_limit_hits_total": _fam(
        "counter", "kernel", (*LABELS, "region"),
        "Allocations refused in one region of a device with several because the group or a "
        "descendant hit its dmem.max there (dmem.events max)."),
}

# DeviceUsage.memory_regions' keys and their families
_REGION_MEMORY = (("current", "pycgpu_gpu_dmem_region_charged_bytes"),
                  ("max", "pycgpu_gpu_dmem_region_max_bytes"),
                  ("peak", "pycgpu_gpu_dmem_region_peak_bytes"),
                  ("limit_hits", "pycgpu_gpu_dmem_region_limit_hits_total"))

# per group that used a device
GROUP_FAMILIES: dict[str, Family] = {
    "pycgpu_gpu_priority": _fam("gauge", "kernel", GROUP_LABELS,
                                "The group's gpu.priority; absent while it reads default."),
    "pycgpu_gpu_priority_effective": _fam(
        "gauge", "kernel", GROUP_LABELS,
        "The group's gpu.priority.effective (capped by its ancestors, or inherited)."),
    "pycgpu_container_info": _fam(
        "gauge", "both", (*GROUP_LABELS, "runtime", "container_id", "pod_uid", "qos"),
        "Container identity of a cgroup: runtime, full ID, pod UID, QoS class (value 1)."),
}

# per device
DEVICE_LEVEL_FAMILIES: dict[str, Family] = {
    "pycgpu_gpu_device_info": _fam(
        "gauge", "both", ("device", "maj_min", "pci", "driver"),
        "A GPU: render node name, MAJ:MIN (the key of the gpu.* files), PCI address and "
        "driver (value 1)."),
    "pycgpu_gpu_device_memory_total_bytes": _fam(
        "gauge", "both", ("device",),
        "The device's memory, where the driver reports it (amdgpu mem_info_vram_total)."),
    "pycgpu_gpu_device_time_seconds_total": _fam(
        "counter", "kernel", ("device",),
        "All GPU time on the device: every cgroup's work, the root cgroup's and the kernel's "
        "(the root cgroup's gpu.stat usage_usec)."),
    "pycgpu_gpu_device_wait_seconds_total": _fam(
        "counter", "kernel", ("device",),
        "Time all queues on the device were ready but waiting (the root cgroup's gpu.stat "
        "wait_usec)."),
    "pycgpu_gpu_device_memory_used_bytes": _fam(
        "gauge", "kernel", ("device",),
        "GPU buffer memory charged on the device in all (the root cgroup's "
        "gpu.memory.current, or dmem.current over the device's regions)."),
    "pycgpu_gpu_device_memory_capacity_bytes": _fam(
        "gauge", "kernel", ("device", "region"),
        "The size of each of the device's memory regions (the root cgroup's dmem.capacity; "
        "a kernel with dmem)."),
    "pycgpu_gpu_engine_capacity": _fam(
        "gauge", "fdinfo", ("device", "engine"),
        "Engines of the class (drm-engine-capacity-<engine>, default 1)."),
    "pycgpu_gpu_engine_frequency_hertz": _fam(
        "gauge", "fdinfo", ("device", "engine"),
        "Current frequency of the engine class (drm-curfreq-<engine>)."),
    "pycgpu_gpu_engine_max_frequency_hertz": _fam(
        "gauge", "fdinfo", ("device", "engine"),
        "Maximum frequency of the engine class (drm-maxfreq-<engine>)."),
}

# about the exporter itself
EXPORTER_FAMILIES: dict[str, Family] = {
    "pycgpu_build_info": _fam(
        "gauge", "both", ("version", "python"), "pycgpu's version and Python's (value 1)."),
    "pycgpu_exporter_scrape_duration_seconds": _fam(
        "gauge", "both", ("source",), "Time this scrape took to read the source."),
    "pycgpu_exporter_errors": _fam(
        "gauge", "both", ("source",),
        "Files this scrape could not read or parse (see the exporter's log)."),
    "pycgpu_scrape_errors_total": _fam(
        "counter", "both", ("cgroup",),
        "Scrapes in which the group's files could not be read or parsed (cgroup \"\": "
        "errors not tied to one group); the other groups are still served."),
    "pycgpu_exporter_connections_dropped_total": _fam(
        "counter", "both", ("reason",),
        "Connections the exporter closed early: the scraper went away before the body was "
        "sent (disconnected), silent for the idle timeout or its request not read whole "
        "within the request deadline (idle), or over the bound of "
        "connections served at once, answered 503 (over_limit)."),
}

FAMILIES: dict[str, Family] = {**DEVICE_FAMILIES, **GROUP_FAMILIES, **DEVICE_LEVEL_FAMILIES,
                               **EXPORTER_FAMILIES}

# name: (type, source, help), for the docs and the CLI's help
METRICS: dict[str, tuple[str, str, str]] = {
    name: (f.type, f.source, f.help) for name, f in FAMILIES.items()}


def escape(value: str) -> str:
    """A label value for the text format: a cgroup name as
    :func:`pycgpu.core.formats.printable_name` prints it (bytes that are not
    UTF-8 and control characters as \\xNN), then backslash and quote escaped."""
    value = printable_name(value)
    if "\\" in value or '"' in value:
        value = value.replace("\\", "\\\\").replace('"', '\\"')
    return value


def _labels(names: tuple[str, ...], values: tuple[str, ...]) -> str:
    return ",".join(f'{n}="{escape(v)}"' for n, v in zip(names, values, strict=True))


def _value(v: float) -> str:
    if isinstance(v, int):
        return str(v)
    return repr(float(v))


@dataclass
class _Out:
    """Samples grouped by family, in :data:`FAMILIES` order."""

    lines: dict[str, list[str]] = field(default_factory=dict)

    def add(self, name: str, labels: str, value: float) -> None:
        self.lines.setdefault(name, []).append(f"{name}{{{labels}}} {_value(value)}\n")

    def family_lines(self, name: str) -> list[str]:
        """The sample lines of family @name, to append to directly."""
        return self.lines.setdefault(name, [])

    def text(self, openmetrics: bool = False) -> str:
        """The exposition: Prometheus text 0.0.4, or OpenMetrics 1.0.0 (a
        counter's family is named without its samples' ``_total``; HELP
        escapes quotes; ``# EOF`` at the end). The sample lines are the same."""
        parts = []
        for name, family in FAMILIES.items():
            lines = self.lines.get(name)
            if not lines:
                continue
            help_ = family.help.replace("\\", "\\\\").replace("\n", "\\n")
            if openmetrics:
                if family.type == "counter":
                    name = name.removesuffix("_total")
                help_ = help_.replace('"', '\\"')
            parts.append(f"# HELP {name} {help_}\n# TYPE {name} {family.type}\n")
            parts.extend(lines)
        if openmetrics:
            parts.append("# EOF\n")
        return "".join(parts)


def _memory_total(sysfs: Path, device: Device) -> int | None:
    """The device's memory where the driver reports it in sysfs."""
    base = sysfs / "class" / "drm" / device.name / "device"
    for name in ("mem_info_vram_total",):
        try:
            return int((base / name).read_text().strip())
        except (OSError, ValueError):
            continue
    return None


class Owner(Protocol):
    """A container's names (:class:`pycgpu.k8s.podresources.Owner`)."""

    @property
    def namespace(self) -> str: ...

    @property
    def pod(self) -> str: ...

    @property
    def container(self) -> str: ...


class PodLabels(Protocol):
    """Where pod, namespace and container names come from when the cgroup
    path and the runtime's state do not give them (Kubernetes: the kubelet's
    PodResources API, :class:`pycgpu.k8s.podresources.Labels`)."""

    def refresh(self, paths: Iterable[str]) -> None:
        """Called once per scrape with the cgroup paths it serves."""

    def owner(self, path: str) -> Owner | None:
        """The container of cgroup @path, if known."""


class Exporter:
    """Reads @monitor at every :meth:`scrape`. Scrapes are serialised: the
    fdinfo source keeps state between samples. With @pod_labels, a group's
    pod, namespace and container labels come from there when it knows the
    group."""

    def __init__(self, monitor: Monitor, devices: list[Device] | None = None,
                 log: Callable[[str], None] | None = None,
                 sysfs: Path | None = None, pod_labels: PodLabels | None = None) -> None:
        self.monitor = monitor
        self.pod_labels = pod_labels
        self.devices = list(devices or [])
        self.log = log
        self.sysfs = sysfs
        self.names: dict[DevT, str] = {d.devt: d.name for d in self.devices}
        self.errors_total: dict[str, int] = {}
        self._lock = threading.Lock()
        # label sets by group and (group, device), kept across scrapes: a
        # group's labels do not change while it lives
        self._group_labels: dict[tuple[str, str, str, str], str] = {}
        self._row_labels: dict[tuple[str, DevT], str] = {}
        self._build = _labels(("version", "python"),
                              (__version__, ".".join(map(str, sys.version_info[:3]))))
        from .httpd import DROP_REASONS

        # connections the HTTP server closed early, by reason (from its threads)
        self._dropped = dict.fromkeys(DROP_REASONS, 0)
        self._dropped_lock = threading.Lock()

    def dropped(self, reason: str) -> None:
        """Count a connection the HTTP server closed early (:mod:`.httpd`)."""
        with self._dropped_lock:
            self._dropped[reason] = self._dropped.get(reason, 0) + 1

    def device_label(self, devt: DevT) -> str:
        """The render node's name; ``MAJ:MIN`` for a device sysfs did not show."""
        return self.names.get(devt) or str(devt)

    def scrape(self, openmetrics: bool = False) -> bytes:
        """The exposition of one scrape: Prometheus text, or OpenMetrics."""
        with self._lock:
            out = _Out()
            t0 = time.perf_counter()
            sample: Sample | None = None
            try:
                sample = self.monitor.refresh(with_rates=False)
                rows = self.monitor.rows(unused=False)
                if self.pod_labels is not None:
                    self.pod_labels.refresh(dict.fromkeys(r.path for r in rows))
                self._rows(out, rows, sample)
            except Exception as e:  # a scrape never fails: count it and serve the rest
                out = _Out()
                self._count([""])
                if self.log is not None:
                    self.log(f"scrape failed: {e}")
                sample = None
            elapsed = time.perf_counter() - t0
            source = sample.source if sample is not None else self.monitor.source.name
            if sample is not None and sample.errors:
                groups = sample.error_groups + [""] * (len(sample.errors)
                                                       - len(sample.error_groups))
                self._count(sorted(set(groups)))
                if self.log is not None:
                    for error in sample.errors:
                        self.log(error)
            self._device_level(out, sample)
            out.add("pycgpu_build_info", self._build, 1)
            src = f'source="{source}"'
            out.add("pycgpu_exporter_scrape_duration_seconds", src, elapsed)
            out.add("pycgpu_exporter_errors", src, len(sample.errors) if sample else 1)
            for cgroup, n in sorted(self.errors_total.items()):
                out.add("pycgpu_scrape_errors_total", _labels(("cgroup",), (cgroup,)), n)
            with self._dropped_lock:
                dropped = list(self._dropped.items())
            for reason, n in dropped:
                out.add("pycgpu_exporter_connections_dropped_total",
                        _labels(("reason",), (reason,)), n)
            return out.text(openmetrics).encode()

    def _count(self, groups: list[str]) -> None:
        for g in groups:
            self.errors_total[g] = self.errors_total.get(g, 0) + 1

    def _labels_of(self, r: Row) -> tuple[str, str]:
        """The group's label set and the row's (the group's and the device)."""
        c = r.container
        owner = self.pod_labels.owner(r.path) if self.pod_labels is not None else None
        if owner is not None:
            group = (r.path, owner.container, owner.pod, owner.namespace)
        else:
            group = (r.path, r.name, (c.pod if c else None) or "",
                     (c.namespace if c else None) or "")
        glabels = self._group_labels.get(group)
        if glabels is None:
            glabels = self._group_labels[group] = _labels(GROUP_LABELS, group)
        labels = self._row_labels.get((glabels, r.devt))
        if labels is None:
            labels = self._row_labels[(glabels, r.devt)] = (
                f'{glabels},device="{escape(self.device_label(r.devt))}"')
        return glabels, labels

    def _rows(self, out: _Out, rows: list[Row], sample: Sample) -> None:
        add = out.add
        lines = out.family_lines  # the hot families: one append per series
        time_, wait = lines("pycgpu_gpu_time_seconds_total"), lines("pycgpu_gpu_wait_seconds_total")
        mem, mem_max = lines("pycgpu_gpu_memory_bytes"), lines("pycgpu_gpu_memory_max_bytes")
        peak, hits = (lines("pycgpu_gpu_memory_peak_bytes"),
                      lines("pycgpu_gpu_memory_limit_hits_total"))
        weight = lines("pycgpu_gpu_weight")
        seen: set[str] = set()
        if len(self._row_labels) > 2 * len(rows) + 1024:  # groups come and go
            self._group_labels.clear()
            self._row_labels.clear()
        for r in rows:
            c = r.container
            glabels, labels = self._labels_of(r)
            du = r.usage
            if du.gpu_time_ns is not None:
                time_.append(f"pycgpu_gpu_time_seconds_total{{{labels}}} "
                             f"{du.gpu_time_ns / 1e9!r}\n")
            if du.wait_ns is not None:
                wait.append(f"pycgpu_gpu_wait_seconds_total{{{labels}}} {du.wait_ns / 1e9!r}\n")
            m = du.memory
            if m:
                if (v := m.get("current")) is not None:
                    mem.append(f"pycgpu_gpu_memory_bytes{{{labels}}} {v}\n")
                if (v := m.get("max")) is not None:
                    mem_max.append(f"pycgpu_gpu_memory_max_bytes{{{labels}}} {v}\n")
                if (v := m.get("peak")) is not None:
                    peak.append(f"pycgpu_gpu_memory_peak_bytes{{{labels}}} {v}\n")
                if (v := m.get("limit_hits")) is not None:
                    hits.append(f"pycgpu_gpu_memory_limit_hits_total{{{labels}}} {v}\n")
            if du.weight is not None:
                weight.append(f"pycgpu_gpu_weight{{{labels}}} {du.weight}\n")
            # a cap's series where one is set or has acted (an uncapped
            # group's counters stay 0: the kernel counts only capped periods)
            cap = du.cap
            capped = cap is not None and cap.max_us is not None
            if cap is not None and cap.max_us is not None:
                add("pycgpu_gpu_max_ratio", labels, cap.max_us / cap.period_us)
                add("pycgpu_gpu_max_period_seconds", labels, cap.period_us / 1e6)
            if capped or du.periods or du.throttled:
                if du.periods is not None:
                    add("pycgpu_gpu_periods_total", labels, du.periods)
                if du.throttled is not None:
                    add("pycgpu_gpu_throttled_periods_total", labels, du.throttled)
                if du.throttled_ns is not None:
                    add("pycgpu_gpu_throttled_seconds_total", labels, du.throttled_ns / 1e9)
            if du.clients is not None:
                add("pycgpu_gpu_clients", labels, du.clients)
            for name, e in du.engines.items():
                add("pycgpu_gpu_engine_busy_seconds_total",
                    f'{labels},engine="{escape(name)}"', e.busy_ns / 1e9)
            for region, kinds in du.regions.items():
                for kind, n in kinds.items():
                    if kind in REGION_KINDS:
                        add(f"pycgpu_gpu_memory_region_{kind}_bytes",
                            f'{labels},region="{escape(region)}"', n)
            for region, m in du.memory_regions.items():
                rlabels = f'{labels},region="{escape(region)}"'
                for key, family in _REGION_MEMORY:
                    if (v := m.get(key)) is not None:
                        add(family, rlabels, v)
            if r.path in seen:
                continue
            seen.add(r.path)
            if isinstance(r.group.priority, int):  # not UNSET (default) nor missing
                add("pycgpu_gpu_priority", glabels, r.group.priority)
            if r.group.priority_effective is not None:
                add("pycgpu_gpu_priority_effective", glabels, r.group.priority_effective)
            if c is not None:
                add("pycgpu_container_info", glabels + "," + _labels(
                    ("runtime", "container_id", "pod_uid", "qos"),
                    (c.runtime, c.id, c.pod_uid or "", c.qos or "")), 1)

    def _device_level(self, out: _Out, sample: Sample | None) -> None:
        for d in self.devices:
            out.add("pycgpu_gpu_device_info", _labels(
                ("device", "maj_min", "pci", "driver"),
                (d.name, str(d.devt), d.pci_address or "", d.driver or "")), 1)
            total = _memory_total(self.sysfs, d) if self.sysfs is not None else None
            if total is not None:
                out.add("pycgpu_gpu_device_memory_total_bytes",
                        _labels(("device",), (d.name,)), total)
        if sample is None:
            return
        for devt, du in sorted(sample.totals.items()):
            labels = _labels(("device",), (self.device_label(devt),))
            if du.gpu_time_ns is not None:
                out.add("pycgpu_gpu_device_time_seconds_total", labels, du.gpu_time_ns / 1e9)
            if du.wait_ns is not None:
                out.add("pycgpu_gpu_device_wait_seconds_total", labels, du.wait_ns / 1e9)
            if du.memory.get("current") is not None:
                out.add("pycgpu_gpu_device_memory_used_bytes", labels, du.memory["current"] or 0)
        for devt, sizes in sorted(sample.capacity.items()):
            for region, size in sizes.items():
                out.add("pycgpu_gpu_device_memory_capacity_bytes", _labels(
                    ("device", "region"), (self.device_label(devt), region)), size)
        capacity: dict[tuple[DevT, str], int] = {}
        for group in sample.groups.values():
            for devt, du in group.devices.items():
                for name, e in du.engines.items():
                    capacity[(devt, name)] = max(capacity.get((devt, name), 1), e.capacity)
        for (devt, name), cap in sorted(capacity.items()):
            out.add("pycgpu_gpu_engine_capacity",
                    _labels(("device", "engine"), (self.device_label(devt), name)), cap)
        for devt, engines in sorted(sample.frequency.items()):
            for name, (cur, top) in engines.items():
                labels = _labels(("device", "engine"), (self.device_label(devt), name))
                if cur is not None:
                    out.add("pycgpu_gpu_engine_frequency_hertz", labels, cur)
                if top is not None:
                    out.add("pycgpu_gpu_engine_max_frequency_hertz", labels, top)


# the HTTP side (content negotiation, gzip, HEAD) is in .httpd; serve() is
# this module's entry point to it
from .httpd import serve  # noqa: E402

__all__ = ["FAMILIES", "METRICS", "Exporter", "escape", "serve"]
