"""`pycgpu cdi generate` (pycgpu.runtime.cdi): CDI specs for the render nodes,
validated against the CDI schema."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from runtime_schemas import cdi_errors

from pycgpu.core.devices import discover
from pycgpu.runtime import cdi


def nodes(spec: dict, name: str) -> list[dict]:
    (device,) = [d for d in spec["devices"] if d["name"] == name]
    return device["containerEdits"]["deviceNodes"]


def test_spec_has_one_device_per_render_node_and_all(cli, fake_sysfs):
    r = cli("cdi", "generate")
    spec = json.loads(r.stdout)
    assert cdi_errors(spec) == []
    assert spec["cdiVersion"] == "0.5.0"
    assert spec["kind"] == "pycgpu.io/gpu"
    assert [d["name"] for d in spec["devices"]] == ["renderD128", "renderD129", "all"]
    dev_root = fake_sysfs[1]
    assert nodes(spec, "renderD128") == [{
        "path": "/dev/dri/renderD128", "hostPath": str(dev_root / "dri" / "renderD128"),
        "type": "c", "major": 226, "minor": 128, "permissions": "rwm"}]
    assert nodes(spec, "all") == nodes(spec, "renderD128") + nodes(spec, "renderD129")
    assert "containerEdits" not in spec  # no hook unless asked


def test_host_path_is_left_out_when_it_is_the_container_path(fake_sysfs):
    real = [dataclasses.replace(d, render_node=Path("/dev/dri") / d.name)
            for d in discover(*fake_sysfs)]
    spec = cdi.spec(real)
    assert nodes(spec, "renderD129") == [{"path": "/dev/dri/renderD129", "type": "c",
                                          "major": 226, "minor": 129, "permissions": "rwm"}]
    assert cdi_errors(spec) == []


def test_spec_with_the_hook(cli):
    r = cli("cdi", "generate", "--hook", "--hook-path", "/usr/local/bin/pycgpu",
            "--device", "card0")
    spec = json.loads(r.stdout)
    assert cdi_errors(spec) == []
    assert [d["name"] for d in spec["devices"]] == ["renderD128", "all"]
    assert spec["containerEdits"] == {"hooks": [{
        "hookName": "createRuntime", "path": "/usr/local/bin/pycgpu",
        "args": ["pycgpu", "oci", "hook"]}]}


def test_hook_allow(cli):
    """--hook-allow: the spec's hook entry accepts more than the node's
    allow-list (the CDI spec is the node administrator's file)."""
    r = cli("cdi", "generate", "--hook-path", "/usr/local/bin/pycgpu", "--device", "card0",
            "--hook-allow", "gpu.priority")
    spec = json.loads(r.stdout)
    assert cdi_errors(spec) == []
    assert spec["containerEdits"]["hooks"][0]["args"] == [
        "pycgpu", "oci", "hook", "--allow", "pycgpu.io/gpu.priority"]
    r = cli("cdi", "generate", "--hook-allow", "cgroup.procs", code=2)
    assert "--hook-allow: 'cgroup.procs' is not a pycgpu.io/ annotation" in r.output


def test_spec_written_to_a_file_atomically(tmp_path, cli):
    out = tmp_path / "cdi" / "pycgpu.json"
    out.parent.mkdir()
    out.write_text("old")
    os.chmod(out, 0o644)
    r = cli("cdi", "generate", "--hook", "-o", str(out))
    assert r.output.strip() == (f"wrote {out}: pycgpu.io/gpu=renderD128 "
                                "pycgpu.io/gpu=renderD129 pycgpu.io/gpu=all")
    assert cdi_errors(json.loads(out.read_text())) == []
    assert os.stat(out).st_mode & 0o777 == 0o644
    assert sorted(p.name for p in out.parent.iterdir()) == ["pycgpu.json"]


def test_unwritable_output_is_a_refusal(tmp_path, cli):
    r = cli("cdi", "generate", "-o", str(tmp_path / "missing" / "x.json"), code=1)
    assert "No such file or directory" in r.output


def test_unknown_device(cli, tmp_path):
    out = tmp_path / "cdi" / "pycgpu.json"
    out.parent.mkdir()
    r = cli("cdi", "generate", "--device", "renderD300", "-o", str(out), code=2)
    assert "--device 'renderD300': unknown device 'renderD300'" in r.output
    assert list(out.parent.iterdir()) == []  # no spec, no temporary file


def test_no_render_nodes(cli, tmp_path):
    cli.env["PYCGPU_SYSFS_ROOT"] = str(tmp_path / "empty")
    r = cli("cdi", "generate", code=1)
    assert r.output.strip() == ("Error: no DRM render nodes found on this host "
                                "(see pycgpu devices)")


def test_schema_catches_a_broken_spec():
    spec = {"cdiVersion": "0.5.0", "kind": "pycgpu.io/gpu",
            "devices": [{"name": "renderD128", "containerEdits": {
                "deviceNodes": [{"path": "/dev/dri/renderD128", "major": "226"}]}}]}
    assert cdi_errors(spec) == [
        "devices/0/containerEdits/deviceNodes/0/major: '226' is not of type 'integer'"]
    with pytest.raises(ValueError):
        cdi.spec([])


def test_help(cli):
    for cmd in (["cdi"], ["cdi", "generate"]):
        out = cli(*cmd, "--help").output
        assert "pycgpu cdi generate" in out.split("Examples:")[1]
