"""Every error of the runtime and Kubernetes layers derives from
pycgpu.Error (issue 39, item 10): each public function of oci, cdi,
annotations, hook, kubepods, jsontext, memory and the plugin's shares,
called with bad input or a missing path, raises a pycgpu.Error, and keeps
the built-in class a caller would catch (FileNotFoundError for a missing
path, ValueError for a bad value)."""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import pycgpu
from pycgpu.core import jsontext
from pycgpu.core.devices import Device, DeviceError
from pycgpu.core.errors import FileError, FileMissing
from pycgpu.core.formats import DevT
from pycgpu.core.knobs import Settings
from pycgpu.core.memory import DMEM, Interface, Region
from pycgpu.k8s import shares as sh
from pycgpu.runtime import annotations as ann
from pycgpu.runtime import cdi, hook, kubepods, oci

MISSING = Device(Path("/nonexistent/dri/renderD200"), None, DevT(226, 200), "none")


def _no_device(text: str) -> DevT:
    raise DeviceError(f"no device {text}")


def _inventory() -> sh.Inventory:
    return sh.build([], sh.parse_config(["2"], 100, [])[0])


# (what, call with tmp_path, the built-in class a caller catches)
CASES: list[tuple[str, Callable[[Path], Any], type[BaseException]]] = [
    ("oci.load: no such file", lambda t: oci.load(t / "none.json"), FileNotFoundError),
    ("oci.load: no such directory", lambda t: oci.load(t / "none" / "c.json"),
     FileNotFoundError),
    ("oci.load: a directory", lambda t: oci.load(t), OSError),
    ("oci.load: not JSON", lambda t: (t / "c.json").write_text("{") and oci.load(t / "c.json"),
     ValueError),
    ("oci.atomic_write: no such directory",
     lambda t: oci.atomic_write(t / "none" / "c.json", "{}"), FileNotFoundError),
    ("oci.atomic_write: a directory", lambda t: oci.atomic_write(t, "{}"), OSError),
    ("oci.parse", lambda t: oci.parse(b"[NaN]"), ValueError),
    ("oci.apply", lambda t: oci.apply({"linux": 5}, oci.Patch(settings=Settings(weight=5))),
     ValueError),
    ("oci.unpatch", lambda t: oci.unpatch({"hooks": []}), ValueError),
    ("oci.unified", lambda t: oci.unified(Settings(weight=0)), ValueError),
    ("oci.legacy_stanza", lambda t: oci.legacy_stanza(Settings()), ValueError),
    ("oci.check_cgroups_path", lambda t: oci.check_cgroups_path("/a/../b"), ValueError),
    ("oci.DeviceNode.from_device", lambda t: oci.DeviceNode.from_device(MISSING),
     FileNotFoundError),
    ("cdi.spec", lambda t: cdi.spec([]), ValueError),
    ("annotations.parse", lambda t: ann.parse({"pycgpu.io/gpu.weight": "x"}, _no_device),
     ValueError),
    ("hook.ContainerState.parse", lambda t: hook.ContainerState.parse("["), Exception),
    ("hook.cgroup_of_pid", lambda t: hook.cgroup_of_pid(1, t, t / "proc"), Exception),
    ("kubepods.Asked.parse", lambda t: kubepods.Asked.parse("x"), ValueError),
    ("kubepods.record_share_ids", lambda t: kubepods.record_share_ids(t / "none", ("a",)),
     FileNotFoundError),
    ("jsontext.loads", lambda t: jsontext.loads("[1e999]", "x"), ValueError),
    ("memory.Interface.resolve",
     lambda t: Interface(DMEM, (Region("1:1", "drm/x/a", DevT(1, 1), "a", 1, DMEM),)).resolve(
         "renderD9", _no_device), LookupError),
    ("shares.parse_id", lambda t: sh.parse_id("nvidia0"), ValueError),
    ("shares.parse_config", lambda t: sh.parse_config(["0"], 100, []), ValueError),
    ("shares.Inventory.gpu_of", lambda t: _inventory().gpu_of("renderD128-s0"), ValueError),
    ("shares.grant", lambda t: sh.grant(_inventory(), []), ValueError),
]


@pytest.mark.parametrize("call, builtin", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_raises_a_pycgpu_error(tmp_path, call, builtin):
    with pytest.raises(pycgpu.Error) as info:
        call(tmp_path)
    assert isinstance(info.value, builtin), type(info.value).__mro__
    assert "\n" not in str(info.value)


def test_a_missing_file_keeps_what_oserror_says(tmp_path):
    with pytest.raises(FileMissing) as info:
        oci.load(tmp_path / "none.json")
    e = info.value
    assert isinstance(e, FileError) and isinstance(e, FileNotFoundError)
    assert (e.errno, e.filename) == (errno.ENOENT, str(tmp_path / "none.json"))
    assert str(e.strerror) == "No such file or directory"
    with pytest.raises(FileMissing) as info:
        oci.atomic_write(tmp_path / "none" / "c.json", "{}")
    assert (info.value.errno, info.value.filename) == (errno.ENOENT, str(tmp_path / "none"))


def test_the_cli_still_says_the_file_does_not_exist(cli, tmp_path):
    path = tmp_path / "none.json"
    r = cli("oci", "patch", str(path), "--priority", "5", code=2)
    assert r.output == f"Error: {path} does not exist (create one: pycgpu oci generate)\n"
    (tmp_path / "file").write_text("")
    path = tmp_path / "file" / "config.json"  # ENOTDIR
    r = cli("oci", "patch", str(path), "--priority", "5", code=2)
    assert r.output == f"Error: {path} does not exist (create one: pycgpu oci generate)\n"
