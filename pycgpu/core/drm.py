"""DRM ioctls through cffi in ABI mode (no compiler at install time).

The structs are declared with ``ffi.cdef`` exactly as in the kernel's
``include/uapi/drm/drm.h`` and ``drm_mode.h``; cffi lays them out with the
platform's C ABI, so their sizes (and hence the ioctl numbers, which encode
the size) are right on every architecture.

The ioctl itself goes through :func:`fcntl.ioctl` with the cffi struct's
memory as a mutable buffer, not through libc's ``ioctl`` via
``ffi.dlopen(None)``: ``ioctl`` is variadic, and calling variadic functions
in cffi's ABI mode is not portable (arm64 Darwin-style ABIs pass variadic
arguments differently), while :func:`fcntl.ioctl` reports failures as
:class:`OSError` with the errno, releases the GIL, and needs no symbol lookup.
For buffers of up to 1024 bytes CPython copies the struct into a temporary
and back; that is fine here because the pointers inside the structs (the
``drm_version`` strings) point at memory cffi owns.

Ioctl numbers follow ``_IOC(dir, type, nr, size)`` of
``include/uapi/asm-generic/ioctl.h`` (``dir << 30 | size << 16 | type << 8 |
nr``, type ``'d'``). On x86_64:

====================================  ==========  ================================
ioctl                                 number      argument
====================================  ==========  ================================
DRM_IOCTL_VERSION                     0xC0406400  struct drm_version (64 bytes)
====================================  ==========  ================================

That is the only ioctl pycgpu itself needs (the driver of a render node).
The test suite and the benchmarks declare more on the same :data:`ffi` and
register their names in :data:`IOCTL_NAMES` (``tests/drmtest.py``: dumb
buffers, PRIME, GEM_CLOSE; ``tests/simgpu.py``: the simulated GPU).

Every failure is a :class:`DrmError` (an :class:`OSError`) that names the
node and the ioctl.
"""

from __future__ import annotations

import errno
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from cffi import FFI

from .errors import Error

ffi = FFI()
ffi.cdef(
    """
    struct drm_version {
        int version_major;
        int version_minor;
        int version_patchlevel;
        size_t name_len;
        char *name;
        size_t date_len;
        char *date;
        size_t desc_len;
        char *desc;
    };
    """
)

# include/uapi/asm-generic/ioctl.h
_IOC_NRBITS, _IOC_TYPEBITS, _IOC_SIZEBITS = 8, 8, 14
_IOC_NRSHIFT = 0
_IOC_TYPESHIFT = _IOC_NRSHIFT + _IOC_NRBITS
_IOC_SIZESHIFT = _IOC_TYPESHIFT + _IOC_TYPEBITS
_IOC_DIRSHIFT = _IOC_SIZESHIFT + _IOC_SIZEBITS
_IOC_WRITE, _IOC_READ = 1, 2
DRM_IOCTL_BASE = ord("d")


def _ioc(direction: int, nr: int, size: int) -> int:
    if size >= 1 << _IOC_SIZEBITS:
        raise ValueError(f"ioctl argument of {size} bytes does not fit _IOC")
    return (
        direction << _IOC_DIRSHIFT
        | size << _IOC_SIZESHIFT
        | DRM_IOCTL_BASE << _IOC_TYPESHIFT
        | nr << _IOC_NRSHIFT
    )


def _iow(nr: int, struct: str) -> int:
    return _ioc(_IOC_WRITE, nr, ffi.sizeof(struct))


def _iowr(nr: int, struct: str) -> int:
    return _ioc(_IOC_READ | _IOC_WRITE, nr, ffi.sizeof(struct))


DRM_IOCTL_VERSION = _iowr(0x00, "struct drm_version")

# request -> name, for DrmError (modules that declare more ioctls add theirs)
IOCTL_NAMES: dict[int, str] = {
    DRM_IOCTL_VERSION: "DRM_IOCTL_VERSION",
}


class DrmError(Error, OSError):
    """A DRM node that could not be opened or an ioctl it refused."""

    def __init__(self, code: int, node: str | Path, ioctl: str) -> None:
        super().__init__(code, f"{ioctl} on {node}: {os.strerror(code)}")
        self.node = str(node)
        self.ioctl = ioctl


@dataclass(frozen=True)
class DrmVersion:
    """What DRM_IOCTL_VERSION reports about the driver of a node."""

    name: str
    major: int
    minor: int
    patchlevel: int
    date: str
    desc: str

    @property
    def version(self) -> str:
        return f"{self.major}.{self.minor}.{self.patchlevel}"


class DrmNode:
    """An open DRM device node (``/dev/dri/renderD*`` or ``/dev/dri/card*``).

    Use it as a context manager; every method raises :class:`DrmError`.
    """

    def __init__(self, path: str | Path, flags: int = os.O_RDWR) -> None:
        self.path = str(path)
        try:
            self.fd = os.open(self.path, flags | os.O_CLOEXEC)
        except OSError as e:
            raise DrmError(e.errno or errno.EIO, self.path, "open") from None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def ioctl(self, request: int, arg: FFI.CData) -> None:
        """Issue @request with the cffi struct pointer @arg, retrying like
        libdrm's drmIoctl() when interrupted."""
        buf = ffi.buffer(arg)
        while True:
            try:
                fcntl.ioctl(self.fd, request, buf, True)
                return
            except (InterruptedError, BlockingIOError):
                continue
            except OSError as e:
                name = IOCTL_NAMES.get(request, f"ioctl {request:#x}")
                raise DrmError(e.errno or errno.EIO, self.path, name) from None

    def version(self) -> DrmVersion:
        # Any: cffi resolves a struct's fields at run time
        v: Any = ffi.new("struct drm_version *")
        self.ioctl(DRM_IOCTL_VERSION, v)  # first call: the string lengths
        bufs = [ffi.new("char[]", n + 1) for n in (v.name_len, v.date_len, v.desc_len)]
        v.name, v.date, v.desc = bufs
        self.ioctl(DRM_IOCTL_VERSION, v)

        def text(ptr: FFI.CData, n: int) -> str:
            raw = ffi.string(ptr, n)  # bytes for a char array
            return raw.decode(errors="replace") if isinstance(raw, bytes) else raw

        return DrmVersion(
            name=text(v.name, v.name_len),
            major=v.version_major,
            minor=v.version_minor,
            patchlevel=v.version_patchlevel,
            date=text(v.date, v.date_len),
            desc=text(v.desc, v.desc_len),
        )


def driver_version(path: str | Path) -> DrmVersion | None:
    """The driver version of a node, or None when it cannot be opened or asked."""
    try:
        with DrmNode(path) as node:
            return node.version()
    except DrmError:
        return None
