"""The DRM ioctls that only the tests and the benchmarks use, on top of
:mod:`pycgpu.core.drm` (which keeps what pycgpu itself needs: opening a node and
DRM_IOCTL_VERSION): dumb buffers, PRIME import and export, GEM_CLOSE.

The structs are declared on :data:`pycgpu.core.drm.ffi` exactly as in the
kernel's ``include/uapi/drm/drm.h`` and ``drm_mode.h``, and the ioctls'
names are registered in :data:`pycgpu.core.drm.IOCTL_NAMES`, so failures are
:class:`pycgpu.core.drm.DrmError` naming the ioctl. On x86_64:

====================================  ==========  ================================
ioctl                                 number      argument
====================================  ==========  ================================
DRM_IOCTL_GEM_CLOSE                   0x40086409  struct drm_gem_close (8)
DRM_IOCTL_PRIME_HANDLE_TO_FD          0xC00C642D  struct drm_prime_handle (12)
DRM_IOCTL_PRIME_FD_TO_HANDLE          0xC00C642E  struct drm_prime_handle (12)
DRM_IOCTL_MODE_CREATE_DUMB            0xC02064B2  struct drm_mode_create_dumb (32)
DRM_IOCTL_MODE_DESTROY_DUMB           0xC00464B4  struct drm_mode_destroy_dumb (4)
====================================  ==========  ================================

Dumb buffers need a node of a KMS-capable driver; on vgem they are created
on the card node (``/dev/dri/cardN``), whose GEM objects the render node
shares through PRIME.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from pycgpu.core import drm
from pycgpu.core.drm import DrmNode, ffi

ffi.cdef(
    """
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

DRM_IOCTL_GEM_CLOSE = drm._iow(0x09, "struct drm_gem_close")
DRM_IOCTL_PRIME_HANDLE_TO_FD = drm._iowr(0x2D, "struct drm_prime_handle")
DRM_IOCTL_PRIME_FD_TO_HANDLE = drm._iowr(0x2E, "struct drm_prime_handle")
DRM_IOCTL_MODE_CREATE_DUMB = drm._iowr(0xB2, "struct drm_mode_create_dumb")
DRM_IOCTL_MODE_DESTROY_DUMB = drm._iowr(0xB4, "struct drm_mode_destroy_dumb")

drm.IOCTL_NAMES.update({
    DRM_IOCTL_GEM_CLOSE: "DRM_IOCTL_GEM_CLOSE",
    DRM_IOCTL_PRIME_HANDLE_TO_FD: "DRM_IOCTL_PRIME_HANDLE_TO_FD",
    DRM_IOCTL_PRIME_FD_TO_HANDLE: "DRM_IOCTL_PRIME_FD_TO_HANDLE",
    DRM_IOCTL_MODE_CREATE_DUMB: "DRM_IOCTL_MODE_CREATE_DUMB",
    DRM_IOCTL_MODE_DESTROY_DUMB: "DRM_IOCTL_MODE_DESTROY_DUMB",
})

# drm.h: flags of DRM_IOCTL_PRIME_HANDLE_TO_FD
DRM_CLOEXEC = os.O_CLOEXEC
DRM_RDWR = os.O_RDWR


@dataclass(frozen=True)
class DumbBuffer:
    """A dumb buffer: its GEM handle, bytes per row and total bytes."""

    handle: int
    pitch: int
    size: int


class BufferNode(DrmNode):
    """A :class:`pycgpu.core.drm.DrmNode` that can also create, share and free
    buffers. Every method raises :class:`pycgpu.core.drm.DrmError`."""

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
