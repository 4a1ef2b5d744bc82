"""The cgroup v2 tree: find the mount, create and remove groups, enable the
``gpu`` controller along a path, and read and write ``gpu.*`` files through
:mod:`pycgpu.core.formats`.

Every change to the file system goes through three module functions,
:func:`_mkdir`, :func:`_rmdir` and :func:`_write_file`: the host tests replace
them with a fake kernel that gives plain files the semantics of cgroupfs."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from pathlib import Path, PurePath
from typing import TypeVar

from . import formats
from .errors import Error

T = TypeVar("T")
V = TypeVar("V")

CONTROLLER = "gpu"
# the kernel's device-memory controller (Linux 6.14+), enabled beside gpu where it exists
DMEM = "dmem"
DEFAULT_MOUNT = Path("/sys/fs/cgroup")


NAME_MAX = 255  # bytes in one path component (cgroupfs: kernfs, like any Linux fs)
PATH_MAX = 4096  # bytes in a path given to the kernel, its final NUL included
# bytes kept after a group's directory for "/" and the name of an interface
# file opened in it (the longest pycgpu opens, gpu.memory.events.local, is 23)
FILE_ROOM = 32


READ, WRITE, MKDIR, RMDIR = "read", "write", "mkdir", "rmdir"
# InvalidPath.reason: an absolute path under the usual mount, another root given
OUTSIDE_ROOT = "outside-root"


class CgroupError(Error, OSError):
    """A cgroup operation the kernel refused; the message names the file and
    the value. @op says what failed (:data:`READ` a file, :data:`WRITE` one,
    :data:`MKDIR`, :data:`RMDIR`; empty: something else) and @file on which
    path, so that a caller can tell a refused value from a file it could not
    read, whatever the errno."""

    def __init__(self, code: int, message: str, op: str = "",
                 file: str | Path | None = None) -> None:
        super().__init__(code, message)
        self.op = op
        self.file = None if file is None else Path(file)


class GroupMissing(CgroupError, FileNotFoundError):
    """A group that does not exist (or went away) where one was listed."""


class DelegatedRefusal(CgroupError):
    """A write to a delegated group's own interface file: the message says
    who may set it, so no generic fix applies."""


class InvalidPath(Error, ValueError):
    """A cgroup path pycgpu refuses before touching anything: ``..``, a
    component the kernel cannot take, or an absolute path outside the root."""


def find_mount(mountinfo: Path = Path("/proc/self/mountinfo")) -> Path:
    """The first cgroup2 mount point, from /proc/self/mountinfo."""
    from .mountinfo import parse as parse_mountinfo

    try:
        text = mountinfo.read_bytes().decode(errors="surrogateescape")
    except OSError as e:
        raise CgroupError(e.errno or 0, f"cannot read {mountinfo}: {e.strerror}", READ,
                          mountinfo) from None
    for mount in parse_mountinfo(text):
        if mount.fstype == "cgroup2":
            return Path(mount.mount_point)
    raise CgroupError(errno.ENOENT, "no cgroup2 file system is mounted (cgroup v1 host?)")


def check_relpath(relpath: str | PurePath, mount: str | PurePath | None = None) -> Path:
    """@relpath (relative to a cgroup root, leading and trailing / ignored)
    as a Path, or :class:`InvalidPath`: no ``..``, every component a name
    cgroupfs takes (at most 255 bytes, no NUL, no newline), and the whole
    short enough that the path of a file in the group, @mount (the root's
    mount point, when given) / @relpath / an interface file's name
    (:data:`FILE_ROOM` bytes kept), is shorter than PATH_MAX: the kernel
    would refuse it with ENAMETOOLONG after the parents are made. Every other
    name is kept as given (``.hidden``, ``..foo``, ``...``); only ``.``
    components and repeated slashes go, as they name no other group. The
    root is ``Path(".")``, whose ``parts`` are empty."""
    text = str(relpath)
    rel = Path(text.strip("/"))
    what = f"cgroup path {formats.shown(text)}"
    for part in rel.parts:
        if part == "..":
            raise InvalidPath(f"{what} must not contain '..'")
        if "\0" in part or "\n" in part:
            raise InvalidPath(f"{what} has a NUL or newline character")
        size = len(part.encode(errors="surrogateescape"))
        if size > NAME_MAX:
            raise InvalidPath(f"{what}: the component {formats.shown(part)} is {size} bytes "
                              f"long, the limit is {NAME_MAX}")
    size = len(str(rel).encode(errors="surrogateescape"))
    limit = PATH_MAX - 1 - FILE_ROOM
    if mount is not None:
        limit -= len(str(mount).rstrip("/").encode(errors="surrogateescape")) + 1
    if size > limit:
        raise InvalidPath(f"{what} is {size} bytes long, the limit is {max(limit, 0)}")
    return rel


def resolve_path(mount: Path, text: str) -> Path:
    """The one rule for a PATH argument, as every command takes it: relative
    to the cgroup root @mount, with or without a leading ``/`` (the form
    /proc/PID/cgroup shows), or an absolute path that begins with @mount.
    An absolute path under the usual mount point /sys/fs/cgroup when the
    root is elsewhere is refused rather than created inside the root, and
    so is ``..``. Returns the path relative to @mount (:func:`check_relpath`'s
    Path, which :class:`Cgroup` takes as it is: one path type from the
    argument to the writes)."""
    root = str(mount).rstrip("/") or "/"
    if root != "/" and (text == root or text.rstrip("/") == root):
        return Path(".")
    if root != "/" and text.startswith(root + "/"):
        rel = text[len(root) + 1:]
    else:
        default = str(DEFAULT_MOUNT)
        if root != default and (text.rstrip("/") == default or text.startswith(default + "/")):
            raise InvalidPath(
                f"{formats.shown(text)} is under {default}, but the cgroup root is {root}: "
                f"give the path relative to the root").because(OUTSIDE_ROOT, mount=default)
        rel = text
    return check_relpath(rel, mount)


def read_interface(name: str | Path, dir_fd: int | None = None) -> str | None:
    """The one reader of cgroup interface files: the text of @name (relative
    to @dir_fd when given), or None if the file does not exist (or its group
    went away while being read). Raises :class:`CgroupError` for other read
    errors and for content that is not UTF-8 text."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise CgroupError(e.errno or 0, f"reading {name}: {e.strerror}", READ, name) from None
    try:
        data = os.read(fd, 4096)
        if len(data) == 4096:  # a big file (many devices): keep reading
            chunks = [data]
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
            data = b"".join(chunks)
    except OSError as e:
        if e.errno == errno.ENODEV:  # the group went away between open and read
            return None
        raise CgroupError(e.errno or 0, f"reading {name}: {e.strerror}", READ, name) from None
    finally:
        os.close(fd)
    try:
        return formats.decode(data, str(name))
    except formats.FormatError as e:
        raise CgroupError(errno.EINVAL, f"reading {e}", READ, name) from None


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


def delegated_to_caller(path: Path) -> bool:
    """Is @path an interface file (not one of the delegation files) of a
    cgroup whose directory the caller owns, while the file is not the
    caller's: the root of a subtree delegated to it (cgroup v2 delegation
    hands over the directory, cgroup.procs, cgroup.threads and
    cgroup.subtree_control, never the controllers' files)?"""
    try:
        uid = os.geteuid()
        return path.parent.stat().st_uid == uid and path.stat().st_uid != uid
    except OSError:
        return False


def _refusal(e: OSError, path: Path, value: str) -> CgroupError:
    code = e.errno or 0
    if code == errno.ENOENT:
        why = _missing_file(path)
    elif code == errno.EBUSY and path.name == "cgroup.procs":
        why = "busy (the group has controllers enabled for its children: use a leaf group)"
    elif code == errno.EOPNOTSUPP and path.name == "gpu.weight":
        why = ("the device has no scheduler that follows the gpu controller "
               "(gpu.stat shows sched=0 for it): a weight could not act there")
    elif code == errno.EOPNOTSUPP and path.name == "gpu.max":
        why = ("no engine of the device can hold work back, which a cap needs (its queues "
               "are scheduled by firmware or by the driver per queue: the kernel README's "
               "driver table says where gpu.max is enforced)")
    elif code == errno.EBUSY and path.name == "cgroup.subtree_control":
        why = "busy (the group has processes: move them into a leaf group first)"
    elif code in (errno.EACCES, errno.EPERM) and delegated_to_caller(path):
        return DelegatedRefusal(
            code, f"writing {value!r} to {path}: {_REASONS[code]}: {path.parent} is delegated "
            f"to you, and a delegated group's own {path.name} is set by the owner of its "
            f"parent; you may set it on the groups you create below it", WRITE, path)
    else:
        why = _REASONS.get(code, e.strerror or str(e))
    return CgroupError(code, f"writing {value!r} to {path}: {why}", WRITE, path)


MOUNTINFO = Path("/proc/self/mountinfo")
SYSFS = Path("/sys")


def sysfs_of(mount: Path) -> Path | None:
    """The sysfs whose render nodes name a cgroup2 tree's dmem regions:
    ``/sys`` for ``/sys/fs/cgroup``, ``SYS`` for ``SYS/fs/cgroup``; /sys
    for a tree mounted anywhere else that :data:`MOUNTINFO` lists as a
    cgroup2 mount (hybrid mode's /sys/fs/cgroup/unified, a custom root);
    None otherwise (a test's fake tree, which must never read /sys)."""
    if mount.parts[-2:] == ("fs", "cgroup"):
        return mount.parent.parent
    from .mountinfo import parse as parse_mountinfo

    try:
        text = MOUNTINFO.read_bytes().decode(errors="surrogateescape")
    except OSError:
        return None
    where = os.path.normpath(mount)
    if any(m.fstype == "cgroup2" and os.path.normpath(m.mount_point) == where
           for m in parse_mountinfo(text)):
        return SYSFS
    return None


class Cgroup:
    """One cgroup directory under a cgroup2 mount. @sysfs_root: the sysfs
    whose render nodes name dmem's regions in the memory accessors (default:
    the one the tree is mounted in, or /sys for another cgroup2 mount,
    :func:`sysfs_of`)."""

    def __init__(self, mount: Path, relpath: str | PurePath = "",
                 sysfs_root: Path | None = None) -> None:
        self.mount = Path(mount)
        rel = check_relpath(relpath, self.mount)
        self.relpath = rel
        self.path = self.mount / rel
        self.sysfs_root = sysfs_root

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
        return Cgroup(self.mount, self.relpath.parent, self.sysfs_root)

    def child(self, name: str) -> Cgroup:
        return Cgroup(self.mount, self.relpath / name, self.sysfs_root)

    def exists(self) -> bool:
        return os.path.isdir(self.path)  # False, not an exception, for a too long path

    def children(self) -> Iterator[Cgroup]:
        """The child groups, by name; :class:`GroupMissing` when this group
        does not exist, :class:`CgroupError` when it cannot be listed."""
        try:
            with os.scandir(self.path) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as e:
            cls = GroupMissing if e.errno in (errno.ENOENT, errno.ENOTDIR) else CgroupError
            raise cls(e.errno or 0, f"reading {self.path}: {e.strerror}", READ,
                      self.path) from None
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                yield self.child(entry.name)

    # raw files ---------------------------------------------------------------

    def has(self, name: str) -> bool:
        """Whether the interface file @name exists (a knob this kernel has and
        whose controller is enabled for this group)."""
        return os.path.isfile(self.path / name)

    def read(self, name: str) -> str:
        path = self.path / name
        text = read_interface(path)
        if text is None:
            raise CgroupError(errno.ENOENT, f"reading {path}: {_missing_file(path)}", READ, path)
        return text

    def parsed(self, name: str, parse: Callable[[str], T]) -> T:
        """@parse applied to the text of @name; a text that does not parse is
        a :class:`CgroupError` naming the file (the kernel wrote something
        pycgpu does not understand)."""
        text = self.read(name)
        try:
            return parse(text)
        except formats.FormatError as e:
            raise CgroupError(errno.EINVAL, f"reading {self.path / name}: {e}", READ,
                              self.path / name) from None

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
        controller (unless the kernel has dmem and no gpu controller), and
        the dmem controller where the kernel has it, in every ancestor's
        cgroup.subtree_control. Returns the groups it created, outermost
        first."""
        root = self.ancestors()[0].controllers()
        gpu = CONTROLLER in root or DMEM not in root
        created: list[Cgroup] = []
        for cg in self.ancestors()[1:]:
            parent = cg.parent
            assert parent is not None
            if gpu:
                parent.enable_controller()
            if DMEM in parent.controllers():
                parent.enable_controller(DMEM)
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
            raise CgroupError(e.errno or 0, f"creating {self.path}: {e.strerror}", MKDIR,
                              self.path) from None
        return True

    def enable_controller(self, controller: str = CONTROLLER) -> None:
        if controller in self.subtree_control():
            return
        if controller not in self.controllers():
            raise CgroupError(
                errno.ENOENT,
                f"the {controller} controller is not available in {self.path} "
                f"(kernel without CONFIG_CGROUP_{controller.upper()}, or not enabled in "
                f"the parent)",
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
            raise CgroupError(e.errno or 0, f"removing {self.path}: {why}", RMDIR,
                              self.path) from None

    def procs(self) -> list[int]:
        return [int(p) for p in self.read("cgroup.procs").split()]

    def add_proc(self, pid: int) -> None:
        self.write("cgroup.procs", str(pid))

    # gpu.* -------------------------------------------------------------------

    def weights(self) -> formats.Weights:
        return self.parsed("gpu.weight", formats.parse_weight)

    def set_weight(self, weight: int | None, dev: formats.DevT | None = None) -> None:
        self.write("gpu.weight", formats.format_weight_write(weight, dev))

    def caps(self) -> formats.Caps:
        """gpu.max: the default cap and the per-device overrides."""
        return self.parsed("gpu.max", formats.parse_max)

    def set_cap(self, cap: formats.Cap | None, dev: formats.DevT | None = None) -> None:
        """Write gpu.max's default line (dev None) or a device's override;
        cap None drops the override, ``Cap()`` lifts the cap."""
        self.write("gpu.max", formats.format_max_write(cap, dev))

    def priority(self) -> formats.Priority:
        """gpu.priority: a number, or :data:`pycgpu.core.formats.UNSET` when
        the group has none of its own (it reads ``default``)."""
        return self.parsed("gpu.priority", formats.parse_priority)

    def set_priority(self, priority: formats.Priority) -> None:
        """Write gpu.priority; :data:`pycgpu.core.formats.UNSET` writes
        ``default`` (a kernel before it refuses that: EINVAL)."""
        self.write("gpu.priority", formats.format_priority(priority))

    def priority_effective(self) -> int:
        return self.parsed("gpu.priority.effective", formats.parse_int)

    # GPU memory per device: gpu.memory.* (6.12 series), or on a kernel whose
    # memory is dmem's, the dmem.* line of each device's only region
    # (pycgpu.core.memory; a device with several regions is left out: name
    # them with memory.detect and model.memory)

    def _dmem_devices(self) -> dict[str, formats.DevT]:
        """dmem's region names of the devices that have one region only, by
        the render nodes of :attr:`sysfs_root` or :func:`sysfs_of` the
        tree; none without either (these accessors serve tests and
        benchmarks; a program names regions with memory.detect)."""
        from .devices import discover
        from .memory import detect

        sysfs = self.sysfs_root or sysfs_of(self.mount)
        regions = detect(self.mount, discover(sysfs)) if sysfs is not None else None
        if regions is None:
            return {}
        return {r.kernel_key: r.dev for r in regions.regions
                if r.dev is not None and r.key == str(r.dev)}

    def _dmem_kernel(self) -> bool:
        """Whether the kernel's GPU memory is dmem's (no gpu.memory.* on the root)."""
        root = Cgroup(self.mount)
        return not root.has("gpu.memory.current") and DMEM in root.controllers()

    def _memory(self, what: str, parse: Callable[[str], dict[formats.DevT, V]],
                parse_region: Callable[[str], dict[str, V]]) -> dict[formats.DevT, V]:
        if self.has(f"gpu.memory.{what}") or not self._dmem_kernel():
            return self.parsed(f"gpu.memory.{what}", parse)
        values = self.parsed(f"dmem.{what}", parse_region)
        return {dev: values[key] for key, dev in self._dmem_devices().items() if key in values}

    def memory_max(self) -> dict[formats.DevT, int | None]:
        return self._memory("max", formats.parse_flat_keyed, formats.parse_region_keyed)

    def set_memory_max(self, dev: formats.DevT, value: int | None) -> None:
        if self.has("gpu.memory.max") or not self._dmem_kernel():
            self.write("gpu.memory.max", formats.format_flat_keyed_write(dev, value))
            return
        for key, owner in self._dmem_devices().items():
            if owner == dev:
                self.write("dmem.max", formats.format_region_keyed_write(key, value))
                return
        raise CgroupError(errno.ENOENT, f"{dev} has no dmem region of its own in "
                                        f"{self.mount}/dmem.capacity", WRITE,
                          self.path / "dmem.max")

    def memory_current(self) -> dict[formats.DevT, int | None]:
        return self._memory("current", formats.parse_flat_keyed, formats.parse_region_keyed)

    def memory_peak(self) -> dict[formats.DevT, int | None]:
        return self._memory("peak", formats.parse_flat_keyed, formats.parse_region_keyed)

    def memory_events(self, local: bool = False) -> dict[formats.DevT, dict[str, int]]:
        what = "events.local" if local else "events"
        return self._memory(what, formats.parse_nested_keyed, formats.parse_region_nested_keyed)

    def stat(self) -> dict[formats.DevT, dict[str, int]]:
        return self.parsed("gpu.stat", formats.parse_nested_keyed)
