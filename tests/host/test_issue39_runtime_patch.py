"""`pycgpu oci patch` converges and `pycgpu oci unpatch` removes every key
pycgpu wrote, on a gpu.memory.* kernel and on a dmem kernel alike: the last
patch wins, whatever mix of --hook (annotations) and linux.resources.unified
came before (issue 39, item 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import Cli, FakeKernel

from pycgpu.runtime.runc_spec import TEXT as RUNC_SPEC

# renderD128 (the i915 GPU at 0000:00:02.0 of fake_sysfs) with two regions,
# renderD129 (vgem) with one
REGIONS = {"drm/0000:00:02.0/vram0": 8 << 30, "drm/0000:00:02.0/stolen": 64 << 20,
           "drm/vgem/system": 16 << 30}
MEMORY = "pycgpu.io/gpu.memory.max"
WEIGHT = "pycgpu.io/gpu.weight"


@pytest.fixture(params=["gpu.memory", "dmem"])
def kernel(request, tmp_path, monkeypatch, fake_sysfs) -> tuple[Cli, str, str, str]:
    """(cli, the memory file unified carries, a device with a region, its
    kernel key in that file)."""
    if request.param == "dmem":
        fake = FakeKernel(tmp_path, memory=False, dmem=REGIONS).install(monkeypatch)
        return Cli(fake, *fake_sysfs), "dmem.max", "renderD128:vram0", \
            "drm/0000:00:02.0/vram0"
    fake = FakeKernel(tmp_path).install(monkeypatch)
    return Cli(fake, *fake_sysfs), "gpu.memory.max", "renderD128", "226:128"


@pytest.fixture
def config(tmp_path) -> Path:
    path = tmp_path / "config.json"
    path.write_text(RUNC_SPEC)
    return path


def unified(path: Path) -> dict:
    return json.loads(path.read_text())["linux"]["resources"].get("unified", {})


def annotations(path: Path) -> dict:
    return json.loads(path.read_text()).get("annotations", {})


def hooks(path: Path) -> list:
    return json.loads(path.read_text()).get("hooks", {}).get("createRuntime", [])


def test_a_unified_limit_replaces_the_hooks_annotation(kernel, config):
    cli, file, dev, key = kernel
    cli("oci", "patch", str(config), "--hook", "--memory-max", f"{dev}=1G")
    assert MEMORY in annotations(config) and file not in unified(config)
    cli("oci", "patch", str(config), "--memory-max", f"{dev}=2G")
    assert unified(config) == {file: f"{key} 2147483648"}
    assert MEMORY not in annotations(config)  # the hook would set 1G after runc's 2G


def test_a_hooks_limit_replaces_the_unified_one(kernel, config):
    cli, file, dev, key = kernel
    cli("oci", "patch", str(config), "--memory-max", f"{dev}=2G")
    assert unified(config) == {file: f"{key} 2147483648"}
    cli("oci", "patch", str(config), "--hook", "--memory-max", f"{dev}=1G")
    assert file not in unified(config)
    assert annotations(config)[MEMORY].endswith("=1073741824")


def test_a_limit_replaces_one_in_the_other_kernels_file(kernel, config):
    """A config patched on the other kind of kernel: its memory limit, in the
    other file, goes too (one knob, one value)."""
    cli, file, dev, key = kernel
    other = "gpu.memory.max" if file == "dmem.max" else "dmem.max"
    doc = json.loads(config.read_text())
    doc["linux"]["resources"]["unified"] = {other: "1:1 1", "cpu.weight": "5"}
    config.write_text(json.dumps(doc))
    cli("oci", "patch", str(config), "--memory-max", f"{dev}=2G")
    assert unified(config) == {"cpu.weight": "5", file: f"{key} 2147483648"}


def test_the_last_of_a_mix_of_patches_wins(kernel, config):
    cli, file, dev, key = kernel
    steps = [("--hook", "1G"), ("", "2G"), ("--hook", "3G"), ("", "4G")]
    for flag, size in steps:
        cli("oci", "patch", str(config), *([flag] if flag else []), "--weight", "7",
            "--memory-max", f"{dev}={size}")
    assert unified(config) == {"gpu.weight": "default 7", file: f"{key} 4294967296"}
    assert not any(k.startswith("pycgpu.io/gpu.") for k in annotations(config))


def test_unpatch_removes_every_key_pycgpu_wrote(kernel, config):
    cli, file, dev, _ = kernel
    cli("oci", "patch", str(config), "--device", "renderD128", "--weight", "300",
        "--priority", "5", "--memory-max", f"{dev}=2G")
    assert set(unified(config)) == {"gpu.weight", "gpu.priority", file}
    cli("oci", "unpatch", str(config))
    assert unified(config) == {}
    cli("oci", "patch", str(config), "--hook", "--weight", "300", "--memory-max", f"{dev}=2G")
    cli("oci", "unpatch", str(config))
    assert unified(config) == {} and annotations(config) == {} and hooks(config) == []
    assert json.loads(config.read_text())["linux"]["devices"] == []
