"""The cgroup v2 tree: find the mount, create and remove groups, enable the
``gpu`` controller along a path, and read and write ``gpu.*`` files through
:mod:`pycgpu.formats`.

Every change to the file system goes through three module functions,
:func:`_mkdir`, :func:`_rmdir` and :func:`_write_file`: the host tests replace
them with a fake kernel that gives plain files the semantics of cgroupfs."""

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


def _mkdir(path: Path) -> None:
    os.mkdir(path)


def _rmdir(path: Path) -> None:
    os.rmdir(path)


def _write_file(path: Path, data: bytes) -> None:
    """One open(2) and one write(2), as cgroupfs takes one key per write."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


_REASONS = {
    errno.EINVAL: "invalid value",
    errno.ERANGE: "out of range",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.ENODEV: "no such device",
    errno.EBUSY: "busy",
    errno.ENOTSUP: "not supported",
}


def _missing_file(path: Path) -> str:
    """Why a cgroup interface file does not exist."""
    group = path.parent
    if not group.is_dir():
        return f"no such cgroup {group}"
    if path.name.startswith("gpu.memory."):
        return (
            f"the gpu controller is not enabled for {group} "
            f"(or this kernel lacks gpu.memory.*)"
        )
    if path.name.startswith("gpu."):
        return f"the gpu controller is not enabled for {group}"
    return "no such file"


def _refusal(e: OSError, path: Path, value: str) -> CgroupError:
    code = e.errno or 0
    if code == errno.ENOENT:
        why = _missing_file(path)
    elif code == errno.EBUSY and path.name == "cgroup.procs":
        why = "busy (the group has controllers enabled for its children: use a leaf group)"
    elif code == errno.EBUSY and path.name == "cgroup.subtree_control":
        why = "busy (the group has processes: move them into a leaf group first)"
    else:
        why = _REASONS.get(code, e.strerror or str(e))
    return CgroupError(code, f"writing {value!r} to {path}: {why}")


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

    def has(self, name: str) -> bool:
        """Whether the interface file @name exists (a knob this kernel has and
        whose controller is enabled for this group)."""
        return (self.path / name).is_file()

    def read(self, name: str) -> str:
        path = self.path / name
        try:
            return path.read_text()
        except OSError as e:
            why = _missing_file(path) if e.errno == errno.ENOENT else e.strerror
            raise CgroupError(e.errno or 0, f"reading {path}: {why}") from None

    def write(self, name: str, value: str) -> None:
        """One write(2) of @value, as the kernel wants each key set separately."""
        path = self.path / name
        try:
            _write_file(path, value.encode())
        except OSError as e:
            raise _refusal(e, path, value) from None

    # structure ---------------------------------------------------------------

    def controllers(self) -> set[str]:
        return set(self.read("cgroup.controllers").split())

    def subtree_control(self) -> set[str]:
        return set(self.read("cgroup.subtree_control").split())

    def ancestors(self) -> list[Cgroup]:
        """The path from the root down to this group, both included."""
        chain: list[Cgroup] = []
        cg: Cgroup | None = self
        while cg is not None:
            chain.append(cg)
            cg = cg.parent
        return chain[::-1]

    def create(self) -> list[Cgroup]:
        """Create this cgroup and its missing parents, enabling the gpu
        controller in every ancestor's cgroup.subtree_control. Returns the
        groups it created, outermost first."""
        created: list[Cgroup] = []
        for cg in self.ancestors()[1:]:
            parent = cg.parent
            assert parent is not None
            parent.enable_controller()
            if cg.mkdir():
                created.append(cg)
        return created

    def mkdir(self) -> bool:
        """Create this one directory; False if it already existed."""
        if self.exists():
            return False
        try:
            _mkdir(self.path)
        except FileExistsError:
            return False
        except OSError as e:
            raise CgroupError(e.errno or 0, f"creating {self.path}: {e.strerror}") from None
        return True

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
            _rmdir(self.path)
        except OSError as e:
            why = {
                errno.EBUSY: "the group still has processes (move them out first)",
                errno.ENOTEMPTY: "the group has child groups",
            }.get(e.errno or 0, e.strerror)
            raise CgroupError(e.errno or 0, f"removing {self.path}: {why}") from None

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

    def memory_max(self) -> dict[formats.DevT, int | None]:
        return formats.parse_flat_keyed(self.read("gpu.memory.max"))

    def set_memory_max(self, dev: formats.DevT, value: int | None) -> None:
        self.write("gpu.memory.max", formats.format_flat_keyed_write(dev, value))

    def memory_current(self) -> dict[formats.DevT, int | None]:
        return formats.parse_flat_keyed(self.read("gpu.memory.current"))

    def memory_peak(self) -> dict[formats.DevT, int | None]:
        return formats.parse_flat_keyed(self.read("gpu.memory.peak"))

    def memory_events(self, local: bool = False) -> dict[formats.DevT, dict[str, int]]:
        name = "gpu.memory.events.local" if local else "gpu.memory.events"
        return formats.parse_nested_keyed(self.read(name))

    def stat(self) -> dict[formats.DevT, dict[str, int]]:
        return formats.parse_nested_keyed(self.read("gpu.stat"))
