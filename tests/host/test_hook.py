"""`pycgpu oci hook` (pycgpu.runtime.hook) on the fake cgroup tree: the allow-list of
pycgpu.io/* annotations, finding the container's cgroup, enabling gpu along
its path, all-or-none, the image check, and failing closed."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pycgpu.cli import main

SCOPE = "system.slice/ctr.scope"
PID = 4242
IRIS = "usr/lib/x86_64-linux-gnu/dri/iris_dri.so"


@pytest.fixture
def ctr(cli, tmp_path):
    """A container: its cgroup under a systemd-like slice that lacks gpu in
    its subtree_control, /proc/PID/cgroup, and its bundle."""
    root = cli.fake.root
    (root / "cgroup.subtree_control").write_text("cpu memory\n")
    for rel in ("system.slice", SCOPE):
        (root / rel).mkdir()
        (root / rel / "cgroup.subtree_control").write_text(
            "cpu memory\n" if rel == "system.slice" else "\n")
        (root / rel / "cgroup.controllers").write_text("cpu memory\n")
        (root / rel / "cgroup.procs").write_text("")
    (root / SCOPE / "cgroup.procs").write_text(f"{PID}\n")
    proc = tmp_path / "proc"
    (proc / str(PID)).mkdir(parents=True)
    (proc / str(PID) / "cgroup").write_text(f"0::/{SCOPE}\n")
    bundle = tmp_path / "ctr-bundle"
    (bundle / "rootfs").mkdir(parents=True)
    config = {"ociVersion": "1.0.2", "root": {"path": "rootfs"},
              "linux": {"cgroupsPath": f"/{SCOPE}", "devices": [
                  {"path": "/dev/dri/renderD128", "type": "c", "major": 226, "minor": 128}]}}
    (bundle / "config.json").write_text(json.dumps(config))
    cli.env["PYCGPU_PROC_ROOT"] = str(proc)
    # a node that allows every knob (the allow-list's own tests are below)
    allow = tmp_path / "annotations.allow"
    allow.write_text("gpu.weight\ngpu.priority\ngpu.memory.max\nimage-check\n")
    allow.chmod(0o644)
    cli.env["PYCGPU_ALLOW_LIST"] = str(allow)
    return bundle


def state(bundle: Path, annotations: dict | None = None, pid: int | None = PID) -> dict:
    doc = {"ociVersion": "1.0.2", "id": "c1", "status": "creating", "bundle": str(bundle)}
    if pid is not None:
        doc["pid"] = pid
    if annotations is not None:
        doc["annotations"] = annotations
    return doc


def hook(cli, stdin: dict | str, code: int = 0):
    text = stdin if isinstance(stdin, str) else json.dumps(stdin)
    result = CliRunner().invoke(main, ["oci", "hook"], input=text, env=cli.env)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == code, (result.exit_code, result.output)
    return result


def read(cli, name: str) -> str:
    return cli.fake.read(f"{SCOPE}/{name}")


KNOBS = {"pycgpu.io/gpu.weight": "300, renderD129=20",
         "pycgpu.io/gpu.priority": "-7",
         "pycgpu.io/gpu.memory.max": "renderD128=1G,card1=512M",
         "org.example/other": "ignored"}


def test_applies_the_knobs_and_enables_gpu_along_the_path(cli, ctr):
    hook(cli, state(ctr, KNOBS))
    assert read(cli, "gpu.weight") == "default 300\n226:129 20\n"
    assert read(cli, "gpu.priority") == "-7\n"
    assert read(cli, "gpu.memory.max") == "226:128 1073741824\n226:129 536870912\n"
    assert cli.fake.log == [
        ("cgroup.subtree_control", "+gpu"),
        ("system.slice/cgroup.subtree_control", "+gpu"),
        (f"{SCOPE}/gpu.weight", "default 300"),
        (f"{SCOPE}/gpu.weight", "226:129 20"),
        (f"{SCOPE}/gpu.priority", "-7"),
        (f"{SCOPE}/gpu.memory.max", "226:128 1073741824"),
        (f"{SCOPE}/gpu.memory.max", "226:129 536870912"),
    ]
    assert read(cli, "cgroup.subtree_control").strip() == ""  # the scope stays a leaf


def test_annotations_from_the_bundle_when_the_state_has_none(cli, ctr):
    config = json.loads((ctr / "config.json").read_text())
    config["annotations"] = {"pycgpu.io/gpu.priority": "12"}
    (ctr / "config.json").write_text(json.dumps(config))
    hook(cli, state(ctr))
    assert read(cli, "gpu.priority") == "12\n"


def test_priority_default_unsets_the_containers_own(cli, ctr):
    """The container's group then inherits its parent's (its pod's) effective
    priority, as a new group does."""
    hook(cli, state(ctr, {"pycgpu.io/gpu.priority": "-7"}))
    assert read(cli, "gpu.priority.effective") == "-7\n"
    cli("set", "system.slice", "--priority", "20")
    hook(cli, state(ctr, {"pycgpu.io/gpu.priority": "default"}))
    assert (read(cli, "gpu.priority"), read(cli, "gpu.priority.effective")) == (
        "default\n", "20\n")
    r = hook(cli, state(ctr, {"pycgpu.io/gpu.priority": "Default"}), code=2)
    assert ("annotation pycgpu.io/gpu.priority 'Default': 'Default' is not an integer (give N "
            "in [-1023, 1023], or default)") in r.output


def test_cgroup_from_cgroups_path_without_a_pid(cli, ctr):
    hook(cli, state(ctr, {"pycgpu.io/gpu.weight": "5"}, pid=None))
    assert read(cli, "gpu.weight") == "default 5\n"


def test_nothing_to_do_without_pycgpu_annotations(cli, ctr, tmp_path):
    cli.env["PYCGPU_CGROUP_ROOT"] = str(tmp_path)  # not even a cgroup2 tree: never asked
    before = cli.fake.snapshot()
    r = hook(cli, state(ctr, {"org.example/x": "y"}))
    assert r.output == ""
    assert cli.fake.log == []
    assert cli.fake.snapshot() == before


@pytest.mark.parametrize("key", [
    "pycgpu.io/gpu.stat", "pycgpu.io/cgroup.procs", "pycgpu.io/memory.max",
    "pycgpu.io/gpu.weight/../../cgroup.procs", "pycgpu.io/gpu.memory.high",
    "pycgpu.io/unified",
])
def test_keys_outside_the_allow_list_refuse_the_container(cli, ctr, key):
    before = cli.fake.snapshot()
    r = hook(cli, state(ctr, {**KNOBS, key: "1"}), code=2)
    assert r.output.strip() == (
        f"Error: pycgpu oci hook: container c1: annotation {key} is not allowed: only "
        "pycgpu.io/gpu.weight, pycgpu.io/gpu.priority, pycgpu.io/gpu.memory.max, "
        "pycgpu.io/gpu.max, pycgpu.io/image-check are accepted (no other cgroup file is "
        "ever written)")
    assert cli.fake.log == []
    assert cli.fake.snapshot() == before


@pytest.mark.parametrize("key,value,why", [
    ("gpu.weight", "0", "weight 0 is out of range [1, 10000]"),
    ("gpu.weight", "abc", "'abc' is not an integer (give W or DEV=W with W in [1, 10000], "
                          "or DEV=default)"),
    ("gpu.weight", "300\n226:128 5", "'300\\n226:128 5' is not an integer"),
    ("gpu.weight", "", "empty value (give e.g. '300' or 'renderD128=50')"),
    ("gpu.weight", "300,,5", "empty value"),
    ("gpu.priority", "1,2", "pycgpu.io/gpu.priority takes one value"),
    ("gpu.priority", "5000", "priority 5000 is out of range [-1023, 1023]"),
    ("gpu.memory.max", "renderD128=1X", "'1X' is not a size"),
    ("gpu.memory.max", "1G", "give DEV=SIZE, e.g. renderD128=2G or renderD128=max"),
    ("gpu.memory.max", "renderD200=1G", "unknown device 'renderD200'"),
    ("gpu.memory.max", "renderD128=1G,226:128=2G", "the limit of 226:128 is given twice"),
    ("image-check", "sometimes", "give enforce, warn, off"),
])
def test_bad_values_refuse_the_container(cli, ctr, key, value, why):
    before = cli.fake.snapshot()
    r = hook(cli, state(ctr, {**KNOBS, f"pycgpu.io/{key}": value}), code=2)
    assert r.output.startswith(
        f"Error: pycgpu oci hook: container c1: annotation pycgpu.io/{key}")
    assert why in r.output
    assert cli.fake.log == []
    assert cli.fake.snapshot() == before


def test_a_non_string_value_is_refused(cli, ctr):
    before = cli.fake.snapshot()
    r = hook(cli, state(ctr, {"pycgpu.io/gpu.weight": "300", "pycgpu.io/gpu.priority": 5}),
             code=2)
    assert "annotation pycgpu.io/gpu.priority is 5, not a string" in r.output
    assert cli.fake.log == [] and cli.fake.snapshot() == before


def test_a_kernel_refusal_rolls_everything_back(cli, ctr):
    cli.fake.fail[f"{SCOPE}/gpu.memory.max"] = errno.EINVAL
    before = cli.fake.snapshot()
    r = hook(cli, state(ctr, KNOBS), code=1)
    assert r.output.startswith(f"Error: pycgpu oci hook: container c1: writing '226:128 "
                               f"1073741824' to {cli.fake.root}/{SCOPE}/gpu.memory.max: "
                               "invalid value; nothing was changed")
    assert cli.fake.snapshot() == before


def test_a_host_without_the_gpu_controller(cli, ctr):
    (cli.fake.root / "cgroup.controllers").write_text("cpu memory\n")
    r = hook(cli, state(ctr, KNOBS), code=1)
    assert "no gpu controller in" in r.output
    assert cli.fake.log == []


@pytest.mark.parametrize("text,why", [
    ("", "the OCI state on stdin:1:1: not valid JSON: Expecting value - is this running"),
    ("[1]", "the OCI state on stdin is not a JSON object"),
    ('{"pid": 1, "bundle": "/b"}', "the OCI state on stdin has no container id"),
    ('{"id": "c1", "pid": "1", "bundle": "/b"}', "container c1: the state's pid '1' is not"),
    ('{"id": "c1", "pid": true, "bundle": "/b"}', "the state's pid True is not a process id"),
    ('{"id": "c1", "pid": 1}', "container c1: the state has no bundle path"),
    ('{"id": "c1", "pid": 1, "bundle": "/b", "annotations": []}', "annotations are not an"),
])
def test_bad_state(cli, ctr, text, why):
    before = cli.fake.snapshot()
    r = hook(cli, text, code=2)
    assert why in r.output
    assert cli.fake.log == []
    assert cli.fake.snapshot() == before


def test_unreadable_bundle_config_fails_closed(cli, tmp_path, ctr):
    before = cli.fake.snapshot()
    r = hook(cli, state(tmp_path / "gone"), code=1)
    assert f"container c1: cannot read {tmp_path}/gone/config.json" in r.output
    (ctr / "config.json").write_text("{nope")
    r = hook(cli, state(ctr), code=2)
    assert "config.json:1:2: not valid JSON" in r.output
    assert cli.fake.log == [] and cli.fake.snapshot() == before
    assert (ctr / "config.json").read_text() == "{nope"


@pytest.mark.parametrize("content,why", [
    (None, "cannot read"),
    ("0::/\n", "the container runs in the root cgroup, which has no gpu.* files"),
    ("0::/gone.scope\n", "/gone.scope does not exist"),
    ("4:memory:/x\n1:name=systemd:/x\n", "has no cgroup v2 entry (0::/...)"),
    ("0::/../etc\n", "must not contain '..'"),
])
def test_the_cgroup_must_be_found(cli, ctr, tmp_path, content, why):
    f = tmp_path / "proc" / str(PID) / "cgroup"
    if content is None:
        f.unlink()
    else:
        f.write_text(content)
    before = cli.fake.snapshot()
    r = hook(cli, state(ctr, KNOBS), code=1)
    assert why in r.output
    assert cli.fake.log == []
    assert cli.fake.snapshot() == before


def test_a_systemd_cgroups_path_needs_the_pid(cli, ctr):
    config = json.loads((ctr / "config.json").read_text())
    config["linux"]["cgroupsPath"] = "system.slice:pycgpu:ctr"
    (ctr / "config.json").write_text(json.dumps(config))
    before = cli.fake.snapshot()
    r = hook(cli, state(ctr, KNOBS, pid=None), code=1)
    assert "is a systemd unit path: the hook needs the state's pid" in r.output
    assert cli.fake.log == [] and cli.fake.snapshot() == before


# the image check ----------------------------------------------------------------------------


def test_image_check_enforce_refuses_a_mismatch(cli, ctr):
    before = cli.fake.snapshot()
    r = hook(cli, state(ctr, {**KNOBS, "pycgpu.io/image-check": "enforce"}), code=3)
    assert r.output.startswith(
        "Error: pycgpu oci hook: container c1: image check failed: renderD128 (i915, "
        "0000:00:02.0) needs a Mesa driver (iris or crocus or i915, or libgallium) and the "
        "image has none (fix: install Mesa's DRI drivers in the image")
    assert cli.fake.log == []
    assert cli.fake.snapshot() == before


def test_image_check_enforce_passes_a_fitting_image(cli, ctr):
    (ctr / "rootfs" / IRIS).parent.mkdir(parents=True)
    (ctr / "rootfs" / IRIS).write_bytes(b"")
    hook(cli, state(ctr, {**KNOBS, "pycgpu.io/image-check": "enforce"}))
    assert read(cli, "gpu.priority") == "-7\n"


def test_image_check_only_counts_the_containers_devices(cli, ctr):
    """The image has no Mesa: it fits a container without the Intel GPU
    (none, or only vgem), and not one with it: the check did run."""
    config = json.loads((ctr / "config.json").read_text())
    vgem = {"path": "/dev/dri/renderD129", "type": "c", "major": 226, "minor": 129}
    for devices in ([], [vgem]):  # no Intel GPU in this container
        config["linux"]["devices"] = devices
        (ctr / "config.json").write_text(json.dumps(config))
        r = hook(cli, state(ctr, {"pycgpu.io/image-check": "enforce"}))
        assert r.output == ""
    config["linux"]["devices"] = [vgem, {**vgem, "path": "/dev/dri/renderD128", "minor": 128}]
    (ctr / "config.json").write_text(json.dumps(config))
    r = hook(cli, state(ctr, {"pycgpu.io/image-check": "warn"}))
    assert r.output.startswith(
        "pycgpu oci hook: warning: image check: renderD128 (i915, 0000:00:02.0) needs a Mesa "
        "driver")
    assert len(r.output.splitlines()) == 1
    assert cli.fake.log == []


def test_image_check_warn_applies_and_warns(cli, ctr):
    r = hook(cli, state(ctr, {**KNOBS, "pycgpu.io/image-check": "warn"}))
    assert "pycgpu oci hook: warning: image check: renderD128 (i915, 0000:00:02.0) needs" \
        in r.output
    assert read(cli, "gpu.priority") == "-7\n"


def test_image_check_needs_the_rootfs(cli, ctr):
    (ctr / "rootfs").rmdir()
    before = cli.fake.snapshot()
    r = hook(cli, state(ctr, {**KNOBS, "pycgpu.io/image-check": "enforce"}), code=1)
    assert f"its root file system {ctr}/rootfs is not a directory" in r.output
    assert cli.fake.log == [] and cli.fake.snapshot() == before  # the knobs were not applied


def test_image_check_off_does_nothing(cli, ctr):
    hook(cli, state(ctr, {"pycgpu.io/image-check": "off"}))
    assert cli.fake.log == []


def test_huge_numbers_in_hook_annotations(cli, ctr):
    before = cli.fake.snapshot()
    r = hook(cli, state(ctr, {"pycgpu.io/gpu.memory.max": "renderD128=" + "9" * 5000}), code=2)
    assert "out of range" in r.output and len(r.output) < 400
    r = hook(cli, state(ctr, {"pycgpu.io/gpu.priority": "-" + "9" * 5000}), code=2)
    assert "out of range" in r.output
    assert cli.fake.snapshot() == before
    assert "gpu" not in (cli.fake.root / SCOPE / "cgroup.controllers").read_text()


# the node's allow-list --------------------------------------------------------------------


def _knob(cli, name: str) -> str | None:
    """A knob file's text, None before gpu is enabled for the group."""
    path = cli.fake.root / SCOPE / name
    return path.read_text() if path.exists() else None


def _hook_args(cli, stdin: dict, *args: str, code: int = 0):
    result = CliRunner().invoke(main, ["oci", "hook", *args], input=json.dumps(stdin),
                                env=cli.env)
    assert result.exit_code == code, (result.exit_code, result.output)
    return result


def test_priority_is_off_without_an_allow_list(cli, ctr, tmp_path):
    """No allow-list file: weight and memory pass, priority refuses the
    container and nothing is written."""
    cli.env["PYCGPU_ALLOW_LIST"] = str(tmp_path / "absent.allow")
    r = hook(cli, state(ctr, {"pycgpu.io/gpu.weight": "300",
                              "pycgpu.io/gpu.priority": "1023"}), code=2)
    assert "annotation pycgpu.io/gpu.priority is not on this node's allow-list" in r.output
    assert _knob(cli, "gpu.priority") in (None, "default\n")
    assert _knob(cli, "gpu.weight") in (None, "default 100\n")
    hook(cli, state(ctr, {"pycgpu.io/gpu.weight": "300",
                          "pycgpu.io/gpu.memory.max": "renderD128=1G"}))
    assert read(cli, "gpu.weight") == "default 300\n"


def test_the_node_file_sets_the_allow_list(cli, ctr, tmp_path):
    allow = tmp_path / "weights-only.allow"
    allow.write_text("# this node: weights only\npycgpu.io/gpu.weight\n")
    allow.chmod(0o600)
    cli.env["PYCGPU_ALLOW_LIST"] = str(allow)
    r = hook(cli, state(ctr, {"pycgpu.io/gpu.memory.max": "renderD128=1G"}), code=2)
    assert "pycgpu.io/gpu.memory.max is not on this node's allow-list " \
        "(pycgpu.io/gpu.weight allowed" in r.output
    allow.write_text("gpu.weight\ngpu.priority\n")
    hook(cli, state(ctr, {"pycgpu.io/gpu.priority": "-7"}))
    assert read(cli, "gpu.priority") == "-7\n"


def test_the_hook_entry_may_allow_more(cli, ctr, tmp_path):
    cli.env["PYCGPU_ALLOW_LIST"] = str(tmp_path / "absent.allow")
    _hook_args(cli, state(ctr, {"pycgpu.io/gpu.priority": "-7"}), "--allow", "gpu.priority")
    assert read(cli, "gpu.priority") == "-7\n"
    r = _hook_args(cli, state(ctr, {}), "--allow", "cgroup.procs", code=1)
    assert "'cgroup.procs' is not a pycgpu.io/ annotation the hook knows" in r.output


@pytest.mark.parametrize(("mode", "text", "message"), [
    (0o666, "gpu.weight\n", "is writable by its group or others (mode 666): not trusted"),
    (0o620, "gpu.weight\n", "is writable by its group or others (mode 620): not trusted"),
    (0o644, "gpu.weight\ncgroup.procs\n", "line 2: 'cgroup.procs' is not a pycgpu.io/"),
    (0o644, b"gpu.weight\xff\n", "is not UTF-8 text"),
])
def test_an_untrusted_or_wrong_allow_list_refuses(cli, ctr, tmp_path, mode, text, message):
    allow = tmp_path / "bad.allow"
    if isinstance(text, bytes):
        allow.write_bytes(text)
    else:
        allow.write_text(text)
    allow.chmod(mode)
    cli.env["PYCGPU_ALLOW_LIST"] = str(allow)
    r = hook(cli, state(ctr, {"pycgpu.io/gpu.weight": "300"}), code=1)
    assert message in r.output
    assert "Traceback" not in r.output
    assert _knob(cli, "gpu.weight") in (None, "default 100\n")


def test_an_allow_list_owned_by_another_user_refuses(cli, ctr, tmp_path):
    import os

    if os.geteuid() != 0:
        pytest.skip("chown to another user needs root")
    allow = tmp_path / "other.allow"
    allow.write_text("gpu.weight\ngpu.priority\n")
    allow.chmod(0o644)
    os.chown(allow, 65534, 65534)
    cli.env["PYCGPU_ALLOW_LIST"] = str(allow)
    r = hook(cli, state(ctr, {"pycgpu.io/gpu.priority": "1023"}), code=1)
    assert "is owned by uid 65534, not root: not trusted" in r.output


def test_a_symlinked_allow_list_is_not_followed(cli, ctr, tmp_path):
    real = tmp_path / "real.allow"
    real.write_text("gpu.priority\n")
    real.chmod(0o644)
    link = tmp_path / "link.allow"
    link.symlink_to(real)
    cli.env["PYCGPU_ALLOW_LIST"] = str(link)
    r = hook(cli, state(ctr, {"pycgpu.io/gpu.priority": "5"}), code=1)
    assert "cannot open the allow-list" in r.output


def test_the_hook_records_the_share_ids(cli, ctr):
    """The device plugin's share IDs, carried by the config's hook entries
    (the plugin's CDI devices, tests/host/test_issue39_runtime_share_ids.py),
    go on the container's cgroup, for the exporter's pod labels
    (pycgpu.k8s.podresources); whatever the node's allow-list."""
    from pycgpu.k8s.podresources import share_ids_of
    from pycgpu.runtime.oci import share_id_entry as carrier

    config = json.loads((ctr / "config.json").read_text())
    config["hooks"] = {"createRuntime": [carrier("renderD128-s0"), carrier("renderD128-s1")]}
    (ctr / "config.json").write_text(json.dumps(config))
    hook(cli, state(ctr, {"pycgpu.io/gpu.weight": "renderD128=300"}))
    assert share_ids_of(cli.fake.root / SCOPE) == ("renderD128-s0", "renderD128-s1")
    allow = cli.fake.root.parent / "weights.allow"
    allow.write_text("gpu.weight\n")
    allow.chmod(0o644)
    cli.env["PYCGPU_ALLOW_LIST"] = str(allow)
    config["hooks"]["createRuntime"] = [carrier("renderD128-s4")]
    (ctr / "config.json").write_text(json.dumps(config))
    hook(cli, state(ctr, {"pycgpu.io/gpu.weight": "renderD128=200"}))
    assert share_ids_of(cli.fake.root / SCOPE) == ("renderD128-s4",)
