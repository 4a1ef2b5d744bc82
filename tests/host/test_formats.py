"""The cgroup file formats of pycgpu.core.formats."""

import pytest

from pycgpu.core import formats as f
from pycgpu.core.formats import DevT, FormatError

DEV = DevT(226, 128)


def test_devt_parse_and_str():
    assert DevT.parse("226:128") == DEV
    assert str(DEV) == "226:128"
    assert DevT.parse(" 1:2 ") == DevT(1, 2)


@pytest.mark.parametrize("bad", ["", "226", "226:", ":128", "a:b", "226:128:1", "-1:2"])
def test_devt_parse_rejects(bad):
    with pytest.raises(FormatError, match="device number"):
        DevT.parse(bad)


def test_parse_weight_default_only():
    w = f.parse_weight("default 100\n")
    assert w.default == 100 and w.devices == {}
    assert w.for_device(DEV) == 100


def test_parse_weight_overrides_roundtrip():
    text = "default 50\n226:128 300\n226:129 7\n"
    w = f.parse_weight(text)
    assert w.default == 50
    assert w.devices == {DEV: 300, DevT(226, 129): 7}
    assert w.for_device(DEV) == 300
    assert w.for_device(DevT(226, 130)) == 50
    assert f.format_weight(w) == text


@pytest.mark.parametrize(
    "bad",
    ["", "100\n", "default\n", "default x\n", "226:128 5\n", "default 1\n226:128\n",
     "default 1\n226:128 x\n", "default 1\nfoo 3\n"],
)
def test_parse_weight_rejects(bad):
    with pytest.raises(FormatError):
        f.parse_weight(bad)


def test_format_weight_write():
    assert f.format_weight_write(300) == "default 300"
    assert f.format_weight_write(300, DEV) == "226:128 300"
    assert f.format_weight_write(None, DEV) == "226:128 default"
    with pytest.raises(FormatError, match="out of range"):
        f.format_weight_write(0)
    with pytest.raises(FormatError, match="out of range"):
        f.format_weight_write(10001, DEV)
    with pytest.raises(FormatError):
        f.format_weight_write(None)


@pytest.mark.parametrize("value", [-1023, 0, 1023])
def test_check_priority_accepts(value):
    assert f.check_priority(value) == value


@pytest.mark.parametrize("value", [-1024, 1024])
def test_check_priority_rejects(value):
    with pytest.raises(FormatError, match="out of range"):
        f.check_priority(value)


def test_parse_int():
    assert f.parse_int("-5\n") == -5
    with pytest.raises(FormatError, match=r"gpu\.priority"):
        f.parse_int("x", "gpu.priority")


@pytest.mark.parametrize(
    ("text", "value"),
    [("4096", 4096), ("1K", 1024), ("512M", 512 << 20), ("2G", 2 << 30), ("2g", 2 << 30),
     ("1T", 1 << 40), ("max", None), (" 7 ", 7)],
)
def test_parse_size(text, value):
    assert f.parse_size(text) == value


@pytest.mark.parametrize("bad", ["", "-1", "1.5G", "12Q", "MAX", "1 G", "0x10"])
def test_parse_size_rejects(bad):
    with pytest.raises(FormatError, match="not a size"):
        f.parse_size(bad)


def test_flat_keyed():
    text = "226:128 4096\n226:129 max\n"
    assert f.parse_flat_keyed(text) == {DEV: 4096, DevT(226, 129): None}
    assert f.format_flat_keyed_write(DEV, None) == "226:128 max"
    assert f.format_flat_keyed_write(DEV, 10) == "226:128 10"
    with pytest.raises(FormatError):
        f.parse_flat_keyed("226:128\n")
    with pytest.raises(FormatError):
        f.parse_flat_keyed("226:128 lots\n")


def test_nested_keyed():
    text = "226:128 usage_usec=10 wait_usec=2\n226:129 max=0\n"
    assert f.parse_nested_keyed(text) == {
        DEV: {"usage_usec": 10, "wait_usec": 2},
        DevT(226, 129): {"max": 0},
    }
    with pytest.raises(FormatError, match="KEY=VALUE"):
        f.parse_nested_keyed("226:128 usage_usec\n")
    with pytest.raises(FormatError):
        f.parse_nested_keyed("226:128 usage_usec=x\n")


def test_region_keyed():
    """dmem's files, as upstream's dmem.c prints them (dmemcg_limit_show)."""
    text = "drm/0000:03:00.0/vram0 1073741824\ndrm/0000:03:00.0/stolen max\ndrm/vgem/system 0\n"
    assert f.parse_region_keyed(text) == {
        "drm/0000:03:00.0/vram0": 1 << 30, "drm/0000:03:00.0/stolen": None, "drm/vgem/system": 0}
    assert f.parse_region_keyed("") == {}
    assert f.format_region_keyed_write("drm/vgem/system", None) == "drm/vgem/system max"
    assert f.format_region_keyed_write("drm/vgem/system", 4096) == "drm/vgem/system 4096"
    for bad in ("drm/vgem/system\n", "drm/vgem/system 1 2\n", "drm/vgem/system lots\n"):
        with pytest.raises(FormatError):
            f.parse_region_keyed(bad)


def test_region_nested_keyed():
    text = "drm/0000:03:00.0/vram0 max=3\ndrm/vgem/system max=0\n"
    assert f.parse_region_nested_keyed(text) == {
        "drm/0000:03:00.0/vram0": {"max": 3}, "drm/vgem/system": {"max": 0}}
    with pytest.raises(FormatError, match="KEY=VALUE"):
        f.parse_region_nested_keyed("drm/vgem/system max\n")


@pytest.mark.parametrize(
    ("value", "text"),
    [(536870912, "512M"), (1024, "1K"), (1000, "1000"), (0, "0"), (None, "max"),
     (1 << 40, "1T"), (3 << 30, "3G"), (1536, "1536"), (4096, "4K"),
     # exact where it can be typed back as a limit, the largest unit that is exact
     (1536 << 20, "1536M"), (9999 << 10, "9999K"),
     # else the largest unit with one decimal: the decimal point marks a rounded value
     (1000000, "976.6K"), (10000, "9.8K"), (12348030976, "11.5G"), (1717985280, "1.6G"),
     ((1 << 30) - 1, "1.0G"), ((1 << 20) - 1, "1.0M"), ((1 << 63) - 1, "8388608.0T")],
)
def test_format_size_human(value, text):
    assert f.format_size_human(value) == text
    if "." not in text and value is not None:  # an exact form reads back as the value
        assert f.parse_size(text) == value


@pytest.mark.parametrize("value", [0, 1000, 1536, 4096, 1717985280, 12348030976, (1 << 63) - 1,
                                   1536 << 20])
def test_format_size_exact_reads_back(value):
    assert f.parse_size(f.format_size_exact(value)) == value
    assert f.format_size_exact(1717985280) == "1677720K"


def test_check_size():
    assert f.check_size(None) is None
    assert f.check_size(f.SIZE_MAX) == f.SIZE_MAX
    with pytest.raises(FormatError, match="out of range"):
        f.check_size(f.SIZE_MAX + 1)


# gpu.max ---------------------------------------------------------------------


def test_parse_max_default_only():
    caps = f.parse_max("default max 100000\n")
    assert caps.default == f.Cap() and caps.devices == {}
    assert caps.for_device(DEV).percent is None


def test_parse_max_overrides_roundtrip():
    text = "default 30000 100000\n226:128 max 50000\n226:129 1000 1000\n"
    caps = f.parse_max(text)
    assert caps.default == f.Cap(30000, 100000) and caps.default.percent == 30
    assert caps.devices == {DEV: f.Cap(None, 50000), DevT(226, 129): f.Cap(1000, 1000)}
    assert caps.for_device(DevT(226, 130)) == caps.default
    assert caps.for_device(DevT(226, 129)).percent == 100
    assert f.format_max(caps) == text


@pytest.mark.parametrize(
    "bad",
    ["", "max 100000\n", "default\n", "default max\n", "default x 100000\n",
     "default 1000 100000 5\n", "default max 100000\n226:128\n",
     "default max 100000\n226:128 30000\n", "default max 100000\nfoo 1 2\n",
     "default -5 100000\n"],
)
def test_parse_max_rejects(bad):
    with pytest.raises(FormatError):
        f.parse_max(bad)


def test_format_max_write():
    assert f.format_max_write(f.Cap(30000)) == "default 30000 100000"
    assert f.format_max_write(f.Cap()) == "default max 100000"
    assert f.format_max_write(f.Cap(20000, 40000), DEV) == "226:128 20000 40000"
    assert f.format_max_write(None, DEV) == "226:128 default"
    with pytest.raises(FormatError):
        f.format_max_write(None)


@pytest.mark.parametrize(
    "cap", [f.Cap(999), f.Cap(30000, 999), f.Cap(30000, 1000001), f.Cap(200000, 100000)]
)
def test_format_max_write_refuses_what_the_kernel_refuses(cap):
    """The kernel's bounds (gpu.c: ERANGE), so that the library says why
    before the write does."""
    with pytest.raises(FormatError, match="out of range"):
        f.format_max_write(cap, DEV)

