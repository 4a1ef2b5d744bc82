"""VM tier: runs as root inside the VM (tools/vm.sh) against the patched kernel."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from simgpu import render_nodes as simgpu_render_nodes
from simgpu import unload as simgpu_unload

from pycgpu.core.cgroup import Cgroup, find_mount
from pycgpu.core.drm import driver_version
from pycgpu.core.formats import DevT

if not os.environ.get("PYCGPU_IN_VM"):
    raise pytest.UsageError("the VM tier runs inside the test VM: use `make test-vm`")


RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results"

# Marks of tests that leave the kernel changed for the rest of the boot:
# i915's mock selftests taint it and leave their lock classes and memory
# behind, the KUnit suites taint it. make test runs them in the same boot
# as the rest of a base's VM tests, after everything else, in this order.
RUN_LAST = ("i915", "kunit")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        return next((n + 1 for n, mark in enumerate(RUN_LAST) if item.get_closest_marker(mark)), 0)

    items.sort(key=rank)  # stable: the rest keep their order


@pytest.fixture(scope="session")
def mount() -> Path:
    return find_mount()


@pytest.fixture(scope="session")
def robustness() -> Iterator[dict[str, dict[str, object]]]:
    """Figures of the robustness tests (inputs tried, load held, faults
    injected), one entry per test, written with the kernel they ran on to
    bench/results/robustness.json (6.12) or robustness-7.3.json (7.3) for
    the README's table; the run's splats, hung tasks and kmemleak reports
    are tools/vm.sh's to count (any fails it)."""
    figures: dict[str, dict[str, object]] = {}
    start = time.monotonic()
    yield figures
    if figures:
        debugfs = Path("/sys/kernel/debug")
        doc = {"kernel": os.uname().release,
               "kmemleak": (debugfs / "kmemleak").exists(),
               "fault_injection": (debugfs / "failslab").exists(),
               "seconds": round(time.monotonic() - start),
               "tests": figures}
        name = "robustness-7.3" if os.uname().release.startswith("7.3") else "robustness"
        (RESULTS / f"{name}.json").write_text(json.dumps(doc, indent=2) + "\n")


@pytest.fixture
def cgroup(mount: Path) -> Iterator[Cgroup]:
    """A fresh cgroup with the gpu controller enabled, removed afterwards."""
    cg = Cgroup(mount, f"pycgpu-test-{uuid.uuid4().hex[:8]}")
    cg.create()
    yield cg
    cg.remove(recursive=True)


def drm_node(driver: str, prefix: str) -> Path:
    """The first /dev/dri node named PREFIX* whose driver is DRIVER (asked
    with DRM_IOCTL_VERSION: virtual devices have no driver link in sysfs)."""
    for node in sorted(Path("/dev/dri").glob(f"{prefix}*")):
        version = driver_version(node)
        if version is not None and version.name == driver:
            return node
    raise LookupError(f"no /dev/dri/{prefix}* node of driver {driver}")


def devt_of(node: Path) -> DevT:
    st = os.stat(node)
    return DevT(os.major(st.st_rdev), os.minor(st.st_rdev))


@pytest.fixture(scope="session")
def vgem() -> DevT:
    """vgem's device key: the MAJ:MIN of its render node."""
    return devt_of(drm_node("vgem", "renderD"))


@pytest.fixture(scope="session")
def vgem_card() -> Path:
    """vgem's card node: dumb buffers are created there, charged to the
    render node's device key."""
    return drm_node("vgem", "card")


@pytest.fixture(scope="session")
def simgpu_nodes() -> list[Path]:
    """The render nodes of the simulated GPU (the out-of-tree module built by
    tools/kernel.sh ext), loaded with two devices if it is not loaded yet."""
    if not Path("/sys/module/simgpu").exists():
        ko = Path(os.environ.get("PYCGPU_EXT", "")) / "simgpu.ko"
        subprocess.run(["insmod", str(ko), "devices=2"], check=True)
    nodes = simgpu_render_nodes()
    assert nodes, "simgpu loaded but no render node of it"
    return nodes


@pytest.fixture
def reload_simgpu(simgpu_nodes) -> Iterator:
    """A function that reloads simgpu with other module parameters and
    returns its render nodes; the module is back as the session fixture
    loaded it afterwards (devices=2)."""
    ko = Path(os.environ.get("PYCGPU_EXT", "")) / "simgpu.ko"

    def load(*params: str) -> list[Path]:
        simgpu_unload()
        subprocess.run(["insmod", str(ko), *params], check=True)
        return simgpu_render_nodes()

    yield load
    load("devices=2")


@pytest.fixture(scope="session")
def gpu_dev(simgpu_nodes: list[Path]) -> DevT:
    """The device key of a device that schedules (the first simgpu), for
    per-device weights: a device without engines (vgem) refuses them."""
    return devt_of(simgpu_nodes[0])
