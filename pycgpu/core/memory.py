"""GPU buffer memory under one vocabulary, over the kernel's two interfaces.

- The gpu controller of the 6.12 series: ``gpu.memory.{max,current,peak,
  events,events.local}``, keyed by the render node's ``MAJ:MIN``; the DRM
  core charges every GEM buffer to its creator's cgroup.
- The dmem controller (Linux 6.14 and later): ``dmem.{max,min,low,current,
  peak}`` and the root's ``dmem.capacity``, keyed by *region*,
  ``drm/<parent>/<region>``, ``<parent>`` the name of the DRM device's parent
  (a PCI address, a platform device's name). Upstream, only TTM drivers with
  VRAM register regions (xe ``vram0``, ``vram1``... per tile; amdgpu and
  nouveau ``vram``) and charge what they place there; the 7.3 series adds
  i915's local memory (``local0``) and simgpu's simulated ``vram``, and a region
  ``system`` for every device whose driver has none, charges its GEM
  buffers there as 6.12 charges gpu.memory.*, and adds ``dmem.events`` and
  ``dmem.events.local``.

A kernel has one of them (the 7.3 series has no gpu.memory.*).
:func:`detect` says which, and lists its regions: one per device under
gpu.memory.*, dmem's under dmem. pycgpu names a region by its *key*: the
device's ``MAJ:MIN`` (``226:128``) when the region is the device's only one
(every device under gpu.memory.*; most under dmem: the core's ``system``,
amdgpu's ``vram``), ``MAJ:MIN:REGION`` (``226:128:vram0``) when the device
has several, dmem's own name for a region no render node owns. So a
device with one region reads and is set alike on both kernels. A region
that ``dmem.capacity`` gives as 0 holds nothing and is not counted among
its device's (:func:`holds_memory`): xe's 8G ``vram0`` beside an empty
region is the device's only region, as the device plugin
(:mod:`pycgpu.k8s.shares`) sizes it. Users type a
device as everywhere (``renderD128``, ``card0``, a PCI address,
``226:128``), with ``:REGION`` for one of several regions
(``renderD128:vram0``), or dmem's name of a region.
"""

from __future__ import annotations

import errno
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

from . import formats
from .cgroup import READ, CgroupError, read_interface
from .errors import Error
from .formats import DevT

GPU_MEMORY, DMEM = "gpu.memory", "dmem"
V = TypeVar("V")

# a region's name after its device: dmem's regions are drm/<parent>/<name>
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


def holds_memory(capacity: int | None) -> bool:
    """Whether a region of this capacity counts among its device's regions:
    all but those ``dmem.capacity`` gives as 0, which can hold nothing (None:
    unknown, as under gpu.memory.*). The one rule of what a device's regions
    are, for naming them (a device's only region takes the device's key),
    for resolving a device to its region, and for the device plugin's
    shares."""
    return capacity != 0


class RegionError(Error, LookupError):
    """A memory region that this kernel does not have; the message lists those it has."""


@dataclass(frozen=True)
class Region:
    """One memory region: what pycgpu calls it and what the kernel's files do."""

    key: str  # pycgpu's name: "226:128", "226:128:vram0", or dmem's name
    kernel_key: str  # the key in the interface files: "226:128", "drm/vgem/system"
    dev: DevT | None  # the render node's device number, None if no render node owns it
    name: str | None = None  # dmem's region name after the device ("system", "vram0")
    capacity: int | None = None  # from dmem.capacity; None under gpu.memory.*
    kind: str = GPU_MEMORY  # the interface that counts it: GPU_MEMORY or DMEM

    def file(self, what: str) -> str:
        """The interface file of @what for this region: ``max`` ->
        ``gpu.memory.max`` or ``dmem.max``."""
        return f"{self.kind}.{what}"

    def write(self, value: int | None) -> str:
        """The line that sets this region's value in :meth:`file`."""
        return formats.format_region_keyed_write(self.kernel_key, formats.check_size(value))


@dataclass(frozen=True)
class Interface:
    """The memory interface of this kernel and its regions."""

    kind: str  # GPU_MEMORY or DMEM
    regions: tuple[Region, ...]

    @property
    def prefix(self) -> str:
        return f"{self.kind}."

    def file(self, what: str) -> str:
        """The interface file of @what: ``max`` -> ``gpu.memory.max`` or ``dmem.max``."""
        return self.prefix + what

    def by_kernel_key(self) -> dict[str, Region]:
        return {r.kernel_key: r for r in self.regions}

    def keyed(self, values: Mapping[str, V] | Mapping[DevT, V]) -> dict[str, V]:
        """A parsed interface file's values by pycgpu's keys; a key the
        region list does not know (a device or region that came after
        :func:`detect`) keeps the kernel's name."""
        known = self.by_kernel_key()
        out: dict[str, V] = {}
        for k, v in values.items():
            region = known.get(str(k))
            out[region.key if region else str(k)] = v
        return out

    def of_device(self, dev: DevT) -> list[Region]:
        """Every region of @dev, empty ones included (they can be named)."""
        return [r for r in self.regions if r.dev == dev]

    def regions_of(self, dev: DevT) -> list[Region]:
        """The regions of @dev that count (:func:`holds_memory`): one is
        the device's only region, several need a name."""
        return [r for r in self.of_device(dev) if holds_memory(r.capacity)]

    def resolve(self, text: str, resolve_device: Callable[[str], DevT]) -> Region:
        """The region a user names: a device (its only region), DEVICE:REGION,
        a key, or dmem's name of a region. Raises :class:`RegionError`, or
        what @resolve_device raises for an unknown device."""
        text = text.strip()
        by_key = {r.key: r for r in self.regions}
        if text in by_key:
            return by_key[text]
        if text in self.by_kernel_key():
            return self.by_kernel_key()[text]
        try:
            return self._only_region(resolve_device(text), text)
        except Error:
            device_text, sep, name = text.rpartition(":")
            if not sep or not _NAME.fullmatch(name) or not device_text:
                raise
        dev = resolve_device(device_text)
        for region in self.of_device(dev):
            if region.name == name:
                return region
        raise RegionError(f"{device_text} ({dev}) has no memory region {name!r}; "
                          f"{self._listing(dev)}")

    def _only_region(self, dev: DevT, text: str) -> Region:
        regions = self.regions_of(dev)
        if len(regions) == 1:
            return regions[0]
        if not regions:
            raise RegionError(f"{text} ({dev}) has no memory region this kernel counts"
                              + ("" if self.kind == GPU_MEMORY else
                                 " (dmem.capacity lists none of it: a driver without a"
                                 " region, on a kernel without the series' GEM charging)"))
        names = ", ".join(f"{text}:{r.name}" for r in regions)
        raise RegionError(f"{text} ({dev}) has several memory regions: give one of {names}")

    def _listing(self, dev: DevT) -> str:
        names = [r.name for r in self.of_device(dev) if r.name]
        return f"it has {', '.join(names)}" if names else "it has none"

    def region_of(self, dev: DevT) -> Region:
        """@dev's only region; :class:`RegionError` if it has none or several."""
        return self._only_region(dev, str(dev))


class DeviceLike(Protocol):
    """What :func:`detect` needs of a device (:class:`pycgpu.core.devices.Device` has it)."""

    @property
    def devt(self) -> DevT: ...

    @property
    def parent(self) -> str | None: ...


@dataclass(frozen=True)
class DeviceRef:
    """A :class:`DeviceLike` of its own, for callers without a Device."""

    devt: DevT
    parent: str | None


def label(key: str, names: Mapping[DevT, str]) -> str:
    """How text output names a region key where it matters (@names: render
    node names by device number): ``renderD128 (226:128)``,
    ``renderD128:vram0 (226:128)``, dmem's name of a region no render node
    owns as it is."""
    head, sep, name = key.rpartition(":")
    try:
        dev = formats.DevT.parse(head if sep and _NAME.fullmatch(name) else key)
    except formats.FormatError:
        return key
    region = f":{name}" if sep and _NAME.fullmatch(name) else ""
    node = names.get(dev)
    return f"{node}{region} ({dev})" if node else f"{dev}{region}"


def _dmem_regions(capacity: Mapping[str, int | None],
                  devices: Iterable[DeviceLike]) -> tuple[Region, ...]:
    owner: dict[str, DevT] = {d.parent: d.devt for d in devices if d.parent}
    parsed: list[tuple[str, DevT | None, str | None, int | None]] = []
    for kernel_key, size in capacity.items():
        head, _, name = kernel_key.rpartition("/")
        bus, _, parent = head.partition("/")
        dev = owner.get(parent) if bus == "drm" and _NAME.fullmatch(name) else None
        parsed.append((kernel_key, dev, name if dev else None, size))
    count: dict[DevT, int] = {}
    for _, dev, _, size in parsed:
        if dev is not None and holds_memory(size):
            count[dev] = count.get(dev, 0) + 1
    out = []
    for kernel_key, dev, region, size in parsed:
        # one region: the device's key; several (or an empty one): DEV:REGION;
        # no render node: dmem's name
        key = (kernel_key if dev is None else
               str(dev) if holds_memory(size) and count[dev] == 1 else f"{dev}:{region}")
        out.append(Region(key, kernel_key, dev, region, size, DMEM))
    return tuple(sorted(out, key=lambda r: (r.dev is None, r.dev or DevT(0, 0), r.key)))


def detect(root: Path, devices: Iterable[DeviceLike]) -> Interface | None:
    """The memory interface of the kernel whose cgroup2 root is @root, with
    its regions (@devices: the render nodes, to name dmem's regions); None
    when it has neither. :class:`pycgpu.core.cgroup.CgroupError` when a
    file cannot be read."""
    devices = list(devices)
    current = read_interface(str(root / "gpu.memory.current"))
    if current is not None:
        try:
            keys = set(formats.parse_flat_keyed(current)) | {d.devt for d in devices}
        except formats.FormatError as e:
            raise _unreadable(root / "gpu.memory.current", e) from None
        return Interface(GPU_MEMORY, tuple(Region(str(d), str(d), d) for d in sorted(keys)))
    controllers = read_interface(str(root / "cgroup.controllers"))
    if controllers is None or DMEM not in controllers.split():
        return None
    text = read_interface(str(root / "dmem.capacity")) or ""
    try:
        capacity = formats.parse_region_keyed(text)
    except formats.FormatError as e:
        raise _unreadable(root / "dmem.capacity", e) from None
    return Interface(DMEM, _dmem_regions(capacity, devices))


def _unreadable(path: Path, e: formats.FormatError) -> CgroupError:
    return CgroupError(errno.EINVAL, f"reading {path}: {e}", READ, path)
