"""bench-sim's plots: each scenario's share over virtual time, the cgroup
order over FIFO and over FAIR against upstream's policy alone, as PNG files
under bench/results/plots/ (the README shows some).

The scenarios print their shares per 100 ms as "series" lines
(kernel/drivers-gpu-cgroup/7.3/tests_cgroup.c); bench/sim.py parses them
into :class:`Series` and calls :func:`plot`. matplotlib comes with the
bench extra (``make bench-sim`` installs it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

PLOTS = Path(__file__).resolve().parent / "results" / "plots"
# line styles: the cgroup order over each policy thick (FIFO's dashed, so
# that it shows where the two are equal), upstream's thin
STYLES = {("fifo", False): ("cgroup order over FIFO", "tab:blue", "--", 2.0),
          ("fair", False): ("cgroup order over FAIR", "tab:orange", "-", 2.0),
          ("fifo", True): ("FIFO alone", "tab:blue", ":", 1.2),
          ("fair", True): ("FAIR alone", "tab:orange", "-.", 1.2)}
TITLES = {"weights": "the heavier of two deep cgroups", "change": "the cgroup that changes"}


@dataclass(frozen=True)
class Series:
    """One printed series: a client's share of the GPU time used, percent,
    per bucket of @bucket_ms, from its window's start."""

    scenario: str  # "weights", "change"
    case: str  # the scenario's case, as it names it
    policy: str  # "fifo", "fair"
    upstream: bool  # upstream's policy alone, no cgroup
    bucket_ms: int
    values: tuple[int, ...]


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def plot(series: list[Series], wants: dict[tuple[str, str], int],
         into: Path = PLOTS) -> list[Path]:
    """One PNG per scenario and case, every policy's line in it, the share
    its weights give (@wants, by scenario and case) as a grey line."""
    # the bench extra, imported only to plot
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    into.mkdir(parents=True, exist_ok=True)
    cases: dict[tuple[str, str], list[Series]] = {}
    for s in series:
        cases.setdefault((s.scenario, s.case), []).append(s)
    written = []
    for (scenario, case), lines in sorted(cases.items()):
        fig, ax = plt.subplots(figsize=(6, 3.2), dpi=80)
        # the cgroup order's drawn last, over upstream's
        for s in sorted(lines, key=lambda s: (not s.upstream, s.policy)):
            label, colour, style, width = STYLES[(s.policy, s.upstream)]
            x = [(i + 1) * s.bucket_ms for i in range(len(s.values))]
            ax.plot(x, s.values, style, color=colour, label=label, linewidth=width)
        if (scenario, case) in wants:
            ax.axhline(wants[(scenario, case)], color="grey", linewidth=0.8,
                       label="its due" if scenario != "change" else "its due after the change")
        ax.set_ylim(-2, 102)
        if scenario == "change":
            ax.axvline(600, color="grey", linestyle=":", linewidth=0.8)
        ax.set_xlabel("virtual ms from the measurement's start (end of each 100 ms)")
        ax.set_ylabel("% of the GPU time used")
        ax.set_title(f"{case}: {TITLES.get(scenario, scenario)}", fontsize=10)
        ax.legend(fontsize=7, loc="best")
        fig.tight_layout()
        path = into / f"{scenario}-{slug(case)}.png"
        fig.savefig(path, metadata={"Software": None})
        plt.close(fig)
        written.append(path)
    return written
