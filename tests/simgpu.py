"""Bindings for simgpu, the simulated GPU of the test suite and benchmarks
(kernel/drivers-gpu-cgroup/simgpu/simgpu_drm.h), on top of :mod:`pycgpu.core.drm`
and :mod:`drmtest` (test code: not part of the pycgpu package).

simgpu is a drm_sched driver: a DRM render node whose engines run jobs of a
requested GPU duration, one after the other, in the order drm_sched selects
them (by the gpu cgroup controller's policy). Jobs can wait for a syncobj
and signal one (DRM_IOCTL_SYNCOBJ_*), so that one client's job can depend on
another's.
"""

from __future__ import annotations

import collections
import errno
import multiprocessing
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from pathlib import Path

from drmtest import BufferNode

from pycgpu.core import drm
from pycgpu.core.drm import driver_version, ffi

ffi.cdef(
    """
    struct drm_simgpu_gem_create { uint64_t size; uint32_t handle; uint32_t flags; };
    struct drm_simgpu_gem_info { uint32_t handle; uint32_t placement; };
    struct drm_simgpu_submit {
        uint64_t duration_ns; uint32_t engine; int32_t priority; uint64_t seqno;
        uint32_t in_syncobj; uint32_t out_syncobj;
    };
    struct drm_syncobj_create { uint32_t handle; uint32_t flags; };
    struct drm_syncobj_destroy { uint32_t handle; uint32_t pad; };
    struct drm_syncobj_handle {
        uint32_t handle; uint32_t flags; int32_t fd; uint32_t pad;
    };
    struct drm_simgpu_wait {
        uint64_t seqno; int64_t timeout_ns; uint64_t queued_ns; uint64_t start_ns;
        uint64_t end_ns;
    };
    """
)

DRM_COMMAND_BASE = 0x40
DRIVER = "simgpu"
GEM_CREATE = drm._iowr(DRM_COMMAND_BASE + 0x00, "struct drm_simgpu_gem_create")
SUBMIT = drm._iowr(DRM_COMMAND_BASE + 0x01, "struct drm_simgpu_submit")
WAIT = drm._iowr(DRM_COMMAND_BASE + 0x02, "struct drm_simgpu_wait")
GEM_INFO = drm._iowr(DRM_COMMAND_BASE + 0x03, "struct drm_simgpu_gem_info")
# gem_create flags: in the simulated VRAM (module parameter vram), and in
# system memory when VRAM has no room; gem_info's placements
GEM_VRAM, GEM_FALLBACK = 1, 2
PLACEMENT_SYSTEM, PLACEMENT_VRAM = 1, 2
SYNCOBJ_CREATE = drm._iowr(0xBF, "struct drm_syncobj_create")
SYNCOBJ_DESTROY = drm._iowr(0xC0, "struct drm_syncobj_destroy")
SYNCOBJ_HANDLE_TO_FD = drm._iowr(0xC1, "struct drm_syncobj_handle")
SYNCOBJ_FD_TO_HANDLE = drm._iowr(0xC2, "struct drm_syncobj_handle")
drm.IOCTL_NAMES.update({
    GEM_CREATE: "DRM_IOCTL_SIMGPU_GEM_CREATE",
    SUBMIT: "DRM_IOCTL_SIMGPU_SUBMIT",
    WAIT: "DRM_IOCTL_SIMGPU_WAIT",
    GEM_INFO: "DRM_IOCTL_SIMGPU_GEM_INFO",
    SYNCOBJ_CREATE: "DRM_IOCTL_SYNCOBJ_CREATE",
    SYNCOBJ_DESTROY: "DRM_IOCTL_SYNCOBJ_DESTROY",
    SYNCOBJ_HANDLE_TO_FD: "DRM_IOCTL_SYNCOBJ_HANDLE_TO_FD",
    SYNCOBJ_FD_TO_HANDLE: "DRM_IOCTL_SYNCOBJ_FD_TO_HANDLE",
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


class SimGpu(BufferNode):
    """An open simgpu render node (with the buffer ioctls of any DRM node:
    PRIME import and export, GEM_CLOSE)."""

    def gem_create(self, size: int, flags: int = 0) -> tuple[int, int]:
        """A buffer of at least @size bytes: (handle, size); @flags GEM_VRAM
        (| GEM_FALLBACK) for one in the simulated VRAM."""
        arg = ffi.new("struct drm_simgpu_gem_create *", {"size": size, "flags": flags})
        self.ioctl(GEM_CREATE, arg)
        return int(arg.handle), int(arg.size)

    def gem_info(self, handle: int) -> int:
        """Where buffer @handle is: PLACEMENT_VRAM or PLACEMENT_SYSTEM."""
        arg = ffi.new("struct drm_simgpu_gem_info *", {"handle": handle})
        self.ioctl(GEM_INFO, arg)
        return int(arg.placement)

    def submit(self, duration_ns: int, engine: int = 0, priority: int = 0,
               wait_for: int = 0, signal: int = 0) -> int:
        """Queue a job keeping @engine busy for @duration_ns; its seqno. It
        runs after the fence in syncobj @wait_for and puts its own in syncobj
        @signal (handles of this file, 0 for none)."""
        arg = ffi.new("struct drm_simgpu_submit *",
                      {"duration_ns": duration_ns, "engine": engine, "priority": priority,
                       "in_syncobj": wait_for, "out_syncobj": signal})
        self.ioctl(SUBMIT, arg)
        return int(arg.seqno)

    def syncobj_create(self) -> int:
        """A new syncobj of this file: its handle."""
        arg = ffi.new("struct drm_syncobj_create *")
        self.ioctl(SYNCOBJ_CREATE, arg)
        return int(arg.handle)

    def syncobj_destroy(self, handle: int) -> None:
        self.ioctl(SYNCOBJ_DESTROY, ffi.new("struct drm_syncobj_destroy *", {"handle": handle}))

    def syncobj_export(self, handle: int) -> int:
        """A file descriptor for syncobj @handle, to pass to another client."""
        arg = ffi.new("struct drm_syncobj_handle *", {"handle": handle})
        self.ioctl(SYNCOBJ_HANDLE_TO_FD, arg)
        return int(arg.fd)

    def syncobj_import(self, fd: int) -> int:
        """The handle, in this file, of the syncobj behind @fd."""
        arg = ffi.new("struct drm_syncobj_handle *", {"fd": fd})
        self.ioctl(SYNCOBJ_FD_TO_HANDLE, arg)
        return int(arg.handle)

    def wait(self, seqno: int, timeout_ns: int = 10**10) -> JobTimes:
        """Wait until every job up to @seqno has finished."""
        arg = ffi.new("struct drm_simgpu_wait *", {"seqno": seqno, "timeout_ns": timeout_ns})
        self.ioctl(WAIT, arg)
        return JobTimes(int(arg.queued_ns), int(arg.start_ns), int(arg.end_ns))

    def done(self, seqno: int) -> bool:
        """Whether every job up to @seqno has finished, without waiting."""
        try:
            self.wait(seqno, timeout_ns=0)
        except drm.DrmError as e:
            if e.errno != errno.ETIME:
                raise
            return False
        return True


def render_nodes(dev_dir: Path = Path("/dev/dri")) -> list[Path]:
    """The render nodes of simgpu devices, in order."""
    return [node for node in sorted(dev_dir.glob("renderD*"))
            if (v := driver_version(node)) is not None and v.name == DRIVER]


def platform_device(node: str | Path) -> str:
    """The platform device of the simgpu device behind render node @node:
    "simgpu.N", the name its driver's bind and unbind files take."""
    return Path("/sys/class/drm", Path(node).name, "device").resolve().name


def unbind(node: str | Path) -> None:
    """Unbinds the simgpu device behind render node @node from its driver,
    its files open or not, as a GPU unbound or pulled out: its open files
    stay, every new ioctl on them fails with ENODEV and their queued jobs
    are cancelled (simgpu.c, the top of the file)."""
    device = platform_device(node)
    Path("/sys/bus/platform/drivers", DRIVER, "unbind").write_text(device)


_BUSY = ("in use", "busy", "temporarily unavailable")


def unload(timeout_s: float = 10.0) -> None:
    """rmmod simgpu, again while the module is held (a client process that
    is still exiting has a file of its devices open: rmmod says it is in
    use, or the kernel refuses it as busy), for at most @timeout_s."""
    deadline = time.monotonic() + timeout_s
    while True:
        run = subprocess.run(["rmmod", "simgpu"], capture_output=True, text=True, check=False)
        if run.returncode == 0:
            return
        if not any(b in run.stderr.lower() for b in _BUSY):
            raise RuntimeError(f"rmmod simgpu failed: {run.stderr.strip()}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"rmmod simgpu failed for {timeout_s} s: {run.stderr.strip()}")
        time.sleep(0.1)


def _saturate(node: str, cgroup: str | None, duration_ns: int, depth: int, priority: int,
              engine: int, stop: Event, ready: Event) -> None:
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


class ClientProcess:
    """A process running @target(node, cgroup, *args, stop, ready) until
    stop(): @target joins @cgroup (None: stays), opens @node, sets ready and
    works until stop is set. The base of the simulated clients of the
    tests and benchmarks."""

    def __init__(self, target: Callable[..., None], node: str | Path,
                 cgroup: str | Path | None, *args: object, what: str = "client") -> None:
        ctx = multiprocessing.get_context("fork")
        self._stop, ready = ctx.Event(), ctx.Event()
        self.proc = ctx.Process(
            target=target, daemon=True,
            args=(str(node), None if cgroup is None else str(cgroup), *args, self._stop, ready))
        self.proc.start()
        if not ready.wait(30):
            self.stop()
            raise TimeoutError(f"simgpu {what} on {node} did not start")

    def stop(self) -> None:
        self._stop.set()
        self.proc.join(30)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()


class Load(ClientProcess):
    """A process in @cgroup that keeps @depth jobs of @duration_ns queued on
    a simgpu engine until stop(): it saturates the engine on its own."""

    def __init__(self, node: str | Path, cgroup: str | Path | None, duration_ns: int,
                 depth: int = 6, priority: int = 0, engine: int = 0) -> None:
        super().__init__(_saturate, node, cgroup, duration_ns, depth, priority, engine,
                         what="load")


def _signal(node: str, cgroup: str | None, wait_fd: int, signal_fd: int, duration_ns: int,
            conn: Connection, stop: Event, ready: Event) -> None:
    if cgroup is not None:
        Path(cgroup, "cgroup.procs").write_text(str(os.getpid()))
    with SimGpu(node) as gpu:
        wait_for = gpu.syncobj_import(wait_fd) if wait_fd >= 0 else 0
        signal = gpu.syncobj_import(signal_fd)
        ready.set()
        last = 0
        while not stop.is_set():
            if conn.poll(0.1):
                try:  # the times of the last job queued, if it has finished
                    times = gpu.wait(last, timeout_ns=1) if last else None
                except OSError:
                    times = None
                for _ in range(conn.recv()):
                    last = gpu.submit(duration_ns, wait_for=wait_for, signal=signal)
                conn.send(times)


class Signaler(ClientProcess):
    """A process in @cgroup that queues, each time submit() asks, jobs of
    @duration_ns on @node that wait on the syncobj behind @wait_fd (-1:
    none) and put their fence in the syncobj behind @signal_fd: another
    client's job can wait on them (priority inheritance through fences)."""

    def __init__(self, node: str | Path, cgroup: str | Path | None, signal_fd: int,
                 duration_ns: int, wait_fd: int = -1) -> None:
        ctx = multiprocessing.get_context("fork")
        self._conn, child = ctx.Pipe()
        try:
            super().__init__(_signal, node, cgroup, wait_fd, signal_fd, duration_ns, child,
                             what="signaler")
        finally:
            child.close()  # the child's end: its exit reads as EOF here

    def submit(self, jobs: int = 1, timeout_s: float = 10.0) -> JobTimes | None:
        """Queue @jobs jobs; the last one's fence is in the signal syncobj
        when this returns. The times of the last job the previous call
        queued, if it has finished."""
        self._conn.send(jobs)
        if not self._conn.poll(timeout_s):
            raise TimeoutError("the signaler did not answer")
        try:
            times: JobTimes | None = self._conn.recv()
        except EOFError:
            raise RuntimeError("the signaler died") from None
        return times

    def stop(self) -> None:
        super().stop()
        self._conn.close()


def linked_signaler(gpu: SimGpu, node: str | Path, cgroup: str | Path | None, duration_ns: int,
                    wait_fd: int = -1) -> tuple[int, Signaler]:
    """A new syncobj of @gpu's file, and a Signaler on @node in @cgroup
    whose jobs put their fences in it (and wait on the syncobj behind
    @wait_fd, if any)."""
    handle = gpu.syncobj_create()
    fd = gpu.syncobj_export(handle)
    try:
        return handle, Signaler(node, cgroup, fd, duration_ns, wait_fd)
    finally:
        os.close(fd)


def waited_jobs(gpu: SimGpu, link: int, signalers: list[Signaler], duration_ns: int,
                seconds: float, pairs: list[tuple[int, int]] | None = None) -> int:
    """Jobs of @duration_ns of @gpu's file, each waiting on syncobj @link
    after each of @signalers queued a job, completed within @seconds. For
    each completed job but the last, appends to @pairs the time from the
    last signaler's job's queueing to its own, and the time that job
    waited in its queue, in ns."""
    done = 0
    end = time.monotonic() + seconds
    waiter: JobTimes | None = None
    while (left := end - time.monotonic()) > 0:
        signal: JobTimes | None = None
        try:
            for signaler in signalers:
                signal = signaler.submit(timeout_s=left)
        except TimeoutError:
            break
        if pairs is not None and waiter is not None and signal is not None:
            pairs.append((waiter.queued_ns - signal.queued_ns, signal.wait_ns))
        seqno = gpu.submit(duration_ns, wait_for=link)
        try:
            waiter = gpu.wait(seqno, timeout_ns=max(1, int((end - time.monotonic()) * 1e9)))
        except OSError:
            break  # the window ended with the job still waiting
        done += 1
    return done


def _main(argv: list[str]) -> None:
    """``python tests/simgpu.py NODE [JOB_MS]``: keeps four jobs of JOB_MS
    (default 2) queued on @NODE until killed, a load for tools/drm-check.sh."""
    import threading

    job_ns = int(float(argv[1]) * 1e6) if len(argv) > 1 else 2_000_000
    _saturate(argv[0], None, job_ns, 4, 0, 0, threading.Event(), threading.Event())  # type: ignore[arg-type]


if __name__ == "__main__":
    import sys

    _main(sys.argv[1:])
