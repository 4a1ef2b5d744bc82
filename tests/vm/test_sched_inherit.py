"""Priority inheritance through fences (the core's essay, "Priority
inheritance"): a client at gpu.priority 100 whose every job waits on a job
of a client at -100, through a shared syncobj, while a cgroup at 0
saturates the signaller's engine. Without inheritance the signaller's job
never runs and the waiter completes nothing for as long as the load lasts;
with it the signaller's cgroup runs at the waiter's priority until its job
has gone to the hardware, on the same engine, on another device, and
along a chain. A waiter in a subtree capped below a saturating band lends
no more than its cap, and a signaller killed while the waiter waits
leaves nothing pinned behind, nor does a loan across two devices when
either device is unbound under it.

The tests count jobs in a window rather than time them: without
inheritance the count is 0; make bench-sched measures the rate against
the rate with the same load on a third device (inversion_rate_ratio)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from clients import busy_fractions, devt, usage_us
from kernlog import kernel_log, splats
from simgpu import ClientProcess, Load, SimGpu, linked_signaler, unbind, waited_jobs

from pycgpu.core.cgroup import Cgroup

LINK_JOB_NS = 2_000_000
LOAD_JOB_NS = 5_000_000
WINDOW_S = 2.0


@pytest.fixture
def bands(cgroup: Cgroup) -> dict[str, Cgroup]:
    """Cgroups under the test's at gpu.priority high 100, middle 0, low
    -100 and low2 -100 (the test's own at 1000 leaves room above 100)."""
    cgroup.set_priority(1000)
    out = {}
    for name, prio in (("high", 100), ("middle", 0), ("low", -100), ("low2", -100)):
        g = cgroup.child(name)
        g.create()
        g.set_priority(prio)
        out[name] = g
    return out


@contextmanager
def joined(group: Cgroup) -> Iterator[None]:
    """This process in @group, back in the root afterwards."""
    group.add_proc(os.getpid())
    try:
        yield
    finally:
        Cgroup(group.mount).add_proc(os.getpid())


@contextmanager
def running(*procs_: ClientProcess) -> Iterator[None]:
    try:
        yield
    finally:
        for proc in procs_:
            proc.stop()


@pytest.mark.parametrize("where", ["one engine", "two devices"])
def test_waiter_lends_its_priority_to_the_job_it_waits_for(bands, simgpu_nodes, where):
    """The job of the client at -100 runs at 100 while the client at 100
    waits for it, on the waiter's engine or another device's, and its GPU
    time is still charged to its own cgroup."""
    wait_node = simgpu_nodes[0]
    signal_node = simgpu_nodes[0] if where == "one engine" else simgpu_nodes[1]
    low, dev = bands["low"], devt(signal_node)
    with joined(bands["high"]), SimGpu(wait_node) as gpu:
        link, signaler = linked_signaler(gpu, signal_node, low.path, LINK_JOB_NS)
        # the load stops first: nothing is left queued behind it at the end
        with running(signaler), running(Load(signal_node, bands["middle"].path, LOAD_JOB_NS)):
            time.sleep(0.3)
            before = usage_us(low, dev)
            done = waited_jobs(gpu, link, [signaler], LINK_JOB_NS, WINDOW_S)
            low_us = usage_us(low, dev) - before
    assert done >= 10, f"{done} jobs in {WINDOW_S} s behind a saturating band (0 without " \
        "inheritance)"
    assert low_us >= 0.8 * done * LINK_JOB_NS / 1000, \
        f"the signaller's cgroup was charged {low_us} us for {done} jobs of its own"


BUSY_JOB_NS = 600_000_000
LOOK_S = 0.2


def test_a_job_lends_from_its_submission(bands, simgpu_nodes):
    """The waiter's own device runs 600 ms jobs at 0 when its job is
    queued: its scheduler looks at the job only when the running one ends,
    but the job is its queue's next from its submission on, and the job it
    waits for (at -100, behind a band at 0 on the other device) runs well
    before. A loan made only when the scheduler looks at the job leaves it
    behind the band until then: the signaller would not have run 200 ms
    after the waiter's job was queued."""
    wait_node, signal_node = simgpu_nodes[1], simgpu_nodes[0]
    low, dev = bands["low"], devt(signal_node)
    seen: list[bool] = []
    with ExitStack() as stack:
        stack.enter_context(joined(bands["high"]))
        gpu = stack.enter_context(SimGpu(wait_node))
        link, signaler = linked_signaler(gpu, signal_node, low.path, LINK_JOB_NS)
        stack.enter_context(running(signaler))
        # the loads stop first: nothing is left queued behind them
        stack.enter_context(running(Load(wait_node, bands["middle"].path, BUSY_JOB_NS, depth=1),
                                    Load(signal_node, bands["middle"].path, LOAD_JOB_NS)))
        time.sleep(0.3)
        for _ in range(8):
            before = usage_us(low, dev)
            signaler.submit()
            seqno = gpu.submit(LINK_JOB_NS, wait_for=link)
            time.sleep(LOOK_S)
            try:  # the waiter's device came free meanwhile: says nothing
                gpu.wait(seqno, timeout_ns=1)
            except OSError:
                seen.append(usage_us(low, dev) > before)
            gpu.wait(seqno)
            if len(seen) >= 3:
                break
    assert len(seen) >= 2, f"the waiter's device came free within {LOOK_S} s " \
        f"{8 - len(seen)} times in 8"
    assert all(seen), f"the signaller ran within {LOOK_S} s of the waiter's job " \
        f"{seen.count(True)} times in {len(seen)}"


def test_inheritance_follows_a_chain(bands, simgpu_nodes):
    """100 waits on -100 (device 0), which waits on another cgroup at -100
    (device 1), with a band at 0 saturating both devices: the priority is
    passed along the chain."""
    node0, node1 = simgpu_nodes[0], simgpu_nodes[1]
    with joined(bands["high"]), SimGpu(node0) as gpu:
        first, c = linked_signaler(gpu, node1, bands["low2"].path, LINK_JOB_NS)
        with running(c):
            first_fd = gpu.syncobj_export(first)
            try:
                second, b = linked_signaler(gpu, node0, bands["low"].path, LINK_JOB_NS,
                                            wait_fd=first_fd)
            finally:
                os.close(first_fd)
            loads = [Load(node, bands["middle"].path, LOAD_JOB_NS) for node in (node0, node1)]
            with running(b), running(*loads):
                time.sleep(0.3)
                done = waited_jobs(gpu, second, [c, b], LINK_JOB_NS, WINDOW_S)
    assert done >= 5, f"{done} jobs in {WINDOW_S} s at the end of a chain of three"


def test_a_capped_waiter_lends_no_more_than_its_cap(cgroup, simgpu_nodes):
    """A waiter whose own gpu.priority is 100 in a subtree capped at 0
    lends 0: a band at 50 saturating the signaller's engine keeps the job
    it waits for (at -100) waiting, as it would keep the waiter itself.
    The waiter is on the other, idle device, so that its job is looked at
    (a dependency is found when the job is next to run) and the loan is
    made: lending its own 100 would let the signaller beat the band."""
    wait_node, node = simgpu_nodes[1], simgpu_nodes[0]
    cgroup.set_priority(1000)
    capped, band50, low = cgroup.child("capped"), cgroup.child("band50"), cgroup.child("low")
    waiter = capped.child("waiter")
    for g, prio in ((capped, 0), (waiter, 100), (band50, 50), (low, -100)):
        g.create()
        g.set_priority(prio)
    dev = devt(node)
    with joined(waiter), SimGpu(wait_node) as gpu:
        link, signaler = linked_signaler(gpu, node, low.path, LINK_JOB_NS)
        with running(signaler), running(Load(node, band50.path, LOAD_JOB_NS)):
            time.sleep(0.3)
            alone = busy_fractions([band50], dev, 1.0)[0]
            before = usage_us(low, dev)
            results: list[int] = []
            busy = busy_fractions([band50], dev, during=lambda: results.append(
                waited_jobs(gpu, link, [signaler], LINK_JOB_NS, WINDOW_S)))[0]
            low_us = usage_us(low, dev) - before
    assert results[0] <= 1, f"{results[0]} jobs: the capped waiter lifted its signaller above 50"
    assert low_us <= 2 * LINK_JOB_NS / 1000, f"the signaller at -100 ran {low_us} us"
    # a loan that held the engine would leave the band a fraction of that;
    # the emulator's own gaps move by a few points from one window to the next
    assert busy >= 0.8 * alone, \
        f"the band at 50 ran {busy:.0%} of the engine, {alone:.0%} before the waiter waited"


LONG_JOB_NS = 4_000_000_000


def test_a_loan_lifts_only_the_client_that_holds_the_job(bands, simgpu_nodes):
    """Only the work waited for rises. The signaller's cgroup at -100 keeps
    a deep filler queued on the engine and holds, in another client, the
    job J that the waiter at 100 waits for; J waits itself on a 4 s job of
    its own cgroup on another device, already running (a fence nothing can
    be lent to). While J cannot run, the cgroup at 0 that saturates the
    engine keeps it and the filler stays below it (a loan to the whole
    cgroup gave the filler all of the engine and the band at 0 nothing);
    once J can run, it runs at 100 and the waiter's job completes."""
    node, other = simgpu_nodes[0], simgpu_nodes[1]
    low, middle, dev = bands["low"], bands["middle"], devt(node)
    with joined(bands["high"]), SimGpu(node) as gpu:
        long_link, long_signaler = linked_signaler(gpu, other, low.path, LONG_JOB_NS)
        long_fd = gpu.syncobj_export(long_link)
        try:
            link, holder = linked_signaler(gpu, node, low.path, LINK_JOB_NS, wait_fd=long_fd)
        finally:
            os.close(long_fd)
        with running(long_signaler, holder), \
                running(Load(node, low.path, LOAD_JOB_NS), Load(node, middle.path, LOAD_JOB_NS)):
            time.sleep(0.3)
            long_signaler.submit()
            holder.submit()
            seqno = gpu.submit(LINK_JOB_NS, wait_for=link)
            time.sleep(0.3)
            low_busy, middle_busy = busy_fractions([low, middle], dev, WINDOW_S)
            gpu.wait(seqno, timeout_ns=10 * 10**9)
    assert low_busy <= 0.1 * middle_busy, \
        f"while the job waited for could not run, the band at 0 ran {middle_busy:.0%} of " \
        f"the engine and the filler at -100 {low_busy:.0%} (a loan lifted the whole cgroup)"


def test_a_killed_signaler_leaves_no_loan_behind(bands, simgpu_nodes):
    """The signaller queues a second of work whose last job the waiter
    waits for and is killed while it is queued: the waiter's job completes
    (its dependency is cancelled), and the signaller's cgroup, once empty,
    goes away (no link of the loan pins it) while the band at 0 has the
    engine again."""
    node = simgpu_nodes[0]
    low, middle = bands["low"], bands["middle"]
    dev = devt(node)
    parent = Path(low.path).parent
    dying_before = dying(parent)
    with joined(bands["high"]), SimGpu(node) as gpu:
        link, signaler = linked_signaler(gpu, node, low.path, 20_000_000)
        with running(signaler), running(Load(node, middle.path, LOAD_JOB_NS)):
            time.sleep(0.3)
            alone = busy_fractions([middle], dev, 1.0)[0]
            signaler.submit(jobs=50)
            seqno = gpu.submit(LINK_JOB_NS, wait_for=link)
            time.sleep(0.1)
            signaler.proc.kill()
            signaler.proc.join(10)
            gpu.wait(seqno, timeout_ns=5 * 10**9)
            low.remove()
            deadline = time.monotonic() + 10
            while dying(parent) > dying_before and time.monotonic() < deadline:
                time.sleep(0.1)
            left = dying(parent) - dying_before
            busy = busy_fractions([middle], dev, 1.0)[0]
    assert left <= 0, "the killed signaller's cgroup stays pinned"
    assert busy >= 0.8 * alone, \
        f"the band at 0 ran {busy:.0%} of the engine after the kill, {alone:.0%} before"


GATE_NS = 5_000_000_000
CONTROL_GATE_NS = 300_000_000


@pytest.mark.parametrize("gone", ["holder", "waiter"])
def test_a_device_unbound_under_a_cross_device_loan(bands, reload_simgpu, gone):
    """A job J of the cgroup at -100 waits on a 5 s gate job; the client
    at 100 waits on J from the other device (the loan is in place while J
    waits), and a band at 0 saturates J's device. Then the device of J
    (the holder's) or of the waiter is unbound with every file open, as a
    GPU unbound from its driver or pulled out: the links into and out of
    its schedulers go with them, no freed scheduler, engine or entity is
    touched (the debug tier runs this under KASAN), the device that stays
    goes on, and neither cgroup stays pinned. A first round with the same
    clients and nothing unbound shows the loan works here: J runs past the
    band once the gate ends, which it never does without the loan."""
    nodes = reload_simgpu("devices=2")
    gone_node, stay_node = nodes[1], nodes[0]
    wait_node, hold_node = (stay_node, gone_node) if gone == "holder" else (gone_node, stay_node)
    low, middle, high = bands["low"], bands["middle"], bands["high"]
    parent = Path(low.path).parent
    dying_before = dying(parent)
    with kernel_log() as log:
        with ExitStack() as stack:
            stack.enter_context(joined(high))
            gpu = stack.enter_context(SimGpu(wait_node))
            # the gate's jobs run at 100 on the device that stays
            gate = stack.enter_context(SimGpu(stay_node))
            gate_link = gate.syncobj_create()
            gate_fd = gate.syncobj_export(gate_link)
            try:
                link, signaler = linked_signaler(gpu, hold_node, low.path, LINK_JOB_NS,
                                                 wait_fd=gate_fd)
            finally:
                os.close(gate_fd)
            stack.enter_context(running(signaler))
            # the load stops first: nothing is left queued behind it at the
            # end; 64 jobs deep, so that a stall of its process under the
            # emulator leaves the band ready
            stack.enter_context(running(Load(hold_node, middle.path, LOAD_JOB_NS, depth=64)))
            time.sleep(0.3)

            # the control: the loan lifts J past the band once the gate ends
            gate.submit(CONTROL_GATE_NS, signal=gate_link)
            signaler.submit()
            try:
                gpu.wait(gpu.submit(LINK_JOB_NS, wait_for=link), timeout_ns=10 * 10**9)
            except OSError as e:
                pytest.fail(f"no loan in the control round: the waiter's job did not end ({e})")

            gated = time.monotonic()
            gate_seqno = gate.submit(GATE_NS, signal=gate_link)
            signaler.submit()
            # linked as it is pushed to its empty queue (drm_sched's glue)
            seqno = gpu.submit(LINK_JOB_NS, wait_for=link)
            time.sleep(0.3)
            start = time.monotonic()
            unbind(gone_node)
            unbind_s = time.monotonic() - start
            # J cannot leave its queue before the gate ends: the loan was
            # in place for the whole teardown
            assert not gate.done(gate_seqno), \
                f"the gate ended before the unbind did ({start - gated:.1f} s from the " \
                f"gate's submission to the unbind, which took {unbind_s:.1f} s)"
            gate.wait(gate_seqno)
            if gone == "holder":
                # J was cancelled once the gate ended: the waiter's job goes
                gpu.wait(seqno, timeout_ns=10 * 10**9)
                gpu.wait(gpu.submit(LINK_JOB_NS), timeout_ns=10 * 10**9)
                lingered = False
            else:
                # no waiter is left: J stays behind the band, in its own
                time.sleep(0.5)
                lingered = signaler.submit(jobs=0) is not None
                gate.wait(gate.submit(LINK_JOB_NS), timeout_ns=10 * 10**9)
        low.remove()
        high.remove()
        deadline = time.monotonic() + 10
        while dying(parent) > dying_before and time.monotonic() < deadline:
            time.sleep(0.1)
        left = dying(parent) - dying_before
    assert not splats(log), "the unbind under a loan:\n" + "\n".join(log)
    assert unbind_s < 10, f"unbinding the {gone}'s device took {unbind_s:.1f} s"
    assert not lingered, "J ran past the band after its waiter's device went (the loan stayed)"
    assert left <= 0, f"{left} cgroups stay pinned after the {gone}'s device went"


def dying(parent: Path) -> int:
    """nr_dying_descendants of the cgroup at @parent."""
    for line in (parent / "cgroup.stat").read_text().splitlines():
        key, value = line.split()
        if key == "nr_dying_descendants":
            return int(value)
    return 0
