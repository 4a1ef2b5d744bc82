"""The kernel source: the gpu controller's own counters, per cgroup.

One refresh walks the cgroup tree and reads, for every group with the gpu
controller enabled, the files of :data:`pycgpu.core.model.USAGE_FILES`
(``gpu.stat``, ``gpu.memory.{current,max,peak,events}``, ``gpu.weight``,
``gpu.priority``, ``gpu.priority.effective`` and ``gpu.max``) by
:func:`pycgpu.core.model.read_texts`, with the parsers of the model's
files: a :class:`~pycgpu.monitoring.GroupUsage` is a projection of the
model, by device. The walk is cheap on hosts with thousands
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
  texts, and an idle container's texts do not change from one refresh to the
  next; a working container's counters (gpu.stat, gpu.memory.current, ...)
  change at every refresh, so they are parsed by one regular expression per
  file (the kernel's exact format; anything else goes to the general
  parsers), while its settings files are parsed once per text.

On a kernel whose GPU memory is dmem's (:mod:`pycgpu.core.memory`), the
memory files read are ``dmem.{current,max,peak,events}`` instead, each line
of a device's only region rekeyed by the device's ``MAJ:MIN``, so that the
rest reads them as gpu.memory.*'s. The regions of a device with several
(xe's ``vram0`` and ``vram1`` on a card with two tiles) go to
:attr:`DeviceUsage.memory_regions`, by region name, and the device's
``current`` and ``limit_hits`` are their sums (a limit or a peak is a
region's own). :attr:`Sample.capacity` has every region's size.

``gpu.stat`` counters are hierarchical: an inner group's usage includes its
children's. :attr:`GroupUsage.leaf` tells the groups apart. The root cgroup
has only ``gpu.stat`` and ``gpu.memory.current``, with each device's totals
(the root's own and the kernel's work included): they go to
:attr:`Sample.totals`, not to a group.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias, TypeVar

from ..core import formats, model
from ..core.cgroup import read_interface
from ..core.memory import DMEM, Interface
from . import KERNEL, DeviceUsage, GroupUsage, Sample, Source, SourceError

_O_FLAGS = os.O_RDONLY | os.O_CLOEXEC
_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | getattr(os, "O_PATH", 0)

# every file read, in order; gpu.stat first (its absence ends the group)
FILES = model.USAGE_FILES
_PARSE = {name: model.FILE[name].parse for name in FILES}
_CACHE_MAX = 4096


def _read(name: str, dir_fd: int) -> str | None:
    """The text of file @name in the directory @dir_fd, or None if it does not exist."""
    return read_interface(name, dir_fd)


# The kernel writes these files in one shape: a text in exactly that shape is
# read by one regular expression (a busy node's counters change at every
# refresh, so these texts are parsed, not found in the cache); any other text
# goes to the model's parsers (pycgpu.core.model.FILES), which also word the errors.
# Digits are ASCII only and as long as formats accepts, so both read the same.
_D = r"[0-9]{1,10}:[0-9]{1,10}"
_N = r"[0-9]{1,20}"
# gpu.stat as the series writes it: sched= since the policy's report, the
# throttling counters since gpu.max
_STAT_KEYS = (rf"usage_usec={_N} wait_usec={_N}(?: sched=[0-9]{{1,3}})?"
              rf"(?: nr_periods={_N} nr_throttled={_N} throttled_usec={_N})?")
_STAT = re.compile(rf"(?:{_D} {_STAT_KEYS}\n)*")
_STAT_LINE = re.compile(rf"({_D}) usage_usec=({_N}) wait_usec=({_N})(?: sched=[0-9]{{1,3}})?"
                        rf"(?: nr_periods=({_N}) nr_throttled=({_N}) throttled_usec=({_N}))?\n")
_FLAT = re.compile(rf"(?:{_D} (?:{_N}|max)\n)*")
_FLAT_LINE = re.compile(rf"({_D}) ({_N}|max)\n")
_EVENTS = re.compile(rf"(?:{_D} max={_N}\n)*")
_EVENTS_LINE = re.compile(rf"({_D}) max=({_N})\n")


_DEVTS: dict[str, formats.DevT] = {}


def _devt(text: str) -> formats.DevT:
    """The device of a MAJ:MIN the fast patterns matched (range-checked once)."""
    devt = _DEVTS.get(text)
    if devt is None:
        devt = formats.DevT.parse(text)
        if len(_DEVTS) < 256:
            _DEVTS[text] = devt
    return devt


# gpu.stat of one device: GPU time and wait time in ns, and where the kernel
# has gpu.max, its periods, throttled periods and time throttled (ns)
_Stat: TypeAlias = tuple[int, int, int | None, int | None, int | None]


def _or_none(text: str, scale: int = 1) -> int | None:
    return int(text) * scale if text else None


def _scaled(value: int | None, scale: int) -> int | None:
    return None if value is None else value * scale


def _stat(text: str) -> dict[formats.DevT, _Stat]:
    """gpu.stat: device -> its counters (:data:`_Stat`)."""
    if _STAT.fullmatch(text):
        return {_devt(d): (int(u) * 1000, int(w) * 1000, _or_none(p), _or_none(t),
                           _or_none(tu, 1000))
                for d, u, w, p, t, tu in _STAT_LINE.findall(text)}
    return {d: (keys.get("usage_usec", 0) * 1000, keys.get("wait_usec", 0) * 1000,
                keys.get("nr_periods"), keys.get("nr_throttled"),
                _scaled(keys.get("throttled_usec"), 1000))
            for d, keys in _PARSE["gpu.stat"](text).items()}


def _set_stat(du: DeviceUsage, stat: _Stat) -> None:
    du.gpu_time_ns, du.wait_ns, du.periods, du.throttled, du.throttled_ns = stat


def _flat(text: str) -> dict[formats.DevT, int | None]:
    """gpu.memory.{current,max,peak}: device -> bytes (None: max)."""
    if _FLAT.fullmatch(text):
        return {_devt(d): None if v == formats.MAX else int(v)
                for d, v in _FLAT_LINE.findall(text)}
    return _PARSE["gpu.memory.current"](text)  # type: ignore[no-any-return]


def _limit_hits(text: str) -> dict[formats.DevT, int]:
    """gpu.memory.events: device -> max=N."""
    if _EVENTS.fullmatch(text):
        return {_devt(d): int(v) for d, v in _EVENTS_LINE.findall(text)}
    return {d: keys.get("max", 0) for d, keys in _PARSE["gpu.memory.events"](text).items()}


# dmem's files read in place of gpu.memory.{current,max,peak,events}
_DMEM_READ = ("current", "max", "peak", "events")


def _rekeyed(text: str | None, rekey: dict[str, str]) -> str | None:
    """A dmem file's text with the lines of @rekey's regions keyed by their
    device (``drm/vgem/system 4096`` -> ``226:129 4096``), the rest dropped."""
    if text is None:
        return None
    out = []
    for line in text.splitlines():
        region, sep, rest = line.partition(" ")
        key = rekey.get(region)
        if key is not None and sep:
            out.append(f"{key} {rest}\n")
    return "".join(out)


# a device with several regions: dmem's name of a region -> (device, region name)
_Regions: TypeAlias = dict[str, tuple[formats.DevT, str]]
_REGION_KEYS = ("current", "max", "peak", "limit_hits")


def _region_lines(text: str | None, regions: _Regions) -> str | None:
    """The lines of @text (a dmem file) of @regions' regions."""
    if not text or not regions:
        return None
    return "".join(line + "\n" for line in text.splitlines()
                   if line.partition(" ")[0] in regions) or None


class _RegionLineError(formats.FormatError):
    """A region's line that does not parse, in the file @index of the four."""

    def __init__(self, index: int, error: formats.FormatError) -> None:
        super().__init__(str(error))
        self.index = index


def _add_regions(devices: dict[formats.DevT, DeviceUsage], texts: tuple[str | None, ...],
                 regions: _Regions) -> None:
    """The regions' lines of dmem.{current,max,peak,events} (@texts, in
    that order) into the devices' memory_regions, with the device's sums;
    _RegionLineError for a line that does not parse."""
    found: dict[formats.DevT, dict[str, dict[str, int | None]]] = {}
    for index, (what, text) in enumerate(zip(_REGION_KEYS, texts, strict=False)):
        if not text:
            continue
        values: dict[str, int | None]
        try:
            if what == "limit_hits":
                values = {k: v.get("max", 0)
                          for k, v in formats.parse_region_nested_keyed(text).items()}
            else:
                values = formats.parse_region_keyed(text)
        except formats.FormatError as e:
            raise _RegionLineError(index, e) from None
        for key, v in values.items():
            dev, name = regions[key]
            found.setdefault(dev, {}).setdefault(name, {})[what] = (
                v if what == "max" else v or 0)
    for dev in sorted(found):
        du = devices.setdefault(dev, DeviceUsage())
        du.memory_regions = dict(sorted(found[dev].items()))
        for what in ("current", "limit_hits"):
            counts = [m[what] or 0 for m in du.memory_regions.values() if what in m]
            if counts:
                du.memory[what] = sum(counts)


@dataclass
class _Parsed:
    """What one set of file texts says, shared by the groups that have the same texts."""

    devices: dict[formats.DevT, DeviceUsage]
    priority: formats.Priority | None
    priority_effective: int | None
    error: str | None


_T = TypeVar("_T")
# a file's parse, its error, or None: the file is not there
_Piece: TypeAlias = _T | formats.FormatError | None


def _try(parse: Callable[[str], _T], text: str | None) -> _Piece[_T]:
    if text is None:
        return None
    try:
        return parse(text)
    except formats.FormatError as e:
        return e


def _ok(piece: _Piece[_T]) -> _T | None:
    if isinstance(piece, formats.FormatError):
        raise piece
    return piece


def _ok_priority(piece: _Piece[formats.Priority]) -> formats.Priority | None:
    """:func:`_ok` of gpu.priority's parse (a union of its own, which _T
    does not take apart)."""
    if isinstance(piece, formats.FormatError):
        raise piece
    return piece


@dataclass(frozen=True)
class _Settings:
    """A group's settings files parsed: gpu.memory.max, gpu.weight,
    gpu.priority[.effective], gpu.max. They change when someone writes them, not as
    the group works, so their parse is cached by their texts while the
    counters' files are parsed at every refresh. A file that does not parse
    holds its error, raised where :func:`_parse` reaches it."""

    max: _Piece[dict[formats.DevT, int | None]]
    weight: _Piece[formats.Weights]
    priority: _Piece[formats.Priority]
    effective: _Piece[int]
    caps: _Piece[formats.Caps]


def _settings(max_: str | None, weight: str | None, priority: str | None,
              effective: str | None, caps: str | None) -> _Settings:
    return _Settings(_try(_flat, max_ or ""), _try(_PARSE["gpu.weight"], weight),
                     _try(_PARSE["gpu.priority"], priority),
                     _try(_PARSE["gpu.priority.effective"], effective),
                     _try(_PARSE["gpu.max"], caps))


_SettingsCache = dict[tuple[str | None, ...], _Settings]


def _parse(texts: tuple[str | None, ...], cache: _SettingsCache | None = None,
           names: tuple[str, ...] = FILES) -> _Parsed:
    key = texts[2], texts[5], texts[6], texts[7], texts[8]
    settings = cache.get(key) if cache is not None else None
    if settings is None:
        settings = _settings(*key)
        if cache is not None:
            cache[key] = settings
    try:
        return _parse_valid(texts, settings)
    except formats.FormatError:
        return _parse_in_order(texts, settings, names)


def _parse_valid(texts: tuple[str | None, ...], settings: _Settings) -> _Parsed:
    """:func:`_parse` of texts that all parse (FormatError otherwise): each
    file read whole, then one DeviceUsage per device."""
    stat, current, _, peak, events, weight, priority, effective, max_ = texts
    st = _stat(stat or "")
    none: dict[formats.DevT, Any] = {}
    cur = mx = pk = ev = none
    if current is not None:
        cur, mx, pk, ev = (_flat(current), _ok(settings.max) or none, _flat(peak or ""),
                           _limit_hits(events or ""))
    weights = _ok(settings.weight) if weight is not None else None
    prio = _ok_priority(settings.priority) if priority is not None else None
    prio_eff = _ok(settings.effective) if effective is not None else None
    caps = _ok(settings.caps) if max_ is not None else None
    keys = st.keys() | cur.keys() | mx.keys() | pk.keys() | ev.keys()
    devices: dict[formats.DevT, DeviceUsage] = {}
    for d in sorted(keys):
        du = devices[d] = DeviceUsage()
        if d in st:
            _set_stat(du, st[d])
        memory = du.memory
        if d in cur:
            memory["current"] = cur[d] or 0
        if d in mx:
            memory["max"] = mx[d]
        if d in pk:
            memory["peak"] = pk[d] or 0
        if d in ev:
            memory["limit_hits"] = ev[d]
        if weights is not None:
            du.weight = weights.for_device(d)
        if caps is not None:
            du.cap = caps.for_device(d)
    return _Parsed(devices, prio, prio_eff, None)


def _parse_in_order(texts: tuple[str | None, ...], settings: _Settings,
                    names: tuple[str, ...] = FILES) -> _Parsed:
    """:func:`_parse` file by file in the order of @names, up to the first
    that does not parse: what was read before it is kept, with the error."""
    stat, current, _, peak, events, weight, priority, effective, max_ = texts
    devices: dict[formats.DevT, DeviceUsage] = {}

    def dev(d: formats.DevT) -> DeviceUsage:
        du = devices.get(d)
        if du is None:
            du = devices[d] = DeviceUsage()
        return du

    fname = names[0]
    prio: formats.Priority | None = None
    prio_eff: int | None = None
    try:
        for d, counters in _stat(stat or "").items():
            _set_stat(dev(d), counters)
        if current is not None:
            fname = names[1]
            for d, v in _flat(current).items():
                dev(d).memory["current"] = v or 0
            fname = names[2]
            for d, v in (_ok(settings.max) or {}).items():
                dev(d).memory["max"] = v
            fname = names[3]
            for d, v in _flat(peak or "").items():
                dev(d).memory["peak"] = v or 0
            fname = names[4]
            for d, hits in _limit_hits(events or "").items():
                dev(d).memory["limit_hits"] = hits
        if weight is not None:
            fname = names[5]
            weights = _ok(settings.weight)
            assert weights is not None
            for d, du in devices.items():
                du.weight = weights.for_device(d)
        if priority is not None:
            fname = names[6]
            prio = _ok_priority(settings.priority)
        if effective is not None:
            fname = names[7]
            prio_eff = _ok(settings.effective)
        if max_ is not None:
            fname = names[8]
            caps = _ok(settings.caps)
            assert caps is not None
            for d, du in devices.items():
                du.cap = caps.for_device(d)
    except formats.FormatError as e:
        return _Parsed(dict(sorted(devices.items())), prio, prio_eff, f"{fname}: {e}")
    return _Parsed(dict(sorted(devices.items())), prio, prio_eff, None)


class KernelSource(Source):
    """Samples of this source share DeviceUsage objects between groups whose
    files read the same (idle containers): treat samples as read-only."""

    name = KERNEL

    def __init__(self, mount: Path, regions: Interface | None = None,
                 redetect: Callable[[], Interface | None] | None = None) -> None:
        """@regions: the kernel's memory interface (pycgpu.core.memory.detect);
        with dmem, the memory files read are dmem's. @redetect gives it
        again when the root's dmem.capacity changes (a GPU that came or
        went: its region with it)."""
        self.mount = Path(mount)
        self._parsed: dict[tuple[str | None, ...], _Parsed] = {}
        self._settings: _SettingsCache = {}
        self._redetect = redetect
        self._capacity: str | None = None
        self._use(regions)

    def _use(self, regions: Interface | None) -> None:
        self._names = FILES
        self._rekey: dict[str, str] | None = None
        self._regions: _Regions = {}
        self._sizes: dict[formats.DevT, dict[str, int]] = {}
        if regions is not None and regions.kind == DMEM:
            self._names = (FILES[0], *(regions.file(w) for w in _DMEM_READ), *FILES[5:])
            self._rekey = {r.kernel_key: r.key for r in regions.regions
                           if r.dev is not None and r.key == str(r.dev)}
            self._regions = {r.kernel_key: (r.dev, r.name) for r in regions.regions
                             if r.dev is not None and r.name and r.key != str(r.dev)}
            self._capacity = "".join(f"{r.kernel_key} {r.capacity}\n" for r in regions.regions
                                     if r.capacity is not None)
            for r in regions.regions:
                if r.dev is not None and r.name and r.capacity is not None:
                    self._sizes.setdefault(r.dev, {})[r.name] = r.capacity

    def _regions_changed(self, dfd: int) -> None:
        """Detects the regions again when dmem.capacity lists others than before."""
        if self._redetect is None or self._rekey is None:
            return
        text = _read("dmem.capacity", dfd)
        if text is not None and sorted(text.splitlines()) != sorted(
                (self._capacity or "").splitlines()):
            self._use(self._redetect())
            self._parsed.clear()

    def _texts(self, stat: str, dfd: int, names: tuple[str, ...]
               ) -> tuple[tuple[str | None, ...], tuple[str | None, ...]]:
        """The files' texts (dmem's: the lines of devices with one region,
        rekeyed), and the lines of the regions of devices with several."""
        texts = (stat, *model.read_texts(dfd, names).values())
        if self._rekey is None:
            return texts, ()
        memory = texts[1:5]
        return ((texts[0], *(_rekeyed(t, self._rekey) for t in memory), *texts[5:]),
                tuple(_region_lines(t, self._regions) for t in memory))

    def _parse(self, texts: tuple[str | None, ...], regions: tuple[str | None, ...],
               cache: _SettingsCache | None = None) -> _Parsed:
        """The parse of a group's (the root's) texts, the regions' lines included."""
        parsed = _parse(texts, cache, self._names)
        if any(regions):
            try:
                _add_regions(parsed.devices, regions, self._regions)
            except _RegionLineError as e:
                if parsed.error is None:
                    parsed.error = f"{self._names[1 + e.index]} (a region): {e}"
        return parsed

    def _read(self, sample: Sample) -> None:
        root = str(self.mount)
        groups = sample.groups
        stack = [(root, "")]
        if len(self._parsed) > _CACHE_MAX:
            self._parsed.clear()
        if len(self._settings) > _CACHE_MAX:
            self._settings.clear()
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
            self._regions_changed(dfd)
            sample.capacity = self._sizes
            stat = _read(FILES[0], dfd)
            # a mount of a non-root cgroup (a cgroup namespace) has knobs at its
            # top: its counters are its own, not the device's totals
            if stat is None or _read("gpu.weight", dfd) is not None:
                return
            texts, regions = self._texts(stat, dfd, self._names[1:2])
        except OSError as e:
            sample.error(f"{root}: {e.strerror or e}")
            return
        finally:
            os.close(dfd)
        texts = (*texts, None, None, None, None, None, None, None)
        parsed = self._parse(texts, regions)
        if parsed.error is not None:
            sample.error(f"{root}/{parsed.error}")
        sample.totals = parsed.devices

    def _group(self, dfd: int, path: str, rel: str, sample: Sample) -> GroupUsage | None:
        t0 = self.clock()
        stat = _read(FILES[0], dfd)
        if stat is None:
            return None
        read_ns = (t0 + self.clock()) // 2
        texts, regions = self._texts(stat, dfd, self._names[1:])
        key = (*texts, *regions)
        parsed = self._parsed.get(key)
        if parsed is None:
            parsed = self._parsed[key] = self._parse(texts, regions, self._settings)
        if parsed.error is not None:
            sample.error(f"{path}/{parsed.error}", rel)
        return GroupUsage(rel, priority=parsed.priority,
                          priority_effective=parsed.priority_effective,
                          devices=parsed.devices, time_ns=read_ns)
