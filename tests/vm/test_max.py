"""gpu.max on the real kernel: the file's rules (cpu.max's format per
device), and the cap acting on a simgpu load, nested, with the throttling
counters of gpu.stat. The exact figures are virtual time's
(drm_sched_cgroup_max, gpucg_test_max); here the margins are the
emulator's."""

from __future__ import annotations

import errno
import time
from pathlib import Path

import pytest
from clients import devt, raw_write, usage_us
from simgpu import Load

from pycgpu.core import formats
from pycgpu.core.cgroup import Cgroup

JOB_NS = 2_000_000  # 2 ms jobs, 6 queued: a load that saturates the engine
WINDOW_S = 3.0


def test_default(cgroup):
    assert cgroup.read("gpu.max") == "default max 100000\n"


@pytest.mark.parametrize(
    ("write", "shown"),
    [("30000", "default 30000 100000"), ("30000 50000", "default 30000 50000"),
     ("default 1000 1000", "default 1000 1000"), ("max", "default max 100000"),
     ("  default   max  20000 \n", "default max 20000"),
     ("1000000 1000000", "default 1000000 1000000")],
)
def test_default_line_accepted(cgroup, write, shown):
    assert raw_write(cgroup, "gpu.max", write) == 0
    assert cgroup.read("gpu.max") == shown + "\n"


def test_period_kept_when_only_max_is_written(cgroup):
    assert raw_write(cgroup, "gpu.max", "20000 40000") == 0
    assert raw_write(cgroup, "gpu.max", "max") == 0
    assert cgroup.read("gpu.max") == "default max 40000\n"
    assert raw_write(cgroup, "gpu.max", "30000") == 0
    assert cgroup.read("gpu.max") == "default 30000 40000\n"


def test_device_override_and_reset(cgroup, gpu_dev):
    assert raw_write(cgroup, "gpu.max", f"{gpu_dev} 30000 100000") == 0
    assert cgroup.read("gpu.max") == f"default max 100000\n{gpu_dev} 30000 100000\n"
    assert raw_write(cgroup, "gpu.max", f"{gpu_dev} max") == 0
    assert cgroup.read("gpu.max") == f"default max 100000\n{gpu_dev} max 100000\n"
    assert raw_write(cgroup, "gpu.max", f"{gpu_dev} default") == 0
    assert cgroup.read("gpu.max") == "default max 100000\n"


MAX_EINVAL = ["abc", "max max", "1.5", "0x10", "30000 100000 5", "default", "{dev}",
              "7:7 30000", "{dev} abc", "{dev} 30000 abc", "x:y 30000", "-5"]
MAX_ERANGE = ["999", "0", "30000 999", "30000 1000001", "200000 100000", "{dev} 500",
              "{dev} 30000 2000000", "99999999999"]


@pytest.mark.parametrize(
    ("write", "err"),
    [(w, errno.EINVAL) for w in MAX_EINVAL] + [(w, errno.ERANGE) for w in MAX_ERANGE],
)
def test_rejected_and_unchanged(cgroup, gpu_dev, write, err):
    assert raw_write(cgroup, "gpu.max", f"{gpu_dev} 40000 80000") == 0
    assert raw_write(cgroup, "gpu.max", "20000") == 0
    before = cgroup.read("gpu.max")
    assert raw_write(cgroup, "gpu.max", write.format(dev=gpu_dev)) == err
    assert cgroup.read("gpu.max") == before


def test_a_device_that_cannot_hold_work_refuses_a_cap(cgroup, vgem):
    """vgem has no engine: a cap there could not act (as a weight)."""
    assert raw_write(cgroup, "gpu.max", f"{vgem} 30000") == errno.EOPNOTSUPP
    assert cgroup.read("gpu.max") == "default max 100000\n"


def stat(cg: Cgroup, dev: formats.DevT) -> dict[str, int]:
    return formats.parse_nested_keyed(cg.read("gpu.stat"))[dev]


def engine_share(cg: Cgroup, dev: formats.DevT, seconds: float = WINDOW_S) -> float:
    """The cgroup's GPU time over @seconds of wall time, percent."""
    u0, t0 = usage_us(cg, dev), time.monotonic()
    time.sleep(seconds)
    u1, t1 = usage_us(cg, dev), time.monotonic()
    return 100 * (u1 - u0) / ((t1 - t0) * 1e6)


def test_a_capped_load_gets_its_cap(cgroup, simgpu_nodes):
    node: Path = simgpu_nodes[0]
    dev = devt(node)
    g = cgroup.child("capped")
    g.create()
    assert raw_write(g, "gpu.max", "30000 100000") == 0
    load = Load(node, g.path, JOB_NS)
    try:
        time.sleep(0.5)
        share = engine_share(g, dev)
    finally:
        load.stop()
    counters = stat(g, dev)
    assert 24 <= share <= 33, f"a load capped at 30% got {share:.1f}% of the engine"
    assert counters["nr_throttled"] > 0 and counters["throttled_usec"] > 0, counters
    assert counters["nr_periods"] >= counters["nr_throttled"], counters


def test_caps_nest(cgroup, simgpu_nodes):
    """A child at 50% under a parent at 40% gets at most the parent's."""
    node: Path = simgpu_nodes[0]
    dev = devt(node)
    parent = cgroup.child("p")
    parent.create()
    child = parent.child("c")
    child.create()
    assert raw_write(parent, "gpu.max", "40000") == 0
    assert raw_write(child, "gpu.max", "50000") == 0
    load = Load(node, child.path, JOB_NS)
    try:
        time.sleep(0.5)
        share = engine_share(child, dev)
    finally:
        load.stop()
    assert 32 <= share <= 43, f"a child capped at 50% under 40% got {share:.1f}%"
    # the parent's cap throttled, not the child's
    assert stat(parent, dev)["nr_throttled"] > 0
    assert stat(child, dev)["nr_throttled"] == 0


def test_lifting_the_cap_frees_the_load(cgroup, simgpu_nodes):
    node: Path = simgpu_nodes[0]
    dev = devt(node)
    g = cgroup.child("lifted")
    g.create()
    assert raw_write(g, "gpu.max", "20000") == 0
    load = Load(node, g.path, JOB_NS)
    try:
        time.sleep(0.5)
        capped = engine_share(g, dev, 2.0)
        assert raw_write(g, "gpu.max", "max") == 0
        time.sleep(0.3)
        free = engine_share(g, dev, 2.0)
    finally:
        load.stop()
    assert capped <= 25 and free >= 60, (capped, free)
