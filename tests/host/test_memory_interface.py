"""pycgpu.core.memory: which memory interface a kernel has, its regions and
the names users give them, on fake cgroup roots."""

from __future__ import annotations

import pytest

from pycgpu.core import memory
from pycgpu.core.formats import DevT
from pycgpu.core.memory import DMEM, GPU_MEMORY, DeviceRef, Region, RegionError

R128, R129, R130 = DevT(226, 128), DevT(226, 129), DevT(226, 130)
DEVICES = [DeviceRef(R128, "0000:03:00.0"), DeviceRef(R129, "vgem"), DeviceRef(R130, "simgpu.0")]
NAMES = {"renderD128": R128, "renderD129": R129, "renderD130": R130, "226:128": R128,
         "226:129": R129, "226:130": R130, "0000:03:00.0": R128}


def resolve(text: str) -> DevT:
    if text not in NAMES:
        raise memory.RegionError(f"no device {text}")  # any pycgpu Error, as devices.resolve's
    return NAMES[text]


def root_612(tmp_path):
    (tmp_path / "gpu.memory.current").write_text("226:128 0\n226:129 4096\n226:131 0\n")
    (tmp_path / "cgroup.controllers").write_text("cpu io memory gpu\n")
    return tmp_path


def root_73(tmp_path, capacity: str, controllers: str = "cpu memory dmem gpu\n"):
    (tmp_path / "cgroup.controllers").write_text(controllers)
    (tmp_path / "dmem.capacity").write_text(capacity)
    return tmp_path


CAPACITY = ("drm/0000:03:00.0/vram0 17163091968\ndrm/0000:03:00.0/stolen 67108864\n"
            "drm/vgem/system 8318820352\ndrm/simgpu.0/system 8318820352\n"
            "drm/0000:09:00.0/vram 1073741824\n")


def test_gpu_memory_has_one_region_per_device(tmp_path):
    iface = memory.detect(root_612(tmp_path), DEVICES)
    assert iface is not None and iface.kind == GPU_MEMORY
    # the devices the root's file lists (226:131: no render node found) and the render nodes
    assert [r.key for r in iface.regions] == ["226:128", "226:129", "226:130", "226:131"]
    assert iface.file("max") == "gpu.memory.max"
    r = iface.resolve("renderD129", resolve)
    assert r == Region("226:129", "226:129", R129)
    assert (r.file("max"), r.write(2 << 30)) == ("gpu.memory.max", "226:129 2147483648")
    assert r.write(None) == "226:129 max"
    assert iface.region_of(R129) == r
    with pytest.raises(RegionError, match="no memory region 'vram0'"):
        iface.resolve("renderD129:vram0", resolve)


def test_dmem_regions_are_named_by_device_and_region(tmp_path):
    iface = memory.detect(root_73(tmp_path, CAPACITY), DEVICES)
    assert iface is not None and iface.kind == DMEM
    assert iface.file("events.local") == "dmem.events.local"
    keys = {r.key: r for r in iface.regions}
    # one region: the device's key alone, as under gpu.memory.*; several: DEV:REGION;
    # none of a render node (a PCI device without one): dmem's name
    assert sorted(keys) == ["226:128:stolen", "226:128:vram0", "226:129", "226:130",
                            "drm/0000:09:00.0/vram"]
    assert keys["226:129"] == Region("226:129", "drm/vgem/system", R129, "system", 8318820352,
                                     DMEM)
    assert keys["226:129"].file("max") == "dmem.max"
    assert keys["226:129"].write(4096) == "drm/vgem/system 4096"
    assert iface.region_of(R129) == keys["226:129"]
    with pytest.raises(RegionError, match="several memory regions"):
        iface.region_of(R128)
    assert keys["226:128:vram0"].capacity == 17163091968
    assert keys["drm/0000:09:00.0/vram"].dev is None


@pytest.mark.parametrize(("text", "key"), [
    ("renderD129", "226:129"), ("226:129", "226:129"), ("drm/vgem/system", "226:129"),
    ("renderD128:vram0", "226:128:vram0"), ("226:128:stolen", "226:128:stolen"),
    ("0000:03:00.0:vram0", "226:128:vram0"), ("drm/0000:03:00.0/stolen", "226:128:stolen"),
    ("drm/0000:09:00.0/vram", "drm/0000:09:00.0/vram"), (" renderD130 ", "226:130"),
])
def test_resolve(tmp_path, text, key):
    iface = memory.detect(root_73(tmp_path, CAPACITY), DEVICES)
    assert iface is not None
    assert iface.resolve(text, resolve).key == key


@pytest.mark.parametrize(("text", "message"), [
    ("renderD128", "several memory regions: give one of renderD128:stolen, renderD128:vram0"),
    ("renderD128:vram7", "no memory region 'vram7'; it has stolen, vram0"),
    ("renderD129:vram0", "no memory region 'vram0'; it has system"),
    ("renderD999", "no device renderD999"),
    ("renderD999:vram0", "no device renderD999"),
])
def test_resolve_says_what_exists(tmp_path, text, message):
    iface = memory.detect(root_73(tmp_path, CAPACITY), DEVICES)
    assert iface is not None
    with pytest.raises(RegionError, match=message):
        iface.resolve(text, resolve)


def test_a_device_without_a_region(tmp_path):
    """Stock dmem: the DRM core registers nothing, a GEM driver has no region."""
    iface = memory.detect(root_73(tmp_path, "drm/0000:03:00.0/vram0 1024\n"), DEVICES)
    assert iface is not None
    with pytest.raises(RegionError, match="no memory region this kernel counts"):
        iface.resolve("renderD129", resolve)
    assert iface.resolve("renderD128", resolve).key == "226:128"  # its only region


def test_keyed_translates_kernel_keys(tmp_path):
    iface = memory.detect(root_73(tmp_path, CAPACITY), DEVICES)
    assert iface is not None
    values = {"drm/vgem/system": 4096, "drm/0000:03:00.0/vram0": None, "drm/new/system": 1}
    assert iface.keyed(values) == {"226:129": 4096, "226:128:vram0": None,
                                   "drm/new/system": 1}


def test_neither_interface(tmp_path):
    (tmp_path / "cgroup.controllers").write_text("cpu memory gpu\n")
    assert memory.detect(tmp_path, DEVICES) is None
    assert memory.detect(tmp_path / "absent", DEVICES) is None


def test_bad_capacity_names_the_file(tmp_path):
    from pycgpu.core.cgroup import CgroupError

    with pytest.raises(CgroupError, match=r"dmem\.capacity"):
        memory.detect(root_73(tmp_path, "drm/vgem/system lots\n"), DEVICES)
