"""The memory commands on a kernel whose GPU memory is dmem's (the 7.3
series, or any kernel with dmem): the same options and output as on
gpu.memory.* (6.12) for a device with one region, DEV:REGION for one of
several, dmem enabled along the path as gpu is."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from conftest import Cli, FakeKernel

from pycgpu.core.schemas import STAT_SCHEMA

# renderD128 is the i915 PCI GPU at 0000:00:02.0 (fake_sysfs), here with two
# regions (a driver's VRAM and stolen memory); renderD129 is vgem, with the DRM
# core's one region
REGIONS = {"drm/0000:00:02.0/vram0": 8 << 30, "drm/0000:00:02.0/stolen": 64 << 20,
           "drm/vgem/system": 16 << 30}


@pytest.fixture
def dcli(tmp_path, monkeypatch, fake_sysfs) -> Cli:
    fake = FakeKernel(tmp_path, memory=False, dmem=REGIONS).install(monkeypatch)
    return Cli(fake, *fake_sysfs)


def test_create_sets_dmem_max_and_enables_dmem_along_the_path(dcli):
    dcli("create", "a/b", "--weight", "300", "--memory-max", "renderD129=1G",
         "--memory-max", "renderD128:vram0=2G")
    root = dcli.fake.root
    for group in (root, root / "a"):
        assert (group / "cgroup.subtree_control").read_text().split() == ["dmem", "gpu"]
    lines = (root / "a" / "b" / "dmem.max").read_text().splitlines()
    assert "drm/vgem/system 1073741824" in lines
    assert "drm/0000:00:02.0/vram0 2147483648" in lines
    assert "drm/0000:00:02.0/stolen max" in lines


def test_show_names_regions_as_on_gpu_memory(dcli):
    dcli("create", "a", "--memory-max", "renderD129=1G", "--memory-max",
         "226:128:stolen=32M")
    doc = json.loads(dcli("show", "--json", "a").output)
    assert doc["cgroups"][0]["memory"]["max"] == {
        "226:128:vram0": None, "226:128:stolen": 32 << 20, "226:129": 1 << 30}
    assert doc["memory"]["interface"] == "dmem"
    assert {r["key"]: r["capacity"] for r in doc["memory"]["regions"]} == {
        "226:128:stolen": 64 << 20, "226:128:vram0": 8 << 30, "226:129": 16 << 30}
    text = dcli("show", "a").output
    assert "renderD129 (226:129) 1G" in text
    assert "renderD128:stolen (226:128) 32M" in text


@pytest.mark.parametrize(("value", "message"), [
    ("renderD128=1G", "several memory regions: give one of renderD128:stolen, "
                      "renderD128:vram0"),
    ("renderD128:vram9=1G", "has no memory region 'vram9'; it has stolen, vram0"),
    ("renderD129:vram0=1G", "has no memory region 'vram0'; it has system"),
])
def test_a_region_that_does_not_exist_is_named(dcli, value, message):
    out = dcli("create", "a", "--memory-max", value, code=2).output
    assert message in out
    assert not (dcli.fake.root / "a").exists()


def test_set_on_a_group_without_dmem_says_so(dcli):
    """A group made before dmem was enabled (by hand, a runtime): set refuses
    and says how to enable it."""
    fake = dcli.fake
    (fake.root / "cgroup.subtree_control").write_text("gpu\n")
    fake.mkdir(fake.root / "old")
    out = dcli("set", "old", "--memory-max", "renderD129=1G", code=1).output
    assert "the dmem controller is not enabled for /old (no dmem.max)" in out


def test_a_failed_create_takes_dmem_back(dcli):
    dcli.fake.fail["a/b"] = 13  # EACCES at mkdir of a/b
    dcli("create", "a/b", "--memory-max", "renderD129=1G", code=1)
    assert (dcli.fake.root / "cgroup.subtree_control").read_text().split() == []
    assert not (dcli.fake.root / "a").exists()


def test_dry_run_lists_the_dmem_steps(dcli):
    out = dcli("create", "a", "--memory-max", "renderD129=1G", "--dry-run").output
    root = dcli.fake.root
    assert f"write '+gpu' to {root}/cgroup.subtree_control" in out
    assert f"write '+dmem' to {root}/cgroup.subtree_control" in out
    assert f"write 'drm/vgem/system 1073741824' to {root}/a/dmem.max" in out


@pytest.fixture
def discovered(monkeypatch) -> list[tuple]:
    """The sysfs roots devices.discover is asked about."""
    from pycgpu.core import devices

    calls: list[tuple] = []
    real = devices.discover
    monkeypatch.setattr(devices, "discover",
                        lambda *a, **k: calls.append(a) or real(*a, **k))  # type: ignore
    return calls


def test_cgroup_memory_accessors_read_a_devices_only_region(dcli, discovered, fake_sysfs):
    """Cgroup.memory_max() and the rest key dmem's lines by device where the
    device has one region (vgem's system), and leave out the others; the
    render nodes are those of the sysfs the Cgroup was given."""
    from pycgpu.core.cgroup import Cgroup, CgroupError
    from pycgpu.core.formats import DevT

    sysfs, _ = fake_sysfs
    dcli("create", "a")
    discovered.clear()
    cg = Cgroup(dcli.fake.root, "a", sysfs_root=sysfs)
    assert cg.child("b").sysfs_root == sysfs and cg.parent.sysfs_root == sysfs
    vgem, i915 = DevT(226, 129), DevT(226, 128)
    assert cg.memory_max() == {vgem: None}
    cg.set_memory_max(vgem, 1 << 20)
    assert "drm/vgem/system 1048576" in (dcli.fake.root / "a" / "dmem.max").read_text()
    assert cg.memory_max() == {vgem: 1 << 20}
    assert cg.memory_current() == {vgem: 0}
    assert cg.memory_events(local=True) == {vgem: {"max": 0}}
    with pytest.raises(CgroupError, match="226:128 has no dmem region of its own"):
        cg.set_memory_max(i915, 1)
    assert discovered and {a[0] for a in discovered} == {sysfs}


def test_cgroup_memory_accessors_never_read_the_real_sys(dcli, discovered):
    """Without a sysfs root, a tree that is not mounted in one (a fake tree,
    a test's) names no device's region and /sys is not read."""
    from pycgpu.core.cgroup import Cgroup

    dcli("create", "a")
    discovered.clear()
    assert Cgroup(dcli.fake.root, "a").memory_max() == {}
    assert discovered == []


def test_cgroup_memory_accessors_use_the_sysfs_the_tree_is_mounted_in(
        tmp_path, monkeypatch, fake_sysfs, discovered):
    """A tree at SYS/fs/cgroup, as the kernel's at /sys/fs/cgroup: SYS's
    render nodes name the regions."""
    from pycgpu.core.cgroup import Cgroup
    from pycgpu.core.formats import DevT

    sysfs, _ = fake_sysfs
    (sysfs / "fs").mkdir()
    fake = FakeKernel(sysfs / "fs", memory=False, dmem=REGIONS).install(monkeypatch)
    fake.make("a")
    (fake.root / "a" / "dmem.max").write_text("".join(f"{r} max\n" for r in REGIONS))
    assert Cgroup(fake.root, "a").memory_max() == {DevT(226, 129): None}
    assert {a[0] for a in discovered} == {sysfs}


def _mountinfo(path: Path, mount: Path, fstype: str) -> Path:
    path.write_text(f"25 1 0:22 / /sys rw - sysfs sysfs rw\n"
                    f"35 25 0:30 / {str(mount).replace(' ', chr(92) + '040')} rw,nosuid - "
                    f"{fstype} {fstype} rw\n")
    return path


@pytest.mark.parametrize("fstype, found", [("cgroup2", True), ("tmpfs", False)])
def test_a_cgroup2_mount_elsewhere_uses_the_hosts_sysfs(
        tmp_path, monkeypatch, fake_sysfs, discovered, fstype, found):
    """Review of issue 39, item 5: a cgroup2 tree mounted elsewhere than
    SYS/fs/cgroup (hybrid mode's /sys/fs/cgroup/unified, a custom root) that
    /proc/self/mountinfo lists as a cgroup2 mount names its regions by /sys's
    render nodes (here a fake /sys); a tree that is no cgroup2 mount (a
    test's fake tree) reads no sysfs at all."""
    from pycgpu.core import cgroup
    from pycgpu.core.formats import DevT

    sysfs, _ = fake_sysfs
    (tmp_path / "unified").mkdir()
    fake = FakeKernel(tmp_path / "unified", memory=False, dmem=REGIONS).install(monkeypatch)
    fake.make("a")
    (fake.root / "a" / "dmem.max").write_text("".join(f"{r} max\n" for r in REGIONS))
    monkeypatch.setattr(cgroup, "MOUNTINFO", _mountinfo(tmp_path / "mountinfo", fake.root, fstype))
    monkeypatch.setattr(cgroup, "SYSFS", sysfs)
    assert cgroup.sysfs_of(fake.root) == (sysfs if found else None)
    assert cgroup.Cgroup(fake.root, "a").memory_max() == ({DevT(226, 129): None} if found else {})
    assert {a[0] for a in discovered} == ({sysfs} if found else set())
    if found:
        cgroup.Cgroup(fake.root, "a").set_memory_max(DevT(226, 129), 1 << 20)
        assert "drm/vgem/system 1048576" in (fake.root / "a" / "dmem.max").read_text()


def test_the_hook_sets_dmem_max_from_the_memory_annotation(dcli, tmp_path):
    """pycgpu.io/gpu.memory.max names devices as everywhere; on a dmem kernel
    the hook writes dmem.max of the device's region, enabling dmem (and gpu)
    along the path of the container's scope."""
    from click.testing import CliRunner

    from pycgpu.cli import main

    root, scope, pid = dcli.fake.root, "system.slice/ctr.scope", 4242
    (root / "cgroup.subtree_control").write_text("cpu memory\n")
    for rel in ("system.slice", scope):
        (root / rel).mkdir()
        (root / rel / "cgroup.subtree_control").write_text("\n")
        (root / rel / "cgroup.controllers").write_text("cpu memory\n")
        (root / rel / "cgroup.procs").write_text("")
    (root / scope / "cgroup.procs").write_text(f"{pid}\n")
    proc = tmp_path / "proc"
    (proc / str(pid)).mkdir(parents=True)
    (proc / str(pid) / "cgroup").write_text(f"0::/{scope}\n")
    bundle = tmp_path / "bundle"
    (bundle / "rootfs").mkdir(parents=True)
    (bundle / "config.json").write_text(json.dumps(
        {"ociVersion": "1.0.2", "root": {"path": "rootfs"},
         "linux": {"cgroupsPath": f"/{scope}"}}))
    allow = tmp_path / "annotations.allow"
    allow.write_text("gpu.memory.max\n")
    allow.chmod(0o644)
    env = {**dcli.env, "PYCGPU_PROC_ROOT": str(proc), "PYCGPU_ALLOW_LIST": str(allow)}
    stdin = json.dumps({"ociVersion": "1.0.2", "id": "c1", "status": "creating",
                        "bundle": str(bundle), "pid": pid,
                        "annotations": {"pycgpu.io/gpu.memory.max": "renderD129=1G"}})
    result = CliRunner().invoke(main, ["oci", "hook"], input=stdin, env=env)
    assert result.exit_code == 0, result.output
    assert "drm/vgem/system 1073741824" in (root / scope / "dmem.max").read_text()
    for rel in ("", "system.slice"):
        assert {"gpu", "dmem"} <= set((root / rel / "cgroup.subtree_control").read_text().split())
    stdin = stdin.replace("renderD129=1G", "renderD128=1G")
    result = CliRunner().invoke(main, ["oci", "hook"], input=stdin, env=env)
    assert result.exit_code != 0
    assert "several memory regions" in result.output


# A kernel with dmem and no gpu controller: one without the series (amdgpu
# and xe VRAM limits then work on their own), or booted with cgroup_disable=gpu.

@pytest.fixture
def ncli(tmp_path, monkeypatch, fake_sysfs) -> Cli:
    fake = FakeKernel(tmp_path, controllers="cpu memory", memory=False,
                      dmem=REGIONS).install(monkeypatch)
    return Cli(fake, *fake_sysfs)


def test_without_the_gpu_controller_memory_limits_work_through_dmem(ncli):
    ncli("create", "a/b", "--memory-max", "renderD128:vram0=2G")
    root = ncli.fake.root
    for group in (root, root / "a"):
        assert (group / "cgroup.subtree_control").read_text().split() == ["dmem"]
    assert "drm/0000:00:02.0/vram0 2147483648" in (root / "a/b/dmem.max").read_text()
    ncli("set", "a/b", "--memory-max", "renderD128:vram0=max", "--memory-max",
         "renderD129=512M")
    doc = json.loads(ncli("show", "--json", "a/b").output)
    assert doc["cgroups"][0]["memory"]["max"] == {
        "226:128:vram0": None, "226:128:stolen": None, "226:129": 512 << 20}
    text = ncli("show", "a/b").output
    assert text.splitlines()[0] == "/a/b  (gpu not enabled)"
    assert "  memory.max           renderD128:vram0 (226:128) max" in text
    ncli("create", "plain")  # a group for exec, dmem enabled
    assert (root / "plain" / "dmem.max").exists()
    out = ncli("check", code=3).output
    assert "GPU memory limits work without it, through dmem" in out


@pytest.mark.parametrize("args", [
    ["create", "a", "--weight", "300"],
    ["create", "a", "--priority", "5", "--memory-max", "renderD129=1G"],
])
def test_without_the_gpu_controller_the_time_knobs_are_refused(ncli, args):
    out = ncli(*args, code=1).output
    assert "no gpu controller" in out and "cgroup_disable=gpu" in out
    assert "GPU memory limits work through dmem" in out
    assert not (ncli.fake.root / "a").exists()
    assert (ncli.fake.root / "cgroup.subtree_control").read_text().split() == []


def test_without_gpu_or_dmem_create_says_neither(tmp_path, monkeypatch, fake_sysfs):
    fake = FakeKernel(tmp_path, controllers="cpu memory", memory=False).install(monkeypatch)
    out = Cli(fake, *fake_sysfs)("create", "a", code=1).output
    assert "no gpu controller" in out and "no dmem controller" in out


def test_stat_reports_every_region_with_its_capacity(dcli):
    """A device with several regions: its memory is their sum, each region
    is reported with its limit, and every region's size is in the document."""
    dcli("create", "a", "--memory-max", "renderD128:vram0=2G")
    a = dcli.fake.root / "a"
    (a / "gpu.stat").write_text("226:128 usage_usec=10 wait_usec=0\n")
    (a / "dmem.current").write_text("drm/0000:00:02.0/vram0 4096\n"
                                    "drm/0000:00:02.0/stolen 8192\ndrm/vgem/system 0\n")
    (dcli.fake.root / "gpu.stat").write_text("226:128 usage_usec=10 wait_usec=0\n")
    (dcli.fake.root / "dmem.current").write_text("drm/0000:00:02.0/vram0 4096\n"
                                                 "drm/0000:00:02.0/stolen 8192\n"
                                                 "drm/vgem/system 0\n")
    doc = json.loads(dcli("stat", "--json", "--source", "kernel").output)
    jsonschema.validate(doc, STAT_SCHEMA)
    (group,) = [g for g in doc["groups"] if g["path"] == "/a"]
    dev = group["devices"]["226:128"]
    assert dev["memory"] == {"current": 12288, "limit_hits": 0}
    assert dev["memory_regions"]["vram0"] == {"current": 4096, "max": 2 << 30, "peak": 0,
                                              "limit_hits": 0}
    assert dev["memory_regions"]["stolen"]["max"] is None
    assert doc["devices"]["226:128"]["memory_capacity"] == {"stolen": 64 << 20,
                                                            "vram0": 8 << 30}
    assert doc["devices"]["226:128"]["total"]["memory_current"] == 12288
    assert doc["devices"]["226:129"]["memory_capacity"] == {"system": 16 << 30}
    lines = dcli("stat", "--source", "kernel").output.splitlines()
    row = next(line for line in lines if "renderD128" in line)
    assert "12K" in row.split() and "vram0=2G" in row.split(), row


def test_a_group_with_only_a_region_limit_is_reported(dcli):
    """A device with several regions: a limit on one of them alone makes the
    group's row one to report (stat hides rows with nothing used or set)."""
    dcli("create", "b", "--memory-max", "renderD128:vram0=1G")
    b = dcli.fake.root / "b"
    (b / "gpu.stat").write_text("226:128 usage_usec=0 wait_usec=0\n")
    doc = json.loads(dcli("stat", "--json", "--source", "kernel").output)
    (group,) = [g for g in doc["groups"] if g["path"] == "/b"]
    assert group["devices"]["226:128"]["memory_regions"]["vram0"]["max"] == 1 << 30
    (b / "dmem.max").write_text("drm/0000:00:02.0/vram0 max\ndrm/0000:00:02.0/stolen max\n"
                                "drm/vgem/system max\n")
    doc = json.loads(dcli("stat", "--json", "--source", "kernel").output)
    (group,) = [g for g in doc["groups"] if g["path"] == "/b"]
    assert group["devices"] == {}
