"""GPU clients of the shapes real ones have, for the VM tests and the
benchmarks: a client that keeps one job queued and submits the next as soon
as it is done (an interactive app, a game at vsync), and helpers to run
them in a cgroup as separate processes."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from simgpu import ClientProcess, Load, SimGpu

from pycgpu.core import formats
from pycgpu.core.cgroup import Cgroup

JOB_NS = 5_000_000  # 5 ms jobs
# the debug flavour (KASAN, kmemleak, fault injection; make test-debug), told
# by its failslab: every ioctl and cgroup file costs milliseconds more there
# under TCG, so timing bounds that hold on the test kernel are loosened
DEBUG_KERNEL = Path("/sys/kernel/debug/failslab").exists()
TOLERANCE_PTS = 5.0




def _shallow(node: str, cgroup: str, duration_ns: int, engine: int, think_s: float,
             stop, ready) -> None:
    Path(cgroup, "cgroup.procs").write_text(str(os.getpid()))
    with SimGpu(node) as gpu:
        ready.set()
        while not stop.is_set():
            gpu.wait(gpu.submit(duration_ns, engine))
            if think_s:
                time.sleep(think_s)


class Shallow(ClientProcess):
    """A process in @cgroup that keeps exactly one job of @duration_ns
    queued on @node until stop(), and with @think_s thinks that long
    between a job's end and the next (a client rendering to vsync, a
    pipeline stage)."""

    def __init__(self, node: str | Path, cgroup: str | Path, duration_ns: int,
                 engine: int = 0, think_s: float = 0.0) -> None:
        super().__init__(_shallow, node, cgroup, duration_ns, engine, think_s,
                         what="shallow client")


def proc_state(pid: int) -> str:
    """The state letter of /proc/PID/stat ('D': uninterruptible), '' if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return ""
    return stat.rsplit(")", 1)[1].split()[0]


def usage_us(cg: Cgroup, dev: formats.DevT) -> int:
    return formats.parse_nested_keyed(cg.read("gpu.stat"))[dev]["usage_usec"]


def devt(node: Path) -> formats.DevT:
    st = os.stat(node)
    return formats.DevT(os.major(st.st_rdev), os.minor(st.st_rdev))


def measure_shares(groups: list[Cgroup], dev: formats.DevT, seconds: float = 2.0,
                   settle: float = 0.3) -> list[float]:
    """Each group's percentage of the GPU time the groups got over @seconds."""
    time.sleep(settle)
    before = [usage_us(g, dev) for g in groups]
    time.sleep(seconds)
    delta = [usage_us(g, dev) - b for g, b in zip(groups, before, strict=True)]
    total = sum(delta)
    assert total > 0, "no GPU time at all"
    return [100.0 * d / total for d in delta]


def busy_fractions(groups: list[Cgroup], dev: formats.DevT, seconds: float = 2.0,
                   during: Callable[[], object] | None = None) -> list[float]:
    """The fraction of wall time the engine of @dev spent on each of
    @groups over @seconds, or while @during runs. Under emulation a
    saturating client's own figure is below 1 (drm_sched hands the next
    job over from a workqueue) and lower still when the host is busy, so
    tests compare two figures measured in one run, not one with a constant."""
    before, t0 = [usage_us(g, dev) for g in groups], time.monotonic()
    if during is None:
        time.sleep(seconds)
    else:
        during()
    wall_us = (time.monotonic() - t0) * 1e6
    return [(usage_us(g, dev) - b) / wall_us for g, b in zip(groups, before, strict=True)]


@contextlib.contextmanager
def loads(node: Path, groups: list[Cgroup], **kw: int) -> Iterator[list[Load]]:
    running = [Load(node, g.path, JOB_NS, **kw) for g in groups]
    try:
        yield running
    finally:
        for load in running:
            load.stop()


def assert_shares(got: list[float], want: list[float], tolerance: float = TOLERANCE_PTS) -> None:
    for g, w in zip(got, want, strict=True):
        assert abs(g - w) <= tolerance, f"shares {got} != {want} (±{tolerance})"


def raw_write(cg: Cgroup, name: str, value: str) -> int:
    """Write like `echo -n VALUE > FILE`; 0 or the errno of the refusal."""
    try:
        fd = os.open(cg.path / name, os.O_WRONLY)
    except OSError as e:
        return e.errno or -1
    try:
        os.write(fd, value.encode())
    except OSError as e:
        return e.errno or -1
    finally:
        os.close(fd)
    return 0
