"""pycgpu.core.drm, and the buffer ioctls the tests add to it (tests/drmtest.py),
without a GPU: struct layouts, ioctl numbers, the ioctl protocol against a
fake ioctl, and the error paths."""

from __future__ import annotations

import errno
import platform

import drmtest
import pytest
from drmtest import BufferNode

from pycgpu.core import drm
from pycgpu.core.drm import DrmError, DrmNode, ffi

x86_64 = pytest.mark.skipif(platform.machine() != "x86_64",
                            reason="the documented numbers are x86_64's (size_t is 8 bytes)")


@x86_64
@pytest.mark.parametrize(
    ("module", "name", "value"),
    [(drm, "DRM_IOCTL_VERSION", 0xC0406400),
     (drmtest, "DRM_IOCTL_MODE_CREATE_DUMB", 0xC02064B2),
     (drmtest, "DRM_IOCTL_MODE_DESTROY_DUMB", 0xC00464B4),
     (drmtest, "DRM_IOCTL_PRIME_HANDLE_TO_FD", 0xC00C642D),
     (drmtest, "DRM_IOCTL_PRIME_FD_TO_HANDLE", 0xC00C642E),
     (drmtest, "DRM_IOCTL_GEM_CLOSE", 0x40086409)],
)
def test_ioctl_numbers(module, name, value):
    assert getattr(module, name) == value
    assert drm.IOCTL_NAMES[value] == name


@pytest.mark.parametrize(
    ("struct", "size"),
    [("struct drm_gem_close", 8), ("struct drm_prime_handle", 12),
     ("struct drm_mode_create_dumb", 32), ("struct drm_mode_destroy_dumb", 4)],
)
def test_fixed_width_struct_sizes(struct, size):
    assert ffi.sizeof(struct) == size


@x86_64
def test_drm_version_layout():
    assert ffi.sizeof("struct drm_version") == 64
    assert ffi.offsetof("struct drm_version", "name_len") == 16
    assert ffi.offsetof("struct drm_version", "desc") == 56


def test_ioc_encoding():
    # _IOC(dir, 'd', nr, size) = dir << 30 | size << 16 | 'd' << 8 | nr
    assert drm._ioc(3, 0x00, 64) == 0xC0406400
    assert drm._ioc(1, 0x09, 8) == 0x40086409
    with pytest.raises(ValueError, match="does not fit"):
        drm._ioc(3, 0, 1 << 14)


def test_open_missing_node_names_node(tmp_path):
    node = tmp_path / "renderD200"
    with pytest.raises(DrmError) as e:
        DrmNode(node)
    assert isinstance(e.value, OSError)
    assert e.value.errno == errno.ENOENT
    assert e.value.node == str(node) and e.value.ioctl == "open"
    assert str(node) in str(e.value)


@pytest.mark.parametrize(
    ("call", "ioctl"),
    [(lambda n: n.version(), "DRM_IOCTL_VERSION"),
     (lambda n: n.create_dumb(64, 64), "DRM_IOCTL_MODE_CREATE_DUMB"),
     (lambda n: n.destroy_dumb(1), "DRM_IOCTL_MODE_DESTROY_DUMB"),
     (lambda n: n.prime_handle_to_fd(1), "DRM_IOCTL_PRIME_HANDLE_TO_FD"),
     (lambda n: n.prime_fd_to_handle(0), "DRM_IOCTL_PRIME_FD_TO_HANDLE"),
     (lambda n: n.gem_close(1), "DRM_IOCTL_GEM_CLOSE")],
)
def test_ioctl_on_non_drm_file_names_ioctl_and_node(call, ioctl):
    with BufferNode("/dev/null") as node, pytest.raises(DrmError) as e:
        call(node)
    assert e.value.errno == errno.ENOTTY
    assert e.value.ioctl == ioctl
    assert f"{ioctl} on /dev/null: " in str(e.value)


def test_driver_version_none_when_unavailable(tmp_path):
    assert drm.driver_version(tmp_path / "renderD128") is None
    assert drm.driver_version("/dev/null") is None


def test_close_is_idempotent():
    node = DrmNode("/dev/null")
    node.close()
    node.close()
    assert node.fd == -1


class FakeDriver:
    """Stands in for fcntl.ioctl: answers like a DRM driver would."""

    def __init__(self) -> None:
        self.calls: list[int] = []
        self.interrupt_once = True

    def __call__(self, fd, request, buf, mutate):
        assert mutate is True
        self.calls.append(request)
        if self.interrupt_once:
            self.interrupt_once = False
            raise InterruptedError(errno.EINTR, "interrupted")
        if request == drm.DRM_IOCTL_VERSION:
            v = ffi.from_buffer("struct drm_version *", buf)
            v.version_major, v.version_minor, v.version_patchlevel = 1, 6, 0
            for field, text in (("name", b"i915"), ("date", b"20230929"),
                                ("desc", b"Intel Graphics")):
                ptr = getattr(v, field)
                if ptr != ffi.NULL:  # second call: copy into the caller's buffer
                    ffi.memmove(ptr, text, min(len(text), getattr(v, field + "_len")))
                setattr(v, field + "_len", len(text))
        elif request == drmtest.DRM_IOCTL_MODE_CREATE_DUMB:
            a = ffi.from_buffer("struct drm_mode_create_dumb *", buf)
            a.handle, a.pitch = 7, a.width * a.bpp // 8
            a.size = a.pitch * a.height
        elif request == drmtest.DRM_IOCTL_PRIME_HANDLE_TO_FD:
            a = ffi.from_buffer("struct drm_prime_handle *", buf)
            assert a.flags == drmtest.DRM_CLOEXEC | drmtest.DRM_RDWR
            a.fd = 42
        elif request == drmtest.DRM_IOCTL_PRIME_FD_TO_HANDLE:
            a = ffi.from_buffer("struct drm_prime_handle *", buf)
            a.handle = a.fd + 100
        elif request == drmtest.DRM_IOCTL_GEM_CLOSE:
            a = ffi.from_buffer("struct drm_gem_close *", buf)
            if a.handle != 7:
                raise OSError(errno.EINVAL, "Invalid argument")


def test_protocol_against_a_fake_driver(monkeypatch):
    fake = FakeDriver()
    monkeypatch.setattr(drm.fcntl, "ioctl", fake)
    with BufferNode("/dev/null") as node:
        v = node.version()
        assert (v.name, v.version, v.date, v.desc) == ("i915", "1.6.0", "20230929",
                                                      "Intel Graphics")
        # EINTR retried, then the two-call length protocol of DRM_IOCTL_VERSION
        assert fake.calls == [drm.DRM_IOCTL_VERSION] * 3
        buf = node.create_dumb(64, 32)
        assert buf == drmtest.DumbBuffer(handle=7, pitch=256, size=256 * 32)
        assert node.prime_handle_to_fd(buf.handle) == 42
        assert node.prime_fd_to_handle(5) == 105
        node.gem_close(7)
        with pytest.raises(DrmError, match="DRM_IOCTL_GEM_CLOSE on /dev/null"):
            node.gem_close(8)


def test_abi_mode_needs_no_compiler():
    # ABI mode: the FFI has declarations but no compiled extension module
    assert not hasattr(drm, "lib")
    assert ffi.typeof("struct drm_version *").kind == "pointer"


def test_simgpu_bindings_load_on_the_host():
    # tests/simgpu.py runs only in the VM tier and the benchmarks: at least its
    # declarations must load, and its node must have the buffer ioctls too
    import simgpu

    assert drm.IOCTL_NAMES[simgpu.SUBMIT] == "DRM_IOCTL_SIMGPU_SUBMIT"
    assert ffi.sizeof("struct drm_simgpu_wait") == 40
    assert issubclass(simgpu.SimGpu, BufferNode)
