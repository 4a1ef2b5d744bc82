"""bench-sim's reading of tools/sim.sh's output (bench/sim.py): each figure
from the lines the cgroup suite's scenarios print, the worse of the two
policies, and a clear error when a scenario's figures are missing."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import sim

# one policy's section of `tools/sim.sh run`'s output, its figures to fill in
SECTION = (Path(__file__).resolve().parent / "fixtures" / "sim-section.txt").read_text()
# the 6.12 core suite's section and figures, which are not the cgroup suite's
CORE = """\
[sim.sh] virtual time, 6.12, core (sched_policy=1): gpu_cgroup_sched*
    drm_sched_cgroup_weights: weights 1:1, one credit: 10% (want 50%)
"""


# the figures of the scenarios a test does not look at
QUIET = {"p99": "0.99", "tree": "0.0", "jain": 994, "conv": 100, "inv": 0, "idle": 15000,
         "perr": "0.9", "plain_think": 40, "plain_inv": 0}


def output(fifo: dict[str, object], fair: dict[str, object]) -> list[str]:
    return (CORE + SECTION.format(name="fifo", n=1, **(QUIET | fifo))
            + SECTION.format(name="fair", n=2, **(QUIET | fair))).splitlines()


def test_each_figure_is_the_worse_of_the_policies() -> None:
    got = sim.result(sim.parse(output({"w11": 49, "loan": 0, "chain": 123, "plain": 56},
                                      {"w11": 52, "loan": 40, "chain": 127, "plain": 30})))
    assert got["fairness_max_error_pts"] == 2.0
    assert got["fairness_max_error_pts_over_fifo"] == 1.0
    assert got["fairness_max_error_pts_over_fair"] == 2.0
    assert got["multislot_shallow_error_pts"] == 2.0
    assert got["think_share_error_pts"] == 2.0
    assert got["inversion_control_ratio"] == round(123 / 127, 3)
    assert got["inversion_control_ratio_over_fair"] == 1.0
    assert got["inversion_control_ratio_emulated_gap"] == round(90 / 167, 3)
    assert got["loan_wait_median_us"] == 40.0
    # upstream's policy alone, beside each: never folded into the worse
    # 56% against 90% (34 points) is below the tree's 43.6 under FIFO
    assert got["fairness_max_error_pts_fifo"] == 43.6
    assert got["fairness_max_error_pts_fair"] == 60.0
    assert "fairness_max_error_pts_upstream" not in got


def test_upstream_beside_the_shallow_thinking_and_inversion_loads() -> None:
    """The same loads on upstream's policy alone are figures of their own
    per policy, never folded into the cgroup order's worse."""
    got = sim.result(sim.parse(output(
        {"w11": 50, "loan": 0, "chain": 123, "plain": 50, "plain_think": 40, "plain_inv": 0},
        {"w11": 50, "loan": 0, "chain": 127, "plain": 50, "plain_think": 30,
         "plain_inv": 200})))
    assert got["multislot_shallow_error_pts"] == 2.0
    assert got["multislot_shallow_error_pts_fifo"] == 57.0
    assert got["think_share_error_pts_fifo"] == 5.0
    assert got["think_share_error_pts_fair"] == 15.0
    assert got["think_share_error_pts"] == 2.0
    # the native gap's, not the emulator's 3 of 150
    assert got["inversion_control_ratio_fifo"] == 0.0
    assert got["inversion_control_ratio_fair"] == 0.5
    assert got["inversion_control_ratio"] == round(123 / 127, 3)
    assert "inversion_control_ratio_upstream" not in got


def test_the_scenarios_of_many_cgroups_waits_and_changes() -> None:
    got = sim.result(sim.parse(output(
        {"w11": 50, "loan": 0, "chain": 127, "plain": 50, "p99": "0.99", "tree": "1.4",
         "jain": 998, "conv": 100},
        {"w11": 50, "loan": 0, "chain": 127, "plain": 50, "p99": "1.49", "tree": "0.2",
         "jain": 912, "conv": 300})))
    # a tree's error, in tenths of a point, is a fairness error
    assert got["fairness_max_error_pts"] == 1.4
    assert got["fairness_max_error_pts_over_fair"] == 0.2
    assert got["fairness_max_error_pts_fifo"] == 43.6
    assert got["prio_wait_p99_jobs"] == 1.49
    assert got["prio_wait_p99_jobs_fifo"] == 2.99
    assert got["convergence_ms"] == 300.0
    # the lower index is the worse; the cgroup order's, then upstream's alone
    assert got["jain_index_60_cgroups"] == 1.0
    assert got["jain_index_60_cgroups_fair"] == 0.912
    assert got["jain_index_60_cgroups_fifo"] == 0.998
    # upstream's policy with 0026, the re-joining client's longest round
    assert got["rejoin_round_worst_ms_fair"] == 12.001
    assert "rejoin_round_worst_ms" not in got


def test_the_property_runs_worst_figures() -> None:
    got = sim.result(sim.parse(output(
        {"w11": 50, "loan": 0, "chain": 127, "plain": 50, "inv": 0, "idle": 16991,
         "perr": "0.9"},
        {"w11": 50, "loan": 0, "chain": 127, "plain": 50, "inv": 3, "idle": 14777,
         "perr": "0.6"})))
    # inversions: the worse policy's count; idle in ms; error in points
    assert got["property_inversions"] == 3.0
    assert got["property_inversions_over_fifo"] == 0.0
    assert got["property_idle_longest_ms"] == 16.991
    assert got["property_share_error_pts"] == 0.9
    assert got["property_share_error_pts_over_fair"] == 0.6
    # the hopping client, and upstream's alone beside it
    assert got["hop_error_pts"] == 1.0
    assert got["hop_error_pts_fifo"] == 29.0
    # gpu.max: the worst distance from a cap, the uncapped client's part of
    # what is left, the time a change takes
    assert got["max_error_pts"] == 0.1
    assert got["max_uncapped_ratio"] == round(69.9 / 70, 3)
    assert got["max_change_ms"] == 66.0


def test_a_missing_scenario_or_policy_is_an_error() -> None:
    lines = [line for line in output({"w11": 50, "loan": 0, "chain": 127, "plain": 50},
                                     {"w11": 50, "loan": 0, "chain": 127, "plain": 50})
             if "drm_sched_cgroup_shapes" not in line]
    with pytest.raises(sim.SimError, match="no figures of shapes, think"):
        sim.result(sim.parse(lines))
    only_fifo = CORE + SECTION.format(name="fifo", n=1, w11=50, loan=0, chain=127, plain=50,
                                      **QUIET)
    with pytest.raises(sim.SimError, match="no figures under fair"):
        sim.result(sim.parse(only_fifo.splitlines()))


def test_a_log_that_has_no_figures_fails_the_benchmark(tmp_path: Path) -> None:
    log = tmp_path / "sim.log"
    log.write_text(CORE)
    assert sim.main([str(log)]) == 1


def test_each_case_is_plotted_with_every_policy_and_its_due(tmp_path: Path) -> None:
    found = sim.parse(output({"w11": 50, "loan": 0, "chain": 127, "plain": 30},
                             {"w11": 50, "loan": 0, "chain": 127, "plain": 30}))
    series, wants = sim.series(found)
    # two scenarios' cases, each printed by the cgroup order and upstream's
    # alone (the change has no upstream counterpart), under both policies
    assert sorted({(s.scenario, s.case) for s in series}) == [
        ("change", "weight 100 to 900"), ("weights", "weights 1:9, a ring of 256")]
    assert len(series) == 6
    assert wants[("weights", "weights 1:9, a ring of 256")] == 90
    assert wants[("change", "weight 100 to 900")] == 90
    ring = [s for s in series if s.case == "weights 1:9, a ring of 256" and s.upstream]
    assert {s.policy for s in ring} == {"fifo", "fair"}
    assert ring[0].values == (0, 2, 100) and ring[0].bucket_ms == 100
    written = sim.plot(series, wants, tmp_path)
    assert sorted(p.name for p in written) == [
        "change-weight-100-to-900.png", "weights-weights-1-9-a-ring-of-256.png"]
    for path in written:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
