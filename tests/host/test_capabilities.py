"""pycgpu.core.capabilities and `pycgpu check` on fake /proc and cgroup trees."""

from __future__ import annotations

import json
import subprocess
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest

from pycgpu.core.capabilities import INFO, OK, PROBLEM, Host, check
from pycgpu.core.schemas import CHECK_SCHEMA

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
    """A pure cgroup v2 host with the gpu controller, not booted by systemd,
    without GRUB, pycgpu installed without a checkout of its repository
    (:func:`booted_by_systemd`, :func:`with_grub`, :func:`in_checkout`
    change that)."""
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
                pid1_comm=proc / "comm", systemd_run=tmp_path / "run/systemd/system",
                grub_default=tmp_path / "etc/default/grub",
                checkout_series=tmp_path / "src/kernel/drivers-gpu-cgroup",
                kfd=tmp_path / "dev/kfd", sysfs_root=tmp_path / "sys-none",
                dev_root=tmp_path / "dev-none", cmdline=proc / "cmdline",
                osrelease=proc / "osrelease")


def booted_by_systemd(host: Host) -> Host:
    host.systemd_run.mkdir(parents=True)
    host.pid1_comm.write_text("systemd\n")
    return host


def with_grub(host: Host) -> Host:
    host.grub_default.parent.mkdir(parents=True)
    host.grub_default.write_text('GRUB_CMDLINE_LINUX=""\n')
    return host


def in_checkout(host: Host) -> Host:
    host.checkout_series.mkdir(parents=True)
    return host


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
    assert f["systemd"].status == INFO and f["memory"].status == INFO
    assert "no interface counts GPU memory" in f["memory"].message
    assert report.cgroup_root == host.mountinfo.parent.parent / "cgroup"


def test_no_cgroup2_mounted(host):
    host.mountinfo.write_text("22 1 0:21 / /proc rw - proc proc rw\n")
    report = check(host)
    assert not report.ok
    assert by_id(report)["cgroup2"].fix == "sudo mount -t cgroup2 none /sys/fs/cgroup"
    assert report.cgroup_root is None


def test_hybrid_host(host):
    booted_by_systemd(with_grub(host))
    host.mountinfo.write_text(HYBRID)
    f = by_id(check(host))["cgroup2"]
    assert f.status == PROBLEM
    assert "v1/hybrid" in f.message and "cpu" in f.message and "/sys/fs/cgroup/unified" in f.message
    assert f.fix == (
        "add systemd.unified_cgroup_hierarchy=1 to the kernel command line and reboot, e.g. "
        "sudo sed -i 's/^GRUB_CMDLINE_LINUX=\"/&systemd.unified_cgroup_hierarchy=1 /' "
        f"{host.grub_default} && sudo update-grub && sudo reboot")


def test_hybrid_host_the_sed_edits_grub(host):
    booted_by_systemd(with_grub(host))
    host.mountinfo.write_text(HYBRID)
    fix = by_id(check(host))["cgroup2"].fix
    sed = fix.split("e.g. ", 1)[1].split(" && ")[0].removeprefix("sudo ")
    subprocess.run(sed, shell=True, check=True)
    assert host.grub_default.read_text() == (
        'GRUB_CMDLINE_LINUX="systemd.unified_cgroup_hierarchy=1 "\n')


def test_hybrid_host_with_systemd_without_grub(host):
    booted_by_systemd(host)
    host.mountinfo.write_text(HYBRID)
    f = by_id(check(host))["cgroup2"]
    assert f.fix == ("add systemd.unified_cgroup_hierarchy=1 to the kernel command line of "
                     "your boot loader and reboot")


@pytest.mark.parametrize("grub", [False, True])
def test_hybrid_host_without_systemd(host, grub):
    """No systemd kernel parameter or step on a host systemd did not boot."""
    if grub:
        with_grub(host)
    host.mountinfo.write_text(HYBRID)
    report = check(host)
    f = by_id(report)["cgroup2"]
    assert f.status == PROBLEM
    assert "systemd" not in f.fix
    assert "add cgroup_no_v1=all to the kernel command line" in f.fix
    assert ("update-grub" in f.fix) == grub
    assert ("of your boot loader" in f.fix) == (not grub)
    assert all("systemd" not in (x.fix or "") for x in report.findings)


@pytest.mark.parametrize("checkout", [False, True])
def test_kernel_without_controller(host, checkout):
    if checkout:
        in_checkout(host)
    root = host.mountinfo.parent.parent / "cgroup"
    (root / "cgroup.controllers").write_text("cpu memory\n")
    host.proc_cgroups.write_text(PROC_CGROUPS)
    report = check(host, path="a")
    f = by_id(report)
    assert f["gpu"].status == PROBLEM
    assert "CONFIG_CGROUP_GPU" in f["gpu"].message
    assert f["path"].status == INFO  # not checked without a controller
    fix = f["gpu"].fix
    assert fix.startswith("boot a kernel built with the pycgpu patch series (CONFIG_CGROUP_GPU=y)")
    if checkout:
        assert fix.endswith(": make kernel, see README")
    else:  # installed with pip: make kernel is not there
        assert "make kernel" not in fix
        assert "kernel/drivers-gpu-cgroup/ of pycgpu's source repository" in fix


def test_the_checkout_is_found_next_to_the_package():
    from pycgpu.core import capabilities

    series = Path(capabilities.__file__).resolve().parent.parent / "kernel/drivers-gpu-cgroup"
    assert Host().checkout_series == series
    assert Host().checkout == series.is_dir()


@pytest.mark.parametrize("grub", [False, True])
def test_controller_disabled_on_cmdline(host, grub):
    if grub:
        with_grub(host)
    root = host.mountinfo.parent.parent / "cgroup"
    (root / "cgroup.controllers").write_text("cpu memory\n")
    host.proc_cgroups.write_text(PROC_CGROUPS + "gpu\t0\t1\t0\n")
    f = by_id(check(host))["gpu"]
    assert "disabled on the kernel command line" in f.message
    if grub:
        assert f.fix == (f"remove cgroup_disable=gpu from GRUB_CMDLINE_LINUX in "
                         f"{host.grub_default}, then sudo update-grub && sudo reboot")
    else:
        assert f.fix == ("remove cgroup_disable=gpu from the kernel command line of your boot "
                         "loader and reboot")


def test_controller_disabled_on_cmdline_of_a_kernel_that_does_not_list_it(host):
    """7.3 lists in /proc/cgroups only the controllers with v1 support: the
    command line says that gpu is disabled, among others, and memory works
    through dmem."""
    root = host.mountinfo.parent.parent / "cgroup"
    (root / "cgroup.controllers").write_text("cpu memory dmem\n")
    host.proc_cgroups.write_text(PROC_CGROUPS)
    host.cmdline.write_text("root=/dev/vda quiet cgroup_disable=pressure,gpu\n")
    f = by_id(check(host))["gpu"]
    assert "disabled on the kernel command line" in f.message
    assert "GPU memory limits work without it, through dmem" in f.message
    assert f.fix == ("remove gpu (only) of cgroup_disable=pressure,gpu from the kernel command "
                     "line of your boot loader and reboot")
    host.cmdline.write_text("root=/dev/vda cgroup_disable=gpus\n")
    assert "kernel without CONFIG_CGROUP_GPU" in by_id(check(host))["gpu"].message


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
    host.systemd_run.mkdir(parents=True)
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
    booted_by_systemd(host)
    f = by_id(check(host))["systemd"]
    assert f.status == PROBLEM  # the root's subtree_control lacks gpu


def test_no_systemd_steps_on_a_host_systemd_did_not_boot(host):
    """A tree that looks like systemd's (init.scope, slices), pid 1 named
    systemd, but no /run/systemd/system: no systemd step is recommended."""
    host.pid1_comm.write_text("systemd\n")
    root = host.mountinfo.parent.parent / "cgroup"
    for d in ("init.scope", "system.slice"):
        (root / d).mkdir()
        (root / d / "cgroup.subtree_control").write_text("cpu memory\n")
    report = check(host)
    f = by_id(report)["systemd"]
    assert (f.status, f.fix) == (INFO, None)
    assert report.ok


def test_memory_on_gpu_memory(host):
    root = host.mountinfo.parent.parent / "cgroup"
    (root / "gpu.memory.current").write_text("226:128 0\n")
    f = by_id(check(host))["memory"]
    assert f.status == INFO and "counted in gpu.memory.* per render node" in f.message


def test_memory_on_dmem_names_regions_and_what_none_counts(host, fake_sysfs):
    root = host.mountinfo.parent.parent / "cgroup"
    (root / "cgroup.controllers").write_text("cpu memory dmem gpu\n")
    (root / "dmem.capacity").write_text("drm/0000:00:02.0/vram0 1024\n")
    sysfs, dev = fake_sysfs
    f = by_id(check(replace(host, sysfs_root=sysfs, dev_root=dev)))["memory"]
    assert f.status == INFO
    assert "by the dmem controller (dmem.*), in regions: 226:128 (drm/0000:00:02.0/vram0)" \
        in f.message
    assert "no region counts the memory of renderD129" in f.message


def test_kfd_said_only_where_it_exists(host):
    assert "kfd" not in by_id(check(host))
    host.kfd.parent.mkdir()
    host.kfd.write_text("")
    f = by_id(check(host))["kfd"]
    assert f.status == INFO and "neither charges nor orders" in f.message


def on_linux(host: Host, release: str, policy: str | None, cmdline: str = "") -> Host:
    """@host running Linux @release with drm_sched loaded with sched_policy
    @policy (None: not loaded), booted with @cmdline."""
    host.osrelease.write_text(release + "\n")
    host.cmdline.write_text(cmdline + "\n")
    if policy is not None:
        params = host.sysfs_root / "module/gpu_sched/parameters"
        params.mkdir(parents=True)
        (params / "sched_policy").write_text(policy + "\n")
    return host


@pytest.mark.parametrize(("policy", "name"), [("1", "FIFO"), ("2", "fair")])
def test_sched_policy_the_order_extends(host, policy, name):
    report = check(on_linux(host, "7.3.4-amd64", policy))
    f = by_id(report)["sched"]
    assert f.status == OK and name in f.message and report.ok


def test_sched_round_robin_is_a_problem_with_the_fix_for_where_it_is_set(host):
    on_linux(with_grub(host), "7.3.4-amd64", "0",
             "BOOT_IMAGE=/vmlinuz gpu_sched.sched_policy=0 quiet")
    f = by_id(check(host))["sched"]
    assert f.status == PROBLEM and "sched=0" in f.message
    assert "remove gpu_sched.sched_policy=0" in f.fix and str(host.grub_default) in f.fix
    # set as a module option rather than on the command line
    host.cmdline.write_text("BOOT_IMAGE=/vmlinuz quiet\n")
    f = by_id(check(host))["sched"]
    assert f.status == PROBLEM and "modprobe.d" in f.fix


@pytest.mark.parametrize(("release", "policy"), [("6.12.57-amd64", "0"), ("7.3.4", None)])
def test_sched_not_said_on_6_12_nor_without_drm_sched(host, release, policy):
    """6.12's series orders drm_sched's entities under any policy; a host
    without drm_sched loaded has nothing to say."""
    assert "sched" not in by_id(check(on_linux(host, release, policy)))


def test_sched_not_said_without_the_controller(host):
    (host.mountinfo.parent.parent / "cgroup/cgroup.controllers").write_text("cpu memory\n")
    assert "sched" not in by_id(check(on_linux(host, "7.3.4", "0")))


def test_sched_policy_unknown_is_information(host):
    f = by_id(check(on_linux(host, "7.5.0", "3")))["sched"]
    assert f.status == INFO and "sched_policy=3" in f.message


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


def test_caps_said_per_device_where_the_kernel_has_gpu_max(host, fake_sysfs):
    """The fake sysfs has renderD128 (i915: under execlists only) and
    renderD129 (vgem, no driver link), which cannot hold work back."""
    sysfs, dev = fake_sysfs
    host = replace(host, sysfs_root=sysfs, dev_root=dev)
    root = host.mountinfo.parent.parent / "cgroup"
    (root / "gpu.stat").write_text("226:128 usage_usec=0 wait_usec=0 sched=1\n")
    assert "caps" not in by_id(check(host))  # a kernel before gpu.max
    (root / "gpu.stat").write_text(
        "226:128 usage_usec=0 wait_usec=0 sched=1 nr_periods=0 nr_throttled=0 throttled_usec=0\n")
    f = by_id(check(host))["caps"]
    assert f.status == INFO
    assert f.message.startswith("gpu.max (a hard cap) is enforced on renderD128 (i915); "
                                "a cap on renderD129 (unknown driver: ")
    assert "fails with EOPNOTSUPP" in f.message
    assert "on i915 only under execlists: under GuC submission" in f.message
