"""GPU shares: what the device plugin advertises and what a container that
takes some of them gets. No gRPC here.

Each GPU (render node) is advertised as N shares, device IDs
``renderD128-s0`` .. ``renderD128-s{N-1}`` of the extended resource
``pycgpu.io/gpu-share``. The kubelet counts them; the plugin turns a
container's shares into what the kernel enforces, per GPU it got shares of:

- the CDI device ``pycgpu.io/gpu=renderD128`` (the render node and its
  device-cgroup allow rule, plus the createRuntime hook of the CDI spec);
- ``pycgpu.io/gpu.weight: renderD128=W`` with W = k x weight-per-share
  (default 100: 1 share is the default weight, 3 shares are 300), so among
  sibling cgroups that use the GPU, time divides in proportion to shares
  (left out on a kernel without the gpu controller, where memory limits
  through dmem are all a share carries);
- ``pycgpu.io/gpu.memory.max: renderD128=M`` with M = size x k / N rounded
  down to 4 KiB, where the GPU's memory size is known: the operator's
  per-device size (``--device-memory renderD128=16G``), else the capacity of
  the device's region in the dmem controller (``dmem.capacity``: xe's and
  amdgpu's VRAM; on the 7.3 series the ``system`` region of a GPU whose
  buffers live in system memory, as large as that memory), else the size
  the driver reports in sysfs (amdgpu: ``device/mem_info_vram_total``), else
  the operator's default size (``--device-memory 8G``); without any, no
  memory limit. A device with several dmem regions (xe with two tiles: its
  ``vram0`` and ``vram1``) gets one limit per region, each sized from its
  capacity: ``renderD128:vram0=M0,renderD128:vram1=M1``;
- with capped shares (``--capped``, which needs the plugin's CDI spec), a
  hard cap of k/N of each engine of the GPU (gpu.max, ``k x 100 ms / N`` of
  every 100 ms), carried by the shares' CDI devices, not by an annotation:
  the hook sums the caps of the share entries it finds in the container's
  config, where a pod cannot write, so that a pod cannot lift what it was
  sold;
- where the plugin writes the CDI spec, the CDI device of each share,
  ``pycgpu.io/gpu=renderD128-s3``, whose hook entry carries the share ID to
  the hook (:mod:`pycgpu.runtime.cdi`), which records it for the exporter's
  pod labels: a share ID never travels in an annotation, which a pod could
  forge.

A configuration entry that is wrong (a share count out of range, a size
that does not parse, a device that is not there) is reported as a warning
and left out; the rest is served.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..core import formats
from ..core.errors import Error
from ..runtime import annotations as ann
from ..runtime import cdi

if TYPE_CHECKING:
    from ..core.devices import Device
    from ..core.memory import Interface

RESOURCE = "pycgpu.io/gpu-share"
DEFAULT_SHARES = 10
SHARES_MAX = 100
DEFAULT_WEIGHT_PER_SHARE = 100
PAGE = 4096
HEALTHY = "Healthy"
VRAM_FILE = "mem_info_vram_total"  # amdgpu, under the render node's device/
_ID = re.compile(r"(renderD\d+)-s(\d+)")


# said by the plugin and by inventory where weights_apply() is False
NO_WEIGHTS = ("no gpu controller in the host's cgroup tree: shares carry GPU memory limits "
              "only, no gpu.weight")


def weights_apply(cgroup_root: Path | None) -> bool:
    """Whether shares carry a weight: False only on a host's cgroup2 root
    @cgroup_root (it has dmem.capacity, which a cgroup namespace's root has
    not) whose kernel has dmem and no gpu controller, where a weight
    annotation would make the hook refuse the container; True where it
    cannot tell (None: no cgroup tree given). The one rule of the plugin's
    Allocate and of what ``inventory`` shows."""
    from ..core.cgroup import CONTROLLER, Cgroup, CgroupError

    if cgroup_root is None or not (cgroup_root / "dmem.capacity").exists():
        return True
    try:
        return CONTROLLER in Cgroup(cgroup_root).controllers()
    except CgroupError:
        return True


class ShareError(Error, ValueError):
    """A request the plugin cannot answer (unknown device ID, bad config)."""


def share_id(gpu: str, index: int) -> str:
    return f"{gpu}-s{index}"


def parse_id(text: str) -> tuple[str, int]:
    """``renderD128-s3`` -> (``renderD128``, 3)."""
    m = _ID.fullmatch(text)
    if not m:
        raise ShareError(f"device ID {formats.shown(text)} is not a pycgpu share "
                         "(renderDN-sK)")
    return m.group(1), int(m.group(2))


@dataclass(frozen=True)
class ConfigNames:
    """What the settings of a :class:`Config` are called in messages: by
    default in words; the CLI gives its options' names. (The knobs' are
    :class:`pycgpu.core.knobs.Names`.)"""

    shares: str = "shares"
    weight_per_share: str = "weight per share"
    device_memory: str = "device memory"
    device: str = "device"


@dataclass(frozen=True)
class Config:
    """Validated settings: shares per GPU, weight per share, memory sizes.
    Per-device keys are DEV texts (renderD128, card0, a PCI address)."""

    shares: int = DEFAULT_SHARES
    weight_per_share: int = DEFAULT_WEIGHT_PER_SHARE
    memory: int | None = None
    device_shares: Mapping[str, int] = field(default_factory=dict)
    device_memory: Mapping[str, int] = field(default_factory=dict)
    only: tuple[str, ...] = ()
    names: ConfigNames = field(default=ConfigNames(), compare=False)
    capped: bool = False  # each share is also a hard cap of 1/N of each engine


def _check_shares(n: int, weight_per_share: int, what: str, names: ConfigNames) -> int:
    if not 1 <= n <= SHARES_MAX:
        raise ShareError(f"{what}: {n} shares is out of range [1, {SHARES_MAX}]")
    if n * weight_per_share > formats.WEIGHT_MAX:
        raise ShareError(f"{what}: {n} shares x weight {weight_per_share} per share = "
                         f"{n * weight_per_share} exceeds the largest gpu.weight "
                         f"{formats.WEIGHT_MAX} (fix: fewer shares or a smaller "
                         f"{names.weight_per_share})")
    return n


def _count(text: str, what: str) -> int:
    """A number of shares: a whole number of at most 9 digits (:func:`formats.parse_number`)."""
    try:
        return formats.parse_number(text, what, signed=False, digits=9)
    except formats.FormatError as e:
        raise ShareError(str(e)) from None


def _size(text: str, what: str) -> int:
    try:
        value = formats.parse_size(text)
    except formats.FormatError as e:
        raise ShareError(f"{what}: {e}") from None
    if value is None or value < PAGE:
        raise ShareError(f"{what}: give the GPU's memory size (at least 4K), e.g. 16G")
    return value


def parse_config(shares: Iterable[str], weight_per_share: int, memory: Iterable[str],
                 only: Iterable[str] = (), names: ConfigNames = ConfigNames(),
                 capped: bool = False) -> tuple[Config, list[str]]:
    """The config from the texts of the settings (shares ``N`` / ``DEV=N``,
    device memory ``SIZE`` / ``DEV=SIZE``), and the warnings for the
    per-device entries left out; messages call the settings as @names
    does. A bad default (the whole plugin's) raises :class:`ShareError`."""
    warnings: list[str] = []
    if not 1 <= weight_per_share <= formats.WEIGHT_MAX:
        raise ShareError(f"{names.weight_per_share} {weight_per_share} is out of range "
                         f"[1, {formats.WEIGHT_MAX}]")
    default_n, default_mem = DEFAULT_SHARES, None
    per_n: dict[str, int] = {}
    per_mem: dict[str, int] = {}
    for raw in shares:
        dev, sep, value = raw.rpartition("=")
        what = f"{names.shares} {formats.shown(raw)}"
        if not sep:
            default_n = _check_shares(_count(value, what), weight_per_share, what, names)
            continue
        try:
            per_n[dev.strip()] = _check_shares(_count(value, what), weight_per_share, what,
                                               names)
        except ShareError as e:
            warnings.append(f"{e}; ignored")
    for raw in memory:
        dev, sep, value = raw.rpartition("=")
        what = f"{names.device_memory} {formats.shown(raw)}"
        if not sep:
            default_mem = _size(value, what)
            continue
        try:
            per_mem[dev.strip()] = _size(value, what)
        except ShareError as e:
            warnings.append(f"{e}; ignored")
    if default_n * weight_per_share > formats.WEIGHT_MAX:
        what = f"{names.weight_per_share} {weight_per_share}"
        _check_shares(default_n, weight_per_share, what, names)
    return Config(default_n, weight_per_share, default_mem, per_n, per_mem,
                  tuple(only), names, capped), warnings


@dataclass(frozen=True)
class Gpu:
    """One advertised GPU."""

    device: Device
    shares: int
    memory: int | None  # bytes, None: unknown (no memory limit)
    memory_from: str  # "device", "dmem", "sysfs", "default" or ""
    # a device with several dmem regions: (region name, capacity) each, sized
    # one by one (memory is then their sum)
    regions: tuple[tuple[str, int], ...] = ()

    @property
    def name(self) -> str:
        return self.device.name

    def ids(self) -> list[str]:
        return [share_id(self.name, i) for i in range(self.shares)]

    def weight(self, k: int, per_share: int) -> int:
        return min(k * per_share, formats.WEIGHT_MAX)

    def cap(self, k: int) -> formats.Cap:
        """The hard cap of @k shares: k/N of each engine, of every 100 ms
        (at least 1 ms: N is at most 100)."""
        period = formats.PERIOD_DEFAULT_US
        return formats.Cap(max(formats.CAP_MIN_US, min(k, self.shares) * period // self.shares),
                           period)

    def part(self, size: int, k: int) -> int:
        """@k shares of @size bytes, rounded down to a page (one page at least)."""
        return max(PAGE, size * k // self.shares // PAGE * PAGE)

    def memory_max(self, k: int) -> int | None:
        """The limit of @k shares of the device's only region (None: unknown,
        or a device with several regions: :meth:`memory_limits`)."""
        if self.memory is None or self.regions:
            return None
        return self.part(self.memory, k)

    def memory_limits(self, k: int) -> list[str]:
        """The ``DEV=SIZE`` (``DEV:REGION=SIZE``) texts of @k shares' limits."""
        if self.regions:
            return [f"{self.name}:{region}={formats.format_size_exact(self.part(size, k))}"
                    for region, size in self.regions]
        limit = self.memory_max(k)
        return [] if limit is None else [f"{self.name}={formats.format_size_exact(limit)}"]

    def memory_text(self) -> str:
        """What the plugin's log says of the memory it divides."""
        if self.regions:
            sizes = ", ".join(f"{region} {formats.format_size_human(size)}"
                              for region, size in self.regions)
            return f"memory {sizes} ({self.memory_from})"
        if self.memory is None:
            return ""
        return f"{formats.format_size_human(self.memory)} of memory ({self.memory_from})"


def vram_size(sysfs_root: Path, dev: Device) -> int | None:
    """The GPU memory size the driver reports in sysfs, if it does."""
    try:
        text = (sysfs_root / "class" / "drm" / dev.name / "device" / VRAM_FILE).read_text()
        value = int(text.strip())
    except (OSError, ValueError):
        return None
    return value if value >= PAGE else None


@dataclass
class Inventory:
    """The GPUs advertised now, by render node name."""

    config: Config
    gpus: dict[str, Gpu] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # False on a kernel with dmem and no gpu controller: shares carry memory
    # limits only (a weight annotation would make the hook refuse the container)
    weights: bool = True

    def device_ids(self) -> list[str]:
        return [i for g in self.gpus.values() for i in g.ids()]

    def weight(self, gpu: str, k: int) -> int | None:
        """The gpu.weight of @k shares of the GPU named @gpu; None where
        shares carry no weight (:attr:`weights`)."""
        if not self.weights:
            return None
        return self.gpus[gpu].weight(k, self.config.weight_per_share)

    def fingerprint(self) -> tuple[tuple[str, int, int | None,
                                         tuple[tuple[str, int], ...]], ...]:
        return tuple((g.name, g.shares, g.memory, g.regions) for g in self.gpus.values())

    def gpu_of(self, device_id: str) -> Gpu:
        name, index = parse_id(device_id)
        gpu = self.gpus.get(name)
        if gpu is None or index >= gpu.shares:
            raise ShareError(f"device ID {device_id} is not advertised (any more): "
                             f"{name} has {'no shares' if gpu is None else gpu.shares} now")
        return gpu

    def count(self, device_ids: Iterable[str]) -> dict[str, int]:
        """Shares per GPU of @device_ids (ShareError for an unknown ID)."""
        counts: dict[str, int] = {}
        for device_id in dict.fromkeys(device_ids):
            gpu = self.gpu_of(device_id)
            counts[gpu.name] = counts.get(gpu.name, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: self.gpus[kv[0]].device.devt))


def _resolve_keys(keys: Iterable[str], devices: list[Device], what: str,
                  warnings: list[str]) -> dict[str, str]:
    """DEV text -> render node name for the keys that name a present device."""
    from ..core.devices import DeviceError, resolve

    out = {}
    for key in keys:
        try:
            out[key] = resolve(key, devices).name
        except DeviceError as e:
            warnings.append(f"{what} {key}: {e}; ignored until it appears")
    return out


def _dmem_sizes(memory: Interface | None, dev: Device) -> tuple[tuple[str, int], ...]:
    """@dev's regions in dmem.capacity with their sizes (its only region:
    one entry, named ""): the regions the hook counts as the device's
    (:meth:`pycgpu.core.memory.Interface.regions_of`), so that a limit
    names a region as the hook resolves it."""
    if memory is None:
        return ()
    regions = memory.regions_of(dev.devt)
    if len(regions) == 1:
        size = regions[0].capacity
        return (("", size),) if size else ()
    return tuple((r.name or r.key, r.capacity) for r in regions if r.capacity)


def build(devices: list[Device], config: Config, sysfs_root: Path = Path("/sys"),
          memory: Interface | None = None, weights: bool = True) -> Inventory:
    """What to advertise for @devices (render nodes, in order); @memory,
    the kernel's memory interface (:func:`pycgpu.core.memory.detect`),
    gives the regions' capacities where the kernel has dmem; @weights is
    False where the kernel has no gpu controller."""
    inv = Inventory(config, weights=weights)
    if config.only:
        chosen = set(_resolve_keys(config.only, devices, config.names.device,
                                   inv.warnings).values())
        devices = [d for d in devices if d.name in chosen]
    n_of = {name: config.device_shares[k] for k, name in _resolve_keys(
        config.device_shares, devices, config.names.shares, inv.warnings).items()}
    mem_of = {name: config.device_memory[k] for k, name in _resolve_keys(
        config.device_memory, devices, config.names.device_memory, inv.warnings).items()}
    for dev in devices:
        n = n_of.get(dev.name, config.shares)
        sizes = _dmem_sizes(memory, dev)
        regions: tuple[tuple[str, int], ...] = ()
        if any(name for name, _ in sizes):  # a limit per region: a device size cannot say which
            if dev.name in mem_of:
                inv.warnings.append(
                    f"{config.names.device_memory} {dev.name}: it has several memory regions "
                    f"({', '.join(name for name, _ in sizes)}); each is sized from "
                    f"dmem.capacity instead")
            regions = sizes
            memory_size, source = sum(size for _, size in sizes), "dmem"
        elif dev.name in mem_of:
            memory_size, source = mem_of[dev.name], "device"
        elif sizes:
            memory_size, source = sizes[0][1], "dmem"
        elif (found := vram_size(sysfs_root, dev)) is not None:
            memory_size, source = found, "sysfs"
        elif config.memory is not None:
            memory_size, source = config.memory, "default"
        else:
            memory_size, source = None, ""
        inv.gpus[dev.name] = Gpu(dev, n, memory_size, source, regions)
    return inv


# GetPreferredAllocation --------------------------------------------------------------------


def preferred(inv: Inventory, available: Iterable[str], must: Iterable[str],
              size: int) -> list[str]:
    """@size IDs from @available that include @must, packed on as few GPUs
    as possible: the GPU of the must-include IDs if it has room, else the
    GPU with the fewest free shares that still holds them all (best fit,
    which keeps whole GPUs free for big requests), else the fullest GPUs
    first. IDs that are not shares of an advertised GPU come last."""
    chosen = list(dict.fromkeys(must))
    free: dict[str | None, list[str]] = {}
    for device_id in dict.fromkeys(available):
        if device_id in chosen:
            continue
        try:
            key: str | None = inv.gpu_of(device_id).name
        except ShareError:
            key = None
        free.setdefault(key, []).append(device_id)
    for ids in free.values():
        ids.sort(key=lambda i: (len(i), i))
    need = size - len(chosen)
    if need <= 0:
        return chosen
    homes = []
    for device_id in chosen:
        try:
            homes.append(inv.gpu_of(device_id).name)
        except ShareError:
            continue
    known = [g for g in free if g is not None]
    fits = sorted((g for g in known if len(free[g]) >= need),
                  key=lambda g: (g not in homes, len(free[g]), inv.gpus[g].device.devt))
    rest = sorted((g for g in known if g not in fits),
                  key=lambda g: (g not in homes, -len(free[g]), inv.gpus[g].device.devt))
    order: list[str | None] = [*fits, *rest, None]
    for g in order:
        take = free.get(g, [])[:need]
        chosen += take
        need -= len(take)
        if need == 0:
            break
    return chosen


# Allocate ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Grant:
    """What one container gets for its shares."""

    shares: dict[str, int]  # render node name -> shares taken
    cdi_devices: list[str]
    annotations: dict[str, str]


def grant(inv: Inventory, device_ids: Iterable[str], share_devices: bool = False) -> Grant:
    """The CDI devices and hook annotations for a container's @device_ids
    (ShareError if one is not advertised): the GPUs' devices and, with
    @share_devices (the plugin writes the CDI spec, which has them: see
    :func:`pycgpu.runtime.cdi.spec`), the devices of the shares, whose hook
    entries carry the share IDs to the hook."""
    ids = list(device_ids)
    if not ids:
        raise ShareError("an Allocate request without device IDs")
    counts = inv.count(ids)
    weights = [f"{name}={w}" for name, k in counts.items()
               if (w := inv.weight(name, k)) is not None]
    limits = [text for name, k in counts.items() for text in inv.gpus[name].memory_limits(k)]
    annotations = {ann.WEIGHT: ",".join(weights)} if weights else {}
    if limits:
        annotations[ann.MEMORY_MAX] = ",".join(limits)
    devices = [cdi.qualified_name(name) for name in counts]
    if share_devices:
        # for the exporter's pod labels: the hook records the IDs their entries
        # carry on the cgroup, the kubelet's PodResources API names their
        # container (k8s/podresources.py); an annotation would be a pod's to forge
        devices += [cdi.qualified_name(i) for i in sorted(
            dict.fromkeys(ids), key=lambda i: (inv.gpu_of(i).device.devt, parse_id(i)[1]))]
    return Grant(counts, devices, annotations)
