"""The kernel source on the fake cgroup tree: what it reads from each group's
gpu.* files, which groups it visits, leaves, errors, rates."""

from __future__ import annotations

import pytest
from fakeproc import Clock

from pycgpu.core.formats import UNSET, DevT
from pycgpu.monitoring import AUTO, FDINFO, KERNEL, gpu_enabled_below, open_source, rates
from pycgpu.monitoring.kernel import KernelSource

I915, VGEM = DevT(226, 128), DevT(226, 129)


def fill(group, stat=None, current=None, max_=None, peak=None, events=None,
         weight=None, priority=None, effective=None):
    for name, text in (("gpu.stat", stat), ("gpu.memory.current", current),
                       ("gpu.memory.max", max_), ("gpu.memory.peak", peak),
                       ("gpu.memory.events", events), ("gpu.weight", weight),
                       ("gpu.priority", priority), ("gpu.priority.effective", effective)):
        if text is not None:
            (group / name).write_text(text)


@pytest.fixture
def tree(fake):
    """/ai (inner) with /ai/train and /ai/infer, /plain without gpu and a
    child of it, /solo a leaf."""
    fake.make("ai/train")
    fake.make("ai/infer")
    fake.make("solo")
    (fake.root / "plain" / "deeper").mkdir(parents=True)
    fill(fake.root / "ai/train",
         stat="226:128 usage_usec=2000000 wait_usec=500000\n226:129 usage_usec=0 wait_usec=0\n",
         current="226:128 1073741824\n226:129 0\n", max_="226:128 2147483648\n226:129 max\n",
         peak="226:128 1610612736\n226:129 0\n", events="226:128 max=3\n226:129 max=0\n",
         weight="default 300\n226:129 50\n", priority="10\n", effective="5\n")
    fill(fake.root / "ai", stat="226:128 usage_usec=2500000 wait_usec=600000\n",
         priority="5\n", effective="5\n")
    return fake


def test_reads_every_file_of_a_group(tree):
    s = KernelSource(tree.root).sample()
    g = s.groups["/ai/train"]
    assert (g.priority, g.priority_effective, g.leaf) == (10, 5, True)
    a, b = g.devices[I915], g.devices[VGEM]
    assert (a.gpu_time_ns, a.wait_ns, a.weight) == (2_000_000_000, 500_000_000, 300)
    assert a.memory == {"current": 1 << 30, "max": 2 << 30, "peak": 3 << 29, "limit_hits": 3}
    assert b.memory == {"current": 0, "max": None, "peak": 0, "limit_hits": 0}
    assert b.weight == 50
    assert s.errors == []


def test_a_priority_that_reads_default(tree):
    """Unset (a new group's, it inherits): UNSET, the effective one as ever;
    a file that reads neither a number nor default is an error of its own."""
    fill(tree.root / "ai/infer", stat="226:128 usage_usec=1 wait_usec=0\n",
         priority="default\n", effective="5\n")
    fill(tree.root / "solo", stat="226:128 usage_usec=1 wait_usec=0\n", priority="dflt\n",
         effective="0\n")
    s = KernelSource(tree.root).sample()
    g = s.groups["/ai/infer"]
    assert (g.priority, g.priority_effective) == (UNSET, 5)
    assert s.groups["/solo"].priority is None
    assert s.errors == [f"{tree.root}/solo/gpu.priority: gpu.priority: 'dflt' is not an integer"]


def test_visits_gpu_groups_only_and_marks_leaves(tree):
    s = KernelSource(tree.root).sample()
    assert sorted(s.groups) == ["/ai", "/ai/infer", "/ai/train", "/solo"]
    assert {p: g.leaf for p, g in s.groups.items()} == {
        "/ai": False, "/ai/infer": True, "/ai/train": True, "/solo": True}


def test_groups_without_memory_files(fake):
    fake.memory = False
    fake.make("a")
    (fake.root / "a" / "gpu.stat").write_text("226:128 usage_usec=7 wait_usec=1\n")
    du = KernelSource(fake.root).sample().groups["/a"].devices[I915]
    assert (du.gpu_time_ns, du.memory, du.weight) == (7000, {}, 100)


def test_a_malformed_file_is_reported_not_fatal(tree):
    (tree.root / "solo" / "gpu.memory.max").write_text("226:128 lots\n")
    s = KernelSource(tree.root).sample()
    assert "/solo" in s.groups and "/ai/train" in s.groups
    assert any("solo/gpu.memory.max" in e for e in s.errors)


def test_rates_over_an_interval(tree):
    src = KernelSource(tree.root)
    src.clock = clock = Clock()
    s1 = src.sample()
    fill(tree.root / "ai/train",
         stat="226:128 usage_usec=2750000 wait_usec=750000\n226:129 usage_usec=0 wait_usec=0\n")
    clock.advance(1.0)
    s2 = src.sample()
    r = rates(s1, s2)
    assert r[("/ai/train", I915)].gpu_percent == pytest.approx(75.0)
    assert r[("/ai/train", I915)].wait_percent == pytest.approx(25.0)
    assert r[("/ai/train", VGEM)].gpu_percent == 0.0
    assert rates(None, s2) == {}


def test_a_group_percent_covers_its_own_two_reads(tree):
    """A walk of many groups takes a while, not the same while twice: a
    group's percentages cover the time between its own two reads of
    gpu.stat, not the time between the starts of the walks (here every
    reading of the clock takes 1 ms in the first walk and 50 ms in the
    second, so /ai/train is reached later in the second)."""
    src = KernelSource(tree.root)
    src.clock = clock = Clock(step_s=0.001)
    s1 = src.sample()
    fill(tree.root / "ai/train",
         stat="226:128 usage_usec=3000000 wait_usec=500000\n226:129 usage_usec=0 wait_usec=0\n")
    clock.advance(2.0)
    clock.step_ns = 50_000_000
    s2 = src.sample()
    g1, g2 = s1.groups["/ai/train"], s2.groups["/ai/train"]
    assert g1.time_ns is not None and g2.time_ns is not None
    assert s1.time_ns < g1.time_ns < s1.time_ns + s1.duration_ns
    assert s2.time_ns < g2.time_ns < s2.time_ns + s2.duration_ns
    span = g2.time_ns - g1.time_ns
    assert span > s2.time_ns - s1.time_ns  # read later into the second walk
    r = rates(s1, s2)[("/ai/train", I915)]
    assert r.interval_s == span / 1e9
    assert r.gpu_percent == pytest.approx(100.0 * 1e9 / span)  # 1 s of GPU time
    assert r.gpu_percent < 100.0 * 1e9 / (s2.time_ns - s1.time_ns)


def test_counter_reset_counts_zero(tree):
    src = KernelSource(tree.root)
    src.clock = clock = Clock()
    s1 = src.sample()
    fill(tree.root / "ai/train", stat="226:128 usage_usec=10 wait_usec=0\n")  # group re-made
    clock.advance(1.0)
    assert rates(s1, src.sample())[("/ai/train", I915)].gpu_percent == 0.0


def test_auto_picks_kernel_when_gpu_is_enabled_below_the_root(tree, tmp_path):
    assert gpu_enabled_below(tree.root)
    assert open_source(AUTO, tree.root).name == KERNEL
    assert open_source(AUTO, None).name == FDINFO
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "cgroup.subtree_control").write_text("cpu memory\n")
    assert open_source(AUTO, bare).name == FDINFO
    assert open_source(FDINFO, tree.root).name == FDINFO
    with pytest.raises(ValueError):
        open_source("nvml", tree.root)


def test_root_totals_go_to_the_sample_not_to_a_group(tree):
    fill(tree.root, stat="226:128 usage_usec=7000000 wait_usec=900000 sched=1\n",
         current="226:128 3221225472\n226:129 4096\n")
    s = KernelSource(tree.root).sample()
    assert "/" not in s.groups and sorted(s.groups) == ["/ai", "/ai/infer", "/ai/train", "/solo"]
    t = s.totals[I915]
    assert (t.gpu_time_ns, t.wait_ns, t.memory) == (7 * 10**9, 900_000_000, {"current": 3 << 30})
    assert s.totals[VGEM].memory == {"current": 4096} and s.totals[VGEM].gpu_time_ns is None
    assert s.errors == []


def test_no_totals_on_a_kernel_without_root_files(tree):
    assert KernelSource(tree.root).sample().totals == {}


def test_malformed_root_totals_are_an_error_not_a_failure(tree):
    fill(tree.root, stat="226:128 usage_usec=oops\n", current="226:128 1\n")
    s = KernelSource(tree.root).sample()
    assert len(s.errors) == 1 and "gpu.stat" in s.errors[0]
    assert "/ai/train" in s.groups


def test_no_totals_from_the_top_of_a_cgroup_namespace(tree):
    """Mounted inside a cgroup namespace, the top is a non-root group (it has
    knobs): its counters are its own, not the device's."""
    fill(tree.root, stat="226:128 usage_usec=7 wait_usec=0 sched=1\n",
         current="226:128 4096\n", weight="default 100\n")
    assert KernelSource(tree.root).sample().totals == {}


# the fast path (the kernel's exact format, one regular expression per file)
# and the general parsers read the same; a text off the fast path is still read

_VALID_TEXTS = [
    ("226:128 usage_usec=5 wait_usec=1\n226:129 usage_usec=0 wait_usec=0\n",
     "226:128 4096\n226:129 0\n", "226:128 max\n226:129 8192\n", "226:128 4096\n226:129 0\n",
     "226:128 max=3\n226:129 max=0\n", "default 100\n226:129 50\n", "0\n", "-5\n", None),
    # the series' gpu.stat (sched=, gpu.max's counters) and gpu.max
    ("226:128 usage_usec=5 wait_usec=1 sched=1 nr_periods=9 nr_throttled=4 throttled_usec=70\n"
     "226:129 usage_usec=0 wait_usec=0 sched=0 nr_periods=0 nr_throttled=0 throttled_usec=0\n",
     "226:128 4096\n226:129 0\n", "226:128 max\n226:129 8192\n", "226:128 4096\n226:129 0\n",
     "226:128 max=3\n226:129 max=0\n", "default 100\n", "0\n", "0\n",
     "default 30000 100000\n226:129 max 100000\n"),
    # shapes only the general parsers take: extra keys, spaces, a sign, no newline
    ("226:128 usage_usec=5 wait_usec=1 extra=2\n", "226:128  +4096", "226:128 max",
     "226:128 7", "226:128 max=1 other=4", "default 100", "10", "10", "default  max 100000"),
    # a device only in some files; no memory files
    ("226:128 usage_usec=5 wait_usec=1\n", "226:129 4096\n", "", "", "", "default 300\n",
     "1\n", "1\n", None),
    ("226:128 usage_usec=5 wait_usec=1\n", None, None, None, None, None, None, None, None),
]


@pytest.mark.parametrize("texts", _VALID_TEXTS)
def test_fast_and_general_parses_agree(texts):
    from pycgpu.monitoring import kernel

    settings = kernel._settings(texts[2], texts[5], texts[6], texts[7], texts[8])
    fast = kernel._parse_valid(texts, settings)
    slow = kernel._parse_in_order(texts, settings)
    assert fast == slow
    assert list(fast.devices) == list(slow.devices)
    for d in fast.devices:
        assert list(fast.devices[d].memory.items()) == list(slow.devices[d].memory.items())
    assert kernel._parse(texts) == slow


def test_fast_path_refuses_what_the_general_parser_refuses():
    from pycgpu.monitoring import kernel

    texts = ("226:128 usage_usec=5 wait_usec=1\n", "226:128 4096\n", "226:128 max\n",
             "226:128 ten\n", "226:128 max=0\n", "default 100\n", "0\n", "0\n", None)
    parsed = kernel._parse(texts, {})
    assert parsed.error is not None and parsed.error.startswith("gpu.memory.peak: ")
    assert parsed.devices[kernel.formats.DevT(226, 128)].memory == {"current": 4096,
                                                                    "max": None}
    # a device number out of range is refused on the fast path as well
    bad = ("4096:0 usage_usec=5 wait_usec=1\n", None, None, None, None, None, None, None, None)
    assert kernel._parse(bad).error.startswith("gpu.stat: ")
    # gpu.max last: what was read before it is kept
    capped = (*texts[:3], "226:128 0\n", *texts[4:8], "default three 100000\n")
    parsed = kernel._parse(capped, {})
    assert parsed.error is not None and parsed.error.startswith("gpu.max: ")
    assert parsed.devices[kernel.formats.DevT(226, 128)].weight == 100


def test_settings_are_parsed_once_per_text():
    from pycgpu.monitoring import kernel

    cache: dict = {}
    texts = list(_VALID_TEXTS[0])
    kernel._parse(tuple(texts), cache)
    texts[0] = "226:128 usage_usec=6 wait_usec=1\n"  # the counters move
    kernel._parse(tuple(texts), cache)
    assert len(cache) == 1


def dmem_tree(tmp_path, monkeypatch):
    """A dmem kernel's tree: i915 (226:128) with two regions, vgem (226:129)
    with one; group a uses both, b and c have a file that does not parse."""
    from conftest import FakeKernel

    from pycgpu.core.memory import DMEM, Interface, Region

    regions = {"drm/0000:00:02.0/vram0": 8 << 30, "drm/0000:00:02.0/stolen": 1 << 26,
               "drm/vgem/system": 16 << 30}
    fake = FakeKernel(tmp_path, memory=False, dmem=regions).install(monkeypatch)
    fake.make("a")
    fake.make("b")
    fake.make("c")
    for g in ("a", "b", "c"):
        (fake.root / g / "gpu.stat").write_text(
            "226:128 usage_usec=0 wait_usec=0\n226:129 usage_usec=5 wait_usec=0\n")
    a = fake.root / "a"
    (a / "dmem.current").write_text("drm/0000:00:02.0/vram0 4096\ndrm/0000:00:02.0/stolen 0\n"
                                    "drm/vgem/system 8192\n")
    (a / "dmem.max").write_text("drm/0000:00:02.0/vram0 max\ndrm/0000:00:02.0/stolen max\n"
                                "drm/vgem/system 1048576\n")
    (a / "dmem.events").write_text("drm/0000:00:02.0/vram0 max=0\ndrm/0000:00:02.0/stolen max=0\n"
                                   "drm/vgem/system max=4\n")
    (fake.root / "dmem.current").write_text("drm/0000:00:02.0/vram0 4096\n"
                                            "drm/0000:00:02.0/stolen 0\ndrm/vgem/system 9000\n")
    (fake.root / "gpu.stat").write_text("226:129 usage_usec=5 wait_usec=0\n")
    (fake.root / "b" / "dmem.current").write_text("drm/vgem/system 0\n")
    (fake.root / "b" / "dmem.peak").write_text("drm/vgem/system lots\n")
    (fake.root / "c" / "dmem.current").write_text("drm/0000:00:02.0/vram0 lots\n")
    iface = Interface(DMEM, (
        Region("226:128:stolen", "drm/0000:00:02.0/stolen", I915, "stolen", 1 << 26, DMEM),
        Region("226:128:vram0", "drm/0000:00:02.0/vram0", I915, "vram0", 8 << 30, DMEM),
        Region("226:129", "drm/vgem/system", VGEM, "system", 16 << 30, DMEM)))
    return fake, iface


def test_dmem_memory_reads_as_gpu_memory(tmp_path, monkeypatch):
    """On a kernel whose GPU memory is dmem's, a device's only region is
    its memory, as gpu.memory.* is on 6.12; a device with several regions
    has each region's, by name, and their sums; every region's size is in
    the sample; an error names the dmem file."""
    fake, iface = dmem_tree(tmp_path, monkeypatch)
    s = KernelSource(fake.root, iface).sample()
    du = s.groups["/a"].devices[VGEM]
    assert du.memory == {"current": 8192, "max": 1 << 20, "limit_hits": 4}  # no dmem.peak
    i915 = s.groups["/a"].devices[I915]
    assert i915.memory == {"current": 4096, "limit_hits": 0}  # no sum of limits or peaks
    assert i915.memory_regions == {"stolen": {"current": 0, "max": None, "limit_hits": 0},
                                   "vram0": {"current": 4096, "max": None, "limit_hits": 0}}
    assert s.groups["/a"].devices[VGEM].memory_regions == {}
    assert s.totals[VGEM].memory == {"current": 9000}
    assert s.totals[I915].memory == {"current": 4096}
    assert s.totals[I915].memory_regions == {"stolen": {"current": 0}, "vram0": {"current": 4096}}
    assert s.capacity == {I915: {"stolen": 1 << 26, "vram0": 8 << 30},
                          VGEM: {"system": 16 << 30}}
    assert any("/b/dmem.peak: " in e for e in s.errors), s.errors
    assert any("/c/dmem.current (a region): " in e for e in s.errors), s.errors
    assert s.groups["/c"].devices[VGEM].gpu_time_ns == 5000  # the rest is read


def test_the_exporter_reports_every_region_with_its_capacity(tmp_path, monkeypatch):
    from prometheus_client.parser import text_string_to_metric_families

    from pycgpu.monitoring import exporter as exp
    from pycgpu.monitoring.view import Monitor

    fake, iface = dmem_tree(tmp_path, monkeypatch)
    (fake.root / "a" / "dmem.max").write_text("drm/0000:00:02.0/vram0 1048576\n"
                                              "drm/0000:00:02.0/stolen max\n"
                                              "drm/vgem/system max\n")
    text = exp.Exporter(Monitor(KernelSource(fake.root, iface))).scrape().decode()
    got = {(s.name, s.labels.get("cgroup"), s.labels.get("device"), s.labels.get("region")):
           s.value for f in text_string_to_metric_families(text) for s in f.samples}
    assert got[("pycgpu_gpu_memory_bytes", "/a", "226:128", None)] == 4096  # the sum
    assert got[("pycgpu_gpu_dmem_region_charged_bytes", "/a", "226:128", "vram0")] == 4096
    assert got[("pycgpu_gpu_dmem_region_charged_bytes", "/a", "226:128", "stolen")] == 0
    assert got[("pycgpu_gpu_dmem_region_max_bytes", "/a", "226:128", "vram0")] == 1 << 20
    assert ("pycgpu_gpu_dmem_region_max_bytes", "/a", "226:128", "stolen") not in got
    assert ("pycgpu_gpu_memory_max_bytes", "/a", "226:128", None) not in got  # a region's own
    assert got[("pycgpu_gpu_dmem_region_limit_hits_total", "/a", "226:128", "vram0")] == 0
    assert ("pycgpu_gpu_dmem_region_charged_bytes", "/a", "226:129", "system") not in got
    assert got[("pycgpu_gpu_device_memory_used_bytes", None, "226:128", None)] == 4096
    capacity = {k[2:]: v for k, v in got.items()
                if k[0] == "pycgpu_gpu_device_memory_capacity_bytes"}
    assert capacity == {("226:128", "stolen"): 1 << 26, ("226:128", "vram0"): 8 << 30,
                        ("226:129", "system"): 16 << 30}


def test_dmem_regions_are_detected_again_when_a_gpu_comes(tmp_path, monkeypatch):
    """A region that appears in dmem.capacity (a GPU probed after the
    exporter started) is read from the next sample on."""
    from conftest import FakeKernel

    from pycgpu.core.memory import DMEM, Interface, Region

    fake = FakeKernel(tmp_path, memory=False, dmem={"drm/vgem/system": 1 << 30})
    fake.install(monkeypatch)
    fake.make("a")
    (fake.root / "a" / "gpu.stat").write_text("226:130 usage_usec=0 wait_usec=0\n")
    (fake.root / "a" / "dmem.current").write_text("drm/vgem/system 0\n")
    vgem = Region("226:129", "drm/vgem/system", VGEM, "system", 1 << 30, DMEM)
    simgpu = Region("226:130", "drm/simgpu.0/system", DevT(226, 130), "system", 1 << 30, DMEM)
    calls = []

    def redetect():
        calls.append(1)
        return Interface(DMEM, (vgem, simgpu))

    src = KernelSource(fake.root, Interface(DMEM, (vgem,)), redetect)
    assert src.sample().groups["/a"].devices[DevT(226, 130)].memory == {}
    assert calls == []  # the same regions: no new detection
    (fake.root / "dmem.capacity").write_text("drm/vgem/system 1073741824\n"
                                             "drm/simgpu.0/system 1073741824\n")
    (fake.root / "a" / "dmem.current").write_text("drm/vgem/system 0\ndrm/simgpu.0/system 8192\n")
    assert src.sample().groups["/a"].devices[DevT(226, 130)].memory == {"current": 8192}
    assert calls == [1]
