"""bench-memory: the cost of GPU memory charging.

Allocates and frees 4 KiB dumb buffers on vgem from a process in the root
cgroup (charged to the root's totals, against no limit) and from one in a
4-level nested cgroup with a limit at every level (charged at 4 levels),
alternating the two in rounds so that both see the same machine. The
limits are gpu.memory.max on 6.12 and dmem.max of vgem's region on 7.3,
whichever the kernel has (pycgpu.core.memory). Prints ns/op for both and
their ratio; writes bench/results/memory.json (6.12) or memory-7.3.json
(7.3) with charge_overhead_ratio.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time
import uuid
from pathlib import Path

from common import BASE, median, save, table  # first: it puts tests/ on sys.path
from drmtest import BufferNode

from pycgpu.core.cgroup import Cgroup, find_mount
from pycgpu.core.devices import discover
from pycgpu.core.drm import driver_version
from pycgpu.core.formats import DevT
from pycgpu.core.memory import detect

OPS = int(os.environ.get("BENCH_MEMORY_OPS", "4000"))
ROUNDS = int(os.environ.get("BENCH_MEMORY_ROUNDS", "7"))


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


def _loop(cgroup: Path, card: Path, ops: int, out) -> None:
    (cgroup / "cgroup.procs").write_text(str(os.getpid()))
    with BufferNode(card) as drm:
        for _ in range(50):  # warm up
            drm.destroy_dumb(drm.create_dumb(1024, 1, 32).handle)
        t0 = time.perf_counter_ns()
        for _ in range(ops):
            drm.destroy_dumb(drm.create_dumb(1024, 1, 32).handle)
        out.send((time.perf_counter_ns() - t0) / ops)


def run_in(cgroup: Path, card: Path) -> float:
    parent, child = mp.Pipe()
    p = mp.get_context("fork").Process(target=_loop, args=(cgroup, card, OPS, child))
    p.start()
    ns = parent.recv()
    p.join()
    return ns


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
        root_ns, nested_ns = [], []
        for _ in range(ROUNDS):
            root_ns.append(run_in(mount, card))
            nested_ns.append(run_in(leaf.path, card))
        current = [line for line in leaf.read(region.file("current")).splitlines()
                   if line.startswith(region.kernel_key + " ")]
    finally:
        top.remove(recursive=True)
    ratio = median(nested_ns) / median(root_ns)
    table(
        f"bench-memory ({BASE}, {region.file('max')}): alloc+free of a 4 KiB vgem buffer, "
        f"{OPS} ops x {ROUNDS} rounds",
        [
            ("root cgroup (no limit)", f"{median(root_ns):,.0f} ns/op"),
            ("4-level nested, limits at each", f"{median(nested_ns):,.0f} ns/op"),
            ("charge_overhead_ratio", f"{ratio:.3f}"),
            ("leaf usage after the run", " ".join(current)),
        ],
    )
    save("memory" if BASE == "6.12" else f"memory-{BASE}", {
        "base": BASE,
        "interface": regions.kind,
        "charge_overhead_ratio": round(ratio, 4),
        "root_ns_per_op": round(median(root_ns)),
        "nested_ns_per_op": round(median(nested_ns)),
        "root_ns_rounds": [round(x) for x in root_ns],
        "nested_ns_rounds": [round(x) for x in nested_ns],
        "ops_per_round": OPS,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
