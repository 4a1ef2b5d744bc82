"""Per-cgroup (and so per-container) GPU usage, from two sources behind one
interface:

- :class:`~pycgpu.monitoring.kernel.KernelSource` reads the gpu controller's
  files of every group that has them: ``gpu.stat`` (GPU time and wait time,
  µs, hierarchical, kept after the processes exit), ``gpu.memory.current``,
  ``.max``, ``.peak``, ``.events`` (``max=N``: allocations refused at a
  limit), ``gpu.weight``, ``gpu.priority[.effective]``, and ``gpu.max`` with
  ``gpu.stat``'s throttling counters (``nr_periods``, ``nr_throttled``,
  ``throttled_usec``) where the kernel has the hard cap.
- :class:`~pycgpu.monitoring.fdinfo.FdinfoSource` scans ``/proc/*/fdinfo`` for
  DRM clients (Documentation/gpu/drm-usage-stats.rst), on any kernel and any
  DRM driver: ``drm-engine-*`` busy time, ``drm-total-*``/``drm-resident-*``
  memory, de-duplicated by ``drm-client-id`` per device and attributed to
  the cgroup of the process holding the file.

A source returns a :class:`Sample`: cumulative counters per group and
device at one instant. Percentages come from two samples of one source
(:func:`rates`): GPU % = GPU time used over the interval / the interval
(it may exceed 100 on a device whose engines run in parallel); an engine's
% = its busy time / (interval x ``drm-engine-capacity``).

``open_source("auto", ...)`` picks the kernel source when the gpu
controller is enabled below the cgroup root (the groups there have
``gpu.stat``), else fdinfo.
"""

from __future__ import annotations

import abc
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import Error
from ..core.formats import Cap, DevT, Priority

KERNEL, FDINFO, AUTO = "kernel", "fdinfo", "auto"
SOURCES = (AUTO, KERNEL, FDINFO)


@dataclass
class Engine:
    """One engine class of a device, summed over a group's clients."""

    busy_ns: int = 0  # cumulative and monotonic for the lifetime of the source
    capacity: int = 1  # drm-engine-capacity: instances of the engine class


@dataclass
class DeviceUsage:
    """What a group used on one device. Absent knowledge is None (or empty)."""

    gpu_time_ns: int | None = None  # cumulative GPU time (kernel: gpu.stat usage_usec)
    wait_ns: int | None = None  # kernel: gpu.stat wait_usec
    engines: dict[str, Engine] = field(default_factory=dict)  # fdinfo
    # fdinfo: the time its increments since the previous sample cover, the
    # mean of its clients' own intervals between reads (None: the group's)
    span_ns: int | None = None
    # keys present when known: current, max (None = no limit), peak, limit_hits
    memory: dict[str, int | None] = field(default_factory=dict)
    # fdinfo: region -> {total, shared, resident, purgeable, active} bytes
    regions: dict[str, dict[str, int]] = field(default_factory=dict)
    # kernel, a device with several dmem regions (xe's vram0, vram1): region ->
    # the keys of @memory; @memory then has the sums of current and limit_hits
    memory_regions: dict[str, dict[str, int | None]] = field(default_factory=dict)
    weight: int | None = None  # kernel: gpu.weight for this device
    # kernel, where it has gpu.max: the cap on this device (max_us None: none),
    # and gpu.stat's periods of GPU work, periods throttled, time throttled
    cap: Cap | None = None
    periods: int | None = None
    throttled: int | None = None
    throttled_ns: int | None = None
    clients: int | None = None  # fdinfo: distinct DRM clients
    driver: str | None = None  # fdinfo: drm-driver


@dataclass
class GroupUsage:
    """One cgroup, named by its path from the cgroup root (``/a/b``)."""

    path: str
    leaf: bool = True  # no child group reports usage of its own
    priority: Priority | None = None  # UNSET: gpu.priority reads default
    priority_effective: int | None = None
    pids: list[int] = field(default_factory=list)  # fdinfo: processes holding clients
    devices: dict[DevT, DeviceUsage] = field(default_factory=dict)
    # CLOCK_MONOTONIC when its counters were read (the middle of that read;
    # None: the sample's time). A read of every group or process takes a
    # while, hundreds of milliseconds under load, and seldom the same while
    # twice: a group's percentages cover the time between its own two reads.
    time_ns: int | None = None


@dataclass
class Sample:
    source: str
    time_ns: int  # CLOCK_MONOTONIC when the read started (each group has its own time too)
    wall_time: float  # time.time() at the same moment
    groups: dict[str, GroupUsage] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # what could not be read, and why
    duration_ns: int = 0  # how long the read took
    # the cgroup of each error ("" when it is not one group's: a process, the source)
    error_groups: list[str] = field(default_factory=list)
    # fdinfo: device -> engine -> (drm-curfreq, drm-maxfreq) in Hz, as the clients report them
    frequency: dict[DevT, dict[str, tuple[int | None, int | None]]] = field(
        default_factory=dict)
    # kernel: each device's totals, from the root cgroup's gpu.stat and gpu.memory.current
    # (all GPU time, the root's and the kernel's work included, and every charged byte);
    # empty where the kernel has no such files on the root
    totals: dict[DevT, DeviceUsage] = field(default_factory=dict)
    # kernel, on dmem: each device's regions and their sizes (dmem.capacity)
    capacity: dict[DevT, dict[str, int]] = field(default_factory=dict)

    def error(self, message: str, cgroup: str = "") -> None:
        """Record what could not be read; the sample goes on with the rest."""
        self.errors.append(message)
        self.error_groups.append(cgroup)


class Source(abc.ABC):
    """Reads usage per cgroup. Sources may keep state between samples (the
    fdinfo source does, to keep counters monotonic); use one instance for a
    series of samples."""

    name: str
    clock = staticmethod(time.monotonic_ns)  # the tests give a fake one

    @abc.abstractmethod
    def _read(self, sample: Sample) -> None:
        """Fill @sample.groups (and errors)."""

    def sample(self) -> Sample:
        t0 = self.clock()
        s = Sample(self.name, t0, time.time())
        self._read(s)
        s.duration_ns = max(0, self.clock() - t0)
        return s


class SourceError(Error, OSError):
    """A source that cannot work on this host; the message says why and the fix."""


class UnknownSource(Error, ValueError):
    """A source name that is none of :data:`SOURCES`."""


def gpu_enabled_below(mount: Path) -> bool:
    """Whether the groups right below @mount have gpu.* files."""
    try:
        return "gpu" in (mount / "cgroup.subtree_control").read_text().split()
    except (OSError, ValueError):
        return False


def controller_available(mount: Path) -> bool:
    """Whether the kernel has the gpu controller (in the root's cgroup.controllers)."""
    try:
        return "gpu" in (mount / "cgroup.controllers").read_text().split()
    except (OSError, ValueError):
        return False


def open_source(kind: str, mount: Path | None, proc: Path = Path("/proc"),
                sysfs: Path = Path("/sys")) -> Source:
    """A source by name: ``kernel``, ``fdinfo`` or ``auto``. @mount is the
    cgroup2 mount (None when there is none: only fdinfo works then)."""
    if kind == AUTO:
        kind = KERNEL if mount is not None and gpu_enabled_below(mount) else FDINFO
    if kind == KERNEL:
        if mount is None:
            raise SourceError(0, "the kernel source needs a cgroup2 mount")
        if not controller_available(mount):
            raise SourceError(0, f"no gpu controller in {mount}/cgroup.controllers: the kernel "
                                 "source needs a kernel with CONFIG_CGROUP_GPU")
        from ..core.devices import discover
        from ..core.errors import Error
        from ..core.memory import Interface, detect
        from .kernel import KernelSource

        def regions() -> Interface | None:
            try:
                return detect(mount, discover(sysfs, Path("/dev")))
            except (Error, OSError):
                return None  # memory goes unreported; the rest does not depend on it

        return KernelSource(mount, regions(), regions)
    if kind == FDINFO:
        from .fdinfo import FdinfoSource

        return FdinfoSource(proc=proc, sysfs=sysfs)
    raise UnknownSource(f"unknown source {kind!r}; known: {', '.join(SOURCES)}")


# rates ------------------------------------------------------------------------


@dataclass
class Rates:
    """Percentages over the interval between two reads of a group's counters."""

    interval_s: float
    gpu_percent: float | None = None
    wait_percent: float | None = None
    # the share of the interval the group's work on the device was held back by its cap
    throttled_percent: float | None = None
    engines: dict[str, float] = field(default_factory=dict)


def _pct(delta: int, interval_ns: int, capacity: int = 1) -> float:
    return 100.0 * max(delta, 0) / (interval_ns * max(capacity, 1))


def _group_interval_ns(before: GroupUsage, after: GroupUsage, interval_ns: int) -> int:
    """The time between two reads of one group: between its own read times
    where both samples have them, else the samples' @interval_ns."""
    if before.time_ns is not None and after.time_ns is not None:
        span = after.time_ns - before.time_ns
        if span > 0:
            return span
    return interval_ns


def rates(prev: Sample | None, cur: Sample) -> dict[tuple[str, DevT], Rates]:
    """Per (group path, device): the percentages from @prev to @cur (two
    samples of one source). Groups or devices new in @cur count from zero
    only if @prev had the group; a group absent from @prev gets no rates.
    Counters that went backwards (a group removed and made again) count 0.
    A group read at its own time in both samples gets the interval between
    those two reads, a device whose clients were each timed
    (:attr:`DeviceUsage.span_ns`) the mean of their intervals."""
    out: dict[tuple[str, DevT], Rates] = {}
    if prev is None:
        return out
    interval = cur.time_ns - prev.time_ns
    if interval <= 0:
        return out
    for path, group in cur.groups.items():
        before = prev.groups.get(path)
        if before is None:
            continue
        span = _group_interval_ns(before, group, interval)
        for dev, du in group.devices.items():
            old = before.devices.get(dev, DeviceUsage())
            dt = du.span_ns if du.span_ns is not None and du.span_ns > 0 else span
            r = Rates(dt / 1e9)
            if du.gpu_time_ns is not None:
                r.gpu_percent = _pct(du.gpu_time_ns - (old.gpu_time_ns or 0), dt)
            if du.wait_ns is not None:
                r.wait_percent = _pct(du.wait_ns - (old.wait_ns or 0), dt)
            if du.throttled_ns is not None:
                r.throttled_percent = _pct(du.throttled_ns - (old.throttled_ns or 0), dt)
            for name, eng in du.engines.items():
                was = old.engines.get(name)
                r.engines[name] = _pct(eng.busy_ns - (was.busy_ns if was else 0), dt,
                                       eng.capacity)
            out[(path, dev)] = r
    return out
