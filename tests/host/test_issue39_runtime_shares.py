"""The device plugin and the hook agree (issue 39): which of a device's dmem
regions count (item 2: a region of zero capacity holds nothing, for the
plugin's sizes and the hook's single-region rule alike), and whether shares
carry a weight (item 8: one rule for the plugin's Allocate and
``pycgpu k8s inventory``)."""

from __future__ import annotations

import json

import pytest
from conftest import Cli, FakeKernel

from pycgpu.core.devices import discover, resolve
from pycgpu.core.memory import detect
from pycgpu.k8s import shares as sh
from pycgpu.runtime import annotations as ann

GIB = 1 << 30
# renderD128 (i915 at 0000:00:02.0 in fake_sysfs): 8G of vram0 and a region
# of size 0; renderD129 (vgem): its system region
ZERO = {"drm/0000:00:02.0/vram0": 8 * GIB, "drm/0000:00:02.0/stolen": 0,
        "drm/vgem/system": 16 * GIB}


@pytest.fixture
def zero(tmp_path, monkeypatch, fake_sysfs) -> Cli:
    fake = FakeKernel(tmp_path, memory=False, dmem=ZERO).install(monkeypatch)
    return Cli(fake, *fake_sysfs)


def test_a_region_of_zero_capacity_does_not_count(zero, fake_sysfs):
    devices = discover(*fake_sysfs)
    memory = detect(zero.fake.root, devices)
    assert memory is not None
    keys = {r.kernel_key: r.key for r in memory.regions}
    # vram0 is the device's only region that holds memory: the device's key
    assert keys == {"drm/0000:00:02.0/vram0": "226:128",
                    "drm/0000:00:02.0/stolen": "226:128:stolen",
                    "drm/vgem/system": "226:129"}


def test_allocate_asks_for_a_limit_the_hook_takes(zero, fake_sysfs):
    devices = discover(*fake_sysfs)
    memory = detect(zero.fake.root, devices)
    inv = sh.build(devices, sh.parse_config(["2"], 100, [])[0], fake_sysfs[0], memory)
    annotations = sh.grant(inv, ["renderD128-s0"]).annotations
    assert annotations[ann.MEMORY_MAX] == "renderD128=4G"
    request = ann.parse(annotations, lambda t: resolve(t, devices).devt,
                        memory=lambda: memory)
    assert {r.kernel_key: v for r, v in request.settings.memory_max.items()} == {
        "drm/0000:00:02.0/vram0": 4 * GIB}


def test_the_cli_takes_the_device_for_its_only_region(zero):
    zero("create", "a", "--memory-max", "renderD128=1G")
    lines = (zero.fake.root / "a" / "dmem.max").read_text().splitlines()
    assert "drm/0000:00:02.0/vram0 1073741824" in lines
    assert "drm/0000:00:02.0/stolen max" in lines


def test_two_regions_that_hold_memory_still_need_a_name(tmp_path, monkeypatch, fake_sysfs):
    regions = {**ZERO, "drm/0000:00:02.0/stolen": 64 << 20}
    cli = Cli(FakeKernel(tmp_path, memory=False, dmem=regions).install(monkeypatch),
              *fake_sysfs)
    out = cli("create", "a", "--memory-max", "renderD128=1G", code=2).output
    assert "several memory regions" in out


# item 8: weights ---------------------------------------------------------------------------


@pytest.mark.parametrize("controllers, weight", [("cpu memory gpu", 100), ("cpu memory", None)])
def test_inventory_shows_the_weight_allocate_sends(tmp_path, monkeypatch, fake_sysfs,
                                                   controllers, weight):
    fake = FakeKernel(tmp_path, controllers=controllers, memory=False,
                      dmem={"drm/vgem/system": 16 * GIB}).install(monkeypatch)
    cli = Cli(fake, *fake_sysfs)
    doc = json.loads(cli("k8s", "inventory", "--shares", "4", "--json").stdout)
    assert {g["device"]: g["weight_per_share"] for g in doc["gpus"]} == {
        "renderD128": weight, "renderD129": weight}
    text = cli("k8s", "inventory", "--shares", "4").stdout
    row = next(line for line in text.splitlines() if line.startswith("renderD129"))
    assert row.split()[5] == ("100" if weight else "none")  # after the IDS column
    # the plugin's rule, and so its Allocate, is the same function
    assert sh.weights_apply(fake.root) is (weight is not None)
    inv = sh.build(discover(*fake_sysfs), sh.parse_config(["4"], 100, [])[0], fake_sysfs[0],
                   detect(fake.root, discover(*fake_sysfs)), sh.weights_apply(fake.root))
    assert (ann.WEIGHT in sh.grant(inv, ["renderD129-s0"]).annotations) is (weight is not None)
    assert inv.weight("renderD129", 1) == weight


def test_a_cgroup_namespaces_root_keeps_weights(tmp_path, monkeypatch):
    """No dmem.capacity (a cgroup namespace's root, or a kernel without dmem):
    weights, as the hook can tell for itself."""
    fake = FakeKernel(tmp_path, controllers="cpu memory", memory=False)
    assert sh.weights_apply(fake.root) is True
    assert sh.weights_apply(None) is True
