"""The fdinfo source: DRM client usage from ``/proc/PID/fdinfo/FD``, on any
kernel (5.19+) and any DRM driver that follows the kernel's
Documentation/gpu/drm-usage-stats.rst.

The keys (one ``key:<whitespace>value`` per line, values may carry a unit):

- ``drm-driver``, ``drm-pdev`` (PCI devices only), ``drm-client-id``,
  ``drm-client-name``
- ``drm-engine-<e>: N ns`` busy time, ``drm-engine-capacity-<e>: N``
  (instances of engine class <e>, when not 1)
- ``drm-cycles-<e>: N`` busy cycles; ``drm-total-cycles-<e>: N`` (xe: the
  engine's timestamp; utilisation = delta cycles / delta total cycles);
  ``drm-maxfreq-<e>`` / ``drm-curfreq-<e>: N Hz`` (msm, panfrost, panthor)
- ``drm-{total,shared,resident,purgeable,active}-<region>: N [KiB|MiB]``;
  ``drm-memory-<region>`` is the older name of ``drm-resident-<region>``
  (amdgpu printed only that before 6.11)

Driver-specific keys (``amd-*``, ``panthor-*``, ``pasid``) are ignored.

The scan, per process in /proc: list ``fd/``, ``readlink`` each entry and
keep those that point under ``/dev/`` and are character devices of the DRM
major (226, ``stat`` of the fd, so names inside containers do not matter);
for those, read ``fdinfo/FD`` and the process's ``cgroup`` (``0::/path``).
Processes without DRM files cost one ``listdir`` and a few ``readlink``\\s.

One DRM client (an open file description) can be reached through several
fds and processes (``dup``, ``fork``, ``SCM_RIGHTS``): clients are
de-duplicated by (``drm-pdev`` or the device number, ``drm-client-id``) and
attributed to the first process found holding it (the lowest PID). Card node
fds are counted against the render node of the same device, so both sources
key devices the same way.

Engine counters are kept monotonic as the document asks: a value lower than
the one read before is taken as the previous one until it catches up. The
source accumulates, per (cgroup, device, engine), the increments of the
clients seen there, so a group's counter does not drop when one of its
clients exits and it follows a process that moves to another group.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeAlias

from ..core.errors import file_error
from ..core.formats import DevT, FormatError, decode
from . import FDINFO, DeviceUsage, Engine, GroupUsage, Sample, Source

DRM_MAJOR = 226
MEMORY_KINDS = ("total", "shared", "resident", "purgeable", "active")

_SIZE_UNITS = {"": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}
_FREQ_UNITS = {"Hz": 1, "KHz": 10**3, "kHz": 10**3, "MHz": 10**6, "GHz": 10**9}
# fds that are never DRM nodes: not worth a stat
_NOT_DRM = ("/dev/pts/", "/dev/null", "/dev/tty", "/dev/urandom", "/dev/random", "/dev/zero",
            "/dev/ptmx", "/dev/shm/", "/dev/console", "/dev/kmsg", "/dev/net/", "/dev/kvm",
            "/dev/fuse", "/dev/mqueue/", "/dev/hugepages/")

# what identifies a DRM client across fds and scans: (drm-pdev or the render
# node, drm-client-id); ("fd", pid, fd) on kernels without drm-client-id
ClientKey: TypeAlias = tuple[str | DevT, int] | tuple[str, int, str]


@dataclass
class DrmClient:
    """The drm-* keys of one fdinfo file."""

    driver: str | None = None
    client_id: int | None = None
    pdev: str | None = None
    client_name: str | None = None
    engines: dict[str, int] = field(default_factory=dict)  # busy ns
    capacity: dict[str, int] = field(default_factory=dict)
    cycles: dict[str, int] = field(default_factory=dict)
    total_cycles: dict[str, int] = field(default_factory=dict)
    maxfreq: dict[str, int] = field(default_factory=dict)  # Hz
    curfreq: dict[str, int] = field(default_factory=dict)  # Hz
    memory: dict[str, dict[str, int]] = field(default_factory=dict)  # region -> kind -> B

    def memory_bytes(self) -> int:
        """Buffer memory over all regions: drm-total-*, or drm-resident-*
        where a driver prints no total."""
        return sum(kinds.get("total", kinds.get("resident", 0))
                   for kinds in self.memory.values())


def _number(value: str, units: dict[str, int], key: str, where: str) -> int:
    words = value.split()
    unit = words[1] if len(words) == 2 else ""
    if len(words) not in (1, 2) or unit not in units or not words[0].isdigit():
        named = "/".join(u for u in units if u)
        raise FormatError(f"{where}: {key}: {value!r} is not a number"
                          + (f" (units: {named})" if named else ""))
    return int(words[0]) * units[unit]


def parse_fdinfo(text: str, where: str = "fdinfo") -> DrmClient | None:
    """The DRM keys of an fdinfo file, or None if it has no ``drm-driver``
    (not a DRM file, or a driver without fdinfo support). Raises
    FormatError naming @where, the key and the value of a malformed line."""
    c = DrmClient()
    legacy: dict[str, int] = {}
    for line in text.splitlines():
        if not line.startswith("drm-"):
            continue
        key, sep, value = line.partition(":")
        if not sep:
            continue
        value = value.strip()
        k = key[4:]
        if k == "driver":
            c.driver = value
        elif k == "client-id":
            c.client_id = _number(value, {"": 1}, key, where)
        elif k == "pdev":
            c.pdev = value
        elif k == "client-name":
            c.client_name = value
        elif k.startswith("engine-capacity-"):
            c.capacity[k[16:]] = _number(value, {"": 1}, key, where)
        elif k.startswith("engine-"):
            c.engines[k[7:]] = _number(value, {"ns": 1, "": 1}, key, where)
        elif k.startswith("total-cycles-"):
            c.total_cycles[k[13:]] = _number(value, {"": 1}, key, where)
        elif k.startswith("cycles-"):
            c.cycles[k[7:]] = _number(value, {"": 1}, key, where)
        elif k.startswith("maxfreq-"):
            c.maxfreq[k[8:]] = _number(value, _FREQ_UNITS, key, where)
        elif k.startswith("curfreq-"):
            c.curfreq[k[8:]] = _number(value, _FREQ_UNITS, key, where)
        elif k.startswith("memory-"):
            legacy[k[7:]] = _number(value, _SIZE_UNITS, key, where)
        else:
            kind, dash, region = k.partition("-")
            if dash and kind in MEMORY_KINDS and region:
                c.memory.setdefault(region, {})[kind] = _number(value, _SIZE_UNITS, key, where)
    if c.driver is None:
        return None
    for region, size in legacy.items():
        c.memory.setdefault(region, {}).setdefault("resident", size)
    return c


def fd_devnum(path: str) -> tuple[int, int] | None:
    """(major, minor) of the character device the fd @path is open on, or None."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISCHR(st.st_mode):
        return None
    return os.major(st.st_rdev), os.minor(st.st_rdev)


@dataclass
class _Found:
    """A DRM client found in one scan, before de-duplication is complete."""

    key: ClientKey
    client: DrmClient
    pid: int
    cgroup: str
    devt: DevT
    pids: list[int]
    time_ns: int  # the source's clock in the middle of the read of its fdinfo
    holders: list[tuple[int, str]] = field(default_factory=list)  # (pid, cgroup)


@dataclass
class _Last:
    """What the previous scan read of a client: the largest values seen."""

    time_ns: int  # when they were read (_Found.time_ns)
    ns: dict[str, int] = field(default_factory=dict)
    cycles: dict[str, tuple[int, int]] = field(default_factory=dict)


class FdinfoSource(Source):
    name = FDINFO

    def __init__(self, proc: Path = Path("/proc"), sysfs: Path = Path("/sys"),
                 forget_s: float = 600.0) -> None:
        self.proc = str(proc)
        self.sysfs = Path(sysfs)
        self.forget_s = forget_s
        self._render: dict[DevT, DevT] = {}
        self._render_loaded = 0.0
        self._last: dict[ClientKey, _Last] = {}
        self._acc: dict[tuple[str, DevT], dict[str, Engine]] = {}
        self._acc_seen: dict[tuple[str, DevT], float] = {}

    # devices -----------------------------------------------------------------------

    def _load_render_map(self) -> None:
        """Every DRM minor under sysfs -> the render node of the same device."""
        self._render_loaded = time.monotonic()
        drm = self.sysfs / "class" / "drm"
        by_parent: dict[str, list[tuple[str, DevT]]] = {}
        try:
            entries = list(os.scandir(drm))
        except OSError:
            return
        for e in entries:
            if "-" in e.name:  # connectors: card0-HDMI-A-1
                continue
            try:
                with open(os.path.join(e.path, "dev")) as f:
                    devt = DevT.parse(f.read())
                parent = os.path.realpath(os.path.join(e.path, "device"))
            except (OSError, FormatError):
                continue
            by_parent.setdefault(parent, []).append((e.name, devt))
        for nodes in by_parent.values():
            render = [d for n, d in nodes if n.startswith("renderD")]
            if render:
                for _, d in nodes:
                    self._render[d] = render[0]

    def render_devt(self, devt: DevT) -> DevT:
        """The render node's number for any node of the same device."""
        r = self._render.get(devt)
        if r is None and time.monotonic() - self._render_loaded > 1.0:
            self._load_render_map()
            r = self._render.get(devt)
        return r or devt

    # the scan -------------------------------------------------------------------------

    def scan(self, errors: list[str] | None = None) -> list[_Found]:
        """Every DRM client of every process, de-duplicated."""
        proc = self.proc
        devnum = fd_devnum
        clock = self.clock
        not_drm = _NOT_DRM
        unreadable = 0
        clients: dict[ClientKey, _Found] = {}
        order: list[_Found] = []
        try:
            pids = os.listdir(proc)
        except OSError as e:
            # a pycgpu.Error (FileMissing, a FileNotFoundError, for a missing /proc)
            raise file_error(OSError(e.errno, f"cannot list {proc}: {e.strerror}")) from None
        for pid in pids:
            if not pid.isdigit():
                continue
            fddir = f"{proc}/{pid}/fd"
            try:
                fds = os.listdir(fddir)
            except PermissionError:
                unreadable += 1
                continue
            except OSError:  # exited
                continue
            cgroup = None
            for fd in fds:
                path = f"{fddir}/{fd}"
                try:
                    target = os.readlink(path)
                except OSError:
                    continue
                if not target.startswith("/dev/") or target.startswith(not_drm):
                    continue
                num = devnum(path)
                if num is None or num[0] != DRM_MAJOR:
                    continue
                where = f"{proc}/{pid}/fdinfo/{fd}"
                try:
                    t0 = clock()
                    with open(where, "rb") as f:
                        data = f.read()
                    read_ns = (t0 + clock()) // 2
                    client = parse_fdinfo(decode(data, where), where)
                except OSError:
                    continue
                except FormatError as e:
                    if errors is not None:
                        errors.append(str(e))
                    continue
                if client is None:
                    continue
                devt = self.render_devt(DevT(*num))
                ipid = int(pid)
                if client.client_id is None:  # very old kernel: one client per fd
                    key: ClientKey = ("fd", ipid, fd)
                else:
                    key = (client.pdev or devt, client.client_id)
                if cgroup is None:
                    cgroup = self._cgroup_of(pid)
                found = clients.get(key)
                if found is None:
                    found = _Found(key, client, ipid, cgroup, devt, [], time_ns=read_ns)
                    clients[key] = found
                    order.append(found)
                found.holders.append((ipid, cgroup))
        for found in order:
            if len(found.holders) > 1:  # the lowest PID owns a shared client
                found.pid, found.cgroup = min(found.holders)
            found.pids = sorted({p for p, cg in found.holders if cg == found.cgroup})
        if unreadable and errors is not None:
            errors.append(f"the file descriptors of {unreadable} processes could not be read "
                          "(permission denied): run as root to see every container")
        return order

    def _cgroup_of(self, pid: str) -> str:
        try:
            with open(f"{self.proc}/{pid}/cgroup", encoding="utf-8",
                      errors="surrogateescape") as f:
                text = f.read()
        except OSError:
            return "/"
        for line in text.splitlines():
            if line.startswith("0::"):
                return line[3:].strip() or "/"
        return "/"

    # counters -----------------------------------------------------------------------

    def _read(self, sample: Sample) -> None:
        found = self.scan(sample.errors)
        last_all: dict[ClientKey, _Last] = {}
        groups = sample.groups
        read_times: dict[str, list[int]] = {}
        spans: dict[tuple[str, DevT], list[int]] = {}
        mono = time.monotonic()
        for f in found:
            key = f.key
            c = f.client
            last = self._last.get(key)
            new = last_all[key] = _Last(time_ns=f.time_ns)
            # the client's own interval between reads: its cycles turn into
            # time over it, and its device's rates cover the mean of them
            wall_dt = f.time_ns - last.time_ns if last is not None else None
            read_times.setdefault(f.cgroup, []).append(f.time_ns)
            if wall_dt is not None:
                spans.setdefault((f.cgroup, f.devt), []).append(wall_dt)
            acc = self._acc.setdefault((f.cgroup, f.devt), {})
            self._acc_seen[(f.cgroup, f.devt)] = mono
            for name, ns in c.engines.items():
                before = last.ns.get(name) if last else None
                if before is None:
                    inc, new.ns[name] = ns, ns
                else:
                    inc, new.ns[name] = max(0, ns - before), max(ns, before)
                eng = acc.get(name)
                if eng is None:
                    eng = acc[name] = Engine()
                eng.busy_ns += inc
                eng.capacity = max(c.capacity.get(name, 1), 1)
            for name, cyc in c.cycles.items():
                total = c.total_cycles.get(name)
                if name in c.engines or total is None:
                    continue
                before_c = last.cycles.get(name) if last else None
                inc = 0
                capacity = max(c.capacity.get(name, 1), 1)
                if before_c is None:
                    new.cycles[name] = (cyc, total)
                else:
                    dc, dt = cyc - before_c[0], total - before_c[1]
                    if dc > 0 and dt > 0 and wall_dt:
                        inc = int(min(dc / dt, capacity) * wall_dt)
                    new.cycles[name] = (max(cyc, before_c[0]), max(total, before_c[1]))
                eng = acc.get(name)
                if eng is None:
                    eng = acc[name] = Engine()
                eng.busy_ns += inc
                eng.capacity = capacity
            group = groups.get(f.cgroup)
            if group is None:
                group = groups[f.cgroup] = GroupUsage(f.cgroup)
            for pid in f.pids:
                if pid not in group.pids:
                    group.pids.append(pid)
            du = group.devices.get(f.devt)
            if du is None:
                du = group.devices[f.devt] = DeviceUsage(clients=0, driver=c.driver)
                du.memory["current"] = 0
            du.clients = (du.clients or 0) + 1
            if c.curfreq or c.maxfreq:
                freq = sample.frequency.setdefault(f.devt, {})
                for name in sorted({*c.curfreq, *c.maxfreq}):
                    freq[name] = (c.curfreq.get(name), c.maxfreq.get(name))
            du.memory["current"] = (du.memory.get("current") or 0) + c.memory_bytes()
            for region, kinds in c.memory.items():
                r = du.regions.setdefault(region, {})
                for kind, v in kinds.items():
                    r[kind] = r.get(kind, 0) + v
        self._last = last_all
        for k in [k for k, t in self._acc_seen.items() if mono - t > self.forget_s]:
            del self._acc_seen[k]
            self._acc.pop(k, None)
        # a device the group used lately and has no client on now is kept,
        # with 0 clients: its counters go on, and a client that comes back
        # counts from them, not from nothing (its whole history in one interval)
        for path, devt in self._acc:
            group = groups.get(path)
            if group is not None and devt not in group.devices:
                group.devices[devt] = DeviceUsage(clients=0, memory={"current": 0})
        for group in groups.values():
            group.pids.sort()
            # its clients' reads, one after another in the scan: their mean
            times = read_times[group.path]
            group.time_ns = sum(times) // len(times)
            for devt, du in group.devices.items():
                dts = spans.get((group.path, devt))
                if dts:  # clients read in both scans (not those new or gone)
                    du.span_ns = sum(dts) // len(dts)
                acc = self._acc.get((group.path, devt), {})
                du.engines = {n: Engine(e.busy_ns, e.capacity) for n, e in sorted(acc.items())}
                du.gpu_time_ns = sum(e.busy_ns for e in acc.values())
            group.devices = dict(sorted(group.devices.items()))
