"""bench-sched: how exactly gpu.weight and gpu.priority divide a simulated GPU.

fairness: share error, in percentage points, of saturating cgroups with
weights 1:1, 1:3, 1:10, 1:100, 8 random weights and a 3-level hierarchy,
each measured from gpu.stat over a window; fairness_max_error_pts is the
worst. convergence_ms: after a weight change from 1:1 to 1:9, the delay after
which the new shares held, from b's shortfall over the next 3 s (see
convergence()); exact to about one 10 ms job.
prio_wait_*_jobs: how long a high-priority job waits to start under 8
saturating low-priority cgroups, in job durations (p50, p99). pick_ns_p99:
the cost of one pick of the scheduler with 10,000 cgroups of which 1,000
have work queued, measured by simgpu around each pick. Writes
bench/results/sched.json.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
import uuid
from pathlib import Path

from common import save, table

from pycgpu import formats
from pycgpu.cgroup import Cgroup, find_mount
from pycgpu.simgpu import Load, SimGpu, render_nodes

JOB_NS = int(os.environ.get("BENCH_SCHED_JOB_NS", "5000000"))
WINDOW_S = float(os.environ.get("BENCH_SCHED_WINDOW_S", "3"))


def load_simgpu() -> Path:
    if not Path("/sys/module/simgpu").exists():
        ko = Path(os.environ.get("PYCGPU_EXT", "")) / "simgpu.ko"
        subprocess.run(["insmod", str(ko), "devices=2"], check=True)
    return render_nodes()[0]


def devt(node: Path) -> formats.DevT:
    st = os.stat(node)
    return formats.DevT(os.major(st.st_rdev), os.minor(st.st_rdev))


def usage(groups: list[Cgroup], dev: formats.DevT) -> list[int]:
    return [formats.parse_nested_keyed(g.read("gpu.stat"))[dev]["usage_usec"] for g in groups]


def shares_over(groups: list[Cgroup], dev: formats.DevT, seconds: float) -> list[float]:
    before = usage(groups, dev)
    time.sleep(seconds)
    delta = [a - b for a, b in zip(usage(groups, dev), before, strict=True)]
    return [100.0 * d / sum(delta) for d in delta]


def fairness_case(top: Cgroup, node: Path, name: str, tree: dict) -> tuple[float, list, list]:
    """tree: {child: weight or (weight, subtree)}; leaves run a saturating load."""
    base = top.child(name)
    leaves: list[tuple[Cgroup, float]] = []

    def build(parent: Cgroup, spec: dict, share: float) -> None:
        total = sum(v if isinstance(v, int) else v[0] for v in spec.values())
        for child, v in spec.items():
            weight, sub = (v, None) if isinstance(v, int) else v
            cg = parent.child(child)
            cg.create()
            cg.set_weight(weight)
            if sub:
                build(cg, sub, share * weight / total)
            else:
                leaves.append((cg, share * weight / total))

    build(base, tree, 100.0)
    loads = [Load(node, cg.path, JOB_NS, depth=8) for cg, _ in leaves]
    try:
        time.sleep(0.5)
        got = shares_over([cg for cg, _ in leaves], devt(node), WINDOW_S)
    finally:
        for load in loads:
            load.stop()
    want = [w for _, w in leaves]
    return max(abs(g - w) for g, w in zip(got, want, strict=True)), got, want


def convergence(top: Cgroup, node: Path) -> float:
    """Weights go from 1:1 to 1:9 at t0. Had the new shares held from a delay
    X on, b would have got 50% until X and 90% after, so over the T of GPU
    time after t0 b falls short of 0.9 T by 0.4 X: X = (0.9 T - B) / 0.4."""
    a, b = top.child("conv-a"), top.child("conv-b")
    a.create()
    b.create()
    dev = devt(node)
    # 10 ms jobs: at 90% b's worker submits 90 jobs/s, which it sustains even
    # under emulation (at 2 ms it could not, and its share would sag)
    loads = [Load(node, g.path, 10_000_000, depth=8) for g in (a, b)]
    try:
        time.sleep(0.5)
        ua0, ub0 = usage([a, b], dev)
        b.set_weight(900)
        time.sleep(3.0)
        ua1, ub1 = usage([a, b], dev)
    finally:
        for load in loads:
            load.stop()
    total, got_b = (ua1 - ua0) + (ub1 - ub0), ub1 - ub0
    return max(0.0, (0.9 * total - got_b) / 0.4) / 1000


def prio_waits(top: Cgroup, node: Path, n: int = 60) -> list[float]:
    lows = [top.child(f"prio-low{i}") for i in range(8)]
    high = top.child("prio-high")
    for g in (*lows, high):
        g.create()
    top.set_priority(1000)  # else it clamps its children to its own 0
    high.set_priority(100)
    loads = [Load(node, g.path, JOB_NS, depth=3) for g in lows]
    waits = []
    try:
        time.sleep(0.3)
        high.add_proc(os.getpid())
        with SimGpu(node) as gpu:
            for _ in range(n):
                waits.append(gpu.wait(gpu.submit(JOB_NS)).wait_ns / JOB_NS)
                time.sleep(0.003)
    finally:
        Cgroup(top.mount).add_proc(os.getpid())
        for load in loads:
            load.stop()
    return sorted(waits)


def measure_picks(node: Path, mount: Path, leaves: list[Cgroup]) -> list[int]:
    """ns of the picks made while every leaf has work queued: one blocker job
    holds the engine while one job per leaf and a second one are queued,
    then the first len(leaves) picks find all leaves active."""
    me = os.getpid()
    with SimGpu(node) as blocker, SimGpu(node) as gpu:
        top_seq = blocker.submit(10 * 10**9)
        picks0, _ = gpu.pick_stats()
        last = 0
        for leaf in leaves:
            leaf.add_proc(me)
            gpu.submit(100_000)
            last = gpu.submit(100_000)
        Cgroup(mount).add_proc(me)
        blocker.wait(top_seq, 20 * 10**9)
        gpu.wait(last, 60 * 10**9)
        picks1, samples = gpu.pick_stats()
    # samples: the latest picks, at most 8192, in ring order
    cut = picks1 % len(samples) if picks1 > len(samples) else 0
    ring = samples[cut:] + samples[:cut]
    ours = ring[len(ring) - (picks1 - picks0):]
    return sorted(ours[1:len(leaves) + 1])  # ours[0]: the pick at the blocker's submit


def pick_cost(mount: Path, node: Path) -> tuple[list[int], list[int], float]:
    """Left in place afterwards: removing 10,010 cgroups takes minutes under
    an emulator, and the VM's cgroup tree goes with the VM (run it last)."""
    base = Cgroup(mount, f"pycgpu-bench-picks-{uuid.uuid4().hex[:6]}")
    base.create()
    base.enable_controller()
    leaves = []
    t0 = time.monotonic()
    for i in range(10):
        p = base.child(f"p{i}")
        p.path.mkdir()
        p.enable_controller()
        for j in range(1000):
            p.child(f"c{j}").path.mkdir()
        leaves += [p.child(f"c{j}") for j in range(0, 1000, 10)]
    made_s = time.monotonic() - t0
    few = measure_picks(node, mount, leaves[::100])
    many = measure_picks(node, mount, leaves)
    return many, few, made_s


def progress(what: str) -> None:
    print(f"  [bench-sched {time.strftime('%H:%M:%S')}] {what}", file=sys.stderr, flush=True)


def pct(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def main() -> int:
    node = load_simgpu()
    top = Cgroup(find_mount(), f"pycgpu-bench-{uuid.uuid4().hex[:6]}")
    top.create()
    rng = random.Random(7)
    cases = {
        "1:1": {"a": 100, "b": 100},
        "1:3": {"a": 100, "b": 300},
        "1:10": {"a": 100, "b": 1000},
        "1:100": {"a": 50, "b": 5000},
        "8 random": {f"g{i}": rng.randint(20, 2000) for i in range(8)},
        "3-level": {"a": (100, {"a1": (100, {"x": 100, "y": 300}), "a2": 200}), "b": 300},
    }
    rows, errors = [], {}
    try:
        for i, (name, tree) in enumerate(cases.items()):
            progress(f"fairness {name}")
            err, got, want = fairness_case(top, node, f"case{i}", tree)
            errors[name] = round(err, 2)
            rows.append((f"fairness {name}",
                         f"error {err:5.2f} pts  got {' '.join(f'{g:.1f}' for g in got)}"
                         f"  want {' '.join(f'{w:.1f}' for w in want)}"))
        progress("convergence")
        conv = convergence(top, node)
        progress("priority waits")
        waits = prio_waits(top, node)
    finally:
        top.remove(recursive=True)
    progress("pick cost: 10,010 cgroups, 1,000 active")
    picks, picks_few, made_s = pick_cost(top.mount, node)
    result = {
        "fairness_max_error_pts": max(errors.values()),
        "fairness_error_pts": errors,
        "convergence_ms": round(conv, 1),
        "prio_wait_p50_jobs": round(pct(waits, 0.5), 3),
        "prio_wait_p99_jobs": round(pct(waits, 0.99), 3),
        "pick_ns_p50": pct(picks, 0.5),
        "pick_ns_p99": pct(picks, 0.99),
        "pick_samples": len(picks),
        "pick_ns_p99_10_active": pct(picks_few, 0.99),
        "pick_p99_ratio_1000_vs_10_active": round(pct(picks, 0.99) / pct(picks_few, 0.99), 2),
        "job_ns": JOB_NS,
        "window_s": WINDOW_S,
    }
    rows += [
        ("fairness_max_error_pts", f"{result['fairness_max_error_pts']:.2f}"),
        ("convergence_ms (1:1 -> 1:9)", f"{conv:.0f} ms"),
        ("prio wait p50 / p99", f"{result['prio_wait_p50_jobs']:.2f} / "
                                f"{result['prio_wait_p99_jobs']:.2f} jobs"),
        ("pick ns p50 / p99, 1,000 active", f"{result['pick_ns_p50']} / {result['pick_ns_p99']} ns "
                                            f"({len(picks)} picks; 10,010 cgroups made in "
                                            f"{made_s:.1f} s)"),
        ("pick ns p99, 10 active", f"{result['pick_ns_p99_10_active']} ns"),
        ("pick p99 ratio 1,000 / 10 active", f"{result['pick_p99_ratio_1000_vs_10_active']}"),
    ]
    table(f"bench-sched: simgpu, {JOB_NS / 1e6:g} ms jobs, {WINDOW_S:g} s windows", rows)
    save("sched", result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
