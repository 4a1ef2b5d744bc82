"""bench-memory: the cost of GPU memory charging.

Allocates and frees 4 KiB dumb buffers on vgem from a process in the root
cgroup (charged to the root's totals, against no limit) and from one in a
4-level nested cgroup with a limit at every level (charged at 4 levels).
The limits are gpu.memory.max on 6.12 and dmem.max of vgem's region on 7.3,
whichever the kernel has (pycgpu.core.memory).

An operation takes about a millisecond in the VM (a shmem file per
buffer, under lockdep and TCG), and the machine's speed moves by half from
one second to the next, far more than a charge costs. So three workers
stay up for the whole run, two in the root and one in the nested cgroup,
and take turns in blocks of BENCH_MEMORY_OPS operations (a fifth of a
second). A block runs slower in some places of a round than in others
(with the nested worker always in the middle, the root worker that went
first was about 8% slower than the one that went last), so the three
take every place once in a cycle of three rounds: a cycle's ratio
is the nested worker's time over the mean of the two root workers'
times, and charge_overhead_ratio is the median over the cycles of
BENCH_MEMORY_ROUNDS rounds. noise_ratio, the median of one root worker's
time over the other's, is a ratio with no difference at all behind it
(a little noisier than the charge's, which has two root workers in its
denominator): how steady the machine was.

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
    top = Cgroup(mount, f"pycgpu-bench-{uuid.uuid4().hex[:6]}")
    leaf = top.child("l2").child("l3").child("l4")
    leaf.create()
    try:
        cg = leaf
        while cg is not None and not cg.is_root:
            cg.write(region.file("max"), region.write(1 << 30))
            cg = cg.parent
        workers: list[Worker] = []
        root_ns, nested_ns, ratios, noise = [], [], [], []
        cycles = max(1, ROUNDS // 3)
        try:
            for cgroup in (mount, leaf.path, mount):
                workers.append(Worker(cgroup, card))
            for _ in range(cycles):
                spent = {id(w): 0.0 for w in workers}
                for shift in range(3):  # each worker in each place once
                    for w in workers[shift:] + workers[:shift]:
                        spent[id(w)] += w.block(OPS)
                first, nested, second = (spent[id(w)] / 3 for w in workers)
                root_ns += [first, second]
                nested_ns.append(nested)
                ratios.append(nested / ((first + second) / 2))
                noise.append(second / first)
        finally:
            for w in workers:
                w.stop()
        current = [line for line in leaf.read(region.file("current")).splitlines()
                   if line.startswith(region.kernel_key + " ")]
    finally:
        top.remove(recursive=True)
    ratio = median(ratios)
    table(
        f"bench-memory ({BASE}, {region.file('max')}): alloc+free of a 4 KiB vgem buffer, "
        f"blocks of {OPS} ops, root / nested / root in every place, {cycles} cycles",
        [
            ("root cgroup (no limit)", f"{median(root_ns):,.0f} ns/op"),
            ("4-level nested, limits at each", f"{median(nested_ns):,.0f} ns/op"),
            ("charge_overhead_ratio",
             f"{ratio:.3f} (cycles {min(ratios):.3f} to {max(ratios):.3f})"),
            ("noise_ratio (root / root)",
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
        "root_ns_per_op": round(median(root_ns)),
        "nested_ns_per_op": round(median(nested_ns)),
        "root_ns_cycles": [round(x) for x in root_ns],
        "nested_ns_cycles": [round(x) for x in nested_ns],
        "ops_per_block": OPS,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
