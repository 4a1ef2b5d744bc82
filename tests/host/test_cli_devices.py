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
