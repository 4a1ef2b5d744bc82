"""bench-memory: the cost of GPU memory charging.

Allocates and frees 4 KiB dumb buffers on vgem from processes in two
4-level nested cgroups of the same shape, with the memory controller
enabled alike in both (so that memcg's charge of the buffers' kernel
objects is paid alike): in one the GPU memory controller is enabled at
every level with a limit at each (the GPU charge at 4 levels, against 4
limits), in the other it is not enabled below the top level (the GPU
charge at that level, against no limit). The ratio is the GPU charge's
own cost; a nested worker beside workers in the root cgroup would also
pay memcg's charge, which the root does not. The limits are
gpu.memory.max on 6.12 and dmem.max of vgem's region on 7.3, whichever the
kernel has (pycgpu.core.memory).

An operation takes about a millisecond in the VM (a shmem file per
buffer, under lockdep and TCG), and the machine's speed moves by half from
one second to the next, far more than a charge costs. So three workers
stay up for the whole run, two in the tree charged at its top and one in
the tree charged at every level, and take turns in blocks of
BENCH_MEMORY_OPS operations (a fifth of a second). A block
runs slower in some places of a round than in others (the worker that
went first was about 8% slower than the one that went last), so the
three take every place once in a cycle of three rounds: a cycle's ratio
is the worker's charged at four levels time over the mean of the two
others', and charge_overhead_ratio (four levels with a limit at each
over one level without) is the median over the cycles of
BENCH_MEMORY_ROUNDS rounds. noise_ratio, the median of one of the two
others' time over the other's, is a ratio with no difference at all
behind it (a little noisier than the charge's, which has two workers in
its denominator): how steady the machine was.

Prints ns/op for both, the ratios and their spread; writes
bench/results/memory.json (6.12) or memory-7.3.json (7.3).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import sys
import time
import uuid
from multiprocessing.connection import Connection
from pathlib import Path

from common import BASE, median, save, table  # first: it puts tests/ on sys.path
from drmtest import BufferNode

from pycgpu.core.cgroup import Cgroup, find_mount
from pycgpu.core.devices import discover
from pycgpu.core.drm import driver_version
from pycgpu.core.formats import DevT
from pycgpu.core.memory import detect

OPS = int(os.environ.get("BENCH_MEMORY_OPS", "200"))
ROUNDS = int(os.environ.get("BENCH_MEMORY_ROUNDS", "60"))


def vgem_nodes() -> tuple[Path, str]:
    """vgem's card node (dumb buffers) and its render node's MAJ:MIN."""
    nodes = {}
    for prefix in ("card", "renderD"):
        for node in sorted(Path("/dev/dri").glob(f"{prefix}*")):
            version = driver_version(node)
            if version is not None and version.name == "vgem":
                nodes[prefix] = node
                break
    if len(nodes) != 2:
        sys.exit("bench-memory needs vgem (CONFIG_DRM_VGEM)")
    st = os.stat(nodes["renderD"])
    return nodes["card"], f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"


def _worker(cgroup: Path, card: Path, conn: Connection) -> None:
    """Moves into @cgroup, then times each block of operations asked for
    on @conn (a count; 0 ends it) and answers with the ns per operation."""
    (cgroup / "cgroup.procs").write_text(str(os.getpid()))
    with BufferNode(card) as drm:
        for _ in range(50):  # warm up
            drm.destroy_dumb(drm.create_dumb(1024, 1, 32).handle)
        conn.send(0.0)
        while ops := conn.recv():
            t0 = time.perf_counter_ns()
            for _ in range(ops):
                drm.destroy_dumb(drm.create_dumb(1024, 1, 32).handle)
            conn.send((time.perf_counter_ns() - t0) / ops)


class Worker:
    def __init__(self, cgroup: Path, card: Path) -> None:
        self.conn, child = mp.Pipe()
        self.proc = mp.get_context("fork").Process(target=_worker, args=(cgroup, card, child),
                                                   daemon=True)
        self.proc.start()
        child.close()  # so that a worker that dies is an EOF here, not a hang
        self.conn.recv()  # in its cgroup, warmed up

    def block(self, ops: int) -> float:
        self.conn.send(ops)
        return float(self.conn.recv())

    def stop(self) -> None:
        with contextlib.suppress(OSError):  # it died: its error is on stderr already
            self.conn.send(0)
        self.proc.join(timeout=30)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


def main() -> int:
    card, devt = vgem_nodes()
    mount = find_mount()
    regions = detect(mount, discover())
    if regions is None:
        sys.exit("bench-memory needs a kernel that counts GPU memory (gpu.memory.* or dmem)")
    region = regions.region_of(DevT.parse(devt))
    name = f"pycgpu-bench-{uuid.uuid4().hex[:6]}"
    top, plain_top = Cgroup(mount, name), Cgroup(mount, f"{name}-plain")
    leaf = top.child("l2").child("l3").child("l4")
    plain = plain_top.child("l2").child("l3").child("l4")
    leaf.create()
    try:
        # the same tree without the GPU memory controller below its top
        for cg in plain.ancestors()[1:]:
            cg.mkdir()
        for cg in (*leaf.ancestors()[1:-1], *plain.ancestors()[1:-1]):
            if "memory" in cg.controllers():
                cg.enable_controller("memory")
        cg = leaf
        while cg is not None and not cg.is_root:
            cg.write(region.file("max"), region.write(1 << 30))
            cg = cg.parent
        workers: list[Worker] = []
        plain_ns, charged_ns, ratios, noise = [], [], [], []
        cycles = max(1, ROUNDS // 3)
        try:
            for cgroup in (plain.path, leaf.path, plain.path):
                workers.append(Worker(cgroup, card))
            for _ in range(cycles):
                spent = {id(w): 0.0 for w in workers}
                for shift in range(3):  # each worker in each place once
                    for w in workers[shift:] + workers[:shift]:
                        spent[id(w)] += w.block(OPS)
                first, nested, second = (spent[id(w)] / 3 for w in workers)
                plain_ns += [first, second]
                charged_ns.append(nested)
                ratios.append(nested / ((first + second) / 2))
                noise.append(second / first)
        finally:
            for w in workers:
                w.stop()
        current = [line for line in leaf.read(region.file("current")).splitlines()
                   if line.startswith(region.kernel_key + " ")]
    finally:
        top.remove(recursive=True)
        if plain_top.exists():
            plain_top.remove(recursive=True)
    ratio = median(ratios)
    table(
        f"bench-memory ({BASE}, {region.file('max')}): alloc+free of a 4 KiB vgem buffer, "
        f"blocks of {OPS} ops, one level / four / one in every place, {cycles} cycles, "
        "memcg alike in both",
        [
            ("4 levels, GPU charge at the top only", f"{median(plain_ns):,.0f} ns/op"),
            ("4 levels, GPU charge and limits at each", f"{median(charged_ns):,.0f} ns/op"),
            ("charge_overhead_ratio",
             f"{ratio:.3f} (cycles {min(ratios):.3f} to {max(ratios):.3f})"),
            ("noise_ratio (one level / one level)",
             f"{median(noise):.3f} (cycles {min(noise):.3f} to {max(noise):.3f})"),
            ("leaf usage after the run", " ".join(current)),
        ],
    )
    save("memory" if BASE == "6.12" else f"memory-{BASE}", {
        "base": BASE,
        "interface": regions.kind,
        "charge_overhead_ratio": round(ratio, 4),
        "charge_overhead_ratio_cycles": [round(x, 4) for x in ratios],
        "noise_ratio": round(median(noise), 4),
        "one_level_ns_per_op": round(median(plain_ns)),
        "four_levels_ns_per_op": round(median(charged_ns)),
        "one_level_ns_cycles": [round(x) for x in plain_ns],
        "four_levels_ns_cycles": [round(x) for x in charged_ns],
        "ops_per_block": OPS,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
