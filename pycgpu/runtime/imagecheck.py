"""Does a container image's GPU user space fit this host's GPU kernel drivers?

The 2017 proposal's "compare the image's libraries with the host, refuse on
mismatch". :func:`scan` finds the GPU user-space drivers in a root file
system by their file names (nothing in the image is executed or opened):

- Mesa: DRI drivers ``dri/*_dri.so`` (iris, crocus, i915, radeonsi, ...)
  and the Gallium megadriver ``libgallium-VERSION.so`` / ``libgallium_dri.so``
- libdrm: ``libdrm.so.X.Y.Z``, ``libdrm_intel.so.X.Y.Z``, ...
- Intel media driver (VA-API): ``iHD_drv_video.so`` (and i965's)
- Intel compute runtime: ``libigdrcl.so`` (OpenCL), ``libze_intel_gpu.so.VERSION``
- NVIDIA: ``libcuda.so.VERSION``, ``libnvidia-*.so.VERSION``, ``libGLX_nvidia.so.VERSION``

Symbolic links are never followed out of the root file system: a link is
judged by its own name, and directories reached through links are skipped.

:func:`host` reads the kernel side: the drivers of the render nodes
(:mod:`pycgpu.core.devices`) and the NVIDIA kernel module's version
(``/proc/driver/nvidia/version``, else ``/sys/module/nvidia/version``).

:func:`check` applies the rules:

- NVIDIA: the user-space version must equal the kernel module's (the
  driver's user and kernel halves share one version and refuse each other
  otherwise); an image without NVIDIA libraries is fine (the NVIDIA
  container toolkit injects the host's);
- Intel (``i915`` or ``xe``): the image needs a Mesa driver for it: iris,
  crocus or i915 (Gen2-3) for i915, iris for xe, or the Gallium megadriver.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.capabilities import Finding

if TYPE_CHECKING:
    from ..core.devices import Device
    from ..core.formats import DevT

IMAGE_CHECK_V1 = "pycgpu.image-check/v1"

MESA_DRI, MESA_GALLIUM, LIBDRM = "mesa-dri", "mesa-gallium", "libdrm"
INTEL_MEDIA, INTEL_COMPUTE, NVIDIA = "intel-media", "intel-compute", "nvidia"
KINDS = (MESA_DRI, MESA_GALLIUM, LIBDRM, INTEL_MEDIA, INTEL_COMPUTE, NVIDIA)

OK, MISMATCH, INFO = "ok", "mismatch", "info"

# where shared libraries live, relative to the root file system
LIBRARY_DIRS = ("lib", "lib64", "lib32", "usr/lib", "usr/lib64", "usr/lib32",
                "usr/local/lib", "usr/local/lib64", "opt")

_NV_VERSION = r"(\d{3,}\.\d+(?:\.\d+)?)"  # 535.104.05, 550.54: not egl-wayland's 1.1.11
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (MESA_GALLIUM, re.compile(r"(libgallium)-(\d+\.\d+(?:\.\d+)?)[^/]*\.so")),
    (MESA_GALLIUM, re.compile(r"(libgallium)_dri\.so()")),
    (LIBDRM, re.compile(r"(libdrm(?:_\w+)?)\.so\.(\d+\.\d+\.\d+)")),
    (INTEL_MEDIA, re.compile(r"(iHD|i965)_drv_video\.so()")),
    (INTEL_COMPUTE, re.compile(r"(libigdrcl)\.so()")),
    (INTEL_COMPUTE, re.compile(r"(libze_intel_gpu)\.so\.(\d+(?:\.\d+)+)")),
    (NVIDIA, re.compile(r"(libcuda|libnvcuvid|libnvoptix|libnvidia-[\w.-]+?"
                        r"|lib(?:GLX|EGL|GLESv2|GLESv1_CM)_nvidia)\.so\." + _NV_VERSION)),
]
_DRI = re.compile(r"(\w+)_dri\.so")

# Mesa drivers that drive each Intel kernel driver
INTEL_MESA = {"i915": ("iris", "crocus", "i915"), "xe": ("iris",)}


@dataclass(frozen=True, order=True)
class Component:
    """One GPU user-space driver file in the image."""

    kind: str
    name: str
    version: str | None
    path: str  # absolute inside the image

    def describe(self) -> str:
        return self.name + (f" {self.version}" if self.version else "")


@dataclass(frozen=True)
class Host:
    """The kernel side: render nodes and the NVIDIA kernel module."""

    devices: tuple[Device, ...] = ()
    nvidia_version: str | None = None


@dataclass
class Report:
    rootfs: Path
    components: list[Component]
    host: Host
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(f.status == MISMATCH for f in self.findings)

    def mismatches(self) -> list[Finding]:
        return [f for f in self.findings if f.status == MISMATCH]


# the image ------------------------------------------------------------------------


def _match(name: str, parent: str) -> tuple[str, str, str | None] | None:
    if parent == "dri":
        m = _DRI.fullmatch(name)
        if m and m.group(1) not in ("libgallium", "libdril"):
            return MESA_DRI, m.group(1), None
    for kind, pattern in _PATTERNS:
        m = pattern.fullmatch(name)
        if m:
            return kind, m.group(1), m.group(2) or None
    return None


def _inside(rootfs: Path, rel: str) -> Path | None:
    """rootfs/rel if no component of @rel is a symbolic link (a link could
    lead out of the image, to the host's files)."""
    path = rootfs
    for part in Path(rel).parts:
        path = path / part
        if path.is_symlink() or not path.is_dir():
            return None
    return path


def scan(rootfs: Path) -> list[Component]:
    """The GPU user-space drivers in the image at @rootfs, sorted."""
    found: set[Component] = set()
    seen: set[tuple[int, int]] = set()
    for rel in LIBRARY_DIRS:
        top = _inside(rootfs, rel)
        if top is None:
            continue
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            st = os.stat(dirpath)
            if (st.st_dev, st.st_ino) in seen:  # a bind mount or a directory seen before
                dirnames.clear()
                continue
            seen.add((st.st_dev, st.st_ino))
            parent = os.path.basename(dirpath)
            for name in filenames:
                hit = _match(name, parent)
                if hit:
                    inner = "/" + os.path.relpath(os.path.join(dirpath, name), rootfs)
                    found.add(Component(hit[0], hit[1], hit[2], inner))
    return sorted(found)


# the host -------------------------------------------------------------------------

_NVRM = re.compile(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)")


def nvidia_kernel_version(proc_root: Path = Path("/proc"),
                          sysfs_root: Path = Path("/sys")) -> str | None:
    """The loaded NVIDIA kernel module's version, or None."""
    try:
        m = _NVRM.search((proc_root / "driver" / "nvidia" / "version").read_text())
        if m:
            return m.group(1)
    except OSError:
        pass
    try:
        text = (sysfs_root / "module" / "nvidia" / "version").read_text().strip()
    except OSError:
        return None
    return text or None


def host(sysfs_root: Path = Path("/sys"), dev_root: Path = Path("/dev"),
         proc_root: Path = Path("/proc")) -> Host:
    from ..core.devices import discover

    return Host(tuple(discover(sysfs_root, dev_root)),
                nvidia_kernel_version(proc_root, sysfs_root))


# the rules ------------------------------------------------------------------------


def _nvidia(components: list[Component], host: Host) -> list[Finding]:
    libs = [c for c in components if c.kind == NVIDIA]
    versions = sorted({c.version for c in libs if c.version})
    kernel = host.nvidia_version
    if not versions:
        if kernel:
            return [Finding(NVIDIA, INFO, f"the host runs NVIDIA kernel module {kernel}; the "
                            "image has no NVIDIA user space (the NVIDIA container toolkit "
                            "injects the host's)")]
        return []
    names = ", ".join(sorted({c.name for c in libs}))
    keep = ("or leave the NVIDIA libraries out of the image and let the NVIDIA container "
            "toolkit inject the host's")
    if len(versions) > 1:
        return [Finding(NVIDIA, MISMATCH,
                        f"the image mixes NVIDIA user-space versions {', '.join(versions)} "
                        f"({names})",
                        f"rebuild the image with one driver version ({kernel or 'the host'}'s), "
                        + keep)]
    version = versions[0]
    if kernel is None:
        return [Finding(NVIDIA, MISMATCH,
                        f"the image has NVIDIA user space {version} ({names}) but the host has "
                        "no NVIDIA kernel module loaded",
                        f"run it on a host with NVIDIA driver {version}, " + keep)]
    if version != kernel:
        return [Finding(NVIDIA, MISMATCH,
                        f"NVIDIA user space {version} in the image does not match the host's "
                        f"kernel module {kernel} ({names})",
                        f"install NVIDIA driver {kernel}'s user space in the image, " + keep)]
    return [Finding(NVIDIA, OK, f"NVIDIA user space {version} matches the kernel module")]


def _intel(components: list[Component], gpus: list[Device]) -> list[Finding]:
    dri = {c.name for c in components if c.kind == MESA_DRI}
    gallium = sorted(c.describe() for c in components if c.kind == MESA_GALLIUM)
    others = sorted({c.name for c in components if c.kind in (INTEL_COMPUTE, INTEL_MEDIA)})
    findings = []
    for dev in gpus:
        assert dev.driver is not None
        wanted = INTEL_MESA[dev.driver]
        have = [name for name in wanted if name in dri]
        what = f"{dev.name} ({dev.driver}"
        what += f", {dev.pci_address})" if dev.pci_address else ")"
        if have:
            findings.append(Finding("intel", OK, f"{what}: Mesa {', '.join(have)}"))
        elif gallium:
            findings.append(Finding("intel", OK, f"{what}: Mesa {', '.join(gallium)}"))
        else:
            present = sorted(dri) + others
            also = f" (found: {', '.join(present)})" if present else ""
            findings.append(Finding(
                "intel", MISMATCH,
                f"{what} needs a Mesa driver ({' or '.join(wanted)}, or libgallium) and the "
                f"image has none{also}",
                "install Mesa's DRI drivers in the image (Debian/Ubuntu: libgl1-mesa-dri; "
                "Fedora: mesa-dri-drivers; Alpine: mesa-dri-gallium)"))
    return findings


def check(rootfs: Path, host: Host, devts: set[DevT] | None = None) -> Report:
    """Scan @rootfs and compare with @host; only the render nodes in @devts
    count when given (the container's own GPUs)."""
    components = scan(rootfs)
    gpus = [d for d in host.devices if devts is None or d.devt in devts]
    report = Report(rootfs, components, host)
    report.findings += _nvidia(components, host)
    report.findings += _intel(components, [d for d in gpus if d.driver in INTEL_MESA])
    if not components:
        report.findings.append(Finding("image", INFO,
                                       "no GPU user-space drivers found in the image"))
    return report


# the JSON document ----------------------------------------------------------------

_STR_OR_NULL = {"type": ["string", "null"]}

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": IMAGE_CHECK_V1,
    "type": "object",
    "required": ["schema", "ok", "rootfs", "host", "image", "findings"],
    "properties": {
        "schema": {"const": IMAGE_CHECK_V1},
        "ok": {"type": "boolean"},
        "rootfs": {"type": "string"},
        "host": {
            "type": "object",
            "required": ["render_nodes", "nvidia_kernel_version"],
            "properties": {
                "render_nodes": {"type": "array", "items": {
                    "type": "object",
                    "required": ["render_node", "devt", "driver", "pci_address"],
                    "properties": {"render_node": {"type": "string"},
                                   "devt": {"type": "string", "pattern": r"^[0-9]+:[0-9]+$"},
                                   "driver": _STR_OR_NULL, "pci_address": _STR_OR_NULL}}},
                "nvidia_kernel_version": _STR_OR_NULL,
            },
        },
        "image": {"type": "array", "items": {
            "type": "object",
            "required": ["kind", "name", "version", "path"],
            "properties": {"kind": {"enum": list(KINDS)}, "name": {"type": "string"},
                           "version": _STR_OR_NULL, "path": {"type": "string"}}}},
        "findings": {"type": "array", "items": {
            "type": "object",
            "required": ["id", "status", "message", "fix"],
            "properties": {"id": {"enum": ["nvidia", "intel", "image"]},
                           "status": {"enum": [OK, MISMATCH, INFO]},
                           "message": {"type": "string"}, "fix": _STR_OR_NULL}}},
    },
}


def to_json(report: Report) -> dict[str, Any]:
    """The ``pycgpu.image-check/v1`` document (:data:`SCHEMA`)."""
    return {
        "schema": IMAGE_CHECK_V1,
        "ok": report.ok,
        "rootfs": str(report.rootfs),
        "host": {
            "render_nodes": [{"render_node": str(d.render_node), "devt": str(d.devt),
                              "driver": d.driver, "pci_address": d.pci_address}
                             for d in report.host.devices],
            "nvidia_kernel_version": report.host.nvidia_version,
        },
        "image": [{"kind": c.kind, "name": c.name, "version": c.version, "path": c.path}
                  for c in report.components],
        "findings": [{"id": f.id, "status": f.status, "message": f.message, "fix": f.fix}
                     for f in report.findings],
    }


def summary(report: Report) -> str:
    """One line for an error message: the mismatches."""
    return "; ".join(f.message for f in report.mismatches()) or "no mismatch"
