"""Bindings for simgpu, the simulated GPU of the test suite and benchmarks
(kernel/drivers-gpu-cgroup/simgpu/simgpu_drm.h), on top of :mod:`pycgpu.drm`.

simgpu is a DRM render node whose engines run jobs of a requested GPU
duration, one at a time, in the order the gpu controller's scheduler picks.
"""

from __future__ import annotations

import collections
import multiprocessing
import os
from dataclasses import dataclass
from pathlib import Path

from . import drm
from .drm import DrmNode, driver_version, ffi

ffi.cdef(
    """
    struct drm_simgpu_gem_create { uint64_t size; uint32_t handle; uint32_t pad; };
    struct drm_simgpu_submit {
        uint64_t duration_ns; uint32_t engine; int32_t priority; uint64_t seqno;
    };
    struct drm_simgpu_wait {
        uint64_t seqno; int64_t timeout_ns; uint64_t queued_ns; uint64_t start_ns;
        uint64_t end_ns;
    };
    struct drm_simgpu_pick_stats {
        uint64_t samples; uint32_t count; uint32_t engine; uint64_t picks;
    };
    """
)

DRM_COMMAND_BASE = 0x40
DRIVER = "simgpu"
GEM_CREATE = drm._iowr(DRM_COMMAND_BASE + 0x00, "struct drm_simgpu_gem_create")
SUBMIT = drm._iowr(DRM_COMMAND_BASE + 0x01, "struct drm_simgpu_submit")
WAIT = drm._iowr(DRM_COMMAND_BASE + 0x02, "struct drm_simgpu_wait")
PICK_STATS = drm._iowr(DRM_COMMAND_BASE + 0x03, "struct drm_simgpu_pick_stats")
drm.IOCTL_NAMES.update({
    GEM_CREATE: "DRM_IOCTL_SIMGPU_GEM_CREATE",
    SUBMIT: "DRM_IOCTL_SIMGPU_SUBMIT",
    WAIT: "DRM_IOCTL_SIMGPU_WAIT",
    PICK_STATS: "DRM_IOCTL_SIMGPU_PICK_STATS",
})


@dataclass(frozen=True)
class JobTimes:
    """CLOCK_MONOTONIC ns at which the job that finished last was queued,
    started and ended."""

    queued_ns: int
    start_ns: int
    end_ns: int

    @property
    def wait_ns(self) -> int:
        return self.start_ns - self.queued_ns


class SimGpu(DrmNode):
    """An open simgpu render node."""

    def gem_create(self, size: int) -> tuple[int, int]:
        """A buffer of at least @size bytes: (handle, size)."""
        arg = ffi.new("struct drm_simgpu_gem_create *", {"size": size})
        self.ioctl(GEM_CREATE, arg)
        return int(arg.handle), int(arg.size)

    def submit(self, duration_ns: int, engine: int = 0, priority: int = 0) -> int:
        """Queue a job keeping @engine busy for @duration_ns; its seqno."""
        arg = ffi.new("struct drm_simgpu_submit *",
                      {"duration_ns": duration_ns, "engine": engine, "priority": priority})
        self.ioctl(SUBMIT, arg)
        return int(arg.seqno)

    def wait(self, seqno: int, timeout_ns: int = 10**10) -> JobTimes:
        """Wait until every job up to @seqno has finished."""
        arg = ffi.new("struct drm_simgpu_wait *", {"seqno": seqno, "timeout_ns": timeout_ns})
        self.ioctl(WAIT, arg)
        return JobTimes(int(arg.queued_ns), int(arg.start_ns), int(arg.end_ns))

    def pick_stats(self, engine: int = 0) -> tuple[int, list[int]]:
        """(picks so far, ns of the latest picks, at most 8192)."""
        samples = ffi.new("uint32_t[]", 8192)
        arg = ffi.new("struct drm_simgpu_pick_stats *",
                      {"samples": int(ffi.cast("uintptr_t", samples)), "count": 8192,
                       "engine": engine})
        self.ioctl(PICK_STATS, arg)
        return int(arg.picks), [int(samples[i]) for i in range(arg.count)]


def render_nodes(dev_dir: Path = Path("/dev/dri")) -> list[Path]:
    """The render nodes of simgpu devices, in order."""
    return [node for node in sorted(dev_dir.glob("renderD*"))
            if (v := driver_version(node)) is not None and v.name == DRIVER]


def _saturate(node: str, cgroup: str | None, duration_ns: int, depth: int, priority: int,
              engine: int, stop, ready) -> None:
    if cgroup is not None:
        Path(cgroup, "cgroup.procs").write_text(str(os.getpid()))
    with SimGpu(node) as gpu:
        queued = collections.deque(gpu.submit(duration_ns, engine, priority)
                                   for _ in range(depth))
        ready.set()
        while not stop.is_set():
            gpu.wait(queued.popleft())
            queued.append(gpu.submit(duration_ns, engine, priority))
        gpu.wait(queued[-1])


class Load:
    """A process in @cgroup that keeps @depth jobs of @duration_ns queued on
    a simgpu engine until stop(): it saturates the engine on its own."""

    def __init__(self, node: str | Path, cgroup: str | Path | None, duration_ns: int,
                 depth: int = 6, priority: int = 0, engine: int = 0) -> None:
        ctx = multiprocessing.get_context("fork")
        self._stop, ready = ctx.Event(), ctx.Event()
        self.proc = ctx.Process(
            target=_saturate, daemon=True,
            args=(str(node), None if cgroup is None else str(cgroup), duration_ns, depth,
                  priority, engine, self._stop, ready))
        self.proc.start()
        if not ready.wait(30):
            self.stop()
            raise TimeoutError(f"simgpu load on {node} did not start")

    def stop(self) -> None:
        self._stop.set()
        self.proc.join(30)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()
