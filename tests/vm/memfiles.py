"""The GPU memory files of the kernel under test, for the tests that read and
write them directly: gpu.memory.* keyed by the render node's MAJ:MIN on the
6.12 series, dmem.* keyed by the device's GEM region on the 7.3 series, where
the DRM core charges GEM buffers to the dmem controller ("drm/<unique>/system",
<unique> the name of the DRM device's parent, as in /sys/class/drm/*/device)."""

from __future__ import annotations

import os
from pathlib import Path

from pycgpu.core import formats
from pycgpu.core.cgroup import Cgroup

DMEM = os.environ.get("PYCGPU_BASE", "6.12") != "6.12"
PREFIX = "dmem." if DMEM else "gpu.memory."
# the memory files of the root cgroup, besides gpu.stat
ROOT_FILES = ["dmem.capacity", "dmem.current"] if DMEM else ["gpu.memory.current"]


def gem_key(render_node: Path, devt: formats.DevT) -> str:
    """The key of the device's GEM buffers in the memory files."""
    if not DMEM:
        return str(devt)
    unique = Path(f"/sys/class/drm/{render_node.name}/device").resolve().name
    return f"drm/{unique}/system"


class MemFiles:
    """The memory files of one device, by key."""

    def __init__(self, key: str) -> None:
        self.key = key

    def __str__(self) -> str:
        return self.key

    @staticmethod
    def name(what: str) -> str:
        return PREFIX + what

    def get(self, cg: Cgroup, what: str) -> int | None:
        """max, current or peak; None for max."""
        text = cg.read(self.name(what))
        values = formats.parse_region_keyed(text)
        return values[self.key]

    def events(self, cg: Cgroup, local: bool = False) -> int:
        text = cg.read(self.name("events.local" if local else "events"))
        return formats.parse_region_nested_keyed(text)[self.key]["max"]

    def set_max(self, cg: Cgroup, value: str) -> None:
        cg.write(self.name("max"), f"{self.key} {value}")
