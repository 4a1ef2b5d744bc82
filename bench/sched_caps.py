"""bench-sched's gpu.max figures (issue 40), in the VM: how exactly a hard
cap holds a saturating client on simgpu's policy device.

max_alone_error_pts: a deep client (6 jobs queued) alone in a cgroup capped
at 30% and then at 70% of every 100 ms: the worse error of its part of the
engine (GPU time over wall time, from gpu.stat) against the cap.
max_beside_capped_pct and max_uncapped_ratio: the client capped at 30%
beside an uncapped deep client at equal weight: the capped one should get
min(cap, its share) = 30%, and the uncapped one the rest; the ratio is the
uncapped one's part over what it gets alone less the capped one's part
(throughput not lost to the cap: target 0.97).
max_nested_error_pts: a child capped at 50% under a parent capped at 40%:
its error against 40%.
max_change_ms: a cap raised from 30% to 70%: the time from the write to the
end of the first 100 ms window in which the client used at least 67%
(gpu.stat read every 10 ms; target: two periods, 200 ms).

Run alone (make bench-sched_caps) it writes bench/results/caps.json (6.12)
or caps-7.3.json; bench/sched.py records the same keys in its own result.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from common import save, table  # first: it puts tests/ on sys.path
from schedload import BASE, JOB_NS, WINDOW_S, devt, load_simgpu, progress, usage
from simgpu import Load

from pycgpu.core import formats
from pycgpu.core.cgroup import Cgroup, find_mount

PERIOD_US = formats.PERIOD_DEFAULT_US


def _group(parent: Cgroup, name: str, cap_pct: float | None) -> Cgroup:
    g = parent.child(name)
    g.create()
    if cap_pct is not None:
        g.set_cap(formats.Cap(round(cap_pct * PERIOD_US / 100)))
    return g


def _parts(groups: list[Cgroup], dev: formats.DevT, seconds: float) -> list[float]:
    """Each group's GPU time over @seconds of wall time, percent of the engine."""
    u0, t0 = usage(groups, dev), time.monotonic()
    time.sleep(seconds)
    u1, t1 = usage(groups, dev), time.monotonic()
    return [100 * (b - a) / ((t1 - t0) * 1e6) for a, b in zip(u0, u1, strict=True)]


def _loaded(groups: list[Cgroup], node: Path) -> list[Load]:
    loads = [Load(node, g.path, JOB_NS) for g in groups]
    time.sleep(0.5)  # past the start
    return loads


def _stop(loads: list[Load]) -> None:
    for load in loads:
        load.stop()


def _alone(top: Cgroup, node: Path, cap: float) -> float:
    g = _group(top, f"alone{cap:g}", cap)
    loads = _loaded([g], node)
    try:
        [part] = _parts([g], devt(node), WINDOW_S)
    finally:
        _stop(loads)
    return part


def _beside(top: Cgroup, node: Path) -> tuple[float, float, float]:
    """(the uncapped client's part alone, then the capped and the uncapped
    one's parts together)."""
    dev = devt(node)
    free, capped = _group(top, "free", None), _group(top, "capped", 30)
    loads = _loaded([free], node)
    try:
        [alone] = _parts([free], dev, WINDOW_S)
        loads += _loaded([capped], node)
        part_capped, part_free = _parts([capped, free], dev, WINDOW_S)
    finally:
        _stop(loads)
    return alone, part_capped, part_free


def _nested(top: Cgroup, node: Path) -> float:
    parent = _group(top, "parent", 40)
    child = _group(parent, "child", 50)
    loads = _loaded([child], node)
    try:
        [part] = _parts([child], devt(node), WINDOW_S)
    finally:
        _stop(loads)
    return part


def _change(top: Cgroup, node: Path, before: float = 30, after: float = 70) -> float | None:
    """ms from raising the cap to the end of the first 100 ms window at
    (after - 3)% or more; None if none within 2 s."""
    dev = devt(node)
    g = _group(top, "change", before)
    loads = _loaded([g], node)
    try:
        time.sleep(1.0)
        samples: list[tuple[float, int]] = []
        t_write = time.monotonic()
        g.set_cap(formats.Cap(round(after * PERIOD_US / 100)))
        end = t_write + 2.0
        while (now := time.monotonic()) < end:
            samples.append((now, usage([g], dev)[0]))
            time.sleep(0.01)
    finally:
        _stop(loads)
    window = PERIOD_US / 1e6
    for i, (t, u) in enumerate(samples):
        j = next((k for k in range(i, len(samples)) if samples[k][0] - t >= window), None)
        if j is None:
            break
        t2, u2 = samples[j]
        if 100 * (u2 - u) / ((t2 - t) * 1e6) >= after - 3:
            return 1000 * (t2 - t_write)
    return None


def cap_figures(top: Cgroup, node: Path) -> tuple[dict[str, object], list[tuple[str, str]]]:
    """The figures (keys of the module's docstring) and the table's rows."""
    progress("gpu.max: alone at 30% and 70%")
    alone = {cap: _alone(top, node, cap) for cap in (30.0, 70.0)}
    progress("gpu.max: capped beside uncapped")
    free_alone, part_capped, part_free = _beside(top, node)
    progress("gpu.max: nested")
    nested = _nested(top, node)
    progress("gpu.max: a cap raised")
    change = _change(top, node)
    ratio = part_free / max(free_alone - part_capped, 1e-9)
    result: dict[str, object] = {
        "max_alone_error_pts": round(max(abs(p - c) for c, p in alone.items()), 2),
        "max_alone_pct": {f"{c:g}": round(p, 2) for c, p in alone.items()},
        "max_beside_capped_pct": round(part_capped, 2),
        "max_beside_uncapped_pct": round(part_free, 2),
        "max_uncapped_alone_pct": round(free_alone, 2),
        "max_uncapped_ratio": round(ratio, 3),
        "max_nested_error_pts": round(abs(nested - 40), 2),
        "max_nested_pct": round(nested, 2),
        "max_change_ms": None if change is None else round(change, 1),
    }
    rows = [(f"gpu.max alone at {c:g}%", f"{p:.1f}% of the engine") for c, p in alone.items()]
    rows += [
        ("max_alone_error_pts", f"{result['max_alone_error_pts']}  (target 2)"),
        ("capped 30% beside uncapped", f"capped {part_capped:.1f}%, uncapped {part_free:.1f}% "
                                       f"(alone {free_alone:.1f}%)"),
        ("max_uncapped_ratio", f"{ratio:.3f}  (target 0.97)"),
        ("child 50% under parent 40%", f"{nested:.1f}%"),
        ("max_change_ms (30% -> 70%)",
         "none within 2 s" if change is None else f"{change:.0f} ms  (target 200)"),
    ]
    return result, rows


def main() -> int:
    node = load_simgpu()[0]
    top = Cgroup(find_mount(), f"pycgpu-bench-{uuid.uuid4().hex[:6]}")
    top.create()
    try:
        result, rows = cap_figures(top, node)
    finally:
        top.remove(recursive=True)
    result["base"] = BASE
    result["job_ns"] = JOB_NS
    table(f"bench-sched gpu.max ({BASE}): simgpu, {JOB_NS / 1e6:g} ms jobs, "
          f"{WINDOW_S:g} s windows", rows)
    save("caps" if BASE == "6.12" else f"caps-{BASE}", result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
