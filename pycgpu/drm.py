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
DRM_IOCTL_GEM_CLOSE                   0x40086409  struct drm_gem_close (8)
DRM_IOCTL_PRIME_HANDLE_TO_FD          0xC00C642D  struct drm_prime_handle (12)
DRM_IOCTL_PRIME_FD_TO_HANDLE          0xC00C642E  struct drm_prime_handle (12)
DRM_IOCTL_MODE_CREATE_DUMB            0xC02064B2  struct drm_mode_create_dumb (32)
DRM_IOCTL_MODE_DESTROY_DUMB           0xC00464B4  struct drm_mode_destroy_dumb (4)
====================================  ==========  ================================

Every failure is a :class:`DrmError` (an :class:`OSError`) that names the
node and the ioctl. Dumb buffers need a node of a KMS-capable driver; on vgem
they are created on the card node (``/dev/dri/cardN``), whose GEM objects the
render node shares through PRIME.
"""

from __future__ import annotations

import errno
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cffi import FFI

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
    struct drm_gem_close {
        uint32_t handle;
        uint32_t pad;
    };
    struct drm_prime_handle {
        uint32_t handle;
        uint32_t flags;
        int32_t fd;
    };
    struct drm_mode_create_dumb {
        uint32_t height;
        uint32_t width;
        uint32_t bpp;
        uint32_t flags;
        uint32_t handle;
        uint32_t pitch;
        uint64_t size;
    };
    struct drm_mode_destroy_dumb {
        uint32_t handle;
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
DRM_IOCTL_GEM_CLOSE = _iow(0x09, "struct drm_gem_close")
DRM_IOCTL_PRIME_HANDLE_TO_FD = _iowr(0x2D, "struct drm_prime_handle")
DRM_IOCTL_PRIME_FD_TO_HANDLE = _iowr(0x2E, "struct drm_prime_handle")
DRM_IOCTL_MODE_CREATE_DUMB = _iowr(0xB2, "struct drm_mode_create_dumb")
DRM_IOCTL_MODE_DESTROY_DUMB = _iowr(0xB4, "struct drm_mode_destroy_dumb")

IOCTL_NAMES = {
    DRM_IOCTL_VERSION: "DRM_IOCTL_VERSION",
    DRM_IOCTL_GEM_CLOSE: "DRM_IOCTL_GEM_CLOSE",
    DRM_IOCTL_PRIME_HANDLE_TO_FD: "DRM_IOCTL_PRIME_HANDLE_TO_FD",
    DRM_IOCTL_PRIME_FD_TO_HANDLE: "DRM_IOCTL_PRIME_FD_TO_HANDLE",
    DRM_IOCTL_MODE_CREATE_DUMB: "DRM_IOCTL_MODE_CREATE_DUMB",
    DRM_IOCTL_MODE_DESTROY_DUMB: "DRM_IOCTL_MODE_DESTROY_DUMB",
}

# drm.h: flags of DRM_IOCTL_PRIME_HANDLE_TO_FD
DRM_CLOEXEC = os.O_CLOEXEC
DRM_RDWR = os.O_RDWR


class DrmError(OSError):
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


@dataclass(frozen=True)
class DumbBuffer:
    """A dumb buffer: its GEM handle, bytes per row and total bytes."""

    handle: int
    pitch: int
    size: int


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

    def __enter__(self) -> DrmNode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def ioctl(self, request: int, arg: Any) -> None:
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
        v = ffi.new("struct drm_version *")
        self.ioctl(DRM_IOCTL_VERSION, v)  # first call: the string lengths
        bufs = [ffi.new("char[]", n + 1) for n in (v.name_len, v.date_len, v.desc_len)]
        v.name, v.date, v.desc = bufs
        self.ioctl(DRM_IOCTL_VERSION, v)

        def text(ptr: Any, n: int) -> str:
            return ffi.string(ptr, n).decode(errors="replace")

        return DrmVersion(
            name=text(v.name, v.name_len),
            major=v.version_major,
            minor=v.version_minor,
            patchlevel=v.version_patchlevel,
            date=text(v.date, v.date_len),
            desc=text(v.desc, v.desc_len),
        )

    def create_dumb(self, width: int, height: int, bpp: int = 32) -> DumbBuffer:
        arg = ffi.new("struct drm_mode_create_dumb *", {"width": width, "height": height,
                                                        "bpp": bpp})
        self.ioctl(DRM_IOCTL_MODE_CREATE_DUMB, arg)
        return DumbBuffer(handle=arg.handle, pitch=arg.pitch, size=arg.size)

    def destroy_dumb(self, handle: int) -> None:
        self.ioctl(DRM_IOCTL_MODE_DESTROY_DUMB,
                   ffi.new("struct drm_mode_destroy_dumb *", {"handle": handle}))

    def prime_handle_to_fd(self, handle: int, flags: int = DRM_CLOEXEC | DRM_RDWR) -> int:
        """Export a GEM handle as a DMA-BUF file descriptor (the caller closes it)."""
        arg = ffi.new("struct drm_prime_handle *", {"handle": handle, "flags": flags, "fd": -1})
        self.ioctl(DRM_IOCTL_PRIME_HANDLE_TO_FD, arg)
        return int(arg.fd)

    def prime_fd_to_handle(self, fd: int) -> int:
        """Import a DMA-BUF file descriptor as a GEM handle of this node."""
        arg = ffi.new("struct drm_prime_handle *", {"fd": fd})
        self.ioctl(DRM_IOCTL_PRIME_FD_TO_HANDLE, arg)
        return int(arg.handle)

    def gem_close(self, handle: int) -> None:
        self.ioctl(DRM_IOCTL_GEM_CLOSE, ffi.new("struct drm_gem_close *", {"handle": handle}))


def driver_version(path: str | Path) -> DrmVersion | None:
    """The driver version of a node, or None when it cannot be opened or asked."""
    try:
        with DrmNode(path) as node:
            return node.version()
    except DrmError:
        return None
