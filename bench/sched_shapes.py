"""The shapes real clients have, for bench-sched (bench/sched.py runs these
last; each reloads simgpu with the parameters it needs):

multislot_shallow_error_pts: engines with credit limits 2, 4 and 256 (a
ring, as xe's and panthor's), a client that has one job at a time (it
submits the next when the last ends) at weight 900 and at 100 against a
saturating client at 100 that tries to keep the ring full (credits + 4
jobs queued), 5 ms jobs: the worst error of the shallow client's share of the
GPU time the two used against its weighted share (90%, 50%). The shallow
client comes first: what it waited behind a ring the other filled before
it came would be owed to it afterwards, for longer than the window.
think_share_error_pts: one job in flight; a client that runs a 5 ms job,
waits for it, then thinks for 0, 25, 50 and 100% of the job before the
next, at weight 900, against a saturating client at 100: the worst error,
in points of the engine's time, of what it gets against the smaller of
its demand and its weighted share (90%) of the GPU time the two used, as
7.3's KUnit shapes assert it. Its demand is what it gets alone, so that
the emulator's latency between two jobs, which counts as think time,
slows it alone as much and is not the policy's.
anticipation_idle_pct: under those think loads, the largest fraction of
wall time the engine was idle although the saturating client had work
queued, less what it is idle with the saturating client alone (the
emulator's latency between two jobs): what holding the engine for the
thinking client costs.
inversion_rate_ratio: a client at gpu.priority 100 whose every 1 ms job
waits on a 1 ms job of a client at -100 (through a shared syncobj, one
pair at a time): its job rate while a cgroup at priority 0 saturates the
signaler's engine with 5 ms jobs, over its rate while the same load runs on
a third device, with the signaler on the waiter's engine and on another
device; the worse of the two. The load runs in both so that the CPU the
emulator spends on it, which slows the pair's round trips as much
wherever the load's jobs run (a quarter to a third of the pair's rate on
these two vCPUs), is not counted as the policy's; on real hardware that
cost is nothing and the baseline is the rate alone. Each rate is the mean
over INVERSION_ROUNDS rounds, each running the four loads (none, on the
third device, on the signaler's engine, and there with the signaler at
100) in turn, so that the emulator's drift over a minute favours none.
inversion_rate_ratio_same_band: the same with the signaler at 100, where
there is nothing to invert: what the load costs the pair on an engine
that does not preempt (a job at 100 still waits for the rest of the job at
0 that runs, half of 5 ms on average; and the signaler's job is not lent
a priority before the waiter's job that waits on it is queued).
inversion_rate_ratio cannot exceed it by more than the noise; the two
apart are what inheritance leaves.
inversion_rate_ratio_idle: the rate under the load over the rate with no
load anywhere (the CPU cost of the load counted too), for reference.
inversion_rate_ratio_long_jobs (and _same_band): the same across devices
with 3 ms jobs. The emulator's round trips (two process wake-ups, about
2 ms a pair) make each client's think time three times its 1 ms job, so
the engine waits for neither; natively they take tens of microseconds and
the signaler's think time is the waiter's job. With 3 ms jobs the ratio
of think time to job is about what 1 ms jobs have natively, and the engine
waits for the signaler when it is in the waiter's band (_same_band comes
near 1). Below it the signaler's job is queued in its own band before the
waiter's job that lends to it (submit_gap in inversion_times_ms), and the
engine awaits the loan (the core's essay): it idles for that gap, which
natively is tens of microseconds, where a middle job started in it would
hold the signaler's job for the rest of its 5 ms.
inversion_times_ms: for each of those loads, the medians of the time from
the signaler's job's queueing to the waiter's (submit_gap: the two
processes' round trip, tens of microseconds on real hardware) and of the
time the signaler's job waited in its queue (signaler_wait). A middle job
that starts in the submit gap is one the signaler's job waits for whatever
inheritance does: the waiter has not asked for it yet.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

from schedload import JOB_NS, WINDOW_S, Pulse, devt, load_simgpu, progress, usage
from simgpu import ClientProcess, Load, SimGpu, linked_signaler, waited_jobs

from pycgpu.core.cgroup import Cgroup

MULTISLOT_CREDITS = (2, 4, 256)
SHALLOW_WEIGHTS = {900: 90.0, 100: 50.0}
THINK_FRACTIONS = (0.0, 0.25, 0.5, 1.0)
THINK_WEIGHT, THINK_SHARE = 900, 90.0
LINK_JOB_NS = 1_000_000
LONG_LINK_JOB_NS = 3_000_000
LONG_JOBS = "two devices, 3 ms jobs"
INVERSION_ROUNDS = 3


def busy_over(groups: list[Cgroup], node: Path, seconds: float) -> tuple[list[float], float]:
    """Each of @groups' share in % of the GPU time they used on @node over
    @seconds, and the fraction of wall time the engine was busy with them."""
    dev = devt(node)
    t0, before = time.monotonic(), usage(groups, dev)
    time.sleep(seconds)
    t1, after = time.monotonic(), usage(groups, dev)
    delta = [a - b for a, b in zip(after, before, strict=True)]
    total = sum(delta)
    shares = [100.0 * d / total if total else 0.0 for d in delta]
    return shares, total / 1e6 / (t1 - t0)


def pair(top: Cgroup, name: str, weight: int) -> tuple[Cgroup, Cgroup, Cgroup]:
    """A cgroup @name under @top and its two children: a client's at @weight
    and a saturating one's at 100."""
    base = top.child(name)
    client, deep = base.child("client"), base.child("deep")
    for g in (base, client, deep):
        g.create()
    client.set_weight(weight)
    deep.set_weight(100)
    return base, client, deep


def multislot_shallow(top: Cgroup, credits: int, weight: int) -> float:
    """The share in % of a client keeping one job queued at @weight against a
    saturating client at 100, on an engine that takes @credits jobs."""
    node, _ = load_simgpu(credits=str(credits))
    base, sh, deep = pair(top, f"multislot{credits}-{weight}", weight)
    loads: list[Load] = []
    try:
        loads.append(Load(node, sh.path, JOB_NS, depth=1))
        time.sleep(0.3)
        loads.append(Load(node, deep.path, JOB_NS, depth=credits + 4))
        time.sleep(0.5)
        shares, _ = busy_over([sh, deep], node, WINDOW_S)
    finally:
        for load in loads:
            load.stop()
        base.remove(recursive=True)
    return shares[0]


def saturated_busy(top: Cgroup) -> float:
    """The fraction of wall time a saturating client alone keeps the engine
    busy (the rest is the emulator's latency between two jobs)."""
    node, _ = load_simgpu()
    base, _, deep = pair(top, "saturated", 100)
    load = Load(node, deep.path, JOB_NS, depth=6)
    try:
        time.sleep(0.3)
        _, busy = busy_over([deep], node, WINDOW_S)
    finally:
        load.stop()
        base.remove(recursive=True)
    return busy


def think_share(top: Cgroup, fraction: float, saturated: float) -> tuple[float, float, float]:
    """A client that thinks @fraction of its job between jobs, at weight
    THINK_WEIGHT, against a saturating client at 100: (what it should get,
    what it gets, the fraction of the engine left idle beyond what it is
    with the saturating client alone, @saturated busy), in % of the
    engine's time (see the top)."""
    node, _ = load_simgpu()
    base, thinker, deep = pair(top, f"think{int(fraction * 100)}", THINK_WEIGHT)
    pause_s = fraction * JOB_NS / 1e9
    loads: list[ClientProcess] = []
    try:
        loads.append(Pulse(node, thinker.path, JOB_NS, pause_s))
        time.sleep(0.3)
        _, alone = busy_over([thinker], node, WINDOW_S)
        loads.append(Load(node, deep.path, JOB_NS, depth=6))
        time.sleep(0.5)
        shares, busy = busy_over([thinker, deep], node, WINDOW_S)
    finally:
        for load in loads:
            load.stop()
        base.remove(recursive=True)
    want = 100.0 * min(alone, THINK_SHARE / 100.0 * busy)
    got = shares[0] * busy
    return want, got, 100.0 * max(0.0, saturated - busy)


def inversion_rate(top: Cgroup, name: str, wait_node: Path, signal_node: Path,
                   middle: Path | None, signal_prio: int = -100,
                   pairs: list[tuple[int, int]] | None = None,
                   job_ns: int = LINK_JOB_NS) -> int:
    """Jobs of @job_ns a client at priority 100 on @wait_node, whose every
    job waits on one of a client at @signal_prio on @signal_node, completes
    in a window, with (@middle) a saturating load at priority 0 on that
    node; @pairs as waited_jobs() fills it."""
    base = top.child(name)
    high, low, mid = base.child("high"), base.child("low"), base.child("middle")
    for g in (base, high, low, mid):
        g.create()
    # gpu.priority is the lowest on the path: room above 100 for high
    top.set_priority(1000)
    base.set_priority(1000)
    high.set_priority(100)
    low.set_priority(signal_prio)
    mid.set_priority(0)  # unset, it would inherit base's 1000
    procs: list[ClientProcess] = []
    done = 0
    try:
        if middle is not None:
            procs.append(Load(middle, mid.path, JOB_NS, depth=6))
        high.add_proc(os.getpid())
        with SimGpu(wait_node) as gpu:
            link, signaler = linked_signaler(gpu, signal_node, low.path, job_ns)
            procs.append(signaler)
            time.sleep(0.3)
            done = waited_jobs(gpu, link, [signaler], job_ns, WINDOW_S, pairs)
    finally:
        Cgroup(top.mount).add_proc(os.getpid())
        for proc in procs:
            proc.stop()
        base.remove(recursive=True)
    return done


def inversion_rates(top: Cgroup, wait_node: Path, signal_node: Path, elsewhere: Path,
                    job_ns: int = LINK_JOB_NS
                    ) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """The pair's rates in jobs/s with jobs of @job_ns (see the top): alone, with the load on
    @elsewhere, with it on @signal_node, and with it there and the signaler
    at 100; and for each, the medians in ms of the time from the
    signaler's job's queueing to the waiter's (submit_gap) and of the time
    the signaler's job waited in its queue (signaler_wait)."""
    cases: dict[str, tuple[Path | None, int]] = {
        "alone": (None, -100),
        "load_elsewhere": (elsewhere, -100),
        "loaded": (signal_node, -100),
        "loaded_same_band": (signal_node, 100),
    }
    jobs = dict.fromkeys(cases, 0)
    pairs: dict[str, list[tuple[int, int]]] = {case: [] for case in cases}
    for _ in range(INVERSION_ROUNDS):
        for case, (middle, prio) in cases.items():
            jobs[case] += inversion_rate(top, f"inv-{case}", wait_node, signal_node, middle,
                                         prio, pairs[case], job_ns)
    times = {case: {"submit_gap": median_ms([gap for gap, _ in p]),
                    "signaler_wait": median_ms([wait for _, wait in p])}
             for case, p in pairs.items()}
    return ({case: round(n / (INVERSION_ROUNDS * WINDOW_S), 1) for case, n in jobs.items()},
            times)


def median_ms(values_ns: list[int]) -> float:
    return round(statistics.median(values_ns) / 1e6, 2) if values_ns else 0.0


def worst_ratio(rates: dict[str, dict[str, float]], key: str,
                baseline: str = "load_elsewhere") -> float:
    """The smallest of @key's rate over @baseline's, over @rates."""
    return round(min(r[key] / r[baseline] if r[baseline] else 0.0 for r in rates.values()), 3)


def shape_figures(top: Cgroup) -> dict[str, object]:
    multislot: dict[str, float] = {}
    errors: list[float] = []
    for credits in MULTISLOT_CREDITS:
        for weight, want in SHALLOW_WEIGHTS.items():
            progress(f"multislot: credits {credits}, shallow at {weight}:100")
            got = multislot_shallow(top, credits, weight)
            multislot[f"credits {credits}, {weight}:100"] = round(got, 2)
            errors.append(abs(got - want))
    think: dict[str, dict[str, float]] = {}
    think_errors, idle = [], []
    progress("a saturating client alone")
    saturated = saturated_busy(top)
    for fraction in THINK_FRACTIONS:
        progress(f"think time {int(fraction * 100)}% of the job")
        want, got, idle_pct = think_share(top, fraction, saturated)
        think[f"{int(fraction * 100)}%"] = {"share": round(got, 2), "want": round(want, 2),
                                           "idle": round(idle_pct, 2)}
        think_errors.append(abs(got - want))
        idle.append(idle_pct)
    rates: dict[str, dict[str, float]] = {}
    times: dict[str, dict[str, dict[str, float]]] = {}
    # a third device for the load's baseline; device 1 on the policy too
    # when it holds the signaler
    for where, params, job_ns in (("one engine", {"devices": "3"}, LINK_JOB_NS),
                                  ("two devices", {"devices": "3", "fifo": "0"}, LINK_JOB_NS),
                                  (LONG_JOBS, {"devices": "3", "fifo": "0"}, LONG_LINK_JOB_NS)):
        node0, node1, node2 = load_simgpu(**params)[:3]
        signal_node = node0 if where == "one engine" else node1
        progress(f"priority inversion, {where}")
        rates[where], times[where] = inversion_rates(top, node0, signal_node, node2, job_ns)
    load_simgpu()
    long_jobs = {LONG_JOBS: rates[LONG_JOBS]}
    short_jobs = {where: r for where, r in rates.items() if where != LONG_JOBS}
    return {
        "multislot_shallow_error_pts": round(max(errors), 2),
        "multislot_shallow_pct": multislot,
        "think_share_error_pts": round(max(think_errors), 2),
        "think_share_pct": think,
        "anticipation_idle_pct": round(max(idle), 2),
        "inversion_rate_ratio": worst_ratio(short_jobs, "loaded"),
        "inversion_rate_ratio_same_band": worst_ratio(short_jobs, "loaded_same_band"),
        "inversion_rate_ratio_idle": worst_ratio(short_jobs, "loaded", baseline="alone"),
        "inversion_rate_ratio_long_jobs": worst_ratio(long_jobs, "loaded"),
        "inversion_rate_ratio_long_jobs_same_band": worst_ratio(long_jobs, "loaded_same_band"),
        "inversion_rates_per_s": rates,
        "inversion_times_ms": times,
    }
