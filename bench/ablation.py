"""bench-ablation: what each mechanism of the scheduling core buys, on
virtual time.

Runs the cgroup suite's scenarios (``tools/sim.sh scenarios``: FIFO and
FAIR on 7.3's UML kernel) once with every mechanism on and once with each
switched off in turn (the kernel's ``gpu_sched_off=`` bit, which only a
kernel built for KUnit has), and writes each run's figures (bench/sim.py's,
the worse of the two policies) to bench/results/ablation-7.3.json with a
table: the figures a mechanism moves are what it buys; the engine's idle
time with work ready over the 400 property runs is what the engine pays
for the waits. A run with a mechanism off fails the scenarios that assert
what it buys: its figures are read all the same.

Usage: bench/ablation.py [MECHANISM...]: those alone (names below).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from common import save
from sim import HIGHER_IS_BETTER, TARGETS, SimError, parse, result

ROOT = Path(__file__).resolve().parent.parent

# name -> (gpu_sched_off= bit, what is switched off); kernel/cgroup/gpu_sched.c
MECHANISMS = {
    "estimate": (1 << 0, "in-flight estimates charged at a job's start"),
    "wait": (1 << 1, "waiting for a shallow entity (anticipation)"),
    "ring": (1 << 2, "keeping the ring shallow for an entity late or not waited for"),
    "above": (1 << 3, "a higher band's hold on lower work while its jobs run"),
    "fits": (1 << 4, "work that ends before an expected entity is back runs"),
    "lend": (1 << 5, "priority inheritance (loans)"),
    "loan_wait": (1 << 6, "awaiting a loan after a lent job"),
    "floor": (1 << 7, "a returning entity's floor (no credit banked by idling)"),
    "bands": (1 << 8, "a vtime kept per band"),
}
# the figures of the table, in its order
FIGURES = (
    "fairness_max_error_pts", "multislot_shallow_error_pts", "think_share_error_pts",
    "prio_wait_p99_jobs", "inversion_control_ratio", "loan_wait_median_us",
    "convergence_ms", "band_share_error_pts", "hop_error_pts", "max_error_pts",
    "max_uncapped_ratio", "max_change_ms", "property_inversions",
    "property_idle_longest_ms", "property_share_error_pts", "property_idle_total_ms",
)


def run(off: int) -> dict[str, float]:
    """The scenarios' figures with the mechanisms of @off switched off."""
    env = dict(os.environ, PYCGPU_SIM_ARGS=f"gpu_sched_off={off:#x}")
    # section headers on stderr, figures on stdout: both, in order
    proc = subprocess.run([str(ROOT / "tools" / "sim.sh"), "scenarios"], env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if off == 0 and proc.returncode:
        sys.stderr.write(proc.stdout)
        raise SimError("the scenarios fail with every mechanism on")
    return result(parse(proc.stdout.splitlines()), partial=True)


def missed(key: str, value: float) -> bool:
    if key not in TARGETS:
        return False
    higher = key.startswith(HIGHER_IS_BETTER)
    return value < TARGETS[key] if higher else value > TARGETS[key]


def main(argv: list[str]) -> int:
    unknown = [a for a in argv if a not in MECHANISMS]
    if unknown:
        print(f"bench-ablation: no mechanism {', '.join(unknown)} "
              f"(one of {', '.join(MECHANISMS)})", file=sys.stderr)
        return 2
    names = argv or list(MECHANISMS)
    rows: dict[str, dict[str, float]] = {}
    try:
        rows["all on"] = run(0)
        for name in names:
            print(f"bench-ablation: {name} off ...", file=sys.stderr, flush=True)
            rows[f"{name} off"] = run(MECHANISMS[name][0])
    except (OSError, SimError) as e:
        print(f"bench-ablation: {e}", file=sys.stderr)
        return 1
    doc = {row: {k: figures[k] for k in FIGURES if k in figures}
           for row, figures in rows.items()}
    saved = save("ablation-7.3", {"runs": doc, "mechanisms": {
        n: MECHANISMS[n][1] for n in names}})
    width = max(len(r) for r in doc)
    print(f"\n{'run':<{width}}  " + "  ".join(FIGURES))
    for row, figures in doc.items():
        cells = []
        for key in FIGURES:
            value = figures.get(key)
            cell = "n/a" if value is None else f"{value:g}" + ("!" if missed(key, value) else "")
            cells.append(f"{cell:>{len(key)}}")
        print(f"{row:<{width}}  " + "  ".join(cells))
    print(f"\n(! misses its target) written to {saved}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
