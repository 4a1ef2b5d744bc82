"""GPU devices: DRM render nodes, what drives them, and turning the names
users type into the ``MAJ:MIN`` key of the gpu controller's files.

Discovery enumerates the ``drm`` subsystem through pyudev (``DEVNAME``
``/dev/dri/renderD*``) and falls back to reading sysfs directly
(``/sys/class/drm/renderD*``) when libudev is unavailable or when a sysfs
root other than ``/sys`` is given (the host tests' fake trees). Either way
the details come from the node's sysfs directory:

- ``dev``: ``MAJ:MIN`` of the render node, the controller's device key
- ``device``: the parent device; its directory name is the PCI address for
  PCI GPUs (``0000:00:02.0``), ``device/vendor`` and ``device/device`` its IDs,
  and names the device's dmem regions (``drm/0000:00:02.0/system``)
- ``device/driver``: the bound driver. Virtual devices have none that names
  the GPU driver: vgem's platform device (6.12) has no driver link, its faux
  device (6.16 and later, bus ``faux``) links the bus's one generic
  ``faux_driver``. With ``query_driver``, the name then comes from
  DRM_IOCTL_VERSION when the node can be opened
- ``device/drm/card*``: the card (primary) node of the same device
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .errors import Error
from .formats import DevT, FormatError, shown

SYSFS_ROOT = Path("/sys")
DEV_ROOT = Path("/dev")

_PCI = re.compile(r"(?:([0-9a-fA-F]{4}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])")


class DeviceError(Error, LookupError):
    """A device name that matches no render node; the message lists the known ones."""


@dataclass(frozen=True)
class Device:
    """One DRM device with a render node."""

    render_node: Path
    card_node: Path | None
    devt: DevT
    driver: str | None = None
    driver_version: str | None = None
    pci_address: str | None = None
    vendor_id: str | None = None
    device_id: str | None = None
    # the name of the DRM device's parent (a PCI address, a platform device's
    # name): the DRM core's "unique", which names the device's dmem regions
    parent: str | None = None

    @property
    def name(self) -> str:
        return self.render_node.name

    def describe(self) -> str:
        """``renderD128 (226:128, i915, 0000:00:02.0)``"""
        extra = [str(self.devt)] + [x for x in (self.driver, self.pci_address) if x]
        return f"{self.name} ({', '.join(extra)})"


def label(devt: DevT, names: Mapping[DevT, str]) -> str:
    """How human-readable output names a device where its key matters:
    the render node with its MAJ:MIN, ``renderD128 (226:128)``; the MAJ:MIN
    alone for a device without a known render node (@names: render node
    names by device number)."""
    name = names.get(devt)
    return f"{name} ({devt})" if name else str(devt)


# Buses whose devices all bind one generic driver: its name says nothing
# about the GPU driver (faux: vgem and other virtual devices since 6.16).
_GENERIC_BUSES = frozenset({"faux"})


def _link_name(path: Path) -> str | None:
    """The last component of symlink @path's target; None if no symlink."""
    try:
        return Path(os.readlink(path)).name
    except OSError:
        return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def normalize_pci(text: str) -> str | None:
    """``00:02.0`` -> ``0000:00:02.0``; None if @text is not a PCI address."""
    m = _PCI.fullmatch(text.strip())
    if not m:
        return None
    domain, bus, slot, func = m.groups()
    return f"{domain or '0000'}:{bus}:{slot}.{func}".lower()


def _from_sysfs(sysdir: Path, devnode: Path) -> Device | None:
    """A Device from a render node's sysfs directory, or None if it has no
    readable device number."""
    try:
        devt = DevT.parse(_read(sysdir / "dev") or "")
    except FormatError:
        return None
    parent = sysdir / "device"
    cards = sorted(
        (p.name for p in (parent / "drm").glob("card*") if re.fullmatch(r"card\d+", p.name)),
        key=lambda n: int(n[4:]),
    )
    driver = _link_name(parent / "driver")
    if _link_name(parent / "subsystem") in _GENERIC_BUSES:
        driver = None
    try:
        parent_name = parent.resolve(strict=True).name
    except OSError:
        parent_name = ""
    pci = normalize_pci(parent_name) if _PCI.fullmatch(parent_name) else None
    return Device(
        render_node=devnode,
        card_node=devnode.with_name(cards[0]) if cards else None,
        devt=devt,
        driver=driver,
        pci_address=pci,
        vendor_id=_read(parent / "vendor") if pci else None,
        device_id=_read(parent / "device") if pci else None,
        parent=parent_name or None,
    )


def _sysfs_nodes(sysfs_root: Path, dev_root: Path) -> list[tuple[Path, Path]]:
    drm = sysfs_root / "class" / "drm"
    if not drm.is_dir():
        return []
    return [(p, dev_root / "dri" / p.name) for p in drm.iterdir()
            if re.fullmatch(r"renderD\d+", p.name)]


def _udev_nodes() -> list[tuple[Path, Path]] | None:
    try:
        import pyudev

        context = pyudev.Context()
        found = []
        for dev in context.list_devices(subsystem="drm"):
            node = dev.device_node
            if node and re.fullmatch(r"renderD\d+", Path(node).name):
                found.append((Path(dev.sys_path), Path(node)))
        return found
    except Exception:  # no libudev, no /run/udev: the sysfs fallback answers
        return None


def discover(
    sysfs_root: Path = SYSFS_ROOT,
    dev_root: Path = DEV_ROOT,
    *,
    query_driver: bool = False,
) -> list[Device]:
    """Every render node, ordered by minor number. With @query_driver, open
    each node to ask its driver's name and version (nodes that cannot be
    opened keep driver_version None)."""
    nodes = None
    if sysfs_root == SYSFS_ROOT and dev_root == DEV_ROOT:
        nodes = _udev_nodes()
    if not nodes:
        nodes = _sysfs_nodes(sysfs_root, dev_root)
    devices = [d for d in (_from_sysfs(s, n) for s, n in nodes) if d is not None]
    devices.sort(key=lambda d: d.devt)
    if query_driver:
        devices = [_with_driver(d) for d in devices]
    return devices


def _with_driver(dev: Device) -> Device:
    from . import drm  # cffi is imported only when a node is opened

    version = drm.driver_version(dev.render_node)
    if version is None:
        return dev
    from dataclasses import replace

    return replace(dev, driver=dev.driver or version.name, driver_version=version.version)


def _known(devices: Iterable[Device]) -> str:
    listed = ", ".join(d.describe() for d in devices)
    return f"known devices: {listed}" if listed else "no DRM render nodes found on this host"


def resolve(text: str, devices: list[Device]) -> Device:
    """The device @text names: ``renderD128``, ``/dev/dri/renderD128``,
    ``card0``, a PCI address (``0000:00:02.0`` or ``00:02.0``) or ``226:128``.
    Raises :class:`DeviceError` naming @text and listing the known devices."""
    t = text.strip()

    def pick(match: list[Device], what: str) -> Device:
        if len(match) == 1:
            return match[0]
        if len(match) > 1:  # one PCI function with several render nodes: be explicit
            raise DeviceError(
                f"{what} {shown(t)} has several render nodes; name one: "
                + ", ".join(d.describe() for d in match)
            )
        raise DeviceError(f"unknown device {shown(t)}; {_known(devices)}")

    if re.fullmatch(r"\d+:\d+", t):
        return pick([d for d in devices if str(d.devt) == t], "device number")
    pci = normalize_pci(t)
    if pci is not None:
        return pick([d for d in devices if d.pci_address == pci], "PCI device")
    if "/" in t:
        return pick(_by_path(Path(t), devices), "device node")
    if re.fullmatch(r"card\d+", t):
        match = [d for d in devices if d.card_node is not None and d.card_node.name == t]
        return pick(match, "card")
    return pick([d for d in devices if d.name == t], "render node")


def _by_path(path: Path, devices: list[Device]) -> list[Device]:
    """Devices whose render or card node is @path, following symlinks
    (``/dev/dri/by-path/pci-0000:00:02.0-render``) and, for real nodes, the
    device number of the character device."""
    candidates = {path, Path(os.path.normpath(path))}
    with contextlib.suppress(OSError):
        candidates.add(path.resolve(strict=True))
    match = [d for d in devices if d.render_node in candidates or d.card_node in candidates]
    if match:
        return match
    try:
        st = os.stat(path)
    except OSError:
        return []
    import stat

    if not stat.S_ISCHR(st.st_mode):
        return []
    devt = DevT(os.major(st.st_rdev), os.minor(st.st_rdev))
    return [d for d in devices if d.devt == devt]
