"""`pycgpu image check` (pycgpu.runtime.imagecheck): GPU user space found in fixture
root file systems, the host's kernel side from fake /proc and sysfs, and the
rules (NVIDIA versions equal, Intel GPUs need Mesa)."""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path

import jsonschema
import pytest

from pycgpu.core.devices import discover
from pycgpu.core.formats import DevT
from pycgpu.runtime import imagecheck
from pycgpu.runtime.imagecheck import (
    INTEL_COMPUTE,
    INTEL_MEDIA,
    LIBDRM,
    MESA_DRI,
    MESA_GALLIUM,
    NVIDIA,
    Component,
    Host,
)

LIBDIR = "usr/lib/x86_64-linux-gnu"
NV = "535.104.05"


def make(rootfs: Path, *files: str, links: dict[str, str] | None = None) -> Path:
    for rel in files:
        path = rootfs / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\x7fELF")
    for rel, target in (links or {}).items():
        path = rootfs / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(target)
    rootfs.mkdir(parents=True, exist_ok=True)
    return rootfs


def nvidia_libs(version: str) -> list[str]:
    return [f"{LIBDIR}/libcuda.so.{version}", f"{LIBDIR}/libnvidia-ml.so.{version}"]


@pytest.fixture
def gpus(fake_sysfs):
    """The fake host's render nodes: renderD128 (i915) and renderD129 (vgem)."""
    return tuple(discover(*fake_sysfs))


def xe(gpus) -> tuple:
    return (dataclasses.replace(gpus[0], driver="xe"),)


def statuses(report) -> list[tuple[str, str]]:
    return [(f.id, f.status) for f in report.findings]


# scanning -----------------------------------------------------------------------------


def test_scan_finds_every_kind_by_file_name(tmp_path):
    rootfs = make(
        tmp_path / "rootfs",
        f"{LIBDIR}/dri/iris_dri.so", f"{LIBDIR}/dri/crocus_dri.so",
        f"{LIBDIR}/dri/kms_swrast_dri.so", f"{LIBDIR}/dri/libdril_dri.so",
        f"{LIBDIR}/libgallium-24.2.8-1~bpo12+1.so",
        f"{LIBDIR}/libdrm.so.2.4.0", f"{LIBDIR}/libdrm_intel.so.1.0.0",
        f"{LIBDIR}/dri/iHD_drv_video.so",
        f"{LIBDIR}/intel-opencl/libigdrcl.so", f"{LIBDIR}/libze_intel_gpu.so.1.3.27191.42",
        *nvidia_libs(NV), f"{LIBDIR}/libGLX_nvidia.so.{NV}",
        f"{LIBDIR}/libnvidia-egl-wayland.so.1.1.11",  # versioned on its own: not the driver
        "opt/conda/lib/libdrm.so.2.4.0",
        f"{LIBDIR}/libc.so.6", "usr/bin/iris_dri.so",  # not a library dir's dri/
        links={f"{LIBDIR}/libcuda.so.1": f"libcuda.so.{NV}",  # no full version: skipped
               f"{LIBDIR}/libdrm.so.2": "libdrm.so.2.4.0"},
    )
    found = imagecheck.scan(rootfs)
    assert found == sorted([
        Component(INTEL_COMPUTE, "libigdrcl", None, f"/{LIBDIR}/intel-opencl/libigdrcl.so"),
        Component(INTEL_COMPUTE, "libze_intel_gpu", "1.3.27191.42",
                  f"/{LIBDIR}/libze_intel_gpu.so.1.3.27191.42"),
        Component(INTEL_MEDIA, "iHD", None, f"/{LIBDIR}/dri/iHD_drv_video.so"),
        Component(LIBDRM, "libdrm", "2.4.0", f"/{LIBDIR}/libdrm.so.2.4.0"),
        Component(LIBDRM, "libdrm", "2.4.0", "/opt/conda/lib/libdrm.so.2.4.0"),
        Component(LIBDRM, "libdrm_intel", "1.0.0", f"/{LIBDIR}/libdrm_intel.so.1.0.0"),
        Component(MESA_DRI, "crocus", None, f"/{LIBDIR}/dri/crocus_dri.so"),
        Component(MESA_DRI, "iris", None, f"/{LIBDIR}/dri/iris_dri.so"),
        Component(MESA_DRI, "kms_swrast", None, f"/{LIBDIR}/dri/kms_swrast_dri.so"),
        Component(MESA_GALLIUM, "libgallium", "24.2.8",
                  f"/{LIBDIR}/libgallium-24.2.8-1~bpo12+1.so"),
        Component(NVIDIA, "libGLX_nvidia", NV, f"/{LIBDIR}/libGLX_nvidia.so.{NV}"),
        Component(NVIDIA, "libcuda", NV, f"/{LIBDIR}/libcuda.so.{NV}"),
        Component(NVIDIA, "libnvidia-ml", NV, f"/{LIBDIR}/libnvidia-ml.so.{NV}"),
    ])


def test_scan_never_follows_links_out_of_the_image(tmp_path):
    host_libs = make(tmp_path / "host", *[f"lib/{n}" for n in nvidia_libs(NV)],
                     "lib/dri/iris_dri.so")
    rootfs = make(tmp_path / "rootfs", f"{LIBDIR}/libdrm.so.2.4.0", links={
        "lib": str(host_libs / "lib"),                       # an absolute link as a top dir
        "usr/lib/x86_64-linux-gnu/escape": str(host_libs),   # a link to a directory
        "usr/local": str(host_libs),                         # a link in the middle of a path
        "opt": "../../host",                                 # a relative way out
    })
    found = imagecheck.scan(rootfs)
    assert [c.name for c in found] == ["libdrm"]


def test_usrmerge_lib_link_is_not_scanned_twice(tmp_path):
    rootfs = make(tmp_path / "rootfs", f"{LIBDIR}/dri/iris_dri.so", links={"lib": "usr/lib"})
    assert [c.path for c in imagecheck.scan(rootfs)] == [f"/{LIBDIR}/dri/iris_dri.so"]


# the host -------------------------------------------------------------------------------


@pytest.mark.parametrize("text,version", [
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
     "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n", "535.104.05"),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.14  Release Build\n",
     "550.54.14"),
])
def test_nvidia_version_from_proc(tmp_path, text, version):
    (tmp_path / "proc" / "driver" / "nvidia").mkdir(parents=True)
    (tmp_path / "proc" / "driver" / "nvidia" / "version").write_text(text)
    assert imagecheck.nvidia_kernel_version(tmp_path / "proc", tmp_path / "sys") == version


def test_nvidia_version_from_sysfs_or_none(tmp_path):
    proc, sys = tmp_path / "proc", tmp_path / "sys"
    assert imagecheck.nvidia_kernel_version(proc, sys) is None
    (sys / "module" / "nvidia").mkdir(parents=True)
    (sys / "module" / "nvidia" / "version").write_text("570.86.15\n")
    assert imagecheck.nvidia_kernel_version(proc, sys) == "570.86.15"


def test_host_reads_render_nodes_and_nvidia(fake_sysfs, tmp_path):
    sysfs, dev = fake_sysfs
    (sysfs / "module" / "nvidia").mkdir(parents=True)
    (sysfs / "module" / "nvidia" / "version").write_text(NV)
    host = imagecheck.host(sysfs, dev, tmp_path / "noproc")
    assert [(d.name, d.driver) for d in host.devices] == [("renderD128", "i915"),
                                                          ("renderD129", None)]
    assert host.nvidia_version == NV


# the rules ------------------------------------------------------------------------------


def test_nvidia_versions_match(tmp_path):
    rootfs = make(tmp_path / "r", *nvidia_libs(NV))
    report = imagecheck.check(rootfs, Host((), NV))
    assert report.ok
    assert report.findings == [imagecheck.Finding(
        "nvidia", "ok", f"NVIDIA user space {NV} matches the kernel module")]


def test_nvidia_version_mismatch(tmp_path):
    rootfs = make(tmp_path / "r", *nvidia_libs("550.54.14"))
    report = imagecheck.check(rootfs, Host((), NV))
    assert not report.ok
    (f,) = report.findings
    assert (f.id, f.status) == ("nvidia", "mismatch")
    assert f.message == ("NVIDIA user space 550.54.14 in the image does not match the host's "
                         f"kernel module {NV} (libcuda, libnvidia-ml)")
    assert f.fix.startswith(f"install NVIDIA driver {NV}'s user space in the image")


def test_nvidia_without_kernel_module(tmp_path):
    report = imagecheck.check(make(tmp_path / "r", *nvidia_libs(NV)), Host((), None))
    assert statuses(report) == [("nvidia", "mismatch")]
    assert "the host has no NVIDIA kernel module loaded" in report.findings[0].message


def test_nvidia_mixed_versions(tmp_path):
    rootfs = make(tmp_path / "r", f"{LIBDIR}/libcuda.so.{NV}",
                  f"{LIBDIR}/libnvidia-ml.so.550.54.14")
    report = imagecheck.check(rootfs, Host((), NV))
    assert statuses(report) == [("nvidia", "mismatch")]
    assert report.findings[0].message.startswith(
        f"the image mixes NVIDIA user-space versions {NV}, 550.54.14")


def test_no_nvidia_in_image_is_fine(tmp_path):
    report = imagecheck.check(make(tmp_path / "r", f"{LIBDIR}/libdrm.so.2.4.0"), Host((), NV))
    assert report.ok
    assert statuses(report) == [("nvidia", "info")]


def test_intel_gpu_with_iris(tmp_path, gpus):
    report = imagecheck.check(make(tmp_path / "r", f"{LIBDIR}/dri/iris_dri.so"), Host(gpus))
    assert report.ok
    assert [f.message for f in report.findings] == [
        "renderD128 (i915, 0000:00:02.0): Mesa iris"]


def test_intel_gpu_with_the_gallium_megadriver(tmp_path, gpus):
    rootfs = make(tmp_path / "r", f"{LIBDIR}/libgallium-24.1.0.so")
    report = imagecheck.check(rootfs, Host(gpus))
    assert report.ok
    assert report.findings[0].message == "renderD128 (i915, 0000:00:02.0): Mesa libgallium 24.1.0"


def test_intel_gpu_without_mesa(tmp_path, gpus):
    rootfs = make(tmp_path / "r", f"{LIBDIR}/libze_intel_gpu.so.1.3.27191.42",
                  f"{LIBDIR}/dri/radeonsi_dri.so")
    report = imagecheck.check(rootfs, Host(gpus))
    assert not report.ok
    (f,) = report.findings
    assert f.message == ("renderD128 (i915, 0000:00:02.0) needs a Mesa driver (iris or crocus "
                         "or i915, or libgallium) and the image has none (found: radeonsi, "
                         "libze_intel_gpu)")
    assert "libgl1-mesa-dri" in f.fix


def test_xe_needs_iris(tmp_path, gpus):
    rootfs = make(tmp_path / "r", f"{LIBDIR}/dri/crocus_dri.so", f"{LIBDIR}/dri/i915_dri.so")
    assert statuses(imagecheck.check(rootfs, Host(xe(gpus)))) == [("intel", "mismatch")]
    make(rootfs, f"{LIBDIR}/dri/iris_dri.so")
    assert statuses(imagecheck.check(rootfs, Host(xe(gpus)))) == [("intel", "ok")]


def test_only_the_containers_gpus_count(tmp_path, gpus):
    rootfs = make(tmp_path / "r")
    assert not imagecheck.check(rootfs, Host(gpus)).ok
    report = imagecheck.check(rootfs, Host(gpus), {DevT(226, 129)})  # vgem only
    assert report.ok
    assert statuses(report) == [("image", "info")]


# the command ----------------------------------------------------------------------------


def test_cli_text_and_exit_codes(tmp_path, cli):
    rootfs = make(tmp_path / "r", f"{LIBDIR}/dri/iris_dri.so", f"{LIBDIR}/libdrm.so.2.4.0")
    r = cli("image", "check", str(rootfs))
    assert r.output.splitlines() == [
        f"image {rootfs}",
        "host   renderD128 (226:128, i915, 0000:00:02.0), renderD129 (226:129)",
        "  mesa-dri      iris",
        "  libdrm        libdrm 2.4.0",
        "ok       intel   renderD128 (i915, 0000:00:02.0): Mesa iris",
        "image fits the host",
    ]
    empty = make(tmp_path / "empty")
    r = cli("image", "check", str(empty), code=3)
    assert r.output.splitlines()[-1] == "1 mismatch found"
    assert "fix: install Mesa's DRI drivers" in r.output
    r = cli("image", "check", str(empty), "--device", "renderD129")  # vgem needs no Mesa
    assert r.output.splitlines() == [
        f"image {empty}",
        "host   renderD128 (226:128, i915, 0000:00:02.0), renderD129 (226:129)",
        "info     image   no GPU user-space drivers found in the image",
        "image fits the host",
    ]


def test_cli_json_validates(tmp_path, cli):
    (tmp_path / "proc" / "driver" / "nvidia").mkdir(parents=True)
    (tmp_path / "proc" / "driver" / "nvidia" / "version").write_text(
        f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {NV}  Sat Aug 19\n")
    cli.env["PYCGPU_PROC_ROOT"] = str(tmp_path / "proc")
    rootfs = make(tmp_path / "r", *nvidia_libs("550.54.14"))
    r = cli("image", "check", str(rootfs), "--json", code=3)
    doc = json.loads(r.stdout)
    jsonschema.Draft202012Validator(imagecheck.SCHEMA).validate(doc)
    assert doc["ok"] is False
    assert doc["host"]["nvidia_kernel_version"] == NV
    assert [(f["id"], f["status"]) for f in doc["findings"]] == [("nvidia", "mismatch"),
                                                                ("intel", "mismatch")]
    assert {c["name"] for c in doc["image"]} == {"libcuda", "libnvidia-ml"}


def test_cli_bad_rootfs_and_device(tmp_path, cli):
    r = cli("image", "check", str(tmp_path / "nope"), code=2)
    assert "is not a directory" in r.output
    (tmp_path / "file").write_text("")
    r = cli("image", "check", str(tmp_path / "file"), code=2)
    assert r.output == (f"Error: ROOTFS {tmp_path}/file is not a directory (give an unpacked "
                        "root file system, e.g. a bundle's rootfs)\n")
    r = cli("image", "check", str(tmp_path), "--device", "renderD7", code=2)
    assert "--device 'renderD7': unknown device" in r.output


def test_cli_help(cli):
    out = cli("image", "check", "--help").output
    assert "pycgpu image check" in out.split("Examples:")[1]
    assert "pycgpu image check" in cli("image", "--help").output


NOBODY = 65534


def scan_names(rootfs: Path) -> list[str]:
    """The components imagecheck.scan() finds in @rootfs, scanned by this
    user, or by nobody when this is root (root reads every directory)."""
    if os.getuid() != 0:
        return [c.name for c in imagecheck.scan(rootfs)]
    read, write = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(read)
        os.close(write)
        raise
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        code = 1
        try:
            os.close(read)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            os.write(write, json.dumps([c.name for c in imagecheck.scan(rootfs)]).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    try:
        with os.fdopen(read, "rb") as pipe:
            out = pipe.read()
    finally:
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the scan as nobody failed"
    names: list[str] = json.loads(out)
    return names


def test_unreadable_directories_are_skipped():
    # not under tmp_path: its parents are root's alone (0700), and a root
    # run scans as nobody
    umask = os.umask(0o022)  # nobody traverses what the test creates
    try:
        with tempfile.TemporaryDirectory() as scratch:
            os.chmod(scratch, 0o755)
            check_unreadable_skipped(Path(scratch))
    finally:
        os.umask(umask)


def check_unreadable_skipped(scratch: Path) -> None:
    rootfs = make(scratch / "r", f"{LIBDIR}/dri/iris_dri.so", "usr/lib/secret/dri/radeonsi_dri.so")
    os.chmod(rootfs / "usr/lib/secret", 0)
    try:
        assert scan_names(rootfs) == ["iris"]
        os.chmod(rootfs / "usr/lib/secret", 0o755)
        # readable, the same tree shows what the one above did not see
        assert scan_names(rootfs) == ["iris", "radeonsi"]
    finally:
        os.chmod(rootfs / "usr/lib/secret", 0o755)
