"""Prometheus metrics of per-container GPU usage, through prometheus_client.

A custom collector reads the source when Prometheus scrapes (``collect()``
yields metric families): no background thread updates gauges, so a scrape
sees the counters as they are now and an idle exporter costs nothing.

Labels: ``cgroup`` (path from the cgroup root), ``container`` (the
container's name, else its short ID, the systemd unit name or the cgroup's
last component), ``pod`` (pod name, else the pod UID from the cgroup path),
``namespace`` (Kubernetes namespace, when the runtime's state tells it),
``device`` (``MAJ:MIN`` of the render node, as in the gpu.* files); plus
``engine``, ``region`` and ``kind`` where the metric needs them.
:data:`METRICS` lists every metric; docs/monitoring.md has the table.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from .view import Monitor, Row

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from ..devices import Device

LABELS = ["cgroup", "container", "pod", "namespace", "device"]
GROUP_LABELS = ["cgroup", "container", "pod", "namespace"]

# name: (type, source it comes from, help)
METRICS: dict[str, tuple[str, str, str]] = {
    "pycgpu_gpu_time_seconds_total": (
        "counter", "kernel, fdinfo",
        "GPU time used by the group's work on the device (kernel: gpu.stat usage_usec, "
        "hierarchical; fdinfo: drm-engine-* summed over engines)."),
    "pycgpu_gpu_wait_seconds_total": (
        "counter", "kernel", "Time the group's work was runnable but waiting for the GPU "
                             "(gpu.stat wait_usec)."),
    "pycgpu_gpu_engine_busy_seconds_total": (
        "counter", "fdinfo", "Busy time of an engine class for the group's DRM clients "
                             "(drm-engine-<engine>, or drm-cycles-<engine> over "
                             "drm-total-cycles-<engine>)."),
    "pycgpu_gpu_engine_capacity": (
        "gauge", "fdinfo", "Engines of the class (drm-engine-capacity-<engine>, default 1)."),
    "pycgpu_gpu_memory_bytes": (
        "gauge", "kernel, fdinfo", "GPU buffer memory charged to the group (gpu.memory.current) "
                                   "or held by its DRM clients (drm-total-* over regions)."),
    "pycgpu_gpu_memory_max_bytes": (
        "gauge", "kernel", "The group's gpu.memory.max; absent when it is max (no limit)."),
    "pycgpu_gpu_memory_peak_bytes": (
        "gauge", "kernel", "High-water mark of the group's charge (gpu.memory.peak)."),
    "pycgpu_gpu_memory_limit_hits_total": (
        "counter", "kernel", "Allocations refused because the group or an ancestor hit "
                             "gpu.memory.max (gpu.memory.events max)."),
    "pycgpu_gpu_memory_region_bytes": (
        "gauge", "fdinfo", "DRM client memory per region and kind (drm-<kind>-<region>: "
                           "total, shared, resident, purgeable, active)."),
    "pycgpu_gpu_clients": (
        "gauge", "fdinfo", "Open DRM clients (distinct drm-client-id) of the group's processes."),
    "pycgpu_gpu_weight": (
        "gauge", "kernel", "The group's gpu.weight on the device."),
    "pycgpu_gpu_priority": (
        "gauge", "kernel", "The group's gpu.priority."),
    "pycgpu_gpu_priority_effective": (
        "gauge", "kernel", "The group's gpu.priority.effective (capped by its ancestors)."),
    "pycgpu_container_info": (
        "gauge", "both", "Container identity of a cgroup: runtime, full ID, pod UID, QoS "
                         "class (value 1)."),
    "pycgpu_gpu_device_info": (
        "gauge", "both", "Render node, driver and PCI address of a device (value 1)."),
    "pycgpu_exporter_scrape_duration_seconds": (
        "gauge", "both", "Time this scrape took to read the source."),
    "pycgpu_exporter_errors": (
        "gauge", "both", "Files this scrape could not read or parse (see the exporter's log)."),
}


def _help(name: str) -> str:
    return METRICS[name][2]


def _counter(name: str, labels: list[str]) -> CounterMetricFamily:
    return CounterMetricFamily(name, _help(name), labels=labels)


def _gauge(name: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, _help(name), labels=labels)


class UsageCollector(Collector):
    """Collects from @monitor at every scrape. Scrapes are serialised: the
    fdinfo source keeps state between samples."""

    def __init__(self, monitor: Monitor, devices: list[Device] | None = None,
                 log=None) -> None:
        self.monitor = monitor
        self.devices = devices or []
        self.log = log
        self._lock = threading.Lock()

    def describe(self) -> Iterator[Metric]:
        return iter(())  # no read of the source at registration

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            t0 = time.perf_counter()
            sample = self.monitor.refresh()
            rows = self.monitor.rows()
            families = self._families(rows)
            elapsed = time.perf_counter() - t0
        if sample.errors and self.log is not None:
            for e in sample.errors:
                self.log(e)
        yield from families
        g = _gauge("pycgpu_exporter_scrape_duration_seconds", ["source"])
        g.add_metric([sample.source], elapsed)
        yield g
        g = _gauge("pycgpu_exporter_errors", ["source"])
        g.add_metric([sample.source], len(sample.errors))
        yield g

    def _families(self, rows: list[Row]) -> list[Metric]:
        time_ = _counter("pycgpu_gpu_time_seconds_total", LABELS)
        wait = _counter("pycgpu_gpu_wait_seconds_total", LABELS)
        busy = _counter("pycgpu_gpu_engine_busy_seconds_total", [*LABELS, "engine"])
        capacity = _gauge("pycgpu_gpu_engine_capacity", [*LABELS, "engine"])
        mem = _gauge("pycgpu_gpu_memory_bytes", LABELS)
        mem_max = _gauge("pycgpu_gpu_memory_max_bytes", LABELS)
        peak = _gauge("pycgpu_gpu_memory_peak_bytes", LABELS)
        hits = _counter("pycgpu_gpu_memory_limit_hits_total", LABELS)
        region = _gauge("pycgpu_gpu_memory_region_bytes", [*LABELS, "region", "kind"])
        clients = _gauge("pycgpu_gpu_clients", LABELS)
        weight = _gauge("pycgpu_gpu_weight", LABELS)
        prio = _gauge("pycgpu_gpu_priority", GROUP_LABELS)
        prio_eff = _gauge("pycgpu_gpu_priority_effective", GROUP_LABELS)
        info = InfoMetricFamily(
            "pycgpu_container", _help("pycgpu_container_info"),
            labels=[*GROUP_LABELS, "runtime", "container_id", "pod_uid", "qos"])
        seen_groups: set[str] = set()
        for r in rows:
            group_labels = [r.path, r.name, r.pod, r.namespace]
            labels = [*group_labels, str(r.devt)]
            du = r.usage
            if du.gpu_time_ns is not None:
                time_.add_metric(labels, du.gpu_time_ns / 1e9)
            if du.wait_ns is not None:
                wait.add_metric(labels, du.wait_ns / 1e9)
            for name, e in du.engines.items():
                busy.add_metric([*labels, name], e.busy_ns / 1e9)
                capacity.add_metric([*labels, name], e.capacity)
            m = du.memory
            if m.get("current") is not None:
                mem.add_metric(labels, m["current"])
            if m.get("max") is not None:
                mem_max.add_metric(labels, m["max"])
            if m.get("peak") is not None:
                peak.add_metric(labels, m["peak"])
            if m.get("limit_hits") is not None:
                hits.add_metric(labels, m["limit_hits"])
            for reg, kinds in du.regions.items():
                for kind, v in kinds.items():
                    region.add_metric([*labels, reg, kind], v)
            if du.clients is not None:
                clients.add_metric(labels, du.clients)
            if du.weight is not None:
                weight.add_metric(labels, du.weight)
            if r.path in seen_groups:
                continue
            seen_groups.add(r.path)
            if r.group.priority is not None:
                prio.add_metric(group_labels, r.group.priority)
            if r.group.priority_effective is not None:
                prio_eff.add_metric(group_labels, r.group.priority_effective)
            c = r.container
            if c is not None:
                info.add_metric(group_labels, {
                    "runtime": c.runtime, "container_id": c.id, "pod_uid": c.pod_uid or "",
                    "qos": c.qos or ""})
        devinfo = InfoMetricFamily("pycgpu_gpu_device", _help("pycgpu_gpu_device_info"),
                                   labels=["device", "node", "driver", "pci_address"])
        for d in self.devices:
            devinfo.add_metric([str(d.devt), d.name, d.driver or "", d.pci_address or ""], {})
        families = [time_, wait, busy, capacity, mem, mem_max, peak, hits, region, clients,
                    weight, prio, prio_eff, info, devinfo]
        return [f for f in families if f.samples]


def registry(monitor: Monitor, devices: list[Device] | None = None,
             log=None) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(UsageCollector(monitor, devices, log))
    return reg


def serve(reg: CollectorRegistry, host: str, port: int) -> tuple[WSGIServer, threading.Thread]:
    """Serve @reg on http://HOST:PORT/metrics from a daemon thread; port 0
    picks a free port (``server.server_port`` tells which)."""
    from prometheus_client import start_http_server

    return start_http_server(port, addr=host, registry=reg)
