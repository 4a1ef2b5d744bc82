"""`pycgpu devices` on the fake sysfs/dev trees."""

from __future__ import annotations

import json

import jsonschema

from pycgpu.core.schemas import DEVICES_SCHEMA


def test_devices_table(cli, fake_sysfs):
    _, dev = fake_sysfs
    lines = cli("devices").output.splitlines()
    assert lines[0].split() == ["NODE", "DEVT", "DRIVER", "VERSION", "CARD", "PCI",
                                "VENDOR:DEVICE"]
    assert lines[1].split() == [f"{dev}/dri/renderD128", "226:128", "i915", "-", "card0",
                                "0000:00:02.0", "0x8086:0x46a6"]
    assert lines[2].split() == [f"{dev}/dri/renderD129", "226:129", "-", "-", "card1", "-", "-"]


def test_devices_json(cli, fake_sysfs):
    _, dev = fake_sysfs
    doc = json.loads(cli("devices", "--json").output)
    jsonschema.validate(doc, DEVICES_SCHEMA)
    assert doc["schema"] == "pycgpu.devices/v1"
    assert doc["devices"][0] == {
        "render_node": f"{dev}/dri/renderD128", "card_node": f"{dev}/dri/card0",
        "devt": "226:128", "major": 226, "minor": 128, "driver": "i915",
        "driver_version": None, "pci_address": "0000:00:02.0", "vendor_id": "0x8086",
        "device_id": "0x46a6",
    }
    assert doc["devices"][1]["driver"] is None


def test_devices_none(cli, tmp_path):
    cli.env["PYCGPU_SYSFS_ROOT"] = str(tmp_path / "empty")
    r = cli("devices")
    assert "no DRM render nodes found" in r.output
    doc = json.loads(cli("devices", "--json").output)
    assert doc == {"schema": "pycgpu.devices/v1", "devices": []}


def test_devices_list_the_memory_regions(tmp_path, monkeypatch, fake_sysfs):
    """Region errors point to pycgpu devices: it lists the kernel's memory
    regions, by the names set and create take, as show --json has them."""
    from conftest import Cli, FakeKernel
    from test_cli_dmem import REGIONS

    fake = FakeKernel(tmp_path, memory=False, dmem=REGIONS).install(monkeypatch)
    dcli = Cli(fake, *fake_sysfs)
    out = dcli("devices").output
    lines = out.split("\n\n")[1].splitlines()
    assert lines[0] == "memory regions (dmem):"
    assert lines[1].split() == ["REGION", "KERNEL", "KEY", "CAPACITY"]
    assert [line.split() for line in lines[2:]] == [
        ["renderD128:stolen", "(226:128)", "drm/0000:00:02.0/stolen", "64M"],
        ["renderD128:vram0", "(226:128)", "drm/0000:00:02.0/vram0", "8G"],
        ["renderD129", "(226:129)", "drm/vgem/system", "16G"]]
    doc = json.loads(dcli("devices", "--json").output)
    jsonschema.validate(doc, DEVICES_SCHEMA)
    assert doc["memory"] == json.loads(dcli("show", "--json").output)["memory"]
    assert doc["memory"]["interface"] == "dmem"
    assert [r["key"] for r in doc["memory"]["regions"]] == ["226:128:stolen", "226:128:vram0",
                                                            "226:129"]


def test_devices_on_gpu_memory_list_one_region_per_device(cli):
    (cli.fake.root / "gpu.memory.current").write_text("226:128 0\n226:129 0\n")
    lines = cli("devices").output.split("\n\n")[1].splitlines()
    assert lines[0] == "memory regions (gpu.memory):"
    assert [line.split() for line in lines[2:]] == [
        ["renderD128", "(226:128)", "226:128", "-"], ["renderD129", "(226:129)", "226:129", "-"]]
    assert json.loads(cli("devices", "--json").output)["memory"]["interface"] == "gpu.memory"


def test_devices_without_a_cgroup_tree_list_the_devices_only(cli, tmp_path):
    cli.env["PYCGPU_CGROUP_ROOT"] = str(tmp_path / "nothing")
    r = cli("devices")
    assert "renderD128" in r.output and "memory regions" not in r.output
    assert "memory" not in json.loads(cli("devices", "--json").output)
