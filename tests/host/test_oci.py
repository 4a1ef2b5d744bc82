"""`pycgpu oci generate` and `pycgpu oci patch` (pycgpu.runtime.oci): runc's default
spec, the runtime-spec schema, preservation of everything else, atomic
writes, and every refusal leaving the file untouched."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from runtime_schemas import oci_errors

from pycgpu.core.formats import UNSET
from pycgpu.runtime import annotations as ann
from pycgpu.runtime import oci
from pycgpu.runtime.runc_spec import TEXT as RUNC_SPEC

DENY_ALL = {"allow": False, "access": "rwm"}


def node_entry(dev_root: Path, name: str, minor: int) -> dict:
    st = os.stat(dev_root / "dri" / name)
    return {"path": f"/dev/dri/{name}", "type": "c", "major": 226, "minor": minor,
            "fileMode": st.st_mode & 0o7777, "uid": st.st_uid, "gid": st.st_gid}


def allow(minor: int) -> dict:
    return {"allow": True, "type": "c", "major": 226, "minor": minor, "access": "rwm"}


@pytest.fixture
def dev_root(fake_sysfs):
    return fake_sysfs[1]


@pytest.fixture
def bundle(tmp_path):
    d = tmp_path / "bundle"
    d.mkdir()
    (d / "config.json").write_text(RUNC_SPEC)
    return d


def load(path: Path) -> dict:
    return json.loads(path.read_text())


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


# generate --------------------------------------------------------------------------


def test_default_spec_is_runc_spec_output(tmp_path, cli):
    assert oci.generate().dumps() == RUNC_SPEC
    cli("oci", "generate", "--bundle", str(tmp_path))
    assert (tmp_path / "config.json").read_text() == RUNC_SPEC
    assert oci_errors(load(tmp_path / "config.json")) == []


@pytest.mark.skipif(shutil.which("runc") is None, reason="runc is not installed")
def test_default_spec_equals_installed_runc(tmp_path):
    version = subprocess.run(["runc", "--version"], capture_output=True, text=True).stdout
    if "runc version 1.1.5" not in version:
        pytest.skip(f"the built-in spec is runc 1.1.5's; installed: {version.splitlines()[0]}")
    subprocess.run(["runc", "spec"], cwd=tmp_path, check=True)
    assert (tmp_path / "config.json").read_text() == RUNC_SPEC


def test_generate_with_everything(tmp_path, cli, dev_root):
    cli("oci", "generate", "--bundle", str(tmp_path), "--device", "renderD128",
        "--weight", "300", "--priority", "-5", "--memory-max", "renderD128=64M",
        "--cgroups-path", "/pycgpu-demo/ctr", "--no-terminal", "--", "sh", "-c", "ls /dev/dri")
    doc = load(tmp_path / "config.json")
    assert oci_errors(doc) == []
    assert doc["process"]["args"] == ["sh", "-c", "ls /dev/dri"]
    assert doc["process"]["terminal"] is False
    linux = doc["linux"]
    assert linux["devices"] == [node_entry(dev_root, "renderD128", 128)]
    assert linux["resources"]["devices"] == [DENY_ALL, allow(128)]  # after runc's deny-all
    assert linux["resources"]["unified"] == {
        "gpu.weight": "default 300", "gpu.priority": "-5", "gpu.memory.max": "226:128 67108864"}
    assert linux["cgroupsPath"] == "/pycgpu-demo/ctr"
    assert "gpu" not in linux["resources"]  # the legacy stanza only on request
    # runc spec's keys keep their order; new ones follow
    assert list(linux) == ["resources", "namespaces", "maskedPaths", "readonlyPaths",
                           "cgroupsPath", "devices"]


def test_generate_refuses_to_replace_without_force(tmp_path, cli):
    (tmp_path / "config.json").write_text("{}")
    r = cli("oci", "generate", "--bundle", str(tmp_path), code=2)
    assert r.output.strip() == (f"Error: {tmp_path}/config.json exists: remove it, pass "
                                f"--force, or patch it with pycgpu oci patch "
                                f"{tmp_path}/config.json")
    assert (tmp_path / "config.json").read_text() == "{}"
    cli("oci", "generate", "--bundle", str(tmp_path), "--force")
    assert (tmp_path / "config.json").read_text() == RUNC_SPEC


def test_generate_to_stdout_and_dry_run(tmp_path, cli):
    r = cli("oci", "generate", "-o", "-", "--device", "renderD129", "--priority", "3")
    doc = json.loads(r.stdout)
    assert doc["linux"]["resources"]["unified"] == {"gpu.priority": "3"}
    b = tmp_path / "b"
    b.mkdir()
    r = cli("oci", "generate", "--bundle", str(b), "--device", "card1", "--weight",
            "20", "--dry-run")
    assert r.output.splitlines() == [
        "would add linux.devices /dev/dri/renderD129 (c 226:129, mode "
        f"{os.stat(cli.env['PYCGPU_DEV_ROOT'] + '/dri/renderD129').st_mode & 0o7777:04o}, "
        f"uid {os.getuid()}, gid {os.getgid()})",
        "would add linux.resources.devices allow c 226:129 rwm",
        "would set linux.resources.unified['gpu.weight'] = 'default 20'",
    ]
    assert list(b.iterdir()) == []


def test_generate_into_a_missing_bundle_directory(tmp_path, cli):
    r = cli("oci", "generate", "--bundle", str(tmp_path / "nope"), code=2)
    assert "is not a directory (create the bundle directory first)" in r.output


# patch: what is added -------------------------------------------------------------------


def test_patch_device_takes_mode_and_owner_of_host_node(bundle, cli, dev_root):
    os.chmod(dev_root / "dri" / "renderD128", 0o660)
    # the same GPU twice: one entry
    cli("oci", "patch", str(bundle / "config.json"), "--device",
        str(dev_root / "dri" / "renderD128"), "--device", "00:02.0")
    doc = load(bundle / "config.json")
    assert doc["linux"]["devices"] == [node_entry(dev_root, "renderD128", 128)]
    assert doc["linux"]["devices"][0]["fileMode"] == 0o660
    assert doc["linux"]["resources"]["devices"] == [DENY_ALL, allow(128)]
    assert oci_errors(doc) == []


def test_patch_a_bundle_directory_twice_is_idempotent(bundle, cli):
    args = ("oci", "patch", str(bundle), "--device", "renderD128", "--device", "renderD129",
            "--weight", "renderD129=50", "--memory-max", "renderD128=1G")
    cli(*args)
    once = (bundle / "config.json").read_text()
    cli(*args)
    assert (bundle / "config.json").read_text() == once
    doc = json.loads(once)
    assert len(doc["linux"]["devices"]) == 2
    assert doc["linux"]["resources"]["devices"] == [DENY_ALL, allow(128), allow(129)]
    assert doc["linux"]["resources"]["unified"] == {"gpu.weight": "226:129 50",
                                                    "gpu.memory.max": "226:128 1073741824"}


def test_patch_replaces_a_stale_device_entry_in_place(bundle, cli, dev_root):
    doc = load(bundle / "config.json")
    doc["linux"]["devices"] = [
        {"path": "/dev/fuse", "type": "c", "major": 10, "minor": 229},
        {"path": "/dev/dri/renderD128", "type": "c", "major": 226, "minor": 200},
    ]
    (bundle / "config.json").write_text(json.dumps(doc))
    cli("oci", "patch", str(bundle), "--device", "renderD128")
    assert load(bundle / "config.json")["linux"]["devices"] == [
        {"path": "/dev/fuse", "type": "c", "major": 10, "minor": 229},
        node_entry(dev_root, "renderD128", 128),
    ]


def test_patch_knob_values_and_the_unified_keys_already_there(bundle, cli):
    doc = load(bundle / "config.json")
    doc["linux"]["resources"]["unified"] = {"memory.high": "1G", "gpu.priority": "1"}
    (bundle / "config.json").write_text(json.dumps(doc, indent=4))
    cli("oci", "patch", str(bundle), "--priority", "1023", "--memory-max", "226:129=max",
        "--weight", "card0=default")
    unified = load(bundle / "config.json")["linux"]["resources"]["unified"]
    assert unified == {"memory.high": "1G", "gpu.priority": "1023",
                       "gpu.memory.max": "226:129 max", "gpu.weight": "226:128 default"}
    assert all(isinstance(v, str) for v in unified.values())


def test_patch_legacy_stanza(bundle, cli):
    cli("oci", "patch", str(bundle), "--memory-max", "renderD128=1G", "--priority", "5",
        "--legacy-stanza")
    doc = load(bundle / "config.json")
    assert doc["linux"]["resources"]["gpu"] == {"memory": 1 << 30, "prio": 5}
    assert doc["linux"]["resources"]["unified"] == {"gpu.priority": "5",
                                                    "gpu.memory.max": "226:128 1073741824"}
    assert oci_errors(doc) == []
    cli("oci", "patch", str(bundle), "--no-legacy-stanza")
    assert "gpu" not in load(bundle / "config.json")["linux"]["resources"]


def test_patch_hook_mode_carries_knobs_in_annotations(bundle, cli):
    cli("oci", "patch", str(bundle), "--device", "renderD128", "--hook",
        "--hook-path", "/usr/local/bin/pycgpu", "--weight", "300", "--weight", "renderD129=20",
        "--priority", "-7", "--memory-max", "renderD128=1G", "--memory-max", "card1=512M",
        "--image-check", "enforce", "--cgroups-path", "/gpu-jobs/a")
    doc = load(bundle / "config.json")
    assert oci_errors(doc) == []
    assert doc["annotations"] == {
        "pycgpu.io/gpu.weight": "300,226:129=20",
        "pycgpu.io/gpu.priority": "-7",
        "pycgpu.io/gpu.memory.max": "226:128=1073741824,226:129=536870912",
        "pycgpu.io/image-check": "enforce",
    }
    # the bundle's author set a priority: its hook entry allows it (a node's
    # allow-list leaves priority off by default)
    assert doc["hooks"] == {"createRuntime": [
        {"path": "/usr/local/bin/pycgpu",
         "args": ["pycgpu", "oci", "hook", "--allow", "pycgpu.io/gpu.priority"]}]}
    assert "unified" not in doc["linux"]["resources"]
    # what the hook will read back
    from pycgpu.cli.commands.common import State

    state = State(sysfs_root=Path(cli.env["PYCGPU_SYSFS_ROOT"]),
                  dev_root=Path(cli.env["PYCGPU_DEV_ROOT"]))
    request = ann.parse(doc["annotations"], state.resolve_devt)
    assert request.image_check == "enforce"
    assert ann.format_settings(request.settings) == {
        k: v for k, v in doc["annotations"].items() if k != ann.IMAGE_CHECK}
    cli("oci", "patch", str(bundle), "--hook", "--hook-path", "/usr/local/bin/pycgpu")
    assert len(load(bundle / "config.json")["hooks"]["createRuntime"]) == 1


def test_priority_default_in_unified_and_in_the_annotation(bundle, cli):
    """runc writes a unified value as it is: ``default`` unsets the group's
    priority (a new container's group has none: it inherits its pod's)."""
    cli("oci", "patch", str(bundle), "--priority", "default")
    assert load(bundle / "config.json")["linux"]["resources"]["unified"] == {
        "gpu.priority": "default"}
    cli("oci", "patch", str(bundle), "--hook", "--hook-path", "/usr/local/bin/pycgpu",
        "--priority", " default")
    doc = load(bundle / "config.json")
    assert doc["annotations"] == {"pycgpu.io/gpu.priority": "default"}
    assert doc["linux"]["resources"]["unified"] == {}  # the knob moved to the annotation
    request = ann.parse(doc["annotations"], lambda t: None)
    assert request.settings.priority is UNSET
    assert ann.format_settings(request.settings) == doc["annotations"]


def test_hook_command_defaults(tmp_path, monkeypatch):
    cmd = oci.hook_command("relative/pycgpu")
    assert cmd.path == os.path.abspath("relative/pycgpu")
    assert cmd.args == ("pycgpu", "oci", "hook")
    assert oci.hook_command("/opt/pycgpu/bin/pycgpu-hook", ["pycgpu.io/gpu.priority"]) == \
        oci.HookCommand("/opt/pycgpu/bin/pycgpu-hook",
                        ("pycgpu-hook", "--allow", "pycgpu.io/gpu.priority"))
    # by default: pycgpu-hook on PATH, else pycgpu on PATH, else this Python
    for name in ("pycgpu", "pycgpu-hook"):
        (tmp_path / name).write_text("#!/bin/sh\n")
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert oci.hook_command() == oci.HookCommand(str(tmp_path / "pycgpu-hook"), ("pycgpu-hook",))
    (tmp_path / "pycgpu-hook").unlink()
    assert oci.hook_command() == oci.HookCommand(str(tmp_path / "pycgpu"),
                                                 ("pycgpu", "oci", "hook"))
    (tmp_path / "pycgpu").unlink()
    found = oci.hook_command()
    assert found.path == os.path.abspath(sys.executable)
    assert found.args == ("python3", "-m", "pycgpu.runtime.hook")


# patch: what is kept ---------------------------------------------------------------------

CUSTOM = """{
  "ociVersion": "1.2.0",
  "x-vendor": {"z": 1, "a": [1, 2.5, "ü"]},
  "process": {"args": ["true"], "cwd": "/", "x-extra": null},
  "root": {"path": "rootfs"},
  "linux": {
    "x-first": true,
    "resources": {
      "memory": {"limit": 1048576},
      "unified": {"memory.high": "1G"},
      "devices": [{"allow": false, "access": "rwm"}],
      "x-inner": {"keep": "me"}
    },
    "namespaces": [{"type": "mount"}]
  },
  "annotations": {"org.example/k": "v"}
}
"""


def key_orders(value, path="") -> dict[str, list[str]]:
    out = {}
    if isinstance(value, dict):
        out[path] = list(value)
        for k, v in value.items():
            out.update(key_orders(v, f"{path}/{k}"))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.update(key_orders(v, f"{path}/{i}"))
    return out


def test_patch_keeps_unknown_fields_key_order_and_layout(tmp_path, cli):
    path = tmp_path / "config.json"
    path.write_text(CUSTOM)
    before = json.loads(CUSTOM)
    cli("oci", "patch", str(path), "--device", "renderD128", "--weight", "300")
    text = path.read_text()
    after = json.loads(text)
    assert text.endswith("}\n") and text.startswith('{\n  "ociVersion"')  # 2 spaces, newline
    assert '"ü"' in text  # not escaped
    # every object keeps its keys in order; new keys come last
    old, new = key_orders(before), key_orders(after)
    for where, keys in old.items():
        assert new[where][:len(keys)] == keys, where
    # removing what the patch added gives back the original
    linux = after["linux"]
    del linux["devices"]
    del linux["resources"]["unified"]["gpu.weight"]
    assert linux["resources"]["devices"].pop() == allow(128)
    assert after == before


@pytest.mark.parametrize("text,expected", [
    ('{"a":1,"b":[1,2]}', '{"a":1,"b":[1,2],'),
    ('{"a": 1, "b": [1, 2]}\n', '{"a": 1, "b": [1, 2], '),
    ('{\n    "a": 1\n}', '{\n    "a": 1,\n    '),
    ('{\n\t"a": 1\n}\n', '{\n\t"a": 1,\n\t'),
])
def test_patch_keeps_the_indentation_style(tmp_path, cli, text, expected):
    path = tmp_path / "config.json"
    path.write_text(text)
    cli("oci", "patch", str(path), "--priority", "1")
    out = path.read_text()
    assert out.startswith(expected)
    assert out.endswith("\n") == text.endswith("\n")


def test_patch_keeps_the_mode_and_replaces_the_file(bundle, cli):
    path = bundle / "config.json"
    os.chmod(path, 0o640)
    inode = os.stat(path).st_ino
    cli("oci", "patch", str(path), "--priority", "1")
    st = os.stat(path)
    assert st.st_mode & 0o7777 == 0o640
    assert st.st_ino != inode  # renamed over, not rewritten in place
    assert leftovers(bundle) == []


def test_patch_through_a_symlink_replaces_the_target(tmp_path, bundle, cli):
    link = tmp_path / "link.json"
    link.symlink_to(bundle / "config.json")
    cli("oci", "patch", str(link), "--priority", "2")
    assert link.is_symlink()
    assert load(bundle / "config.json")["linux"]["resources"]["unified"] == {"gpu.priority": "2"}


def test_patch_output_elsewhere_leaves_config_alone(tmp_path, bundle, cli):
    out = tmp_path / "other.json"
    cli("oci", "patch", str(bundle), "--priority", "4", "-o", str(out))
    assert (bundle / "config.json").read_text() == RUNC_SPEC
    assert load(out)["linux"]["resources"]["unified"] == {"gpu.priority": "4"}
    r = cli("oci", "patch", str(bundle), "--priority", "4", "-o", "-")
    assert json.loads(r.stdout) == load(out)
    assert (bundle / "config.json").read_text() == RUNC_SPEC


def test_patch_dry_run_writes_nothing(bundle, cli):
    r = cli("oci", "patch", str(bundle), "--priority", "4", "--legacy-stanza",
            "--cgroups-path", "/a/b", "--dry-run")
    assert r.output.splitlines() == [
        "would set linux.cgroupsPath = '/a/b'",
        "would set linux.resources.unified['gpu.priority'] = '4'",
        'would set linux.resources.gpu = {"prio": 4}',
    ]
    assert (bundle / "config.json").read_text() == RUNC_SPEC


# atomic write ---------------------------------------------------------------------------


@pytest.mark.parametrize("step", ["write", "fchmod", "fsync", "replace"])
def test_a_failure_midway_leaves_the_original_intact(bundle, cli, monkeypatch, step):
    path = bundle / "config.json"

    def boom(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    if step == "write":  # half of the text written, then the disk is full
        real_fdopen = os.fdopen

        class Half:
            def __init__(self, f):
                self.f = f

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.f.close()

            def write(self, text):
                self.f.write(text[: len(text) // 2])
                self.f.flush()
                boom()

        monkeypatch.setattr(os, "fdopen", lambda *a, **kw: Half(real_fdopen(*a, **kw)))
    else:
        monkeypatch.setattr(os, step, boom)
    r = cli("oci", "patch", str(path), "--device", "renderD128", "--priority", "9", code=1)
    assert "No space left on device" in r.output
    assert f"({path} is unchanged)" in r.output
    assert path.read_text() == RUNC_SPEC
    assert leftovers(bundle) == []


def test_an_unwritable_directory_leaves_the_original_intact(bundle, cli, monkeypatch):
    import tempfile

    def denied(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(bundle))

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    r = cli("oci", "patch", str(bundle), "--priority", "9", code=1)
    assert r.output.strip() == (f"Error: {bundle}: Permission denied "
                                f"({bundle}/config.json is unchanged)")
    assert (bundle / "config.json").read_text() == RUNC_SPEC


def test_atomic_write_creates_new_files_with_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        oci.atomic_write(tmp_path / "new.json", "{}")
    finally:
        os.umask(old)
    assert os.stat(tmp_path / "new.json").st_mode & 0o777 == 0o640
    assert (tmp_path / "new.json").read_text() == "{}"


# refusals --------------------------------------------------------------------------------

BAD_CONFIGS = [
    ("{", "config.json:1:2: not valid JSON: Expecting property name enclosed in double quotes"),
    ("[]", "config.json: not a runtime-spec config (the top level is an array, not an object)"),
    ('{"a": 1, "a": 2}', "config.json: duplicate key 'a' (a rewrite would drop one of them)"),
    ('{"linux": "x"}', "linux is a string, not an object"),
    ('{"linux": {"devices": {}}}', "linux.devices is an object, not an array"),
    ('{"linux": {"devices": [1]}}', "linux.devices[0] is a number, not an object"),
    ('{"linux": {"resources": []}}', "linux.resources is an array, not an object"),
    ('{"linux": {"resources": {"devices": "all"}}}',
     "linux.resources.devices is a string, not an array"),
    ('{"linux": {"resources": {"unified": {"memory.max": 100}}}}',
     "linux.resources.unified['memory.max'] is 100, not a string (the runtime-spec requires "
     "string values)"),
    ('{"linux": {"resources": {"gpu": 5}}}', "linux.resources.gpu is a number, not an object"),
    ('{"linux": {"cgroupsPath": 5}}', "linux.cgroupsPath is a number, not a string"),
    ('{"annotations": {"a": true}}',
     "annotations['a'] is true, not a string (the runtime-spec requires string values)"),
    ('{"hooks": {"createRuntime": {}}}', "hooks.createRuntime is an object, not an array"),
    ('{"process": []}', "process is an array, not an object"),
]


@pytest.mark.parametrize("text,message", BAD_CONFIGS)
def test_bad_configs_are_refused_untouched(tmp_path, cli, text, message):
    path = tmp_path / "config.json"
    path.write_text(text)
    r = cli("oci", "patch", str(path), "--device", "renderD128", "--weight", "3", code=2)
    assert r.output.startswith("Error: ")
    assert message in r.output
    assert len(r.output.strip().splitlines()) == 1
    assert path.read_text() == text
    assert leftovers(tmp_path) == []


BAD_OPTIONS = [
    (["--device", "renderD200"], "--device 'renderD200': unknown device 'renderD200'; "
                                 "known devices: renderD128 (226:128, i915, 0000:00:02.0), "
                                 "renderD129 (226:129) (see pycgpu devices)"),
    (["--weight", "0"], "--weight '0': weight 0 is out of range [1, 10000]"),
    (["--weight", "abc"], "--weight 'abc': 'abc' is not an integer"),
    (["--priority", "2000"], "--priority '2000': priority 2000 is out of range [-1023, 1023]"),
    (["--memory-max", "renderD128=12Q"], "--memory-max 'renderD128=12Q': '12Q' is not a size"),
    (["--memory-max", "2G"], "--memory-max '2G': give DEV=SIZE"),
    (["--weight", "300", "--weight", "renderD128=50"],
     "gpu.weight needs 2 writes ('default 300'; '226:128 50') but linux.resources.unified "
     "holds one per file (runc and crun write it with one write(2); the kernel takes one key "
     "per write): give one value, or pass --hook to apply them from the createRuntime hook"),
    (["--memory-max", "renderD128=1G", "--memory-max", "renderD129=1G"],
     "gpu.memory.max needs 2 writes"),
    (["--memory-max", "renderD128=1G", "--memory-max", "renderD129=1G", "--hook",
      "--legacy-stanza"], "the legacy linux.resources.gpu stanza has one memory limit"),
    (["--weight", "5", "--legacy-stanza"],
     "the legacy linux.resources.gpu stanza carries memory, prio, quota and period"),
    (["--priority", "default", "--legacy-stanza"],
     "the legacy linux.resources.gpu stanza's prio is a number: it cannot carry the priority "
     "default"),
    (["--memory-max", "renderD128=max", "--legacy-stanza"],
     "the legacy linux.resources.gpu stanza carries memory, prio, quota and period"),
    (["--cgroups-path", "/a/../b"], "cgroups path '/a/../b' must not contain '..'"),
    (["--cgroups-path", " "], "cgroups path ' ' is empty or has a newline"),
    (["--image-check", "sometimes"], "Invalid value for '--image-check'"),
    ([], "nothing to patch: give --device, --weight, --priority, --memory-max, "
         "--max, --cgroups-path, --hook or --legacy-stanza"),
    (["--max", "30%", "--max", "renderD128=50%"],
     "gpu.max needs 2 writes ('default 30000 100000'; '226:128 50000 100000')"),
    (["--max", "130%"], "--max '130%': 130% is more than all of an engine"),
    (["--max", "renderD128=0.5ms"],
     "--max 'renderD128=0.5ms': cap 500 µs is out of range [1000, 100000]"),
    (["--max", "renderD128=30%", "--max", "renderD129=30%", "--hook", "--legacy-stanza"],
     "the legacy linux.resources.gpu stanza has one cap"),
    (["--max", "renderD128=default", "--hook", "--legacy-stanza"],
     "the legacy linux.resources.gpu stanza has no form for a device's cap of default"),
]


@pytest.mark.parametrize("args,message", BAD_OPTIONS)
def test_bad_options_are_refused_untouched(bundle, cli, args, message):
    r = cli("oci", "patch", str(bundle / "config.json"), *args, code=2)
    assert message in r.output
    assert (bundle / "config.json").read_text() == RUNC_SPEC
    assert leftovers(bundle) == []


def test_null_fields_count_as_empty(tmp_path, cli, dev_root):
    path = tmp_path / "config.json"
    path.write_text('{"linux": {"devices": null, "resources": {"devices": null, "unified": null}}}')
    cli("oci", "patch", str(path), "--device", "renderD128", "--weight", "3")
    assert load(path) == {"linux": {
        "devices": [node_entry(dev_root, "renderD128", 128)],
        "resources": {"devices": [allow(128)], "unified": {"gpu.weight": "default 3"}}}}


def test_missing_config(tmp_path, cli):
    r = cli("oci", "patch", str(tmp_path / "config.json"), "--priority", "1", code=2)
    assert r.output.strip() == (f"Error: {tmp_path}/config.json does not exist (create one: "
                                "pycgpu oci generate)")
    r = cli("oci", "patch", str(tmp_path), "--priority", "1", code=2)  # a dir without one
    assert "does not exist" in r.output


def test_unreadable_device_node_is_a_refusal(bundle, cli, dev_root):
    (dev_root / "dri" / "renderD129").unlink()
    r = cli("oci", "patch", str(bundle), "--device", "renderD129", code=1)
    assert "renderD129: No such file or directory" in r.output
    assert (bundle / "config.json").read_text() == RUNC_SPEC


# the schema --------------------------------------------------------------------------------


def test_schema_rejects_numbers_in_unified():
    doc = json.loads(RUNC_SPEC)
    doc["linux"]["resources"]["unified"] = {"gpu.weight": 200}
    assert oci_errors(doc) == ["linux/resources/unified/gpu.weight: 200 is not of type 'string'"]


@pytest.mark.parametrize("args", [
    ["--device", "renderD128", "--device", "renderD129", "--weight", "300", "--priority",
     "-1023", "--memory-max", "renderD129=1T"],
    ["--device", "renderD128", "--hook", "--memory-max", "renderD128=1G", "--memory-max",
     "renderD129=2G", "--image-check", "warn"],
    ["--memory-max", "renderD128=512M", "--priority", "7", "--legacy-stanza",
     "--cgroups-path", "system.slice:pycgpu:job"],
])
def test_every_patch_validates_against_the_runtime_spec(bundle, cli, args):
    cli("oci", "patch", str(bundle), *args)
    assert oci_errors(load(bundle / "config.json")) == []


def test_help_has_examples_and_exit_codes(cli):
    for cmd in (["oci"], ["oci", "patch"], ["oci", "generate"], ["oci", "hook"]):
        out = cli(*cmd, "--help").output
        assert "Examples:" in out
        assert "pycgpu oci" in out.split("Examples:")[1]
    assert "Exit codes: 0 done" in cli("oci", "patch", "--help").output


# patching again converges; unpatch --------------------------------------------------------


def knobs_of(doc: dict) -> tuple[dict, dict, list]:
    unified = doc["linux"].get("resources", {}).get("unified", {})
    annotations = {k: v for k, v in doc.get("annotations", {}).items()
                   if k.startswith(ann.PREFIX)}
    return unified, annotations, doc.get("hooks", {}).get("createRuntime", [])


def test_patch_without_hook_replaces_the_hooks_value(cli, bundle):
    cfg = str(bundle / "config.json")
    cli("oci", "patch", cfg, "--hook", "--hook-path", "/usr/bin/pycgpu", "--weight", "500")
    cli("oci", "patch", cfg, "--weight", "700")
    unified, annotations, hooks = knobs_of(load(bundle / "config.json"))
    assert unified == {"gpu.weight": "default 700"}
    assert annotations == {}  # the hook would otherwise write 500 after runc wrote 700
    assert len(hooks) == 1


def test_patch_with_hook_replaces_the_unified_value(cli, bundle):
    cfg = str(bundle / "config.json")
    cli("oci", "patch", cfg, "--weight", "700", "--priority", "3")
    args = ["oci", "patch", cfg, "--hook", "--hook-path", "/usr/bin/pycgpu", "--weight", "500"]
    r = cli(*args, "--dry-run")
    assert "would remove linux.resources.unified['gpu.weight'] (now in annotations)" in r.output
    cli(*args)
    unified, annotations, _hooks = knobs_of(load(bundle / "config.json"))
    assert unified == {"gpu.priority": "3"}  # the knob not given again stays
    assert annotations == {"pycgpu.io/gpu.weight": "500"}
    assert oci_errors(load(bundle / "config.json")) == []


def test_one_hook_whatever_the_hook_path(cli, bundle):
    cfg = str(bundle / "config.json")
    cli("oci", "patch", cfg, "--hook", "--hook-path", "/usr/bin/pycgpu", "--weight", "5")
    cli("oci", "patch", cfg, "--hook", "--hook-path", "/opt/venv/bin/pycgpu", "--weight", "5")
    _, _, hooks = knobs_of(load(bundle / "config.json"))
    assert hooks == [{"path": "/opt/venv/bin/pycgpu", "args": ["pycgpu", "oci", "hook"]}]


def test_patching_twice_changes_nothing(cli, bundle):
    args = ["--device", "renderD128", "--hook", "--hook-path", "/usr/bin/pycgpu",
            "--memory-max", "renderD128=1G", "--priority", "4"]
    cli("oci", "patch", str(bundle), *args)
    once = (bundle / "config.json").read_text()
    r = cli("oci", "patch", str(bundle), *args, "--dry-run")
    assert r.output == ""
    cli("oci", "patch", str(bundle), *args)
    assert (bundle / "config.json").read_text() == once


def test_unpatch_removes_every_pycgpu_edit(cli, bundle):
    other_hook = {"path": "/usr/bin/nvidia-ctk", "args": ["nvidia-ctk", "hook"]}
    doc = load(bundle / "config.json")
    doc["hooks"] = {"createRuntime": [other_hook]}
    doc["annotations"] = {"org.example/keep": "yes"}
    (bundle / "config.json").write_text(json.dumps(doc, indent="\t"))
    cli("oci", "patch", str(bundle), "--device", "renderD128", "--weight", "300",
        "--legacy-stanza", "--priority", "2")
    cli("oci", "patch", str(bundle), "--hook", "--hook-path", "/usr/bin/pycgpu",
        "--memory-max", "renderD128=1G", "--image-check", "warn")
    r = cli("oci", "unpatch", str(bundle), "--dry-run")
    assert "would remove hooks.createRuntime pycgpu oci hook (/usr/bin/pycgpu)" in r.output
    cli("oci", "unpatch", str(bundle))
    after = load(bundle / "config.json")
    unified, annotations, hooks = knobs_of(after)
    assert unified == {} and annotations == {} and hooks == [other_hook]
    assert after["annotations"] == {"org.example/keep": "yes"}
    assert "gpu" not in after["linux"]["resources"]
    assert after["linux"]["devices"] == []
    assert after["linux"]["resources"]["devices"] == [DENY_ALL]
    assert oci_errors(after) == []


def test_a_hook_entry_with_allow_options_is_pycgpus(cli, bundle):
    """--priority puts --allow after `oci hook`: patching again replaces that
    entry (one hook), and unpatch removes it."""
    cli("oci", "patch", str(bundle), "--hook", "--hook-path", "/usr/bin/pycgpu",
        "--priority", "-3")
    cli("oci", "patch", str(bundle), "--hook", "--hook-path", "/usr/bin/pycgpu",
        "--weight", "200")
    _, _, hooks = knobs_of(load(bundle / "config.json"))
    # the priority stays in the annotations: the entry keeps allowing it
    assert [h["args"] for h in hooks] == [["pycgpu", "oci", "hook", "--allow",
                                           "pycgpu.io/gpu.priority"]]
    cli("oci", "patch", str(bundle), "--hook", "--hook-path", "/usr/bin/pycgpu",
        "--priority", "-3")
    _, _, hooks = knobs_of(load(bundle / "config.json"))
    assert [h["args"] for h in hooks] == [
        ["pycgpu", "oci", "hook", "--allow", "pycgpu.io/gpu.priority"]]
    cli("oci", "unpatch", str(bundle))
    assert knobs_of(load(bundle / "config.json"))[2] == []


def test_unpatch_keep_devices(cli, bundle, dev_root):
    cli("oci", "patch", str(bundle), "--device", "renderD128", "--weight", "300")
    cli("oci", "unpatch", str(bundle), "--keep-devices")
    after = load(bundle / "config.json")
    assert after["linux"]["devices"] == [node_entry(dev_root, "renderD128", 128)]
    assert allow(128) in after["linux"]["resources"]["devices"]
    assert "gpu.weight" not in after["linux"]["resources"].get("unified", {})
