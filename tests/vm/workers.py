"""Child processes that join a cgroup and use a DRM node on request, so that
the VM tests can allocate as tasks of any cgroup and pass buffers between
processes: dumb buffers on a card node, simgpu's own buffers (in its
simulated VRAM with flags) on a simgpu render node."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
from multiprocessing.connection import Connection
from multiprocessing.reduction import recv_handle, send_handle
from pathlib import Path
from typing import Any

from drmtest import BufferNode
from simgpu import SimGpu

from pycgpu.core.drm import driver_version

PAGE = os.sysconf("SC_PAGE_SIZE")


def _serve(conn: Connection, cgroup: Path, node: str) -> None:
    (cgroup / "cgroup.procs").write_text(str(os.getpid()))
    version = driver_version(Path(node))
    drm = SimGpu(node) if version is not None and version.name == "simgpu" else BufferNode(node)
    while True:
        op, args = conn.recv()
        try:
            if op == "alloc":  # bytes, a whole number of pages
                if isinstance(drm, SimGpu):
                    result: Any = drm.gem_create(args[0], args[1] if len(args) > 1 else 0)[0]
                else:
                    result = drm.create_dumb(PAGE // 4, args[0] // PAGE, 32).handle
            elif op == "placement":
                assert isinstance(drm, SimGpu)
                result = drm.gem_info(args[0])
            elif op == "free":
                if isinstance(drm, SimGpu):
                    drm.gem_close(args[0])
                else:
                    drm.destroy_dumb(args[0])
                result = None
            elif op == "export":
                fd = drm.prime_handle_to_fd(args[0])
                conn.send((True, None))
                send_handle(conn, fd, args[1])
                os.close(fd)
                continue
            elif op == "import":
                fd = recv_handle(conn)
                result = drm.prime_fd_to_handle(fd)
                os.close(fd)
            elif op == "move":
                (Path(args[0]) / "cgroup.procs").write_text(str(os.getpid()))
                result = None
            elif op == "exit":
                conn.send((True, None))
                return
            else:
                raise ValueError(op)
            conn.send((True, result))
        except OSError as e:
            conn.send((False, e.errno))


class Worker:
    """A process in @cgroup with @node open. Methods return the result or
    raise OSError with the errno the kernel gave."""

    def __init__(self, cgroup: Path, node: str | Path) -> None:
        self.conn, child = mp.Pipe()
        self.proc = mp.get_context("fork").Process(
            target=_serve, args=(child, Path(cgroup), str(node)), daemon=True
        )
        self.proc.start()

    def _call(self, op: str, *args: Any) -> Any:
        self.conn.send((op, args))
        ok, value = self.conn.recv()
        if not ok:
            raise OSError(value, os.strerror(value))
        return value

    def alloc(self, size: int, flags: int = 0) -> int:
        """A buffer of @size bytes (on simgpu: with gem_create's @flags)."""
        return self._call("alloc", size, flags) if flags else self._call("alloc", size)

    def placement(self, handle: int) -> int:
        """simgpu: where buffer @handle is (simgpu.PLACEMENT_VRAM or _SYSTEM)."""
        return self._call("placement", handle)

    def free(self, handle: int) -> None:
        self._call("free", handle)

    def move(self, cgroup: Path) -> None:
        self._call("move", str(cgroup))

    def give(self, handle: int, other: Worker) -> int:
        """Export @handle as a DMA-BUF, pass it to @other, which imports it."""
        self.conn.send(("export", (handle, other.proc.pid)))
        ok, value = self.conn.recv()
        if not ok:
            raise OSError(value, os.strerror(value))
        other.conn.send(("import", ()))
        fd = recv_handle(self.conn)
        send_handle(other.conn, fd, other.proc.pid)
        os.close(fd)
        ok, value = other.conn.recv()
        if not ok:
            raise OSError(value, os.strerror(value))
        return value

    def close(self) -> None:
        if self.proc.is_alive():
            with contextlib.suppress(EOFError, OSError):
                self._call("exit")
            self.proc.join(10)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join()

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
