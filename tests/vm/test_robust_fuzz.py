"""Fuzzed knobs (make test-debug): 100,000 random and grammar-aware writes to
gpu.weight, gpu.priority, gpu.max and gpu.memory.max (6.12; on 7.3 GPU memory is
dmem's, whose parser is upstream's) from four processes, each on
its own cgroup, while buffers are allocated and jobs run there. Every write
is checked against the reference model of tests/kernel_model.py (written
from kernel/cgroup/gpu.c, not from pycgpu's parsers): a rejected write
gives the model's errno and changes nothing, an accepted one reads back in
the kernel's canonical form.

The allocators pause a millisecond between buffers: a tight loop of four
of them would take the VM's CPUs from the fuzzers (under KASAN on TCG the
run did not end in 20 minutes), and a few hundred buffers a second keep
charges and limit hits racing the writes all the same.

The run is bounded in time as well as in writes: each fuzzer stops at its
share of the writes or after FUZZ_SECONDS, whichever comes first, and at
least MIN_WRITES must have been checked. On the debug kernels under TCG,
with the allocators and the simgpu loads beside them, the fuzzers check
about 44 writes a second between them (7.3 and 6.12 alike), so 100,000
writes and their read-backs would take longer than the whole tier's
budget; on the test kernel all of them run. The figure says how many ran."""

from __future__ import annotations

import contextlib
import errno
import multiprocessing as mp
import os
import random
import time
from pathlib import Path

import pytest
from clients import JOB_NS
from drmtest import BufferNode
from kernel_model import Model, Refused, parse_back, value
from memfiles import DMEM
from simgpu import Load

pytestmark = pytest.mark.debug

WRITES = 100_000
MIN_WRITES = 10_000
PROCS = 4
FUZZ_SECONDS = 900.0


def fuzz(path: str, devices: dict, seed: int, n: int, out) -> None:
    try:
        rng = random.Random(seed)
        model = Model(devices)
        devs = list(devices)
        # gpu.max too: caps come and go on groups whose loads keep simgpu busy
        names = ["gpu.weight", "gpu.priority", "gpu.max"] + ([] if DMEM else ["gpu.memory.max"])
        accepted = done = 0
        deadline = time.monotonic() + FUZZ_SECONDS
        for i in range(n):
            if time.monotonic() > deadline:
                break
            name = rng.choice(names)
            data = value(rng, name, devs)
            try:
                model.write(name, data)
                want_err = 0
            except Refused as e:
                want_err = e.code
            fd = os.open(os.path.join(path, name), os.O_WRONLY)
            try:
                os.write(fd, data)
                got_err = 0
            except OSError as e:
                got_err = e.errno or -1
            finally:
                os.close(fd)
            if got_err != want_err:
                out.put(f"write {i} {data!r} to {name}: kernel {errno.errorcode.get(got_err)}, "
                        f"model {errno.errorcode.get(want_err, 'success')}")
                return
            accepted += not got_err
            got = parse_back(name, Path(path, name).read_text())
            if got != model.read(name):
                out.put(f"write {i} {data!r} to {name}: reads back {got}, model {model.read(name)}")
                return
            done += 1
        out.put(f"ok {accepted} {done}")
    except Exception as e:
        out.put(f"error: {e!r}")


def _allocate(card: str, cgroup: str, stop, made) -> None:
    Path(cgroup, "cgroup.procs").write_text(str(os.getpid()))
    with BufferNode(card) as node:
        while not stop.is_set():
            with contextlib.suppress(OSError):  # a fuzzed limit may refuse it
                node.destroy_dumb(node.create_dumb(64, 64, 32).handle)
                made.value += 1
            time.sleep(0.001)


def test_fuzzed_writes_match_the_reference_model(cgroup, simgpu_nodes, vgem, vgem_card,
                                                 robustness):
    devices = {}
    for node in simgpu_nodes:
        st = os.stat(node)
        devices[(os.major(st.st_rdev), os.minor(st.st_rdev))] = True
    devices[(vgem.major, vgem.minor)] = False
    groups = []
    for i in range(PROCS):
        g = cgroup.child(f"fz{i}")
        g.create()
        groups.append(g)
    ctx = mp.get_context("fork")
    out, stop = ctx.Queue(), ctx.Event()
    loads = [Load(simgpu_nodes[0], g.path, JOB_NS // 5, depth=2) for g in groups]
    made = [ctx.Value("Q", 0) for _ in groups]
    allocs = [ctx.Process(target=_allocate, args=(str(vgem_card), str(g.path), stop, n))
              for g, n in zip(groups, made, strict=True)]
    for p in allocs:
        p.start()
    fuzzers = [ctx.Process(target=fuzz, args=(str(g.path), devices, 1000 + i,
                                              WRITES // PROCS, out))
               for i, g in enumerate(groups)]
    t0 = time.monotonic()
    try:
        for p in fuzzers:
            p.start()
        # a write that never returns is a hung kernel: tools/vm.sh reports the task
        results = [out.get(timeout=FUZZ_SECONDS + 600) for _ in fuzzers]
    finally:
        stop.set()
        for p in fuzzers + allocs:
            p.join(60)
            if p.is_alive():  # left behind, it would fuzz the next tests' kernel
                p.kill()
                p.join()
        for load in loads:
            load.stop()
    bad = [r for r in results if not r.startswith("ok ")]
    assert not bad, bad
    accepted = sum(int(r.split()[1]) for r in results)
    done = sum(int(r.split()[2]) for r in results)
    assert done >= min(WRITES, MIN_WRITES), \
        f"{done} writes checked in {FUZZ_SECONDS:.0f} s, fewer than {MIN_WRITES}"
    assert accepted > done // 10, f"only {accepted} of {done} writes were accepted"
    robustness["fuzz"] = {"writes": done, "accepted": accepted, "processes": PROCS,
                          "buffers": sum(n.value for n in made),
                          "seconds": round(time.monotonic() - t0)}
