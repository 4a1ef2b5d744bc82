"""The gpu controller's presence, enabling, and the rules of gpu.weight and
gpu.priority (../shared/DESIGN.md section 2), on the real kernel."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from clients import raw_write
from memfiles import DMEM

from pycgpu.core.cgroup import Cgroup
from pycgpu.core.formats import DevT


def test_listed_in_root_controllers(mount):
    assert "gpu" in Cgroup(mount).controllers()


def test_proc_cgroups_lists_it_as_the_kernel_lists_v2_controllers():
    """6.12 lists every controller in /proc/cgroups. Later kernels (7.3
    here) list only those with v1 support unless booted with
    cgroup_v1_proc=1, so gpu, which has none, is then listed only in the
    root's cgroup.controllers (test_listed_in_root_controllers)."""
    text = Path("/proc/cgroups").read_text()
    names = [line.split()[0] for line in text.splitlines() if not line.startswith("#")]
    v1_only = (os.environ.get("PYCGPU_BASE", "6.12") != "6.12"
               and "cgroup_v1_proc=1" not in Path("/proc/cmdline").read_text().split())
    assert ("gpu" in names) == (not v1_only), names


def test_only_the_totals_on_root(mount):
    """As io.stat and misc.current: the root has the device totals, and
    no knob (it has nothing to share with)."""
    # gpu.memory.* is the 6.12 series'; on 7.3 GPU buffer memory is dmem's
    expected = ["gpu.stat"] if DMEM else ["gpu.memory.current", "gpu.stat"]
    assert sorted(p.name for p in mount.glob("gpu.*")) == expected


def test_files_appear_when_enabled_and_go_when_disabled(mount):
    root = Cgroup(mount)
    parent = root.child("pycgpu-enable-test")
    parent.path.mkdir()
    try:
        root.enable_controller()
        child = parent.child("c")
        child.path.mkdir()
        assert not (child.path / "gpu.weight").exists()
        parent.write("cgroup.subtree_control", "+gpu")
        assert {p.name for p in child.path.glob("gpu.*")} >= {
            "gpu.weight", "gpu.priority", "gpu.priority.effective"
        }
        parent.write("cgroup.subtree_control", "-gpu")
        assert not (child.path / "gpu.weight").exists()
        child.remove()
    finally:
        parent.remove(recursive=True)


def test_defaults(cgroup):
    assert cgroup.read("gpu.weight") == "default 100\n"
    # unset: a top-level group's effective priority is 0
    assert cgroup.read("gpu.priority") == "default\n"
    assert cgroup.read("gpu.priority.effective") == "0\n"


# gpu.weight ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("write", "default"),
    [("300", 300), ("1", 1), ("10000", 10000), ("default 50", 50),
     ("  default   7  \n", 7), ("42\n", 42), ("+9", 9)],
)
def test_weight_default_accepted(cgroup, write, default):
    assert raw_write(cgroup, "gpu.weight", write) == 0
    assert cgroup.read("gpu.weight") == f"default {default}\n"


def test_weight_device_override_and_reset(cgroup, gpu_dev):
    assert raw_write(cgroup, "gpu.weight", f"{gpu_dev} 500") == 0
    assert cgroup.read("gpu.weight") == f"default 100\n{gpu_dev} 500\n"
    assert cgroup.weights().for_device(gpu_dev) == 500
    assert raw_write(cgroup, "gpu.weight", "250") == 0
    assert cgroup.read("gpu.weight") == f"default 250\n{gpu_dev} 500\n"
    assert raw_write(cgroup, "gpu.weight", f"{gpu_dev} default") == 0
    assert cgroup.read("gpu.weight") == "default 250\n"
    # resetting an override that does not exist is fine too
    assert raw_write(cgroup, "gpu.weight", f"{gpu_dev} default") == 0
    assert cgroup.read("gpu.weight") == "default 250\n"


def test_weight_library_calls(cgroup, gpu_dev):
    cgroup.set_weight(30)
    cgroup.set_weight(70, gpu_dev)
    w = cgroup.weights()
    assert (w.default, w.devices) == (30, {gpu_dev: 70})
    cgroup.set_weight(None, gpu_dev)
    assert cgroup.weights().devices == {}


WEIGHT_EINVAL = [
    "\n", "abc", "default", "default default", "default x", "1.5", "0x10", "5 6 7",
    "226:128", "226:128 abc", "226:128 5 6", "1:2:3 5", "226: 5", ":128 5", "x:y 5",
    "4000000000:1 5", "7:7 500", "226:9999 500", "weight 5",
]
WEIGHT_ERANGE = ["0", "10001", "-1", "99999999999999999999", "default 0", "default 10001",
                 "{dev} 0", "{dev} 10001", "{dev} -5"]


@pytest.mark.parametrize(
    ("write", "err"),
    [(w, errno.EINVAL) for w in WEIGHT_EINVAL] + [(w, errno.ERANGE) for w in WEIGHT_ERANGE],
)
def test_weight_rejected_and_unchanged(cgroup, gpu_dev, write, err):
    assert raw_write(cgroup, "gpu.weight", f"{gpu_dev} 77") == 0
    assert raw_write(cgroup, "gpu.weight", "33") == 0
    before = cgroup.read("gpu.weight")
    assert raw_write(cgroup, "gpu.weight", write.format(dev=gpu_dev)) == err
    assert cgroup.read("gpu.weight") == before


# gpu.priority ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("write", "value"), [("-1023", -1023), ("1023", 1023), ("0", 0), ("5\n", 5), (" -7 ", -7),
                         ("+12", 12)]
)
def test_priority_accepted(cgroup, write, value):
    assert raw_write(cgroup, "gpu.priority", write) == 0
    assert cgroup.priority() == value


@pytest.mark.parametrize("write", ["default", "default\n", " default ", "\tdefault\n"])
def test_priority_default_unsets_it(cgroup, write):
    assert raw_write(cgroup, "gpu.priority", "-9") == 0
    assert raw_write(cgroup, "gpu.priority", write) == 0
    assert cgroup.read("gpu.priority") == "default\n"
    assert cgroup.read("gpu.priority.effective") == "0\n"


PRIO_EINVAL = ["\n", "abc", "1 2", "1.5", "max", "0x10", "--1", "226:128 5", "Default",
               "default 5", "defaults", "default0"]
PRIO_ERANGE = ["1024", "-1024", "99999999999", "-99999999999"]


@pytest.mark.parametrize(
    ("write", "err"),
    [(w, errno.EINVAL) for w in PRIO_EINVAL] + [(w, errno.ERANGE) for w in PRIO_ERANGE],
)
def test_priority_rejected_and_unchanged(cgroup, write, err):
    assert raw_write(cgroup, "gpu.priority", "-9") == 0
    assert raw_write(cgroup, "gpu.priority", write) == err
    assert cgroup.read("gpu.priority") == "-9\n"


def test_priority_effective_is_clamped_by_ancestors(cgroup):
    child = cgroup.child("a")
    grandchild = child.child("b")
    grandchild.create()
    cgroup.set_priority(100)
    child.set_priority(500)  # may ask for more than its parent, but does not get it
    grandchild.set_priority(-20)
    assert (child.priority(), child.priority_effective()) == (500, 100)
    assert grandchild.priority_effective() == -20
    grandchild.set_priority(1000)
    assert grandchild.priority_effective() == 100
    cgroup.set_priority(-300)
    assert child.priority_effective() == -300
    assert grandchild.priority_effective() == -300
    # the root imposes no clamp
    cgroup.set_priority(1023)
    assert child.priority_effective() == 500


def test_an_unset_priority_inherits_the_parents(cgroup):
    """Issue 37 item 10: a priority given to a container's group reaches the
    groups made under it (a pod's containers, systemd inside a container);
    before, the untouched child and grandchild of a group at 500 ran at 0."""
    child = cgroup.child("a")
    grandchild = child.child("b")
    grandchild.create()
    cgroup.set_priority(500)
    assert child.read("gpu.priority") == grandchild.read("gpu.priority") == "default\n"
    assert (child.priority_effective(), grandchild.priority_effective()) == (500, 500)
    # a set priority still takes effect up to the parent's
    child.set_priority(800)
    assert grandchild.priority_effective() == 500
    child.set_priority(-5)
    assert grandchild.priority_effective() == -5
    assert raw_write(child, "gpu.priority", "default") == 0
    assert grandchild.priority_effective() == 500
    # a top-level group's unset priority is 0, which its children inherit
    assert raw_write(cgroup, "gpu.priority", "default") == 0
    assert (child.priority_effective(), grandchild.priority_effective()) == (0, 0)
    child.set_priority(300)
    assert grandchild.priority_effective() == 0


def test_priority_effective_is_read_only(cgroup):
    # root opens the 0444 file despite its mode (CAP_DAC_OVERRIDE); the
    # write then fails in cgroup_file_write() for want of a handler
    assert raw_write(cgroup, "gpu.priority.effective", "5") == errno.EINVAL
    assert cgroup.priority_effective() == 0


@pytest.mark.parametrize("name", ["gpu.weight", "gpu.priority"])
def test_empty_write_is_a_no_op(cgroup, name):
    # write(2) of 0 bytes never reaches the controller
    before = cgroup.read(name)
    assert raw_write(cgroup, name, "") == 0
    assert cgroup.read(name) == before


def test_render_node_is_the_device_key(vgem):
    assert vgem.major == 226 and vgem.minor >= 128
    assert isinstance(vgem, DevT)
