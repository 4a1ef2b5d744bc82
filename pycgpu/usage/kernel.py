"""The kernel source: the gpu controller's own counters, per cgroup.

One refresh walks the cgroup tree and reads, for every group with the gpu
controller enabled, ``gpu.stat``, ``gpu.memory.{current,max,peak,events}``,
``gpu.weight``, ``gpu.priority`` and ``gpu.priority.effective`` through the
parsers of :mod:`pycgpu.formats`. The walk is cheap on hosts with thousands
of containers:

- a group without ``gpu.stat`` has no gpu-enabled descendants (the
  controller must be enabled in each parent), so the walk stops there;
- on cgroupfs (kernfs) a directory's link count is 2 + its number of
  sub-directories, so leaf groups (nearly all of them) are never listed:
  one ``stat`` instead of a ``scandir`` of their ~80 interface files;
- files are opened relative to the group's directory (``openat``: no walk
  of the long path of a Kubernetes container per file) and read with one
  ``read`` each, no ``pathlib``;
- the parse of a set of file texts is cached: idle containers have the same
  texts, and most texts do not change from one refresh to the next.

``gpu.stat`` counters are hierarchical: an inner group's usage includes its
children's. :attr:`GroupUsage.leaf` tells the groups apart. The root cgroup
has only ``gpu.stat`` and ``gpu.memory.current``, with each device's totals
(the root's own and the kernel's work included): they go to
:attr:`Sample.totals`, not to a group.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .. import formats
from ..cgroup import read_interface
from . import KERNEL, DeviceUsage, GroupUsage, Sample, Source, SourceError

_O_FLAGS = os.O_RDONLY | os.O_CLOEXEC
_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | getattr(os, "O_PATH", 0)

# every file read, in order; gpu.stat first (its absence ends the group)
FILES = ("gpu.stat", "gpu.memory.current", "gpu.memory.max", "gpu.memory.peak",
         "gpu.memory.events", "gpu.weight", "gpu.priority", "gpu.priority.effective")
_CACHE_MAX = 4096


def _read(name: str, dir_fd: int) -> str | None:
    """The text of file @name in the directory @dir_fd, or None if it does not exist."""
    return read_interface(name, dir_fd)


@dataclass
class _Parsed:
    """What one set of file texts says, shared by the groups that have the same texts."""

    devices: dict[formats.DevT, DeviceUsage]
    priority: int | None
    priority_effective: int | None
    error: str | None


def _parse(texts: tuple[str | None, ...]) -> _Parsed:
    stat, current, max_, peak, events, weight, priority, effective = texts
    devices: dict[formats.DevT, DeviceUsage] = {}

    def dev(d: formats.DevT) -> DeviceUsage:
        du = devices.get(d)
        if du is None:
            du = devices[d] = DeviceUsage()
        return du

    fname = FILES[0]
    prio = prio_eff = None
    try:
        for d, keys in formats.parse_nested_keyed(stat or "").items():
            du = dev(d)
            du.gpu_time_ns = keys.get("usage_usec", 0) * 1000
            du.wait_ns = keys.get("wait_usec", 0) * 1000
        if current is not None:
            fname = FILES[1]
            for d, v in formats.parse_flat_keyed(current).items():
                dev(d).memory["current"] = v or 0
            fname = FILES[2]
            for d, v in formats.parse_flat_keyed(max_ or "").items():
                dev(d).memory["max"] = v
            fname = FILES[3]
            for d, v in formats.parse_flat_keyed(peak or "").items():
                dev(d).memory["peak"] = v or 0
            fname = FILES[4]
            for d, keys in formats.parse_nested_keyed(events or "").items():
                dev(d).memory["limit_hits"] = keys.get("max", 0)
        if weight is not None:
            fname = FILES[5]
            weights = formats.parse_weight(weight)
            for d, du in devices.items():
                du.weight = weights.for_device(d)
        if priority is not None:
            fname = FILES[6]
            prio = formats.parse_int(priority, fname)
        if effective is not None:
            fname = FILES[7]
            prio_eff = formats.parse_int(effective, fname)
    except formats.FormatError as e:
        return _Parsed(dict(sorted(devices.items())), prio, prio_eff, f"{fname}: {e}")
    return _Parsed(dict(sorted(devices.items())), prio, prio_eff, None)


class KernelSource(Source):
    """Samples of this source share DeviceUsage objects between groups whose
    files read the same (idle containers): treat samples as read-only."""

    name = KERNEL

    def __init__(self, mount: Path) -> None:
        self.mount = Path(mount)
        self._parsed: dict[tuple[str | None, ...], _Parsed] = {}

    def _read(self, sample: Sample) -> None:
        root = str(self.mount)
        groups = sample.groups
        stack = [(root, "")]
        if len(self._parsed) > _CACHE_MAX:
            self._parsed.clear()
        self._totals(root, sample)
        while stack:
            dirpath, rel = stack.pop()
            try:
                with os.scandir(dirpath) as it:
                    subdirs = [(e.name, e.path) for e in it if e.is_dir(follow_symlinks=False)]
            except OSError as e:
                if not rel:
                    raise SourceError(e.errno or 0, f"cannot list {root}: {e.strerror}") from None
                continue  # removed while we walked
            parent = groups.get(rel)
            for name, path in subdirs:
                child_rel = f"{rel}/{name}"
                try:
                    dfd = os.open(path, _O_DIR)
                except OSError:
                    continue  # removed while we walked
                try:
                    group = self._group(dfd, path, child_rel, sample)
                    if group is None:
                        continue  # no gpu.* here, so none below either
                    nlink = os.stat(dfd).st_nlink
                except OSError as e:
                    sample.error(f"{path}: {e.strerror}", child_rel)
                    continue
                finally:
                    os.close(dfd)
                groups[child_rel] = group
                if parent is not None:
                    parent.leaf = False
                if nlink != 2:  # sub-directories (or a file system that does not count)
                    stack.append((path, child_rel))

    def _totals(self, root: str, sample: Sample) -> None:
        """The devices' totals from the root's files, where the kernel has them."""
        try:
            dfd = os.open(root, _O_DIR)
        except OSError as e:
            raise SourceError(e.errno or 0, f"cannot open {root}: {e.strerror}") from None
        try:
            stat = _read(FILES[0], dfd)
            # a mount of a non-root cgroup (a cgroup namespace) has knobs at its
            # top: its counters are its own, not the device's totals
            if stat is None or _read("gpu.weight", dfd) is not None:
                return
            texts = (stat, _read(FILES[1], dfd), None, None, None, None, None, None)
        except OSError as e:
            sample.error(f"{root}: {e.strerror or e}")
            return
        finally:
            os.close(dfd)
        parsed = _parse(texts)
        if parsed.error is not None:
            sample.error(f"{root}/{parsed.error}")
        sample.totals = parsed.devices

    def _group(self, dfd: int, path: str, rel: str, sample: Sample) -> GroupUsage | None:
        stat = _read(FILES[0], dfd)
        if stat is None:
            return None
        texts = (stat, *(_read(f, dfd) for f in FILES[1:]))
        parsed = self._parsed.get(texts)
        if parsed is None:
            parsed = self._parsed[texts] = _parse(texts)
        if parsed.error is not None:
            sample.error(f"{path}/{parsed.error}", rel)
        return GroupUsage(rel, priority=parsed.priority,
                          priority_effective=parsed.priority_effective,
                          devices=parsed.devices)
