"""What the scheduling benchmarks (bench/sched.py, bench/sched_shapes.py)
share: the simulated GPU's setup, the clients they run on it and the
shares they read from gpu.stat."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import common  # first: it puts tests/ on sys.path
from simgpu import ClientProcess, SimGpu, render_nodes, unload

from pycgpu.core import formats
from pycgpu.core.cgroup import Cgroup

BASE = common.BASE
# what device 1 keeps: drm_sched's FIFO on 6.12; on 7.3 the boot's FAIR
STOCK = "fair" if BASE == "7.3" else "fifo"
JOB_NS = int(os.environ.get("BENCH_SCHED_JOB_NS", "5000000"))
WINDOW_S = float(os.environ.get("BENCH_SCHED_WINDOW_S", "3"))
# device 0 follows the gpu cgroup policy, device 1 (bit 1) keeps drm_sched's
# own policy (STOCK)
SIMGPU_PARAMS = {"devices": "2", "engines": "1", "credits": "1", "fifo": "2"}


def load_simgpu(**changes: str) -> list[Path]:
    """simgpu with SIMGPU_PARAMS, @changes (module parameters) applied,
    reloaded if it was loaded with others (as the VM tests and the other
    loads do): the render nodes of its devices in order (by default two:
    the policy's and the FIFO one)."""
    params = SIMGPU_PARAMS | changes
    module = Path("/sys/module/simgpu")
    loaded = module.exists()
    if loaded:
        have = {k: (module / "parameters" / k).read_text().strip() for k in params}
        if have != params:
            progress(f"reloading simgpu: {have} -> {params}")
            unload()
            loaded = False
    if not loaded:
        ko = Path(os.environ.get("PYCGPU_EXT", "")) / "simgpu.ko"
        subprocess.run(["insmod", str(ko), *(f"{k}={v}" for k, v in params.items())],
                       check=True)
    want = int(params["devices"])
    deadline = time.monotonic() + 10
    while len(nodes := render_nodes()) < want and time.monotonic() < deadline:
        time.sleep(0.1)  # in case the device nodes show up after insmod returns
    if len(nodes) != want:
        raise RuntimeError(f"simgpu loaded with devices={want}, but its render nodes are {nodes}")
    return nodes


def reload_sched(policy: int | None) -> list[Path]:
    """drm_sched (a module on 7.3) reloaded with sched_policy=@policy, or as
    the kernel command line has it (None), and simgpu with it."""
    unload()
    subprocess.run(["modprobe", "-r", "gpu-sched"], check=True)
    subprocess.run(["modprobe", "gpu-sched",
                    *([f"sched_policy={policy}"] if policy is not None else [])], check=True)
    return load_simgpu()


def devt(node: Path) -> formats.DevT:
    st = os.stat(node)
    return formats.DevT(os.major(st.st_rdev), os.minor(st.st_rdev))


def usage(groups: list[Cgroup], dev: formats.DevT) -> list[int]:
    return [formats.parse_nested_keyed(g.read("gpu.stat"))[dev]["usage_usec"] for g in groups]


def shares_over(groups: list[Cgroup], dev: formats.DevT, seconds: float) -> list[float]:
    before = usage(groups, dev)
    time.sleep(seconds)
    delta = [a - b for a, b in zip(usage(groups, dev), before, strict=True)]
    return [100.0 * d / sum(delta) for d in delta]


def _pulse(node: str, cgroup: str, duration_ns: int, pause_s: float, stop, ready) -> None:
    Path(cgroup, "cgroup.procs").write_text(str(os.getpid()))
    with SimGpu(node) as gpu:
        ready.set()
        while not stop.is_set():
            gpu.wait(gpu.submit(duration_ns))
            time.sleep(pause_s)


class Pulse(ClientProcess):
    """A process in @cgroup that runs one job of @duration_ns, waits for it,
    sleeps @pause_s and so on until stop(): a client that goes idle."""

    def __init__(self, node: Path, cgroup: Path, duration_ns: int, pause_s: float) -> None:
        super().__init__(_pulse, node, cgroup, duration_ns, pause_s, what="pulse client")


def progress(what: str) -> None:
    print(f"  [bench-sched {time.strftime('%H:%M:%S')}] {what}", file=sys.stderr, flush=True)
