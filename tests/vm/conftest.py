"""VM tier: runs as root inside the VM (tools/vm.sh) against the patched kernel."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pycgpu.cgroup import Cgroup, find_mount
from pycgpu.formats import DevT

if not os.environ.get("PYCGPU_IN_VM"):
    raise pytest.UsageError("the VM tier runs inside the test VM: use `make test-vm`")


@pytest.fixture(scope="session")
def mount() -> Path:
    return find_mount()


@pytest.fixture
def cgroup(mount: Path) -> Iterator[Cgroup]:
    """A fresh cgroup with the gpu controller enabled, removed afterwards."""
    cg = Cgroup(mount, f"pycgpu-test-{uuid.uuid4().hex[:8]}")
    cg.create()
    yield cg
    cg.remove(recursive=True)


def render_node(driver: str) -> tuple[Path, DevT]:
    for sysdev in sorted(Path("/sys/class/drm").glob("renderD*")):
        drv = sysdev / "device" / "driver"
        if drv.exists() and drv.resolve().name == driver:
            st = os.stat(f"/dev/dri/{sysdev.name}")
            return Path(f"/dev/dri/{sysdev.name}"), DevT(os.major(st.st_rdev), os.minor(st.st_rdev))
    raise LookupError(f"no render node of driver {driver}")


@pytest.fixture(scope="session")
def vgem() -> DevT:
    return render_node("vgem")[1]
