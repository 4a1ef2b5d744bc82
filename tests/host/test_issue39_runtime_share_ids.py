"""Share IDs come only from what the device plugin granted (issue 39, item
6). The plugin's CDI spec has a device per share (``pycgpu.io/gpu=
renderD128-s3``) whose own edits are a hook entry carrying the ID
(``/bin/true pycgpu-share-id=renderD128-s3``: a trivial host program, not a
Python start per share at every container start); Allocate names those devices, the
runtime puts their hook entries in the container's config.json, where a pod
cannot write, and the hook records the IDs it finds there. A
``pycgpu.io/share-ids`` annotation, which a pod can set where the runtime
copies pod annotations (CRI-O), is ignored: a forged claim can neither strip
nor steal another pod's labels in the exporter."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from runtime_schemas import cdi_errors
from test_hook import PID, SCOPE, ctr, hook, state  # noqa: F401  (ctr: the fixture)

from pycgpu.core.devices import discover
from pycgpu.k8s import shares as sh
from pycgpu.k8s.podresources import share_ids_of
from pycgpu.runtime import annotations as ann
from pycgpu.runtime import cdi, oci
from pycgpu.runtime import hook as hookmod

HOOK = oci.hook_command("/opt/pycgpu/bin/pycgpu-hook")


def with_cdi_devices(bundle: Path, spec: dict, names: list[str]) -> None:
    """What a CDI runtime does to the bundle's config.json for the devices
    @names of @spec: their hook entries, and the spec-wide ones, into hooks."""
    path = bundle / "config.json"
    config = json.loads(path.read_text())
    by_name = {cdi.qualified_name(d["name"]): d for d in spec["devices"]}
    edits = [spec.get("containerEdits", {})] + [by_name[n]["containerEdits"] for n in names]
    for edit in edits:
        for h in edit.get("hooks", []):
            entry = {k: v for k, v in h.items() if k != "hookName"}
            config.setdefault("hooks", {}).setdefault(h["hookName"], []).append(entry)
    path.write_text(json.dumps(config))


@pytest.fixture
def inventory(fake_sysfs) -> sh.Inventory:
    return sh.build(discover(*fake_sysfs), sh.parse_config(["4"], 100, [])[0], fake_sysfs[0])


def granted(inventory: sh.Inventory, ids: list[str]) -> tuple[sh.Grant, dict]:
    spec = cdi.spec(sorted((g.device for g in inventory.gpus.values()), key=lambda d: d.devt),
                    HOOK, {g.name: g.ids() for g in inventory.gpus.values()})
    return sh.grant(inventory, ids, share_devices=True), spec


def test_the_spec_has_a_device_per_share_carrying_its_id(inventory):
    _, spec = granted(inventory, ["renderD128-s0"])
    assert cdi_errors(spec) == []
    by_name = {d["name"]: d for d in spec["devices"]}
    assert by_name["renderD128-s3"]["containerEdits"] == {"hooks": [{
        "hookName": "createRuntime", "path": "/bin/true",
        "args": ["true", "pycgpu-share-id=renderD128-s3"]}]}
    assert [n for n in by_name if n.startswith("renderD129-")] == [
        f"renderD129-s{i}" for i in range(4)]
    assert spec["containerEdits"]["hooks"][0]["args"] == ["pycgpu-hook"]


def test_allocate_names_the_share_devices_not_an_annotation(inventory):
    grant, _ = granted(inventory, ["renderD128-s2", "renderD128-s0", "renderD129-s1"])
    assert grant.cdi_devices == ["pycgpu.io/gpu=renderD128", "pycgpu.io/gpu=renderD129",
                                 "pycgpu.io/gpu=renderD128-s0", "pycgpu.io/gpu=renderD128-s2",
                                 "pycgpu.io/gpu=renderD129-s1"]
    assert "pycgpu.io/share-ids" not in grant.annotations
    # without a spec of its own (pycgpu cdi generate's has no share devices): none
    plain = sh.grant(inventory, ["renderD128-s2"])
    assert plain.cdi_devices == ["pycgpu.io/gpu=renderD128"]
    assert "pycgpu.io/share-ids" not in plain.annotations


def test_the_hook_records_the_share_ids_of_the_cdi_devices(cli, ctr, inventory):  # noqa: F811
    grant, spec = granted(inventory, ["renderD128-s1", "renderD128-s0"])
    with_cdi_devices(ctr, spec, grant.cdi_devices)
    hook(cli, state(ctr, grant.annotations))
    assert share_ids_of(cli.fake.root / SCOPE) == ("renderD128-s0", "renderD128-s1")


def test_a_forged_annotation_claims_nothing(cli, ctr, inventory):  # noqa: F811
    """A pod that claims another pod's share (renderD128-s0) in an
    annotation: its own share (s3) is recorded, the claim is ignored, with
    a warning."""
    grant, spec = granted(inventory, ["renderD128-s3"])
    with_cdi_devices(ctr, spec, grant.cdi_devices)
    r = hook(cli, state(ctr, {**grant.annotations, "pycgpu.io/share-ids": "renderD128-s0"}))
    assert share_ids_of(cli.fake.root / SCOPE) == ("renderD128-s3",)
    assert r.output == ("pycgpu oci hook: warning: annotation pycgpu.io/share-ids ignored: "
                        "share IDs come from the device plugin's CDI devices only\n")


def test_a_forged_annotation_alone_records_nothing(cli, ctr):  # noqa: F811
    hook(cli, state(ctr, {"pycgpu.io/gpu.weight": "300",
                          "pycgpu.io/share-ids": "renderD128-s0,renderD128-s1"}))
    assert share_ids_of(cli.fake.root / SCOPE) == ()
    assert cli.fake.read(f"{SCOPE}/gpu.weight") == "default 300\n"


def test_the_annotation_is_not_an_allowed_key():
    assert ann.SHARE_IDS not in ann.ALLOWED
    request = ann.parse({ann.SHARE_IDS: "renderD128-s0"}, lambda t: None)  # type: ignore
    assert request.ignored == [ann.SHARE_IDS] and request.is_empty()


def test_a_share_entry_runs_a_trivial_host_program_not_pycgpu():
    """The runtime runs each share device's hook entry at every container
    start: it is /bin/true with the ID as an argument it ignores (a fork and
    an exec, not a Python start of about 50-100 ms per share)."""
    import subprocess

    entry = oci.share_id_entry("renderD128-s3")
    assert entry == {"path": "/bin/true", "args": ["true", "pycgpu-share-id=renderD128-s3"]}
    assert not oci.is_pycgpu_hook(entry)
    done = subprocess.run(entry["args"], executable=entry["path"], stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=10, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")


def test_the_hook_has_no_share_id_option(cli, monkeypatch, capsys):
    """pycgpu's hook no longer runs once per share: --share-id is unknown."""
    from click.testing import CliRunner

    from pycgpu.cli import main

    r = CliRunner().invoke(main, ["oci", "hook", "--share-id", "renderD128-s3"], input="{}",
                           env=cli.env)
    assert r.exit_code == 2 and "No such option '--share-id'" in r.output
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b'{"id": "c"}')))
    assert hookmod.main(["--share-id", "renderD128-s3"]) == 2
    assert "--share-id" not in capsys.readouterr().err


def test_patch_and_unpatch_know_the_share_entries():
    carrier = oci.share_id_entry("renderD128-s1")
    assert oci.share_id_of(carrier) == "renderD128-s1"
    assert oci.share_id_of(HOOK.oci()) is None
    doc = {"hooks": {"createRuntime": [carrier]}}
    oci.apply(doc, oci.Patch(hook=HOOK))
    assert doc["hooks"]["createRuntime"] == [carrier, HOOK.oci()]  # the carrier stays
    oci.unpatch(doc)
    assert doc["hooks"]["createRuntime"] == []


@pytest.mark.parametrize("entry", [
    {"path": "/usr/bin/other", "args": ["other", "--share-id", "renderD128-s0"]},
    # the entry of the first version (a Python start per share): no longer read
    {"path": "/opt/pycgpu/bin/pycgpu-hook", "args": ["pycgpu-hook", "--share-id",
                                                     "renderD128-s0"]},
    {"path": "/bin/true", "args": ["true", "pycgpu-share-id=renderD128-s0", "x"]},
    {"path": "/bin/true", "args": ["true", "x", "pycgpu-share-id=renderD128-s0"]},
    {"path": "/bin/true", "args": ["true"], "env": ["pycgpu-share-id=renderD128-s0"]},
    {"path": "/bin/true", "args": ["true", " pycgpu-share-id=renderD128-s0"]},
    {"path": "/bin/true", "args": "true pycgpu-share-id=renderD128-s0"},
])
def test_only_share_entries_carry_ids(entry):
    """An entry of another form, or an ID in its env, carries nothing."""
    assert oci.share_id_of(entry) is None
    doc = {"hooks": {"createRuntime": [entry, oci.share_id_entry("renderD129-s2")]}}
    assert hookmod.granted_share_ids(doc) == ("renderD129-s2",)


def test_the_docs_name_the_share_entry_as_it_is():
    docs = Path(__file__).resolve().parents[2] / "docs"
    for page in ("kubernetes.md", "runtimes.md", "commands.md"):
        text = (docs / page).read_text()
        assert "--share-id" not in text, page
    assert "`/bin/true pycgpu-share-id=renderD128-s0`" in (docs / "kubernetes.md").read_text()


def test_share_ids_live_in_a_trusted_xattr_a_user_one_is_not_read(tmp_path):
    """Whoever can write a cgroup directory (a rootless user's delegated
    subtree, a pod with a writable cgroupfs) can set its user.* attributes:
    the IDs are recorded in, and read from, a trusted.* one (CAP_SYS_ADMIN),
    as the weights are; a user.pycgpu.share_ids claims nothing."""
    import os

    from pycgpu.runtime import kubepods
    assert kubepods.SHARE_IDS_XATTR == "trusted.pycgpu.share_ids"
    forged, real = tmp_path / "forged", tmp_path / "real"
    forged.mkdir(), real.mkdir()
    os.setxattr(forged, "user.pycgpu.share_ids", b"renderD128-s0")
    assert share_ids_of(forged) == ()
    kubepods.record_share_ids(real, ("renderD128-s1",))
    assert os.getxattr(real, "trusted.pycgpu.share_ids") == b"renderD128-s1"
    assert not [a for a in os.listxattr(real) if a.startswith("user.")]
    assert share_ids_of(real) == ("renderD128-s1",)
