"""Upstream's drm_sched KUnit suites (drivers/gpu/drm/scheduler/tests/,
Linux 7.2 and later) with the series applied, under each of drm_sched's
policies: `make test-kunit` (PYCGPU_BASE=7.3; 6.12 has no such suite).

drm_sched is a module on the 7.3 test kernel (kernel/drivers-gpu-cgroup/7.3/
vm.config), so one boot reloads it with gpu_sched.sched_policy = 0 (RR),
1 (FIFO) and 2 (FAIR) and loads the test module, which runs its suites at
load; their TAP results are read from debugfs (CONFIG_KUNIT_DEBUGFS). The
modules that use drm_sched (simgpu) are unloaded first and the scheduler is
left as the boot had it (the policy of the kernel command line).

The series adds a suite of its own to the module (tests_cgroup.c): upstream's
scenario clients placed in cgroups on a mock scheduler that follows the gpu
cgroup controller, with their shares asserted. Its cgroups are made here and
named to it by the module's gpucg_root parameter; it runs under the fair
and the FIFO policy, which the cgroup order extends, and skips under RR.
Its shares of GPU time are asserted on virtual time (tools/sim.sh); here,
under TCG, they are shown and its functional cases asserted.

The controller's knobs on simgpu under each policy, the kernel's default
(FIFO) included, are tested here too, with the scheduler reloaded alike.

xe's KUnit suites (the ones that need no device: those in xe.ko, which run
when it loads, and xe_test's) run with the series too, xe_gpucg among them:
how xe maps a cgroup's priority to a GuC band and a share to a timeslice.
"""

from __future__ import annotations

import errno
import os
import re
import subprocess
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from clients import JOB_NS, busy_fractions, devt
from simgpu import Load
from simgpu import render_nodes as simgpu_render_nodes
from simgpu import unload as unload_simgpu

from pycgpu.core import formats
from pycgpu.core.cgroup import Cgroup

pytestmark = pytest.mark.kunit

KUNIT = Path("/sys/kernel/debug/kunit")
TESTS_MODULE = "drm-sched-tests"
SCHED_MODULE = "gpu-sched"
POLICIES = {"rr": 0, "fifo": 1, "fair": 2}
# the suites of upstream's tests_basic.c and tests_scheduler.c (the last one
# the series' own: 7.3 patch 0026's)
UPSTREAM_SUITES = {
    "drm_sched_basic_tests", "drm_sched_concurrent_tests", "drm_sched_basic_cancel_tests",
    "drm_sched_basic_timeout_tests", "drm_sched_basic_priority_tests",
    "drm_sched_basic_modify_sched_tests", "drm_sched_basic_credits_tests",
    "drm_sched_scheduler_overhead_tests", "drm_sched_scheduler_two_clients_one_credit_tests",
    "drm_sched_scheduler_two_clients_two_credits_tests", "drm_sched_scheduler_many_clients_tests",
    "drm_sched_scheduler_rejoin_tests",
}
CGROUP_SUITE = "drm_sched_cgroup_tests"
# its scenarios that make cgroups of their own and skip where the loader
# names its cgroups (here): measured on virtual time alone (make test-sim)
VIRTUAL_TIME_ONLY = {"drm_sched_cgroup_prio_wait", "drm_sched_cgroup_tree",
                     "drm_sched_cgroup_change", "drm_sched_cgroup_property",
                     "drm_sched_cgroup_bands", "drm_sched_cgroup_hop",
                     "drm_sched_cgroup_max"}
# the harness's cgroups (tests_cgroup.c): name -> (gpu.weight, gpu.priority)
KUNIT_CGROUPS = {"w100": (100, 0), "e100": (100, 0), "w400": (400, 0), "w900": (900, 0),
                 "p100": (100, 100), "p0": (100, 0), "m100": (100, -100), "m50": (100, -50),
                 "q100": (100, 100), "r100": (100, 100), "s100": (100, 100)}
# xe's suites that need no device, and the series' own among them
XE_MODULES = ("xe", "xe_test")
XE_CGROUP_SUITE = "xe_gpucg"
RESULT = re.compile(r"^\s*(not ok|ok) \d+ (?:- )?(\S+)(.*)$")


def loaded(module: str) -> bool:
    return Path("/sys/module", module.replace("-", "_")).exists()


def unload(module: str) -> None:
    """Unloads @module; simgpu, loaded with insmod from outside the
    kernel's module tree, with rmmod (modprobe does not know it)."""
    if not loaded(module):
        return
    if module == "simgpu":
        unload_simgpu()
    else:
        subprocess.run(["modprobe", "-r", module], check=True)


@pytest.fixture(scope="module")
def scheduler() -> Iterator[None]:
    """Nothing but the tests uses drm_sched while they run; afterwards the
    scheduler is loaded again as the boot had it, and simgpu with it if it
    was loaded."""
    if not (Path("/sys/module/gpu_sched").exists() or KUNIT.exists()):
        pytest.fail("this kernel has no drm_sched module: build it with PYCGPU_BASE=7.3")
    simgpu = loaded("simgpu")
    params = Path("/sys/module/simgpu/parameters")
    simgpu_params = ([f"{p.name}={p.read_text().strip()}" for p in params.iterdir()]
                     if simgpu else [])
    unload("simgpu")
    yield
    unload(TESTS_MODULE)
    unload(SCHED_MODULE)
    subprocess.run(["modprobe", SCHED_MODULE], check=True)
    if simgpu:
        ko = Path(os.environ.get("PYCGPU_EXT", "")) / "simgpu.ko"
        subprocess.run(["insmod", str(ko), *simgpu_params], check=True)


@pytest.fixture(scope="module")
def kunit_cgroups(mount: Path) -> Iterator[str]:
    """The cgroups tests_cgroup.c places its clients in; their path from
    the cgroup2 root."""
    top = Cgroup(mount, "pycgpu-kunit")
    top.create()
    top.write("gpu.priority", "100")
    for name, (weight, priority) in KUNIT_CGROUPS.items():
        cg = Cgroup(mount, f"pycgpu-kunit/{name}")
        cg.create()
        cg.write("gpu.weight", f"default {weight}")
        cg.write("gpu.priority", str(priority))
    yield "/pycgpu-kunit"
    unload(TESTS_MODULE)
    top.remove(recursive=True)


def run_suites(policy: int, cgroups: str) -> dict[str, list[tuple[bool, str, str]]]:
    """Loads the test module under POLICY; the results of each suite:
    (passed, test, rest of the TAP line) for every test and parameter."""
    unload(TESTS_MODULE)
    unload(SCHED_MODULE)
    subprocess.run(["modprobe", SCHED_MODULE, f"sched_policy={policy}"], check=True)
    got = Path("/sys/module/gpu_sched/parameters/sched_policy").read_text().strip()
    assert got == str(policy), f"gpu-sched loaded with sched_policy={got}"
    subprocess.run(["modprobe", TESTS_MODULE, f"gpucg_root={cgroups}"], check=True,
                   timeout=900)
    return read_results(KUNIT.glob("drm_sched_*/results"))


def read_results(paths: Iterable[Path]) -> dict[str, list[tuple[bool, str, str]]]:
    """The results of each suite in PATHS (debugfs results files): (passed,
    test, rest of the TAP line) for every test and parameter."""
    suites: dict[str, list[tuple[bool, str, str]]] = {}
    for results in sorted(paths):
        lines = []
        text = results.read_text()
        if results.parent.name == CGROUP_SUITE:
            print(text)  # the shares it measured: shown with a failure
        for line in text.splitlines():
            m = RESULT.match(line)
            if m:
                lines.append((m.group(1) == "ok", m.group(2), m.group(3)))
        suites[results.parent.name] = lines
    return suites


def failures(suites: dict[str, list[tuple[bool, str, str]]]) -> list[str]:
    return [f"{suite}: {name}{rest}" for suite, lines in suites.items()
            for ok, name, rest in lines if not ok]


@pytest.mark.parametrize("policy", POLICIES)
def test_suites_pass(scheduler, kunit_cgroups, policy):
    """Upstream's suites pass unchanged under every policy; the cgroup
    suite runs under FAIR and FIFO (the default), with nothing skipped but
    its scenarios of virtual time alone, and skips under RR. Its cases that
    only look at where entities are and what they lend (karma, the lender)
    must pass here; those that measure shares of GPU time are asserted on
    virtual time (make test-sim), where the same code gives exact figures:
    under TCG their figures move with the emulator by more than their
    margins, and are shown, not asserted."""
    suites = run_suites(POLICIES[policy], kunit_cgroups)
    missing = (UPSTREAM_SUITES | {CGROUP_SUITE}) - set(suites)
    assert not missing, f"suites that did not run: {sorted(missing)}"
    failed = failures({k: v for k, v in suites.items() if k != CGROUP_SUITE})
    assert not failed, "\n".join(failed)
    ran = sum(1 for suite, lines in suites.items() if suite in UPSTREAM_SUITES
              for ok, _, rest in lines if ok and "# SKIP" not in rest)
    assert ran >= 30, f"only {ran} upstream tests passed under {policy}"
    cgroup = suites[CGROUP_SUITE]
    skipped = [name for _, name, rest in cgroup if "# SKIP" in rest]
    if policy != "rr":
        # a scenario's parameters carry its reason, the scenario its name
        unexpected = [name for _, name, rest in cgroup if "# SKIP" in rest and
                      "virtual time only" not in rest and name not in VIRTUAL_TIME_ONLY]
        assert len(cgroup) >= 9 and not unexpected, f"{CGROUP_SUITE}: {cgroup}"
        # the walk over a scheduler's entities, karma through it; the
        # dependency a job lends to from its push
        passed = {name.strip() for ok, name, _ in cgroup if ok}
        for case in ("drm_sched_cgroup_karma", "drm_sched_cgroup_lender"):
            assert case in passed, f"{CGROUP_SUITE}: {case} did not pass: {cgroup}"
    else:
        assert skipped, f"{CGROUP_SUITE} ran under {policy}: {cgroup}"


def _shares(node: Path, groups: list[Cgroup]) -> list[float]:
    """Each group's fraction of the engine of @node with a deep load in each."""
    loads = [Load(node, g.path, JOB_NS) for g in groups]
    try:
        time.sleep(0.3)
        return busy_fractions(groups, devt(node), 2.0)
    finally:
        for load in loads:
            load.stop()


@pytest.mark.parametrize("policy", POLICIES)
def test_the_knobs_under_each_policy(scheduler, cgroup, policy):
    """gpu.weight and gpu.priority order simgpu's clients under the FIFO
    policy (the kernel's default command line) as under FAIR: 1:4 weights
    share the engine 20:80, and a cgroup at priority 100 keeps it from one at
    0. Under RR the device does not schedule: gpu.stat says sched=0 and a
    per-device weight is refused with EOPNOTSUPP."""
    unload(TESTS_MODULE)
    unload(SCHED_MODULE)
    subprocess.run(["modprobe", SCHED_MODULE, f"sched_policy={POLICIES[policy]}"], check=True)
    got = Path("/sys/module/gpu_sched/parameters/sched_policy").read_text().strip()
    assert got == str(POLICIES[policy]), f"gpu-sched loaded with sched_policy={got}"
    ko = Path(os.environ.get("PYCGPU_EXT", "")) / "simgpu.ko"
    subprocess.run(["insmod", str(ko), "devices=1"], check=True)
    try:
        node = simgpu_render_nodes()[0]
        dev = devt(node)
        light, heavy, high, low = (cgroup.child(n) for n in ("light", "heavy", "high", "low"))
        for g in (light, heavy, high, low):
            g.create()
        sched = formats.parse_nested_keyed(light.read("gpu.stat"))[dev]["sched"]
        if policy == "rr":
            assert sched == 0
            with pytest.raises(OSError) as e:
                heavy.set_weight(400, dev)
            assert e.value.errno == errno.EOPNOTSUPP
            return
        assert sched == 1
        heavy.set_weight(400, dev)
        cgroup.set_priority(1000)  # the effective priority is the least on the path
        high.set_priority(100)
        low.set_priority(0)
        a, b = _shares(node, [light, heavy])
        h, lo = _shares(node, [high, low])
    finally:
        unload_simgpu()
    share = b / (a + b)
    assert 0.72 <= share <= 0.88, f"weights 1:4 under {policy}: {share:.0%} for the heavy one"
    assert lo <= 0.1 * h, f"priority 100 against 0 under {policy}: {h:.0%} and {lo:.0%}"


@pytest.fixture
def xe_modules() -> Iterator[None]:
    """xe and its tests are unloaded afterwards: xe holds drm_sched, which
    the tests above reload."""
    if subprocess.run(["modinfo", "xe"], capture_output=True).returncode:
        pytest.fail("this kernel has no xe module: build it with PYCGPU_BASE=7.3")
    for module in reversed(XE_MODULES):
        unload(module)
    yield
    for module in reversed(XE_MODULES):
        unload(module)


def test_xe_suites_pass(xe_modules):
    """xe's KUnit suites that need no device pass with the series, and the
    series' own (priority to band, share to timeslice, clamps) ran whole."""
    before = {p.parent.name for p in KUNIT.glob("*/results")}
    for module in XE_MODULES:
        subprocess.run(["modprobe", module], check=True, timeout=900)
    suites = read_results(p for p in KUNIT.glob("*/results") if p.parent.name not in before)
    assert XE_CGROUP_SUITE in suites, f"{XE_CGROUP_SUITE} did not run: {sorted(suites)}"
    failed = failures(suites)
    assert not failed, "\n".join(failed)
    mapping = [name for ok, name, rest in suites[XE_CGROUP_SUITE] if ok and "# SKIP" not in rest]
    assert len(mapping) >= 7, f"{XE_CGROUP_SUITE}: {suites[XE_CGROUP_SUITE]}"
    ran = sum(1 for lines in suites.values() for ok, _, rest in lines
              if ok and "# SKIP" not in rest)
    print(f"xe: {len(suites)} suites, {ran} tests passed")
    assert len(suites) >= 5, f"xe's suites that ran: {sorted(suites)}"
