"""What a client makes the gpu controller allocate is charged to the memory
cgroup it is in (issue 37 item 6; ../shared/DESIGN.md section 9): a process
that moves through many cgroups pays for the scheduling state each move
makes (the cgroup's entity on the engines its queues used, the cgroup's
pool of the device), in the kernel memory of the cgroups it moved to."""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from pathlib import Path

import pytest
from clients import JOB_NS
from simgpu import SimGpu

from pycgpu.core.cgroup import Cgroup

MOVES = 100
# the least a move makes: an entity and a pool (about 1 KiB a move measured,
# with 7.3's run queue of the cgroup as with 6.12's memory counters)
PER_MOVE = 512


@pytest.fixture
def node(simgpu_nodes) -> Path:
    return simgpu_nodes[0]


def kernel_bytes(cg: Cgroup) -> int:
    """The subtree's slab memory (memory.stat is hierarchical), once memcg's
    periodic flush (every 2 s) has folded in the counts of every CPU."""
    time.sleep(2.5)
    for line in cg.read("memory.stat").splitlines():
        key, value = line.split()
        if key == "slab":
            return int(value)
    raise AssertionError(f"no slab in {cg.path}/memory.stat")


def _move_through(node: str, groups: list[str], jobs: bool) -> None:
    """In each of @groups in turn, one job on @node if @jobs (the ioctl
    after a move makes the owner's new cgroup the client's)."""
    with SimGpu(Path(node)) as gpu:
        gpu.wait(gpu.submit(JOB_NS))
        for path in groups:
            Path(path, "cgroup.procs").write_text(str(os.getpid()))
            if jobs:
                gpu.wait(gpu.submit(JOB_NS))
    os._exit(0)


def _run(node: Path, parent: Cgroup, jobs: bool) -> int:
    """The growth of @parent's kernel memory while a process moves through
    MOVES cgroups under it, with a job in each if @jobs."""
    parent.create()
    parent.write("cgroup.subtree_control", "+memory")
    groups = [parent.child(f"m{i}") for i in range(MOVES)]
    for g in groups:
        g.create()
    before = kernel_bytes(parent)
    p = mp.get_context("fork").Process(
        target=_move_through, args=(str(node), [str(g.path) for g in groups], jobs))
    p.start()
    p.join(120)
    assert p.exitcode == 0, p.exitcode
    return kernel_bytes(parent) - before


def test_a_client_pays_for_the_state_its_moves_make(cgroup, node):
    """100 moves with a job after each against the same moves without:
    the first charge the subtree at least 100 entities and pools more
    (measured: 105 KiB more on 6.12, 130 KiB on 7.3). Before, the
    controller's allocations were charged to nobody: 2 KiB less."""
    cgroup.write("cgroup.subtree_control", "+memory")
    moves = _run(node, cgroup.child("moves"), jobs=False)
    with_jobs = _run(node, cgroup.child("jobs"), jobs=True)
    assert with_jobs - moves >= MOVES * PER_MOVE, (with_jobs, moves)
