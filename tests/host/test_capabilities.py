"""pycgpu.capabilities and `pycgpu check` on fake /proc and cgroup trees."""

from __future__ import annotations

import json
import subprocess

import jsonschema
import pytest

from pycgpu.capabilities import INFO, OK, PROBLEM, Host, check
from pycgpu.schemas import CHECK_SCHEMA

V2 = "30 22 0:26 / {root} rw,nosuid shared:9 - cgroup2 cgroup2 rw,nsdelegate\n"
HYBRID = (
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
)
PROC_CGROUPS = "#subsys_name\thierarchy\tnum_cgroups\tenabled\ncpu\t0\t1\t1\n"


@pytest.fixture
def host(tmp_path):
    """A pure cgroup v2 host with the gpu controller, not run by systemd."""
    root = tmp_path / "cgroup"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpu memory gpu\n")
    (root / "cgroup.subtree_control").write_text("\n")
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "mountinfo").write_text(V2.format(root=root))
    (proc / "cgroups").write_text(PROC_CGROUPS + "gpu\t0\t1\t1\n")
    (proc / "comm").write_text("init\n")
    return Host(mountinfo=proc / "mountinfo", proc_cgroups=proc / "cgroups",
                pid1_comm=proc / "comm")


def by_id(report):
    return {f.id: f for f in report.findings}


def run_fix(fix: str, root) -> list[str]:
    """Run a printed fix command (without sudo: the fake tree is ours) and
    return the files it wrote "+gpu" to, relative to @root; then do what the
    kernel does with the write (the files are plain files here)."""
    assert fix.startswith("sudo ")
    subprocess.run(fix.removeprefix("sudo "), shell=True, check=True)
    written = []
    for f in sorted(root.rglob("cgroup.subtree_control")):
        if f.read_text() == "+gpu\n":
            written.append(str(f.parent.relative_to(root)))
            f.write_text("gpu\n")
    return sorted(written)


def test_all_good(host):
    report = check(host)
    assert report.ok
    f = by_id(report)
    assert f["cgroup2"].status == OK and f["gpu"].status == OK
    assert f["systemd"].status == INFO and f["dmem"].status == INFO
    assert "no upstream dmem" in f["dmem"].message
    assert report.cgroup_root == host.mountinfo.parent.parent / "cgroup"


def test_no_cgroup2_mounted(host):
    host.mountinfo.write_text("22 1 0:21 / /proc rw - proc proc rw\n")
    report = check(host)
    assert not report.ok
    assert by_id(report)["cgroup2"].fix == "sudo mount -t cgroup2 none /sys/fs/cgroup"
    assert report.cgroup_root is None


def test_hybrid_host(host):
    host.mountinfo.write_text(HYBRID)
    f = by_id(check(host))["cgroup2"]
    assert f.status == PROBLEM
    assert "v1/hybrid" in f.message and "cpu" in f.message and "/sys/fs/cgroup/unified" in f.message
    assert "systemd.unified_cgroup_hierarchy=1" in f.fix and "update-grub" in f.fix


def test_kernel_without_controller(host):
    root = host.mountinfo.parent.parent / "cgroup"
    (root / "cgroup.controllers").write_text("cpu memory\n")
    host.proc_cgroups.write_text(PROC_CGROUPS)
    report = check(host, path="a")
    f = by_id(report)
    assert f["gpu"].status == PROBLEM
    assert "CONFIG_CGROUP_GPU" in f["gpu"].message
    assert f["path"].status == INFO  # not checked without a controller


def test_controller_disabled_on_cmdline(host):
    root = host.mountinfo.parent.parent / "cgroup"
    (root / "cgroup.controllers").write_text("cpu memory\n")
    host.proc_cgroups.write_text(PROC_CGROUPS + "gpu\t0\t1\t0\n")
    f = by_id(check(host))["gpu"]
    assert "disabled on the kernel command line" in f.message
    assert "cgroup_disable=gpu" in f.fix


def test_path_not_enabled_fix_is_exact(host):
    root = host.mountinfo.parent.parent / "cgroup"
    for rel in ("a", "a/b", "a/b/c"):
        (root / rel).mkdir()
        (root / rel / "cgroup.subtree_control").write_text("\n")
    (root / "a" / "cgroup.subtree_control").write_text("gpu\n")
    f = by_id(check(host, path="/a/b/c"))["path"]
    assert f.status == PROBLEM
    assert str(root) in f.message and str(root / "a" / "b") in f.message
    assert str(root / "a") + "," not in f.message  # a already has it
    # the printed command enables gpu exactly where missing, outermost first
    assert f.fix.index(str(root / "cgroup.subtree_control")) < f.fix.index(str(root / "a/b"))
    assert run_fix(f.fix, root) == [".", "a/b"]
    assert by_id(check(host, path="a/b/c"))["path"].status == OK


def test_path_missing(host):
    root = host.mountinfo.parent.parent / "cgroup"
    (root / "cgroup.subtree_control").write_text("gpu\n")
    f = by_id(check(host, path="x/y"))["path"]
    assert f.status == PROBLEM
    assert f.fix == "pycgpu create /x/y"


def test_systemd_tree_without_gpu(host):
    root = host.mountinfo.parent.parent / "cgroup"
    for d in ("init.scope", "system.slice", "user.slice"):
        (root / d).mkdir()
        (root / d / "cgroup.subtree_control").write_text("cpu memory\n")
    (root / "cgroup.subtree_control").write_text("cpu memory\n")
    f = by_id(check(host))["systemd"]
    assert f.status == PROBLEM
    assert "does not enable controllers it does not know" in f.message
    assert run_fix(f.fix, root) == [".", "system.slice", "user.slice"]
    assert by_id(check(host))["systemd"].status == OK


def test_systemd_detected_through_pid1(host):
    host.pid1_comm.write_text("systemd\n")
    f = by_id(check(host))["systemd"]
    assert f.status == PROBLEM  # the root's subtree_control lacks gpu


def test_dmem_present(host):
    root = host.mountinfo.parent.parent / "cgroup"
    (root / "cgroup.controllers").write_text("cpu memory dmem gpu\n")
    f = by_id(check(host))["dmem"]
    assert f.status == INFO and "dmem controller is present" in f.message


def test_given_root(tmp_path):
    report = check(Host(cgroup_root=tmp_path, mountinfo=tmp_path / "none"))
    assert by_id(report)["cgroup2"].status == PROBLEM
    assert "--cgroup-root /sys/fs/cgroup" in by_id(report)["cgroup2"].fix


# the command ---------------------------------------------------------------------


def test_cli_check_ok(cli):
    (cli.fake.root / "cgroup.subtree_control").write_text("gpu\n")
    r = cli("check", "--path", "a", code=3)  # a does not exist yet
    assert "pycgpu create /a" in r.output
    cli("create", "a")
    r = cli("check", "--path", "a")
    assert r.output.rstrip().endswith("all good")


def test_cli_check_json(cli):
    (cli.fake.root / "cgroup.controllers").write_text("cpu\n")
    r = cli("check", "--json", code=3)
    doc = json.loads(r.output)
    jsonschema.validate(doc, CHECK_SCHEMA)
    assert doc["schema"] == "pycgpu.check/v1"
    assert doc["ok"] is False
    assert doc["cgroup_root"] == str(cli.fake.root)
    gpu = next(f for f in doc["findings"] if f["id"] == "gpu")
    assert gpu["status"] == "problem" and gpu["fix"]


def test_cli_check_text_lists_fix(cli):
    (cli.fake.root / "cgroup.controllers").write_text("cpu\n")
    r = cli("check", code=3)
    assert "problem  gpu" in r.output
    assert "fix: boot a kernel built with the pycgpu patch series" in r.output
    assert r.output.rstrip().endswith("1 problem found")
