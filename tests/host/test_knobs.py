"""pycgpu.core.knobs (plans, undo values, rollback) and the refusal messages of
pycgpu.core.cgroup, on the fake kernel."""

from __future__ import annotations

import errno

import pytest

from pycgpu.core import knobs
from pycgpu.core.cgroup import Cgroup, CgroupError
from pycgpu.core.formats import DevT
from pycgpu.core.knobs import (
    ApplyError,
    InvalidRequest,
    Settings,
    Unavailable,
    Write,
    gpu_memory_region,
)

DEV = DevT(226, 128)


def test_settings_writes_in_order_and_validated():
    s = Settings(weight=300, device_weights={DevT(226, 129): None, DEV: 5}, priority=-2,
                 memory_max={gpu_memory_region(DEV): 1 << 30})
    assert [(w.file, w.value) for w in s.writes()] == [
        ("gpu.weight", "default 300"), ("gpu.weight", "226:128 5"),
        ("gpu.weight", "226:129 default"), ("gpu.priority", "-2"),
        ("gpu.memory.max", "226:128 1073741824")]
    assert s.files() == ["gpu.weight", "gpu.priority", "gpu.memory.max"]
    assert Settings().is_empty()
    with pytest.raises(InvalidRequest, match="weight 0 is out of range"):
        Settings(weight=0).writes()
    with pytest.raises(InvalidRequest, match="priority 2000"):
        Settings(priority=2000).writes()


def test_undo_values(fake):
    path = fake.make("a")
    cg = Cgroup(fake.root, "a")
    (path / "gpu.weight").write_text("default 40\n226:128 7\n")
    (path / "gpu.memory.max").write_text("226:128 4096\n")
    assert Write("gpu.weight", "default 1").undo_value(cg) == "default 40"
    assert Write("gpu.weight", "226:128 1", DEV).undo_value(cg) == "226:128 7"
    assert Write("gpu.weight", "226:129 1", DevT(226, 129)).undo_value(cg) == "226:129 default"
    assert Write("gpu.memory.max", "226:128 1", DEV).undo_value(cg) == "226:128 4096"
    assert Write("gpu.memory.max", "226:129 1", DevT(226, 129)).undo_value(cg) == "226:129 max"
    assert Write("gpu.priority", "1").undo_value(cg) == "default"  # a new group's
    (path / "gpu.priority").write_text("-4\n")
    assert Write("gpu.priority", "1").undo_value(cg) == "-4"


def test_plan_create_steps_skip_what_exists(fake):
    fake.make("a")
    plan = knobs.plan_create(Cgroup(fake.root, "a/b/c"), Settings(priority=1))
    assert plan.steps() == [
        f"write '+gpu' to {fake.root}/a/cgroup.subtree_control",
        f"mkdir {fake.root}/a/b",
        f"write '+gpu' to {fake.root}/a/b/cgroup.subtree_control",
        f"mkdir {fake.root}/a/b/c",
        f"write '1' to {fake.root}/a/b/c/gpu.priority",
    ]
    knobs.apply(plan)
    assert Cgroup(fake.root, "a/b/c").priority() == 1


def test_apply_refusal_is_an_apply_error(fake):
    fake.make("a")
    fake.fail["a/gpu.priority"] = errno.EINVAL
    cg = Cgroup(fake.root, "a")
    with pytest.raises(ApplyError) as e:
        knobs.apply(knobs.plan_set(cg, Settings(weight=5, priority=1)))
    assert e.value.errno == errno.EINVAL
    assert isinstance(e.value.cause, CgroupError) and e.value.rollback_errors == []
    assert cg.weights().default == 100


def test_plan_set_checks(fake):
    with pytest.raises(InvalidRequest, match="does not exist"):
        knobs.plan_set(Cgroup(fake.root, "x"), Settings(weight=1))
    (fake.root / "cgroup.controllers").write_text("cpu\n")
    (fake.root / "b").mkdir()
    with pytest.raises(Unavailable, match="kernel without CONFIG_CGROUP_GPU"):
        knobs.plan_set(Cgroup(fake.root, "b"), Settings(weight=1))


@pytest.mark.parametrize(
    ("name", "message"),
    [("gpu.weight", "the gpu controller is not enabled for {root}/a$"),
     ("gpu.memory.max",
      r"the gpu controller is not enabled for {root}/a \(or this kernel lacks gpu.memory.\*\)"),
     ("cgroup.procs", "no such file")],
)
def test_enoent_messages(tmp_path, name, message):
    (tmp_path / "a").mkdir()
    with pytest.raises(CgroupError, match=message.format(root=tmp_path)) as e:
        Cgroup(tmp_path, "a").write(name, "1")
    assert e.value.errno == errno.ENOENT


def test_enoent_missing_group(tmp_path):
    with pytest.raises(CgroupError, match=f"no such cgroup {tmp_path}/nope"):
        Cgroup(tmp_path, "nope").read("gpu.weight")


def test_create_returns_created_groups(fake):
    fake.make("a")
    created = Cgroup(fake.root, "a/b/c").create()
    assert [c.name for c in created] == ["/a/b", "/a/b/c"]
    assert Cgroup(fake.root, "a/b/c").create() == []


def test_remove_messages(fake):
    fake.make("a/b")
    with pytest.raises(CgroupError, match="the group has child groups"):
        Cgroup(fake.root, "a").remove()
    (fake.root / "a" / "b" / "cgroup.procs").write_text("1\n")
    with pytest.raises(CgroupError, match="still has processes"):
        Cgroup(fake.root, "a/b").remove()


def test_memory_accessors(fake):
    path = fake.make("a")
    (path / "gpu.memory.current").write_text("226:128 4096\n")
    (path / "gpu.memory.events.local").write_text("226:128 max=2\n")
    (path / "gpu.stat").write_text("226:128 usage_usec=5 wait_usec=1\n")
    cg = Cgroup(fake.root, "a")
    cg.set_memory_max(DEV, 1 << 20)
    other = DevT(226, 129)  # the kernel lists every device, limited or not
    assert cg.memory_max() == {DEV: 1 << 20, other: None}
    cg.set_memory_max(DEV, None)
    assert cg.memory_max() == {DEV: None, other: None}
    assert cg.memory_current() == {DEV: 4096}
    assert cg.memory_peak() == {}
    assert cg.memory_events() == {}
    assert cg.memory_events(local=True) == {DEV: {"max": 2}}
    assert cg.stat() == {DEV: {"usage_usec": 5, "wait_usec": 1}}
    assert cg.has("gpu.stat") and not cg.has("gpu.nope")
