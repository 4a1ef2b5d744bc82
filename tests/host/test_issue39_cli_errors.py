"""Issue 39, item 10: the promise of docs/library.md, "every error the
library raises derives from pycgpu.Error", checked by calling each public
function it names (and the core and monitoring ones beside them) with bad
input or a missing path: whatever it raises is a pycgpu.Error, and keeps the
built-in class a caller catches (FileNotFoundError for a missing path,
ValueError for a bad value, LookupError for something not found).
test_issue39_runtime_errors.py does the same for the runtime and k8s layers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import pycgpu
from pycgpu.core import formats, knobs, locks, memory, model, schemas, snapshot
from pycgpu.core.cgroup import Cgroup, check_relpath, find_mount, resolve_path
from pycgpu.core.devices import discover, resolve
from pycgpu.core.formats import DevT
from pycgpu.monitoring import open_source
from pycgpu.monitoring.fdinfo import FdinfoSource
from pycgpu.monitoring.kernel import KernelSource
from pycgpu.runtime import allowlist, cdi, oci


def _gone(t: Path) -> Path:
    return t / "gone"


def _fake_root(t: Path) -> Path:
    root = t / "cg"
    root.mkdir()
    (root / "cgroup.controllers").write_text("gpu\n")
    (root / "cgroup.subtree_control").write_text("\n")
    return root


def _plan(t: Path) -> knobs.Plan:
    return knobs.Plan(Cgroup(_gone(t), "a"), writes=[knobs.Write("gpu.weight", "default 5")])


REGIONS = memory.Interface(memory.DMEM, (memory.Region("226:128", "drm/x/vram0",
                                                        DevT(226, 128), "vram0", 1 << 30,
                                                        memory.DMEM),))

# (what, call with tmp_path, the built-in class a caller catches)
CASES: list[tuple[str, Callable[[Path], Any], type[BaseException]]] = [
    # pycgpu.core.cgroup
    ("Cgroup: '..'", lambda t: Cgroup(t, "a/../b"), ValueError),
    ("Cgroup.children: no such group", lambda t: list(Cgroup(_gone(t), "a").children()),
     FileNotFoundError),
    ("Cgroup.remove(recursive=True): no such group",
     lambda t: Cgroup(_gone(t), "a").remove(recursive=True), FileNotFoundError),
    ("Cgroup.remove: no such group", lambda t: Cgroup(_gone(t), "a").remove(), OSError),
    ("Cgroup.read", lambda t: Cgroup(_gone(t), "a").read("gpu.weight"), OSError),
    ("Cgroup.write", lambda t: Cgroup(_gone(t), "a").write("gpu.weight", "5"), OSError),
    ("Cgroup.mkdir", lambda t: Cgroup(_gone(t), "a/b").mkdir(), OSError),
    ("Cgroup.create", lambda t: Cgroup(_gone(t), "a/b").create(), OSError),
    ("Cgroup.weights", lambda t: Cgroup(_gone(t), "a").weights(), OSError),
    ("Cgroup.set_priority", lambda t: Cgroup(_gone(t), "a").set_priority(5000), ValueError),
    ("Cgroup.memory_max", lambda t: Cgroup(_gone(t), "a").memory_max(), OSError),
    ("find_mount", lambda t: find_mount(_gone(t)), OSError),
    ("check_relpath", lambda t: check_relpath("x" * 300), ValueError),
    ("resolve_path", lambda t: resolve_path(t, "/sys/fs/cgroup/a"), ValueError),
    # knobs, locks
    ("knobs.parse_settings", lambda t: knobs.parse_settings(["0"], None, [], DevT.parse),
     ValueError),
    ("knobs.Settings.writes", lambda t: knobs.Settings(weight=0).writes(), ValueError),
    ("knobs.plan_set: no such group",
     lambda t: knobs.plan_set(Cgroup(_fake_root(t), "a"), knobs.Settings(weight=5)),
     ValueError),
    ("knobs.plan_create: no tree", lambda t: knobs.plan_create(
        Cgroup(_gone(t), "a"), knobs.Settings(weight=5)), OSError),
    ("knobs.apply: no tree", lambda t: knobs.apply(_plan(t)), OSError),
    ("locks.tree_lock", lambda t: locks.tree_lock(_gone(t)).__enter__(), OSError),
    ("locks.file_lock", lambda t: locks.file_lock(_gone(t) / "c.json").__enter__(),
     FileNotFoundError),
    # model, snapshot, formats
    ("model.read_group", lambda t: model.read_group(str(t), "/", {"gpu.weight"}) if (
        t / "gpu.weight").write_bytes(b"\xff") else None, OSError),
    ("model.show_item", lambda t: model.show_item(model.parse_texts(
        "/a", {"gpu.weight": "x"})), ValueError),
    ("snapshot.walk", lambda t: list(snapshot.walk(_gone(t), "a")), OSError),
    ("formats.DevT.parse", lambda t: DevT.parse("x"), ValueError),
    ("formats.parse_size", lambda t: formats.parse_size("2Q"), ValueError),
    ("formats.parse_number", lambda t: formats.parse_number("1" * 50, "n", "N"), ValueError),
    ("formats.parse_weight", lambda t: formats.parse_weight("x"), ValueError),
    ("formats.parse_flat_keyed", lambda t: formats.parse_flat_keyed("1:1"), ValueError),
    ("formats.parse_nested_keyed", lambda t: formats.parse_nested_keyed("1:1 x"), ValueError),
    ("formats.parse_region_keyed", lambda t: formats.parse_region_keyed("r"), ValueError),
    ("formats.decode", lambda t: formats.decode(b"\xff", "f"), ValueError),
    ("formats.format_weight_write", lambda t: formats.format_weight_write(None), ValueError),
    ("formats.check_size", lambda t: formats.check_size(1 << 64), ValueError),
    # devices, memory, schemas
    ("devices.resolve", lambda t: resolve("renderD999", []), LookupError),
    # devices.discover and memory.detect of a missing tree raise nothing: see
    # test_a_missing_tree_is_no_devices_and_no_memory_interface
    ("memory.Interface.region_of", lambda t: REGIONS.region_of(DevT(1, 1)), LookupError),
    ("memory.Interface.resolve", lambda t: REGIONS.resolve("226:128:x", DevT.parse),
     Exception),
    ("schemas.get", lambda t: schemas.get("nothing"), KeyError),
    ("schemas.get: a version", lambda t: schemas.get("pycgpu.show/v9"), KeyError),
    # monitoring
    ("open_source: unknown", lambda t: open_source("nvml", None), ValueError),
    ("open_source: kernel without a mount", lambda t: open_source("kernel", None), OSError),
    ("KernelSource.sample: no tree", lambda t: KernelSource(_gone(t)).sample(), OSError),
    ("FdinfoSource.scan: no /proc", lambda t: FdinfoSource(proc=_gone(t)).scan(), OSError),
    ("FdinfoSource.sample: no /proc",
     lambda t: FdinfoSource(proc=_gone(t), sysfs=_gone(t)).sample(), FileNotFoundError),
    # runtime (the other layers: test_issue39_runtime_errors.py)
    ("allowlist.load: a directory", lambda t: allowlist.load(t), ValueError),
    ("allowlist.key", lambda t: allowlist.key("gpu.nothing"), ValueError),
    ("oci.load", lambda t: oci.load(_gone(t) / "c.json"), FileNotFoundError),
    ("oci.atomic_write", lambda t: oci.atomic_write(_gone(t) / "c.json", "{}"),
     FileNotFoundError),
    ("cdi.spec", lambda t: cdi.spec([]), ValueError),
]


@pytest.mark.parametrize("call, builtin", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_raises_a_pycgpu_error(tmp_path, call, builtin):
    """Each case raises (nothing raised fails), a pycgpu.Error of the
    built-in class, in one line."""
    with pytest.raises(pycgpu.Error) as info:
        call(tmp_path)
    e = info.value
    assert isinstance(e, builtin), type(e).__mro__
    assert "\n" not in str(e)


def test_an_unknown_schema_says_which_ones_exist():
    with pytest.raises(KeyError) as info:
        schemas.get("nothing")
    assert str(info.value) == "no schema 'nothing'; known: " + ", ".join(sorted(schemas.SCHEMAS))


def test_the_cli_still_names_the_known_schemas(cli):
    r = cli("schema", "nothing", code=2)
    assert r.output == ("Error: no schema 'nothing'; known: " + ", ".join(sorted(schemas.SCHEMAS))
                        + "\n")


def test_a_missing_tree_is_no_devices_and_no_memory_interface(tmp_path):
    """Not errors: a host without render nodes (no /sys/class/drm) has no
    devices, and a cgroup tree without the files of either memory interface
    (gpu.memory.* or dmem.*) has none; check and devices report both."""
    assert discover(_gone(tmp_path), _gone(tmp_path)) == []
    assert memory.detect(_gone(tmp_path), []) is None
