"""The cgroup v2 tree: find the mount, create and remove groups, enable the
``gpu`` controller along a path, and read and write ``gpu.*`` files through
:mod:`pycgpu.formats`."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

from . import formats

CONTROLLER = "gpu"
DEFAULT_MOUNT = Path("/sys/fs/cgroup")


class CgroupError(OSError):
    """A cgroup operation the kernel refused; the message names the file and the value."""


def find_mount(mountinfo: Path = Path("/proc/self/mountinfo")) -> Path:
    """The first cgroup2 mount point, from /proc/self/mountinfo."""
    try:
        text = mountinfo.read_text()
    except OSError as e:
        raise CgroupError(e.errno, f"cannot read {mountinfo}: {e.strerror}") from None
    for line in text.splitlines():
        # ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPER
        pre, _, post = line.partition(" - ")
        if post.split(" ", 1)[0] == "cgroup2":
            return Path(pre.split(" ")[4].replace("\\040", " "))
    raise CgroupError(errno.ENOENT, "no cgroup2 file system is mounted (cgroup v1 host?)")


def _refusal(e: OSError, path: Path, value: str) -> CgroupError:
    reasons = {
        errno.EINVAL: "invalid value",
        errno.ERANGE: "value out of range",
        errno.EACCES: "permission denied",
        errno.EPERM: "operation not permitted",
        errno.ENOENT: "no such file (is the gpu controller enabled for this cgroup?)",
        errno.ENODEV: "no such device",
        errno.EBUSY: "busy",
        errno.ENOTSUP: "not supported",
    }
    why = reasons.get(e.errno or 0, e.strerror or str(e))
    return CgroupError(e.errno or 0, f"writing {value!r} to {path}: {why}")


class Cgroup:
    """One cgroup directory under a cgroup2 mount."""

    def __init__(self, mount: Path, relpath: str | Path = "") -> None:
        self.mount = Path(mount)
        rel = Path(str(relpath).strip("/"))
        if ".." in rel.parts:
            raise ValueError(f"cgroup path {relpath!s} must not contain '..'")
        self.relpath = rel
        self.path = self.mount / rel

    def __repr__(self) -> str:
        return f"Cgroup({'/' + str(self.relpath) if str(self.relpath) != '.' else '/'})"

    @property
    def name(self) -> str:
        return "/" + ("" if str(self.relpath) == "." else str(self.relpath))

    @property
    def is_root(self) -> bool:
        return self.path == self.mount

    @property
    def parent(self) -> Cgroup | None:
        if self.is_root:
            return None
        return Cgroup(self.mount, self.relpath.parent)

    def child(self, name: str) -> Cgroup:
        return Cgroup(self.mount, self.relpath / name)

    def exists(self) -> bool:
        return self.path.is_dir()

    def children(self) -> Iterator[Cgroup]:
        for entry in sorted(os.scandir(self.path), key=lambda e: e.name):
            if entry.is_dir(follow_symlinks=False):
                yield self.child(entry.name)

    # raw files ---------------------------------------------------------------

    def read(self, name: str) -> str:
        path = self.path / name
        try:
            return path.read_text()
        except OSError as e:
            raise CgroupError(e.errno or 0, f"reading {path}: {e.strerror}") from None

    def write(self, name: str, value: str) -> None:
        """One write(2) of @value, as the kernel wants each key set separately."""
        path = self.path / name
        try:
            fd = os.open(path, os.O_WRONLY)
        except OSError as e:
            raise _refusal(e, path, value) from None
        try:
            os.write(fd, value.encode())
        except OSError as e:
            raise _refusal(e, path, value) from None
        finally:
            os.close(fd)

    # structure ---------------------------------------------------------------

    def controllers(self) -> set[str]:
        return set(self.read("cgroup.controllers").split())

    def subtree_control(self) -> set[str]:
        return set(self.read("cgroup.subtree_control").split())

    def create(self) -> None:
        """Create this cgroup and its missing parents, enabling the gpu
        controller in every ancestor's cgroup.subtree_control."""
        chain: list[Cgroup] = []
        cg: Cgroup | None = self
        while cg is not None and not cg.is_root:
            chain.append(cg)
            cg = cg.parent
        for cg in reversed(chain):
            parent = cg.parent
            assert parent is not None
            parent.enable_controller()
            if not cg.exists():
                try:
                    cg.path.mkdir()
                except FileExistsError:
                    pass
                except OSError as e:
                    raise CgroupError(e.errno or 0, f"creating {cg.path}: {e.strerror}") from None

    def enable_controller(self, controller: str = CONTROLLER) -> None:
        if controller in self.subtree_control():
            return
        if controller not in self.controllers():
            raise CgroupError(
                errno.ENOENT,
                f"the {controller} controller is not available in {self.path} "
                f"(kernel without CONFIG_CGROUP_GPU, or not enabled in the parent)",
            )
        self.write("cgroup.subtree_control", f"+{controller}")

    def remove(self, recursive: bool = False) -> None:
        if recursive:
            for child in self.children():
                child.remove(recursive=True)
        try:
            self.path.rmdir()
        except OSError as e:
            raise CgroupError(e.errno or 0, f"removing {self.path}: {e.strerror}") from None

    def procs(self) -> list[int]:
        return [int(p) for p in self.read("cgroup.procs").split()]

    def add_proc(self, pid: int) -> None:
        self.write("cgroup.procs", str(pid))

    # gpu.* -------------------------------------------------------------------

    def weights(self) -> formats.Weights:
        return formats.parse_weight(self.read("gpu.weight"))

    def set_weight(self, weight: int | None, dev: formats.DevT | None = None) -> None:
        self.write("gpu.weight", formats.format_weight_write(weight, dev))

    def priority(self) -> int:
        return formats.parse_int(self.read("gpu.priority"), "gpu.priority")

    def set_priority(self, priority: int) -> None:
        self.write("gpu.priority", str(formats.check_priority(priority)))

    def priority_effective(self) -> int:
        return formats.parse_int(self.read("gpu.priority.effective"), "gpu.priority.effective")
