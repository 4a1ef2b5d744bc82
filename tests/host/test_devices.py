"""pycgpu.core.devices on fake sysfs and /dev trees (conftest.fake_sysfs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pycgpu.core import devices
from pycgpu.core.devices import Device, DeviceError, discover, normalize_pci, resolve
from pycgpu.core.drm import DrmVersion
from pycgpu.core.formats import DevT


@pytest.fixture
def found(fake_sysfs):
    return discover(*fake_sysfs)


def test_discover_fields(found, fake_sysfs):
    _, dev = fake_sysfs
    i915, vgem = found
    assert i915 == Device(
        render_node=dev / "dri" / "renderD128", card_node=dev / "dri" / "card0",
        devt=DevT(226, 128), driver="i915", driver_version=None,
        pci_address="0000:00:02.0", vendor_id="0x8086", device_id="0x46a6",
        parent="0000:00:02.0",
    )
    assert vgem.devt == DevT(226, 129)
    assert vgem.card_node == dev / "dri" / "card1"
    assert (vgem.driver, vgem.pci_address, vgem.vendor_id) == (None, None, None)
    assert vgem.parent == "vgem"
    assert i915.describe() == "renderD128 (226:128, i915, 0000:00:02.0)"


def test_faux_device_driver_comes_from_drm(fake_sysfs, monkeypatch):
    """6.16 and later put vgem on the faux bus, whose one generic driver
    (faux_driver) every faux device links: that is not the GPU driver."""
    import os

    from pycgpu.core import drm

    sysfs, dev = fake_sysfs
    platform = sysfs / "devices" / "platform" / "vgem"
    faux = sysfs / "devices" / "faux" / "vgem"
    faux.parent.mkdir(parents=True)
    platform.rename(faux)
    for name in ("card1", "renderD129"):
        link = sysfs / "class" / "drm" / name
        link.unlink()
        link.symlink_to(os.path.relpath(faux / "drm" / name, link.parent))
    bus = sysfs / "bus" / "faux"
    (bus / "drivers" / "faux_driver").mkdir(parents=True)
    (faux / "driver").symlink_to(os.path.relpath(bus / "drivers" / "faux_driver", faux))
    (faux / "subsystem").symlink_to(os.path.relpath(bus, faux))
    _, vgem = discover(sysfs, dev)
    assert (vgem.driver, vgem.card_node) == (None, dev / "dri" / "card1")
    monkeypatch.setattr(drm, "driver_version", lambda path: DrmVersion(
        "vgem", 1, 0, 0, "20120112", "Virtual GEM provider"))
    _, vgem = discover(sysfs, dev, query_driver=True)
    assert (vgem.driver, vgem.driver_version) == ("vgem", "1.0.0")


def test_discover_skips_nodes_without_dev(fake_sysfs):
    sysfs, dev = fake_sysfs
    (sysfs / "class" / "drm" / "renderD129" / "dev").unlink()
    assert [d.name for d in discover(sysfs, dev)] == ["renderD128"]


def test_discover_empty_tree(tmp_path):
    assert discover(tmp_path / "sys", tmp_path / "dev") == []


def test_injected_roots_do_not_use_udev(fake_sysfs, monkeypatch):
    def boom():
        raise AssertionError("pyudev used for a fake tree")

    monkeypatch.setattr(devices, "_udev_nodes", boom)
    assert len(discover(*fake_sysfs)) == 2


def test_udev_enumeration_is_used_for_the_real_tree(fake_sysfs, monkeypatch):
    sysfs, _ = fake_sysfs
    node = sysfs / "class" / "drm" / "renderD128"
    monkeypatch.setattr(devices, "_udev_nodes", lambda: [(node, Path("/dev/dri/renderD128"))])
    (found,) = discover()
    assert found.render_node == Path("/dev/dri/renderD128")
    assert found.card_node == Path("/dev/dri/card0")
    assert found.pci_address == "0000:00:02.0"


def test_udev_unavailable_falls_back_to_sysfs(monkeypatch, fake_sysfs):
    real, seen = devices._sysfs_nodes, []

    def sysfs_nodes(sysfs_root, dev_root):
        seen.append((sysfs_root, dev_root))
        return real(*fake_sysfs)

    monkeypatch.setattr(devices, "_udev_nodes", lambda: None)
    monkeypatch.setattr(devices, "_sysfs_nodes", sysfs_nodes)
    assert [d.name for d in discover()] == ["renderD128", "renderD129"]
    assert seen == [(Path("/sys"), Path("/dev"))]


def test_query_driver_fills_version(fake_sysfs, monkeypatch):
    from pycgpu.core import drm

    def fake_version(path):
        if Path(path).name == "renderD129":
            return DrmVersion("vgem", 1, 0, 0, "20120112", "Virtual GEM provider")
        return None  # renderD128 cannot be opened

    monkeypatch.setattr(drm, "driver_version", fake_version)
    i915, vgem = discover(*fake_sysfs, query_driver=True)
    assert (i915.driver, i915.driver_version) == ("i915", None)
    assert (vgem.driver, vgem.driver_version) == ("vgem", "1.0.0")


@pytest.mark.parametrize(
    ("text", "pci"),
    [("0000:00:02.0", "0000:00:02.0"), ("00:02.0", "0000:00:02.0"),
     ("0000:03:00.1", "0000:03:00.1"), ("0000:0A:1f.7", "0000:0a:1f.7"),
     ("226:128", None), ("00:02", None), ("0:00:02.0", None), ("00:02.8", None)],
)
def test_normalize_pci(text, pci):
    assert normalize_pci(text) == pci


@pytest.mark.parametrize(
    ("text", "minor"),
    [("renderD128", 128), ("renderD129", 129), ("card0", 128), ("card1", 129),
     ("226:128", 128), (" 226:129 ", 129), ("0000:00:02.0", 128), ("00:02.0", 128),
     ("{dev}/dri/renderD129", 129), ("{dev}/dri/card0", 128),
     ("{dev}/dri/../dri/renderD128", 128), ("{dev}/dri/by-path/pci-0000:00:02.0-render", 128)],
)
def test_resolve_forms(found, fake_sysfs, text, minor):
    assert resolve(text.format(dev=fake_sysfs[1]), found).devt == DevT(226, minor)


@pytest.mark.parametrize("text", ["renderD200", "card7", "226:0", "226:130", "0000:00:03.0",
                                  "/dev/dri/renderD128", "gpu0", ""])
def test_resolve_unknown_lists_known(found, text):
    with pytest.raises(DeviceError) as e:
        resolve(text, found)
    msg = str(e.value)
    assert f"unknown device {text!r}" in msg
    assert "known devices: renderD128 (226:128, i915, 0000:00:02.0), renderD129 (226:129)" in msg


def test_resolve_without_devices():
    with pytest.raises(DeviceError, match="no DRM render nodes found"):
        resolve("renderD128", [])


def test_resolve_real_char_device_by_number(tmp_path):
    # /dev/null is 1:3: a character device that is found through its st_rdev
    null = Device(render_node=tmp_path / "renderD5", card_node=None, devt=DevT(1, 3))
    assert resolve("/dev/null", [null]) is null


def test_resolve_ambiguous_pci(found):
    twin = Device(render_node=Path("/dev/dri/renderD130"), card_node=None,
                  devt=DevT(226, 130), pci_address="0000:00:02.0")
    with pytest.raises(DeviceError, match="several render nodes"):
        resolve("00:02.0", [*found, twin])
