"""Stress with faults (make test-debug): 32 processes for 60 s allocate and
free buffers, share them across devices (PRIME, vgem to simgpu), submit
jobs that depend on each other (syncobjs across clients), move between
cgroups and get killed, while knobs change, spare cgroups come and go and
simgpu is unloaded and loaded again under live cgroups. Afterwards nothing
is charged, no cgroup is left dying, no task is stuck in D state; KASAN,
lockdep, debug objects and the hung-task detector watch the kernel log,
and kmemleak is scanned at the end of the run (tools/vm-guest.sh)."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest
from clients import proc_state
from drmtest import BufferNode
from memfiles import DMEM, PREFIX, gem_key
from simgpu import SimGpu, render_nodes
from simgpu import unload as unload_simgpu

from pycgpu.core import formats

pytestmark = pytest.mark.debug

WORKERS = 32
SECONDS = 60.0
MIN_KILLS = 5
GROUPS = 8


def _worker(seed: int, card: str, nodes: list[str], groups: list[str]) -> None:
    # below the test's own process, which kills, spawns and reloads on a
    # schedule: with 32 busy workers at its own nice level it got too little
    # of the debug kernel's 2 emulated CPUs (4 kills in 180 s, not 5)
    os.nice(10)
    rng = random.Random(seed)
    Path(rng.choice(groups), "cgroup.procs").write_text(str(os.getpid()))
    with contextlib.ExitStack() as stack:
        vgem = stack.enter_context(BufferNode(card))
        gpus = [stack.enter_context(SimGpu(n)) for n in nodes[:1] for _ in range(2)]
        held: list[int] = []
        while True:
            op = rng.randrange(6)
            with contextlib.suppress(OSError):  # limits refuse, knobs change
                if op == 0:
                    held.append(vgem.create_dumb(64, rng.choice([16, 64, 256]), 32).handle)
                elif op == 1 and held:
                    vgem.destroy_dumb(held.pop(rng.randrange(len(held))))
                elif op == 2 and held:
                    fd = vgem.prime_handle_to_fd(rng.choice(held))
                    try:
                        h = gpus[0].prime_fd_to_handle(fd)
                        gpus[0].gem_close(h)
                    finally:
                        os.close(fd)
                elif op == 3:
                    a, b = gpus
                    sync = a.syncobj_create()
                    a.submit(rng.choice([100_000, 1_000_000]), signal=sync)
                    fd = a.syncobj_export(sync)
                    try:
                        bs = b.syncobj_import(fd)
                    finally:
                        os.close(fd)
                    b.submit(200_000, wait_for=bs)
                    a.syncobj_destroy(sync)
                    b.syncobj_destroy(bs)
                elif op == 4:
                    Path(rng.choice(groups), "cgroup.procs").write_text(str(os.getpid()))
                else:
                    gpus[rng.randrange(2)].submit(rng.choice([50_000, 500_000]),
                                                  priority=rng.randint(-5, 0))


def _knobs(seed: int, groups: list[str], devs: list[str], mems: list[str], stop) -> None:
    """Random writes of the knobs: @devs key gpu.weight, @mems the memory
    limit (gpu.memory.max on 6.12, dmem.max of the devices' GEM regions on
    7.3)."""
    rng = random.Random(seed)
    while not stop.is_set():
        g = rng.choice(groups)
        name, value = rng.choice([
            ("gpu.weight", str(rng.randint(1, 10000))),
            ("gpu.weight", f"{rng.choice(devs)} {rng.randint(1, 10000)}"),
            ("gpu.priority", str(rng.randint(-50, 50))),
            (PREFIX + "max", f"{rng.choice(mems)} {rng.choice(['max', '64K', '1M', '8M'])}"),
        ])
        with contextlib.suppress(OSError):  # devices come and go
            Path(g, name).write_text(value)
        time.sleep(0.002)


def dying(mount: Path) -> int:
    stat = (mount / "cgroup.stat").read_text()
    return int(stat.split("nr_dying_descendants")[1].split()[0])


def reload_simgpu() -> list[Path]:
    ko = Path(os.environ.get("PYCGPU_EXT", "")) / "simgpu.ko"
    unload_simgpu()
    subprocess.run(["insmod", str(ko), "devices=2"], check=True)
    return render_nodes()


def test_stress(cgroup, mount, simgpu_nodes, vgem, vgem_card, robustness):
    base = dying(mount)
    groups = []
    for i in range(GROUPS):
        g = cgroup.child(f"s{i}")
        g.create()
        groups.append(str(g.path))
    ctx = mp.get_context("fork")
    rng = random.Random(42)
    stop = ctx.Event()
    workers: list = []
    nodes = [str(n) for n in simgpu_nodes]

    def devs() -> list[str]:
        out = [str(vgem)]
        for n in render_nodes():
            st = os.stat(n)
            out.append(f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}")
        return out

    def mems() -> list[str]:
        """The memory files' keys of the devices."""
        if not DMEM:
            return devs()
        nodes = [Path(f"/dev/dri/renderD{vgem.minor}"), *render_nodes()]
        return [gem_key(n, formats.DevT(os.major(os.stat(n).st_rdev),
                                        os.minor(os.stat(n).st_rdev))) for n in nodes]

    def spawn() -> None:
        p = ctx.Process(target=_worker, daemon=True,
                        args=(rng.randrange(1 << 30), str(vgem_card), nodes, groups))
        p.start()
        workers.append(p)

    def kill_all() -> None:
        for p in workers:
            if p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
        for p in workers:
            p.join(30)
            assert p.exitcode is not None, f"worker {p.pid} stuck: {proc_state(p.pid)!r}"
        workers.clear()

    knobs = ctx.Process(target=_knobs, args=(7, groups, devs(), mems(), stop), daemon=True)
    knobs.start()
    kills = spares = reloads = 0
    try:
        for _ in range(WORKERS):
            spawn()
        t0 = time.monotonic()
        reloaded = False
        # the debug kernel under emulation forks slowly: SECONDS, and at
        # least MIN_KILLS kills (within three times as long)
        while (time.monotonic() - t0 < SECONDS or kills < MIN_KILLS) and \
                time.monotonic() - t0 < 3 * SECONDS:
            time.sleep(0.2)
            victim = workers.pop(rng.randrange(len(workers)))
            os.kill(victim.pid, signal.SIGKILL)
            victim.join(30)
            assert victim.exitcode is not None, f"killed worker stuck: {proc_state(victim.pid)!r}"
            kills += 1
            spawn()
            spare = cgroup.child(f"spare{spares}")
            spare.create()
            spare.remove()
            spares += 1
            if not reloaded and time.monotonic() - t0 > SECONDS / 2:
                kill_all()  # simgpu cannot go while files are open
                nodes[:] = [str(n) for n in reload_simgpu()]
                reloads += 1
                reloaded = True
                for _ in range(WORKERS):
                    spawn()
    finally:
        stop.set()
        kill_all()
        knobs.join(30)
    assert kills >= MIN_KILLS and reloads == 1, (kills, reloads)
    # nothing stuck, nothing charged, nothing left dying
    stuck = []
    for p in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            if (p / "cmdline").read_bytes() and proc_state(int(p.name)) == "D":
                stuck.append(p.name)
    assert not stuck, f"user tasks in D state: {stuck}"
    for g in groups:
        text = Path(g, PREFIX + "current").read_text()
        current = (formats.parse_region_keyed(text) if DMEM
                   else formats.parse_flat_keyed(text))
        assert not any(current.values()), f"{g}: still charged {current}"
    cgroup.remove(recursive=True)
    deadline = time.monotonic() + 30
    while dying(mount) > base and time.monotonic() < deadline:
        time.sleep(0.5)
    assert dying(mount) <= base, f"{dying(mount) - base} cgroups left dying"
    cgroup.create()  # for the fixture's teardown
    robustness["stress"] = {"processes": WORKERS, "seconds": SECONDS, "kills": kills,
                            "reloads": reloads, "cgroups_created_and_removed": spares,
                            "stuck_tasks": 0, "charged_bytes_left": 0, "dying_left": 0}
