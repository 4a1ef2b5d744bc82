"""bench-sim: the scheduling figures on virtual time, without a VM or root.

``tools/sim.sh run`` boots the UML kernel of 7.3's tree with the series
(``tools/sim.sh build``) under ``time-travel=inf-cpu`` and runs the KUnit
scenarios of the cgroup order (kernel/drivers-gpu-cgroup/7.3/tests_cgroup.c)
under drm_sched's FIFO and FAIR policies: clocks are virtual and CPU work
takes no time, so every figure is exact and the same on every run. This
parses the figures the scenarios print into bench/results/sim-7.3.json and
prints them as a table.

Figures (each is the worse of the two policies; ``_over_fifo`` and
``_over_fair`` give the cgroup order's figure over each; ``_fifo`` and
``_fair`` give upstream's policy alone for the same load, no cgroup
configured, where a scenario measures it):

- fairness_max_error_pts: two deep clients at weights 1:1, 1:4 and 1:9,
  with 1, 2, 4 and 256 slots, and deep clients at 1:100, 10000:1, eight
  random weights, a tree of three levels and jobs of 1 and 7 ms: the
  largest distance, in points of the GPU time used, of a share from its
  weights'; target 1 (upstream's policies split the engine by entity: 40
  points and more);
- jain_index_60_cgroups: Jain's fairness index of 60 deep clients in 60
  cgroups of equal weight (1 when all get the same);
- multislot_shallow_error_pts: a client that keeps one job queued and does
  not think, against a deep one, with 2, 4 and 256 slots: the largest
  distance of its share of the GPU time used from its weight's; target 2
  (``_fifo``, ``_fair``: the same two clients on upstream's policy alone,
  held to the same shares);
- think_share_error_pts: a client that thinks 25% to 1000% of its job
  against a deep one: the largest distance of its share of the engine
  from the smaller of its demand (what it gets alone) and its weight's
  share of the GPU time used; target 2 (upstream's beside it, as above);
- inversion_control_ratio: a waiter at priority 100 whose every job waits
  on a client at -100 (on its scheduler, on another, or along a chain of
  three through one at -50), beside a deep load at 0, with a native
  submission gap (20 us) and 1 or 3 ms jobs: the worst of its rates over
  the rate of the same load with everyone in the waiter's band; target
  0.95. ``inversion_control_ratio_emulated_gap`` is the same with a 1.5
  ms gap, what the emulated VM sees (shown, no target). ``_fifo``,
  ``_fair``: upstream's policy alone with the waiter's entity at HIGH,
  the signallers' at LOW and the load's at NORMAL, over everyone at HIGH
  (native gap);
- loan_wait_median_us: how long a job that a waiter at 100 lends to waits
  for its start after the waiter's submission, beside a deep load at 0 with
  10 ms jobs (median; the worse of the two gaps);
- prio_wait_p99_jobs: a client at priority 100 with one 1 ms job at a time
  and 3 to 5 ms between, against a deep one at 0 with 2 ms jobs, on 1, 2,
  4 and 256 slots: the 99th percentile of its jobs' wait for their start,
  in deep jobs; target 1 (upstream's: its entity at HIGH, the deep one's at
  NORMAL);
- band_share_error_pts: a cgroup at 100 with a client at 100 (1 ms jobs 4
  to 5 ms apart) and a deep one at 0, beside a deep cgroup at 0 of equal
  weight: the distance of the deep client's part of the band-0 time from
  50% (target 1);
- hop_error_pts: a deep client whose owner moves every 200 ms between
  cgroups at 100 and 900 that each hold a deep client: the largest
  distance of its share from half its cgroup's (5%, 45%) over the second
  100 ms of each stay (target 2; ``_fifo``, ``_fair``: upstream's policy
  alone, which gives it a third);
- max_error_pts, max_uncapped_ratio, max_change_ms (gpu.max): a deep
  client capped at 30% or 70% of every 100 ms alone, at 30% beside an
  uncapped deep client, at 50% under a parent at 40%, with 7 ms jobs
  (debt): the largest distance of its part of the engine's time from its
  cap (target 1); the uncapped client's part over what the capped one
  leaves (target 0.97); a cap raised from 30% to 70%: from the change
  until every 100 ms after is within 2 points (target 200);
- convergence_ms: two deep clients, one cgroup's weight going 100 to 900
  or 900 to 100, its priority 0 to 100, or its client back after 400 ms
  idle: from the change until every
  whole 100 ms after is within 2 points of the new share (the worst case;
  under 100 ms is the first whole 100 ms's); target 200;
- property_inversions, property_idle_longest_ms, property_share_error_pts:
  200 random mixes (cgroup trees, weights 1 to 10000, priorities, deep,
  one-job and thinking clients, each waiting with each job on another's
  last with chance 1/5, 1 to 4 slots), each run as drawn and with every client
  deep and none waiting: handoffs that passed over ready work of a higher
  band than the job may run in (its own, or a waiter's that lent to it;
  target 0), the longest stretch the engine ran nothing while work was
  ready (target 48, the essay's bound), and where the highest band's
  clients are all deep and no client waits, the largest distance of a leaf's
  share from its weights' (target 1);
- rejoin_round_worst_ms (``_fifo``, ``_fair`` only: upstream's policy,
  with 7.3 patch 0026, no cgroup): a client with one job running and one
  queued against rounds of a signaller's 1 ms job and a job waiting on it;
  the longest round with a normal signaller (FAIR as released never ended
  one).

Usage: bench/sim.py [LOG]: parses LOG (the output of ``tools/sim.sh run``)
instead of running it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from common import save, table
from sim_plots import Series, plot

ROOT = Path(__file__).resolve().parent.parent
POLICIES = ("fifo", "fair")
HIGHER_IS_BETTER = ("inversion_", "jain_", "max_uncapped")
TARGETS = {
    "fairness_max_error_pts": 1.0,
    "multislot_shallow_error_pts": 2.0,
    "think_share_error_pts": 2.0,
    "inversion_control_ratio": 0.95,
    "prio_wait_p99_jobs": 1.0,
    "jain_index_60_cgroups": 0.99,
    "convergence_ms": 200.0,
    "band_share_error_pts": 1.0,
    "hop_error_pts": 2.0,
    "max_error_pts": 1.0,
    "max_uncapped_ratio": 0.97,
    "max_change_ms": 200.0,
    "property_inversions": 0.0,
    "property_idle_longest_ms": 48.0,
    "property_share_error_pts": 1.0,
}
# "[sim.sh] virtual time, 7.3, fifo (sched_policy=1): ..."
SECTION = re.compile(r"^\[sim\.sh\] virtual time, (?P<base>[\d.]+), (?P<name>\w+) ")
# "    drm_sched_cgroup_weights: weights 1:4, one credit: 80% (want 80%)", and
# the same load on upstream's policy alone: "..., one credit, no cgroup: 50% ..."
WEIGHTS = re.compile(r"^\s+drm_sched_cgroup_weights: (?P<case>.*?)(?P<plain>, no cgroup)?: "
                     r"(?P<got>\d+)% \(want (?P<want>\d+)%\)$")
# "    drm_sched_cgroup_shapes: think 25%, one slot, weights 9:1: 72% of the
# engine, 90% of the GPU time used (alone 76%), want 72%; engine busy 80%"
SHAPES = re.compile(
    r"^\s+drm_sched_cgroup_shapes: (?P<case>no think|think \d+%).*?(?P<plain>, no cgroup)?: "
    r"(?P<engine>\d+)% of the engine, (?P<used>\d+)% of the GPU time used \(alone \d+%\), "
    r"want (?P<want>\d+)%")
# "    drm_sched_cgroup_inversion: two schedulers, 1 ms jobs, native gap:
# 494 rounds/s, 356 in the waiter's band: 138%"
INVERSION = re.compile(
    r"^\s+drm_sched_cgroup_inversion: (?P<case>[^:]*), (?P<gap>native|emulator's) gap"
    r"(?P<plain>, no cgroup)?: (?P<rate>\d+) rounds/s, (?P<control>\d+) in the waiter's band")
# "    drm_sched_cgroup_loan_awaited: a native submission gap (20 us): the
# signaller's job started 0 us (median) after ..."
LOAN = re.compile(r"^\s+drm_sched_cgroup_loan_awaited: [^:]*: the signaller's job started "
                  r"(?P<median>-?\d+) us \(median\)")
# "    drm_sched_cgroup_prio_wait: two slots, no cgroup: p50 2.62 jobs, p99 2.99 jobs (108 jobs)"
PRIO_WAIT = re.compile(r"^\s+drm_sched_cgroup_prio_wait: .*?(?P<plain>, no cgroup)?: p50 [\d.]+ "
                       r"jobs, p99 (?P<p99>[\d.]+) jobs")
# "    drm_sched_cgroup_tree: eight random weights, no cgroup: largest error 43.6 points"
TREE = re.compile(r"^\s+drm_sched_cgroup_tree: .*?(?P<plain>, no cgroup)?: largest error "
                  r"(?P<error>[\d.]+) points$")
# "    drm_sched_cgroup_tree: 60 cgroups of equal weight, no cgroup: Jain's index 994/1000"
JAIN = re.compile(r"^\s+drm_sched_cgroup_tree: .*?(?P<plain>, no cgroup)?: Jain's index "
                  r"(?P<index>\d+)/1000$")
# "    drm_sched_cgroup_change: weight 100 to 900: within 2 points of 90% 100 ms after the change"
CHANGE = re.compile(r"^\s+drm_sched_cgroup_change: (?P<case>.*): within 2 points of "
                    r"(?P<want>\d+)% (?P<ms>\d+) ms after the change$")
# "    drm_sched_scheduler_rejoin_test: Normal signaller: 20 of 20 rounds, 11501 us on
# average, 12001 at worst"
REJOIN = re.compile(r"^\s+drm_sched_scheduler_rejoin_test: Normal signaller: \d+ of \d+ rounds, "
                    r"\d+ us on average, (?P<worst>\d+) at worst$")
# "    drm_sched_cgroup_weights: weights 1:9, one credit, no cgroup: series 100 ms: 50,50"
MAX = re.compile(r"^\s+drm_sched_cgroup_max: .*: (?P<got>[\d.]+)% of the engine "
                 r"\((?:cap|wanted) (?P<want>[\d.]+)%\), the uncapped one (?P<other>[\d.]+)%"
                 r"(?P<free> \([\d.]+% beside it uncapped\))?")
MAX_CHANGE = re.compile(r"^\s+drm_sched_cgroup_max: .*: within 2 points of \d+% (?P<ms>\d+) ms "
                        r"after the change")
HOP = re.compile(r"^\s+drm_sched_cgroup_hop: .*?(?P<plain>, no cgroup)?: within (?P<error>\d+) "
                 r"points of its due")
BANDS = re.compile(r"^\s+drm_sched_cgroup_bands: .*P2 (?P<part>[\d.]+)% of band 0's time")
PROPERTY = re.compile(r"^\s+drm_sched_cgroup_property: \d+ runs: (?P<inversions>\d+) inversions, "
                      r"longest idle with work ready (?P<idle>\d+) us, largest share error "
                      r"(?P<error>[\d.]+) points \(\d+ runs checked\), idle with work ready "
                      r"(?P<total>\d+) ms in all")
SERIES = re.compile(r"^\s+drm_sched_cgroup_(?P<scenario>\w+): (?P<case>.*?)(?P<plain>, no cgroup)?"
                    r": series (?P<ms>\d+) ms: (?P<values>\d+(?:,\d+)*)$")


class SimError(Exception):
    """The output lacks figures a scenario should have printed."""


@dataclass
class Figures:
    """One policy's figures, as the scenarios printed them."""

    weights: list[tuple[int, int]] = field(default_factory=list)
    weights_upstream: list[tuple[int, int]] = field(default_factory=list)
    shallow: list[tuple[int, int]] = field(default_factory=list)  # (share of used, want)
    shallow_upstream: list[tuple[int, int]] = field(default_factory=list)
    think: list[tuple[int, int]] = field(default_factory=list)  # (share of engine, want)
    think_upstream: list[tuple[int, int]] = field(default_factory=list)
    inversion: dict[str, list[float]] = field(default_factory=dict)  # gap -> ratios
    inversion_upstream: dict[str, list[float]] = field(default_factory=dict)
    loan_median_us: list[int] = field(default_factory=list)
    prio_p99: list[float] = field(default_factory=list)
    prio_p99_upstream: list[float] = field(default_factory=list)
    tree: list[float] = field(default_factory=list)
    tree_upstream: list[float] = field(default_factory=list)
    jain: list[float] = field(default_factory=list)
    jain_upstream: list[float] = field(default_factory=list)
    change_ms: list[int] = field(default_factory=list)
    rejoin_worst_us: list[int] = field(default_factory=list)
    bands: list[float] = field(default_factory=list)  # the deep client's part, %
    hop: list[float] = field(default_factory=list)
    caps: list[tuple[float, float, float]] = field(default_factory=list)  # got, want, other
    cap_change_ms: list[int] = field(default_factory=list)
    hop_upstream: list[float] = field(default_factory=list)
    # (inversions, longest idle us, share error, idle ms in all)
    property: list[tuple[int, int, float, int]] = field(default_factory=list)
    series: list[tuple[str, str, bool, int, tuple[int, ...]]] = field(default_factory=list)
    wants: dict[tuple[str, str], int] = field(default_factory=dict)

    def summary(self, partial: bool = False) -> dict[str, float]:
        """The figures: all of them, or SimError naming the scenarios that
        printed none; with @partial, those of the scenarios that printed any
        (a run with a mechanism switched off may fail some)."""
        missing = [n for n, v in (("weights", self.weights), ("shapes", self.shallow),
                                  ("think", self.think), ("inversion", self.inversion),
                                  ("loan", self.loan_median_us), ("prio_wait", self.prio_p99),
                                  ("tree", self.tree), ("jain", self.jain),
                                  ("change", self.change_ms), ("bands", self.bands),
                                  ("hop", self.hop), ("max", self.caps),
                                  ("property", self.property)) if not v]
        if not partial and (missing or "native" not in self.inversion):
            raise SimError(f"no figures of {', '.join(missing) or 'native inversion'}")
        weights = [float(abs(g - w)) for g, w in self.weights]
        raw: dict[str, float | None] = {
            "fairness_max_error_pts": _worst(weights + self.tree),
            "jain_index_60_cgroups": _worst(self.jain, higher=True),
            "prio_wait_p99_jobs": _worst(self.prio_p99),
            "convergence_ms": _worst([float(v) for v in self.change_ms]),
            "band_share_error_pts": _worst([round(abs(v - 50), 1) for v in self.bands]),
            "hop_error_pts": _worst(self.hop),
            "max_error_pts": _worst([round(abs(g - w), 1) for g, w, _ in self.caps]),
            "max_uncapped_ratio": _worst([round(o / (100 - g), 3) for g, _, o in self.caps
                                          if o > 0], higher=True),
            "max_change_ms": _worst([float(v) for v in self.cap_change_ms]),
            "multislot_shallow_error_pts": _worst([float(abs(g - w)) for g, w in self.shallow]),
            "think_share_error_pts": _worst([float(abs(g - w)) for g, w in self.think]),
            "inversion_control_ratio": (round(min(self.inversion["native"]), 3)
                                        if self.inversion.get("native") else None),
            "loan_wait_median_us": _worst([float(v) for v in self.loan_median_us]),
            "property_inversions": (float(sum(p[0] for p in self.property))
                                    if self.property else None),
            "property_idle_longest_ms": _worst([p[1] / 1000 for p in self.property]),
            "property_share_error_pts": _worst([p[2] for p in self.property]),
            "property_idle_total_ms": _worst([float(p[3]) for p in self.property]),
        }
        out = {k: v for k, v in raw.items() if v is not None}
        if self.weights_upstream or self.tree_upstream:
            out["fairness_max_error_pts_upstream"] = max(
                [float(abs(g - w)) for g, w in self.weights_upstream] + self.tree_upstream)
        if self.hop_upstream:
            out["hop_error_pts_upstream"] = max(self.hop_upstream)
        if self.shallow_upstream:
            out["multislot_shallow_error_pts_upstream"] = max(
                float(abs(g - w)) for g, w in self.shallow_upstream)
        if self.think_upstream:
            out["think_share_error_pts_upstream"] = max(
                float(abs(g - w)) for g, w in self.think_upstream)
        if self.inversion_upstream.get("native"):
            out["inversion_control_ratio_upstream"] = round(
                min(self.inversion_upstream["native"]), 3)
        if self.jain_upstream:
            out["jain_index_60_cgroups_upstream"] = min(self.jain_upstream)
        if self.prio_p99_upstream:
            out["prio_wait_p99_jobs_upstream"] = max(self.prio_p99_upstream)
        if self.rejoin_worst_us:
            out["rejoin_round_worst_ms_upstream"] = max(self.rejoin_worst_us) / 1000
        if "emulator's" in self.inversion:
            out["inversion_control_ratio_emulated_gap"] = round(
                min(self.inversion["emulator's"]), 3)
        return out


def _worst(values: list[float], higher: bool = False) -> float | None:
    """The worst of @values (the least where @higher is better), or None."""
    if not values:
        return None
    return min(values) if higher else max(values)


def parse(lines: Iterable[str]) -> dict[str, Figures]:
    """The figures of 7.3's cgroup suite under each policy in @lines."""
    found: dict[str, Figures] = {}
    current: Figures | None = None
    for line in lines:
        line = line.rstrip("\n")
        if m := SECTION.match(line):
            current = (found.setdefault(m["name"], Figures())
                       if m["base"] == "7.3" and m["name"] in POLICIES else None)
            continue
        if current is None:
            continue
        if m := SERIES.match(line):
            current.series.append((m["scenario"], m["case"], bool(m["plain"]), int(m["ms"]),
                                   tuple(int(v) for v in m["values"].split(","))))
        elif m := WEIGHTS.match(line):
            (current.weights_upstream if m["plain"] else current.weights).append(
                (int(m["got"]), int(m["want"])))
            if not m["plain"]:
                current.wants[("weights", m["case"])] = int(m["want"])
        elif m := SHAPES.match(line):
            if m["case"] == "no think":
                (current.shallow_upstream if m["plain"] else current.shallow).append(
                    (int(m["used"]), int(m["want"])))
            else:
                (current.think_upstream if m["plain"] else current.think).append(
                    (int(m["engine"]), int(m["want"])))
        elif m := INVERSION.match(line):
            if int(m["control"]):
                ratios = current.inversion_upstream if m["plain"] else current.inversion
                ratios.setdefault(m["gap"], []).append(int(m["rate"]) / int(m["control"]))
        elif m := LOAN.match(line):
            current.loan_median_us.append(int(m["median"]))
        elif m := PRIO_WAIT.match(line):
            (current.prio_p99_upstream if m["plain"] else current.prio_p99).append(
                float(m["p99"]))
        elif m := TREE.match(line):
            (current.tree_upstream if m["plain"] else current.tree).append(float(m["error"]))
        elif m := JAIN.match(line):
            (current.jain_upstream if m["plain"] else current.jain).append(
                int(m["index"]) / 1000)
        elif m := MAX.match(line):
            # beside a thinking capped client, the uncapped one's part is held
            # to what it gets beside it uncapped, not to the rest
            current.caps.append((float(m["got"]), float(m["want"]),
                                 0.0 if m["free"] else float(m["other"])))
        elif m := MAX_CHANGE.match(line):
            current.cap_change_ms.append(int(m["ms"]))
        elif m := HOP.match(line):
            (current.hop_upstream if m["plain"] else current.hop).append(float(m["error"]))
        elif m := BANDS.match(line):
            current.bands.append(float(m["part"]))
        elif m := PROPERTY.match(line):
            current.property.append((int(m["inversions"]), int(m["idle"]), float(m["error"]),
                                     int(m["total"])))
        elif m := REJOIN.match(line):
            current.rejoin_worst_us.append(int(m["worst"]))
        elif m := CHANGE.match(line):
            current.change_ms.append(int(m["ms"]))
            current.wants[("change", m["case"])] = int(m["want"])
    return found


def result(found: dict[str, Figures], partial: bool = False) -> dict[str, float]:
    """The worse of the policies' figures, and each policy's (with
    @partial, of the figures either printed)."""
    missing = [p for p in POLICIES if p not in found]
    if missing:
        raise SimError(f"no figures under {', '.join(missing)}")
    per = {p: found[p].summary(partial) for p in POLICIES}
    out: dict[str, float] = {}
    for key in dict.fromkeys(k for p in POLICIES for k in per[p]):
        if key.endswith("_upstream"):  # upstream's own, per policy
            for p in POLICIES:
                if key in per[p]:
                    out[f"{key.removesuffix('_upstream')}_{p}"] = per[p][key]
            continue
        values = [per[p][key] for p in POLICIES if key in per[p]]
        out[key] = min(values) if key.startswith(HIGHER_IS_BETTER) else max(values)
        for p in POLICIES:
            if key in per[p]:
                out[f"{key}_over_{p}"] = per[p][key]
    return out


def series(found: dict[str, Figures]) -> tuple[list[Series], dict[tuple[str, str], int]]:
    """Every policy's printed series, and the share each case is due."""
    out = [Series(scenario, case, policy, plain, ms, values)
           for policy, figures in found.items()
           for scenario, case, plain, ms, values in figures.series]
    wants = {key: want for figures in found.values() for key, want in figures.wants.items()}
    return out, wants


def run_sim() -> list[str]:
    # its section headers go to stderr, the figures to stdout: both, in order
    proc = subprocess.run([str(ROOT / "tools" / "sim.sh"), "run"], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    sys.stdout.write(proc.stdout)
    if proc.returncode:
        raise SimError(f"tools/sim.sh run failed (exit {proc.returncode})")
    return proc.stdout.splitlines()


def main(argv: list[str]) -> int:
    try:
        lines = Path(argv[0]).read_text().splitlines() if argv else run_sim()
        found = parse(lines)
        figures = result(found)
    except (OSError, SimError) as e:
        print(f"bench-sim: {e}", file=sys.stderr)
        return 1
    saved = save("sim-7.3", figures)
    rows = []
    for key, value in figures.items():
        if key in TARGETS:
            target = TARGETS[key]
            higher = key.startswith(HIGHER_IS_BETTER)
            ok = value >= target if higher else value <= target
            rows.append((key, f"{value:g} (target {'>=' if higher else '<='}"
                              f" {target:g}: {'met' if ok else 'MISSED'})"))
        else:
            rows.append((key, f"{value:g}"))
    table("virtual time, 7.3 (cgroup order over FIFO and FAIR)", rows)
    try:
        written = plot(*series(found))
    except (OSError, ImportError) as e:  # the figures are saved already
        print(f"\nwritten to {saved}; no plots: {e}", file=sys.stderr)
        return 1
    print(f"\nwritten to {saved}, and {len(written)} plots to "
          f"{written[0].parent if written else 'nowhere: no series printed'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
