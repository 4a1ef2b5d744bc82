"""One exception base, pycgpu.Error, and library messages in the library's
own words: no command line options or commands in them, the CLI adding its
advice by the error's reason (commands/common.py: advised)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest
from conftest import FakeKernel

import pycgpu
from pycgpu.core import knobs
from pycgpu.core.cgroup import Cgroup, CgroupError, InvalidPath, resolve_path
from pycgpu.core.formats import DevT
from pycgpu.core.knobs import InvalidRequest, Settings, Unavailable, gpu_memory_region
from pycgpu.runtime import oci

# an option (--weight) or a pycgpu command: the CLI's words
CLI_WORDS = re.compile(r"(?<![\w-])--[a-z]|\bpycgpu [a-z]")


def _library_modules():
    for info in pkgutil.walk_packages(pycgpu.__path__, "pycgpu."):
        if info.name.startswith(("pycgpu.cli", "pycgpu.__main__")) or info.name.endswith(
                ("_pb2", "_pb2_grpc")):
            continue
        yield importlib.import_module(info.name)


def test_every_library_error_derives_from_pycgpu_error():
    found = {f"{cls.__module__}.{cls.__qualname__}"
             for module in _library_modules()
             for _, cls in inspect.getmembers(module, inspect.isclass)
             if issubclass(cls, BaseException) and cls.__module__ == module.__name__
             and not cls.__name__.startswith("_")}
    assert len(found) >= 20, sorted(found)
    strays = sorted(name for name in found
                    if not issubclass(_resolve(name), pycgpu.Error))
    assert strays == []


def _resolve(name: str) -> type:
    module, _, qual = name.rpartition(".")
    return getattr(importlib.import_module(module), qual)  # type: ignore[no-any-return]


def test_errors_keep_the_builtin_classes_callers_catch():
    assert issubclass(CgroupError, OSError) and issubclass(InvalidPath, ValueError)
    assert issubclass(InvalidRequest, ValueError) and issubclass(Unavailable, OSError)
    from pycgpu.core.devices import DeviceError
    assert issubclass(DeviceError, LookupError)
    e = CgroupError(2, "x")
    assert (e.errno, e.strerror, e.reason) == (2, "x", "")


@pytest.fixture
def tree(tmp_path, monkeypatch):
    return FakeKernel(tmp_path).install(monkeypatch)


def _raised(call) -> pycgpu.Error:
    with pytest.raises(pycgpu.Error) as info:
        call()
    return info.value


def test_knob_refusals_say_what_without_cli_words(tmp_path, monkeypatch):
    fake = FakeKernel(tmp_path, memory=False).install(monkeypatch)
    fake.make("a/b")
    root = fake.root
    cases = [
        (lambda: knobs.plan_set(Cgroup(root, "nope"), Settings(weight=5)),
         knobs.NO_GROUP, "cgroup /nope does not exist", {"group": "/nope"}),
        (lambda: knobs.plan_create(Cgroup(root, "a"), Settings()),
         knobs.EXISTS, "cgroup /a already exists", {"group": "/a"}),
        (lambda: knobs.plan_set(Cgroup(root, "a"), Settings()),
         knobs.NOTHING_TO_SET, "nothing to set", {}),
        (lambda: knobs.plan_set(Cgroup(root, "a"),
                                Settings(memory_max={gpu_memory_region(DevT(226, 128)): 1})),
         knobs.NO_MEMORY_SUPPORT, "this kernel lacks gpu.memory.max",
         {"file": "gpu.memory.max"}),
        (lambda: resolve_path(root, "/sys/fs/cgroup/a"), "outside-root",
         f"'/sys/fs/cgroup/a' is under /sys/fs/cgroup, but the cgroup root is {root}: give "
         "the path relative to the root", {"mount": "/sys/fs/cgroup"}),
        (lambda: oci.unified(Settings(weight=5, device_weights={DevT(226, 128): 7})),
         oci.SEVERAL_WRITES, None, {"file": "gpu.weight"}),
    ]
    for call, reason, message, details in cases:
        e = _raised(call)
        text = str(e.strerror) if isinstance(e, OSError) else str(e)
        assert (e.reason, dict(e.details)) == (reason, details), text
        if message is not None:
            assert text == message
        assert not CLI_WORDS.search(text), text


def test_a_group_without_gpu_and_a_host_without_the_controller(tmp_path, monkeypatch):
    fake = FakeKernel(tmp_path).install(monkeypatch)
    (fake.root / "plain").mkdir()
    e = _raised(lambda: knobs.plan_set(Cgroup(fake.root, "plain"), Settings(weight=5)))
    assert (e.reason, e.details, e.strerror) == (
        knobs.GPU_NOT_ENABLED, {"group": "/plain"},
        "the gpu controller is not enabled for /plain (no gpu.weight)")
    (fake.root / "cgroup.controllers").write_text("cpu memory\n")
    e = _raised(lambda: knobs.plan_set(Cgroup(fake.root, "plain"), Settings(weight=5)))
    assert e.reason == knobs.NO_CONTROLLER
    assert e.strerror == (f"no gpu controller in {fake.root}/cgroup.controllers (a kernel "
                          "without CONFIG_CGROUP_GPU, or booted with cgroup_disable=gpu); no "
                          "dmem controller for GPU memory either")


def test_a_capped_priority_is_a_notice_with_its_reason(tree):
    tree.make("low/job")
    tree.write(tree.root / "low" / "gpu.priority", b"-5")
    plan = knobs.plan_set(Cgroup(tree.root, "low/job"), Settings(priority=3))
    [notice] = plan.warnings
    assert notice == ("/low/job gets priority 3 but its effective priority stays -5: "
                      "ancestor /low has gpu.priority -5")
    assert (notice.reason, notice.details) == (knobs.PRIORITY_CAPPED,
                                               {"ancestor": "/low", "priority": "3"})


def test_names_of_the_values_default_to_the_files_not_the_options():
    e = _raised(lambda: knobs.parse_settings(["0"], None, [], lambda t: DevT(226, 128)))
    assert str(e).startswith("weight '0': ")
    assert not CLI_WORDS.search(str(e))


@pytest.mark.parametrize("reason, details, text, advised", [
    ("no-group", {"group": "/g"}, "cgroup /g does not exist",
     "cgroup /g does not exist (create it: pycgpu create /g)"),
    ("gpu-not-enabled", {"group": "/g"}, "the gpu controller is not enabled for /g (no x)",
     "the gpu controller is not enabled for /g (no x; fix: pycgpu create /g --exist-ok)"),
    ("nothing-to-set", {}, "nothing to set",
     "nothing to set: give --weight, --priority, --memory-max or --max"),
    ("", {}, "as it is", "as it is"),
])
def test_the_cli_adds_its_advice_by_reason(reason, details, text, advised):
    from pycgpu.cli.commands.common import advised as cli_advised

    e = InvalidRequest(text).because(reason, **details) if reason else InvalidRequest(text)
    assert cli_advised(e) == advised
    notice = knobs.Notice(text, reason, **details)
    assert cli_advised(notice) == advised


def test_pycgpu_error_is_exported():
    assert "Error" in pycgpu.__all__
    assert Path(inspect.getfile(pycgpu.Error)).name == "errors.py"
