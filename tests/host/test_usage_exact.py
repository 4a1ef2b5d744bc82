"""The monitoring views to the character: the pycgpu.stat/v1 document, the
table cells, top's summary line and its live frames, from a scripted source
whose two samples are known exactly (so every number, rounding and key is
checked, not only the shape). Written against the survivors of a mutation
run of the monitoring layer (make mutation)."""

from __future__ import annotations

import io
import re
import sys
import time

import pytest
from rich.console import Console

from pycgpu import __version__
from pycgpu.core.formats import DevT
from pycgpu.monitoring import DeviceUsage, Engine, GroupUsage, Sample, Source, frames, view
from pycgpu.monitoring.view import Monitor, columns, stat_document, summary

R128, R129 = DevT(226, 128), DevT(226, 129)
SECOND = 1_000_000_000
NAMES = {R128: "renderD128"}  # 226:129 has no known node


class Scripted(Source):
    """Returns the given samples one after another; its clock is the time
    of the sample last returned."""

    def __init__(self, name: str, *samples: Sample) -> None:
        self.name = name
        self.samples = list(samples)
        self.now = samples[0].time_ns

    def clock(self) -> int:  # type: ignore[override]
        return self.now

    def _read(self, sample: Sample) -> None:  # pragma: no cover - sample() is replaced
        raise AssertionError

    def sample(self) -> Sample:
        s = self.samples.pop(0) if len(self.samples) > 1 else self.samples[0]
        self.now = s.time_ns
        return s


def kernel_sample(t_s: float, usage_us: int, wait_us: int, hits: int) -> Sample:
    train = GroupUsage("/ai/train", priority=10, priority_effective=5, devices={
        R128: DeviceUsage(gpu_time_ns=usage_us * 1000 + 999, wait_ns=wait_us * 1000 + 999,
                          memory={"current": 1536 << 20, "max": 2 << 30, "peak": 2 << 30,
                                  "limit_hits": hits}, weight=300),
        R129: DeviceUsage(gpu_time_ns=0, wait_ns=0, memory={"current": 0, "max": None},
                          weight=100),
    })
    idle = GroupUsage("/ai/idle", priority=0, priority_effective=0, devices={
        R128: DeviceUsage(gpu_time_ns=0, wait_ns=0, memory={"current": 0, "max": None},
                          weight=100)})
    inner = GroupUsage("/ai", leaf=False, priority=0, priority_effective=0, devices={
        R128: DeviceUsage(gpu_time_ns=usage_us * 1000, wait_ns=0, memory={"current": 7},
                          weight=100)})
    return Sample("kernel", int(t_s * SECOND), 1_700_000_000.123456 + t_s,
                  groups={g.path: g for g in (train, idle, inner)},
                  totals={R128: DeviceUsage(gpu_time_ns=9_000_123_456, wait_ns=1_999,
                                            memory={"current": 4096})})


def fdinfo_sample(t_s: float, render_ns: int, video_ns: int) -> Sample:
    du = DeviceUsage(gpu_time_ns=render_ns + video_ns, clients=2, driver="i915",
                     engines={"render": Engine(render_ns, 1), "video": Engine(video_ns, 2)},
                     memory={"current": 3 << 20},
                     regions={"system0": {"total": 3 << 20, "resident": 1 << 20}})
    group = GroupUsage("/system.slice/docker-" + "ab" * 32 + ".scope", pids=[41, 7],
                       devices={R128: du})
    return Sample("fdinfo", int(t_s * SECOND), 1_700_000_100.0 + t_s,
                  groups={group.path: group})


def monitor_of(*samples: Sample, all_groups: bool = False) -> Monitor:
    m = Monitor(Scripted(samples[0].source, *samples), None, all_groups)
    for _ in samples:
        m.refresh()
    return m


# the JSON document ---------------------------------------------------------------------------


def test_stat_document_kernel_with_rates():
    # 3 s apart: 1 s of GPU time (33.33 %), 2 s of waiting (66.67 %), one more limit hit
    m = monitor_of(kernel_sample(10, 4_000_000, 1_000_000, 2),
                   kernel_sample(13, 5_000_000, 3_000_000, 3))
    doc = stat_document(m, "/sys/fs/cgroup", 3.0, NAMES, unused=True)
    assert doc["schema"] == "pycgpu.stat/v1"
    assert (doc["source"], doc["cgroup_root"]) == ("kernel", "/sys/fs/cgroup")
    assert doc["time"] == 1_700_000_013.123  # wall time of the sample, ms precision
    assert doc["interval_s"] == 3.0
    assert doc["devices"] == {
        "226:128": {"node": "renderD128", "total": {
            "usage_usec": 9_000_123, "wait_usec": 1, "memory_current": 4096}},
        "226:129": {"node": None}}
    assert doc["errors"] == []
    groups = {g["path"]: g for g in doc["groups"]}
    assert list(groups) == ["/ai/idle", "/ai/train"]  # leaves, sorted
    train = groups["/ai/train"]
    assert (train["leaf"], train["container"]) == (True, None)
    assert (train["priority"], train["priority_effective"]) == (10, 5)
    assert "pids" not in train  # the kernel source has none
    assert train["devices"]["226:128"] == {
        "usage_usec": 5_000_000, "gpu_time_usec": 5_000_000,  # ns // 1000: 999 ns dropped
        "wait_usec": 3_000_000, "interval_s": 3.0,
        "gpu_percent": 33.33, "wait_percent": 66.67,
        "memory": {"current": 1536 << 20, "max": 2 << 30, "peak": 2 << 30, "limit_hits": 3},
        "weight": 300}
    assert train["devices"]["226:129"] == {
        "usage_usec": 0, "gpu_time_usec": 0, "wait_usec": 0, "interval_s": 3.0, "gpu_percent": 0.0,
        "wait_percent": 0.0, "memory": {"current": 0, "max": None}, "weight": 100}


def test_stat_document_a_group_read_late_gets_its_own_window():
    """/ai/train read 0.2 s into the first walk and 0.7 s into the second:
    its 1 s of GPU time is 28.57 % of its own 3.5 s, and the item says when
    it was read and its devices what interval their percentages cover."""
    a, b = kernel_sample(10, 4_000_000, 1_000_000, 2), kernel_sample(13, 5_000_000, 3_000_000, 3)
    a.groups["/ai/train"].time_ns = 10_200_000_000
    b.groups["/ai/train"].time_ns = 13_700_000_000
    doc = stat_document(monitor_of(a, b), "/sys/fs/cgroup", 3.0, NAMES)
    assert doc["interval_s"] == 3.0
    groups = {g["path"]: g for g in doc["groups"]}
    train = groups["/ai/train"]
    assert train["time"] == 1_700_000_013.823
    dev = train["devices"]["226:128"]
    assert (dev["interval_s"], dev["gpu_percent"], dev["wait_percent"]) == (3.5, 28.57, 57.14)
    idle = groups["/ai/idle"]  # a source that does not time its groups: the samples' times
    assert "time" not in idle and idle["devices"]["226:128"]["interval_s"] == 3.0


def test_stat_document_fdinfo_device_span_wins():
    """A device whose clients were each timed covers the mean of their own
    intervals (here 1.6 s, where the samples are 2 s apart)."""
    a, b = fdinfo_sample(5, 1 * SECOND, 2 * SECOND), fdinfo_sample(7, 2 * SECOND, 3 * SECOND)
    (group,) = b.groups.values()
    group.devices[R128].span_ns = 1_600_000_000
    dev = stat_document(monitor_of(a, b), None, 2.0, NAMES)["groups"][0]["devices"]["226:128"]
    assert (dev["interval_s"], dev["gpu_percent"], dev["engines"]["render"]["percent"]) == (
        1.6, 125.0, 62.5)


def test_stat_document_leaves_unused_devices_out_on_request():
    m = monitor_of(kernel_sample(10, 4_000_000, 1_000_000, 2))
    doc = stat_document(m, "/sys/fs/cgroup", 0.0, NAMES, unused=False)
    groups = {g["path"]: g for g in doc["groups"]}
    assert list(groups["/ai/train"]["devices"]) == ["226:128"]
    assert groups["/ai/idle"]["devices"] == {}
    assert doc["interval_s"] is None  # one sample: no interval, no rates
    dev = groups["/ai/train"]["devices"]["226:128"]
    assert "gpu_percent" not in dev and "wait_percent" not in dev


def test_stat_document_all_groups_adds_the_inner_ones():
    m = monitor_of(kernel_sample(10, 4_000_000, 1_000_000, 2), all_groups=True)
    doc = stat_document(m, None, 0.0, NAMES, unused=False)
    inner = {g["path"]: g for g in doc["groups"]}["/ai"]
    assert inner["leaf"] is False and inner["devices"]["226:128"]["usage_usec"] == 4_000_000


def test_stat_document_fdinfo_with_rates():
    # 2 s apart: render +1 s (50 %), video +1 s over 2 engines (25 %)
    m = monitor_of(fdinfo_sample(5, 1 * SECOND, 2 * SECOND),
                   fdinfo_sample(7, 2 * SECOND, 3 * SECOND))
    doc = stat_document(m, None, 2.0, NAMES)
    assert doc["cgroup_root"] is None and doc["source"] == "fdinfo"
    (group,) = doc["groups"]
    assert group["pids"] == [41, 7]
    assert group["container"]["runtime"] == "docker"
    assert group["devices"]["226:128"] == {
        "usage_usec": 5_000_000, "gpu_time_usec": 5_000_000, "interval_s": 2.0,
        "gpu_percent": 100.0,
        "engines": {"render": {"busy_ns": 2 * SECOND, "capacity": 1, "percent": 50.0},
                    "video": {"busy_ns": 3 * SECOND, "capacity": 2, "percent": 25.0}},
        "memory": {"current": 3 << 20},
        "regions": {"system0": {"total": 3 << 20, "resident": 1 << 20}},
        "clients": 2, "driver": "i915"}


def test_stat_document_fdinfo_without_rates_has_null_percentages():
    m = monitor_of(fdinfo_sample(5, 1 * SECOND, 2 * SECOND))
    m.prev = m.sample  # two samples at one instant: rates are asked for but none exist
    dev = stat_document(m, None, 0.0, NAMES)["groups"][0]["devices"]["226:128"]
    assert dev["gpu_percent"] is None
    assert dev["engines"]["render"] == {"busy_ns": SECOND, "capacity": 1, "percent": None}


# the table -----------------------------------------------------------------------------------


def test_columns_kernel_wide():
    m = monitor_of(kernel_sample(10, 4_000_000, 1_000_000, 2),
                   kernel_sample(13, 5_000_000, 3_000_000, 3))
    header, cells = columns(m.rows(), NAMES, wide=True)
    assert header == ["CONTAINER", "POD", "DEVICE", "GPU%", "WAIT%", "MEMORY", "MAX", "HITS",
                      "WEIGHT", "PRIO", "RUNTIME", "CGROUP"]
    assert cells == [
        ["idle", "-", "renderD128", "0.0", "0.0", "0", "max", "-", "100", "0", "-", "/ai/idle"],
        ["train", "-", "renderD128", "33.3", "66.7", "1536M", "2G", "3", "300", "5", "-",
         "/ai/train"],
        ["train", "-", "226:129", "0.0", "0.0", "0", "max", "-", "100", "5", "-", "/ai/train"]]


def test_columns_fdinfo():
    m = monitor_of(fdinfo_sample(5, 1 * SECOND, 2 * SECOND),
                   fdinfo_sample(7, 2 * SECOND, 3 * SECOND))
    header, cells = columns(m.rows(), NAMES)
    assert header == ["CONTAINER", "POD", "DEVICE", "GPU%", "RENDER%", "VIDEO%", "MEMORY",
                      "CLIENTS"]
    assert cells == [["abababababab", "-", "renderD128", "100.0", "50.0", "25.0", "3M", "2"]]


# top -----------------------------------------------------------------------------------------


@pytest.fixture
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_summary_line(utc):
    m = monitor_of(kernel_sample(10, 4_000_000, 1_000_000, 2),
                   kernel_sample(13, 5_000_000, 3_000_000, 3))
    assert summary(m, m.rows(), NAMES) == (
        "pycgpu top - 22:13:33  |  source kernel  |  2 groups  |  2 devices  |  "
        "renderD128 GPU 33.3% mem 1536M  |  226:129 GPU 0.0% mem 0")


def _console(height: int = 40) -> Console:
    return Console(file=io.StringIO(), width=200, height=height, force_terminal=True,
                   force_interactive=True, color_system="standard", legacy_windows=False,
                   _environ={})  # TERM=dumb or TTY_INTERACTIVE=0 would stop the live view


def test_top_live_view_refreshes_count_times(utc, monkeypatch):
    """The live view (a terminal): one frame at start and one per refresh,
    each measured after sleeping out the interval, rows cut to the
    terminal's height with a line saying how many were left out."""
    samples = [kernel_sample(t, 4_000_000 + t * 100_000, 1_000_000, 2) for t in (10, 11, 12)]
    source = Scripted("kernel", *samples)
    m = Monitor(source, None)
    slept: list[float] = []
    monkeypatch.setattr(frames.time, "sleep", lambda s: slept.append(round(s, 3)))
    console = _console(height=8)  # 8 - 6 lines: 2 of the 3 rows
    frames.run(m, NAMES, interval=1.0, sort="memory", reverse=True, once=False, count=2,
               wide=False, unused=True, tty=True, console=console)
    out = console.file.getvalue()
    assert out.count("pycgpu top - ") == 3  # the first frame, then 2 refreshes
    assert "22:13:32" in out and "sorted by memory (reversed); Ctrl-C quits" in out
    assert "... 1 more rows (a taller terminal, or pycgpu stat)" in out
    assert "\x1b[?1049h" in out and "\x1b[?1049l" in out  # the alternate screen
    assert "\x1b[7m" in out  # the header in reverse video
    assert slept == [1.0, 1.0]  # the clock stood still: the whole interval each time
    assert m.sample is samples[2]


def test_top_live_view_with_a_short_interval_waits_at_least_100ms(monkeypatch):
    source = Scripted("kernel", kernel_sample(10, 1, 1, 0))
    m = Monitor(source, None)
    slept: list[float] = []
    monkeypatch.setattr(frames.time, "sleep", slept.append)
    frames.run(m, NAMES, interval=0.0, sort="gpu", reverse=False, once=False, count=1,
               wide=False, unused=False, tty=True, console=_console())
    assert slept == [0.1]


def test_top_once_on_a_terminal_prints_one_rich_frame(utc):
    source = Scripted("kernel", kernel_sample(10, 4_000_000, 1_000_000, 2))
    console = _console()
    frames.run(Monitor(source, None), NAMES, interval=0.0, sort="cgroup", reverse=False,
               once=True, count=None, wide=True, unused=False, tty=True, console=console)
    out = console.file.getvalue()
    assert out.count("pycgpu top - ") == 1 and "\x1b[?1049h" not in out
    assert "CGROUP" in out and "/ai/train" in out  # --wide
    assert "226:129" not in out  # never used, and --unused not given
    assert "sorted by cgroup; Ctrl-C quits" in out


def test_top_frame_without_rows_says_so():
    source = Scripted("fdinfo", Sample("fdinfo", SECOND, 1.0))
    m = Monitor(source, None)
    m.refresh()
    console = _console()
    console.print(frames.rich_frame(m, "gpu", False, {}, False, None))
    assert "no GPU usage found (source fdinfo)" in console.file.getvalue()
    assert frames.plain_frame(m, "gpu", False, {}, False).splitlines()[2] == (
        "no GPU usage found (source fdinfo)")


def test_top_frame_shows_the_first_three_warnings():
    s = Sample("kernel", SECOND, 1.0)
    for i in range(5):
        s.error(f"problem {i}", f"/g{i}")
    m = Monitor(Scripted("kernel", s), None)
    m.refresh()
    console = _console()
    console.print(frames.rich_frame(m, "gpu", False, {}, False, None))
    out = console.file.getvalue()
    assert [f"warning: problem {i}" in out for i in range(5)] == [True] * 3 + [False] * 2


def test_sleep_until_counts_from_the_last_sample(monkeypatch):
    source = Scripted("kernel", kernel_sample(10, 1, 1, 0))
    m = Monitor(source, None)
    m.refresh()
    slept: list[float] = []
    monkeypatch.setattr(frames.time, "sleep", slept.append)
    source.now += int(0.25 * SECOND)  # 250 ms went by since the sample
    frames.sleep_until(m, 1.0)
    source.now += SECOND  # already late: no sleep
    frames.sleep_until(m, 1.0)
    assert slept == [0.75]


def test_row_names_fall_back_to_the_last_path_component():
    m = monitor_of(kernel_sample(10, 1, 1, 0), all_groups=True)
    assert sorted(r.name for r in m.rows(unused=False)) == ["ai", "train"]
    assert view._basename("/") == "/" and view._basename("/a/b/") == "b"


def test_top_on_a_narrow_terminal_cuts_the_cgroup_path_then_the_right_columns():
    """The cgroup path gives way first (down to 12 cells), the other columns
    never shrink (a number cut short would lie); what does not fit is cut
    at the terminal's edge, as in top(1)."""
    m = monitor_of(kernel_sample(10, 4_000_000, 1_000_000, 2))
    header, cells = columns(m.rows(), NAMES, wide=True)
    # CONTAINER 9, POD 3, DEVICE 10, GPU% 4, WAIT% 5, MEMORY 6, MAX 3, HITS 4, WEIGHT 6,
    # PRIO 4, RUNTIME 7, CGROUP 9 (of 9): 70 cells and 11 gaps of 2
    assert frames._fixed_width(header, cells) == 70 + 22
    long = [[*c[:-1], "/" + "x" * 40] for c in cells]
    assert frames._fixed_width(header, long) == 61 + 12 + 22
    for width in (200, 80):
        console = Console(file=io.StringIO(), width=width, height=40, color_system=None)
        console.print(frames.rich_frame(m, "cgroup", False, NAMES, True, None))
        lines = console.file.getvalue().splitlines()
        assert max(len(line) for line in lines) <= width
        table = lines[1:3]  # the idle group never used a device: no row
        assert lines[3] == "sorted by cgroup; Ctrl-C quits"
        assert table[0].split()[:10] == ["CONTAINER", "POD", "DEVICE", "GPU%", "WAIT%",
                                        "MEMORY", "MAX", "HITS", "WEIGHT", "PRIO"]
        assert table[1].split()[:10] == ["train", "-", "renderD128", "-", "-", "1536M", "2G",
                                        "2", "300", "5"]
        assert ("/ai/train" in table[1]) == (width == 200)


def test_top_batch_frames_are_separated_by_a_blank_line(utc, monkeypatch, capsys):
    samples = [kernel_sample(t, 4_000_000, 1_000_000, 2) for t in (10, 11, 12)]
    m = Monitor(Scripted("kernel", *samples), None)
    monkeypatch.setattr(frames.time, "sleep", lambda s: None)
    frames.run(m, NAMES, interval=1.0, sort="cgroup", reverse=False, once=False, count=2,
               wide=False, unused=False, tty=False)
    out = capsys.readouterr().out
    frame = frames.plain_frame(m, "cgroup", False, NAMES, False)
    assert frame.splitlines()[1] == ""  # the summary, a blank line, the table
    assert out.count("pycgpu top - ") == 2  # the first sample is only the baseline
    assert out.endswith(frame + "\n\n")
    first = out[:-len(frame) - 2]
    assert first.startswith("pycgpu top - ") and first.endswith("5\n\n")


# the exporter --------------------------------------------------------------------------------

POD_UID = "1c2d3e4f-aaaa-bbbb-cccc-111122223333"
K8S = ("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod"
       f"{POD_UID.replace('-', '_')}.slice/cri-containerd-{'3f' * 32}.scope")


def exporter_of(sample: Sample, tmp_path, **kw):
    from pycgpu.core.devices import Device
    from pycgpu.monitoring.exporter import Exporter

    sysfs = tmp_path / "sys"
    vram = sysfs / "class" / "drm" / "renderD128" / "device" / "mem_info_vram_total"
    vram.parent.mkdir(parents=True)
    vram.write_text("17163091968\n")
    devices = [Device(tmp_path / "dev" / "renderD128", None, R128, "amdgpu", None,
                      "0000:03:00.0"),
               Device(tmp_path / "dev" / "renderD131", None, DevT(226, 131))]
    logged: list[str] = []
    exp = Exporter(Monitor(Scripted(sample.source, sample), None), devices, logged.append,
                   sysfs, **kw)
    return exp, logged


def _body(exp) -> list[str]:
    """The scrape's lines but the ones that vary (duration, build)."""
    return [line for line in exp.scrape().decode().splitlines()
            if "scrape_duration" not in line and not line.startswith("pycgpu_build_info")]


def test_exporter_kernel_text(tmp_path):
    s = kernel_sample(10, 4_000_000, 1_000_000, 2)
    s.groups[K8S] = GroupUsage(K8S, priority=-3, priority_effective=-5, devices={
        R128: DeviceUsage(gpu_time_ns=2_500_000_000, wait_ns=0,
                          memory={"current": 0, "max": None}, weight=100)})
    s.error("gpu.stat of /ai/broken: not a number", "/ai/broken")
    exp, logged = exporter_of(s, tmp_path)
    g = 'cgroup="/ai/train",container="train",pod="",namespace=""'
    k = (f'cgroup="{K8S}",container="{"3f" * 6}",pod="",namespace=""')
    assert _body(exp) == [
        "# HELP pycgpu_gpu_time_seconds_total " + exp_help("pycgpu_gpu_time_seconds_total"),
        "# TYPE pycgpu_gpu_time_seconds_total counter",
        f'pycgpu_gpu_time_seconds_total{{{g},device="renderD128"}} 4.000000999',
        f'pycgpu_gpu_time_seconds_total{{{k},device="renderD128"}} 2.5',
        "# HELP pycgpu_gpu_wait_seconds_total " + exp_help("pycgpu_gpu_wait_seconds_total"),
        "# TYPE pycgpu_gpu_wait_seconds_total counter",
        f'pycgpu_gpu_wait_seconds_total{{{g},device="renderD128"}} 1.000000999',
        f'pycgpu_gpu_wait_seconds_total{{{k},device="renderD128"}} 0.0',
        "# HELP pycgpu_gpu_memory_bytes " + exp_help("pycgpu_gpu_memory_bytes"),
        "# TYPE pycgpu_gpu_memory_bytes gauge",
        f'pycgpu_gpu_memory_bytes{{{g},device="renderD128"}} {1536 << 20}',
        f'pycgpu_gpu_memory_bytes{{{k},device="renderD128"}} 0',
        "# HELP pycgpu_gpu_memory_max_bytes " + exp_help("pycgpu_gpu_memory_max_bytes"),
        "# TYPE pycgpu_gpu_memory_max_bytes gauge",
        f'pycgpu_gpu_memory_max_bytes{{{g},device="renderD128"}} {2 << 30}',
        "# HELP pycgpu_gpu_memory_peak_bytes " + exp_help("pycgpu_gpu_memory_peak_bytes"),
        "# TYPE pycgpu_gpu_memory_peak_bytes gauge",
        f'pycgpu_gpu_memory_peak_bytes{{{g},device="renderD128"}} {2 << 30}',
        "# HELP pycgpu_gpu_memory_limit_hits_total "
        + exp_help("pycgpu_gpu_memory_limit_hits_total"),
        "# TYPE pycgpu_gpu_memory_limit_hits_total counter",
        f'pycgpu_gpu_memory_limit_hits_total{{{g},device="renderD128"}} 2',
        "# HELP pycgpu_gpu_weight " + exp_help("pycgpu_gpu_weight"),
        "# TYPE pycgpu_gpu_weight gauge",
        f'pycgpu_gpu_weight{{{g},device="renderD128"}} 300',
        f'pycgpu_gpu_weight{{{k},device="renderD128"}} 100',
        "# HELP pycgpu_gpu_priority " + exp_help("pycgpu_gpu_priority"),
        "# TYPE pycgpu_gpu_priority gauge",
        f"pycgpu_gpu_priority{{{g}}} 10",
        f"pycgpu_gpu_priority{{{k}}} -3",
        "# HELP pycgpu_gpu_priority_effective " + exp_help("pycgpu_gpu_priority_effective"),
        "# TYPE pycgpu_gpu_priority_effective gauge",
        f"pycgpu_gpu_priority_effective{{{g}}} 5",
        f"pycgpu_gpu_priority_effective{{{k}}} -5",
        "# HELP pycgpu_container_info " + exp_help("pycgpu_container_info"),
        "# TYPE pycgpu_container_info gauge",
        f'pycgpu_container_info{{{k},runtime="containerd",container_id="{"3f" * 32}",'
        f'pod_uid="{POD_UID}",qos="burstable"}} 1',
        "# HELP pycgpu_gpu_device_info " + exp_help("pycgpu_gpu_device_info"),
        "# TYPE pycgpu_gpu_device_info gauge",
        'pycgpu_gpu_device_info{device="renderD128",maj_min="226:128",pci="0000:03:00.0",'
        'driver="amdgpu"} 1',
        'pycgpu_gpu_device_info{device="renderD131",maj_min="226:131",pci="",driver=""} 1',
        "# HELP pycgpu_gpu_device_memory_total_bytes "
        + exp_help("pycgpu_gpu_device_memory_total_bytes"),
        "# TYPE pycgpu_gpu_device_memory_total_bytes gauge",
        'pycgpu_gpu_device_memory_total_bytes{device="renderD128"} 17163091968',
        "# HELP pycgpu_gpu_device_time_seconds_total "
        + exp_help("pycgpu_gpu_device_time_seconds_total"),
        "# TYPE pycgpu_gpu_device_time_seconds_total counter",
        'pycgpu_gpu_device_time_seconds_total{device="renderD128"} 9.000123456',
        "# HELP pycgpu_gpu_device_wait_seconds_total "
        + exp_help("pycgpu_gpu_device_wait_seconds_total"),
        "# TYPE pycgpu_gpu_device_wait_seconds_total counter",
        'pycgpu_gpu_device_wait_seconds_total{device="renderD128"} 1.999e-06',
        "# HELP pycgpu_gpu_device_memory_used_bytes "
        + exp_help("pycgpu_gpu_device_memory_used_bytes"),
        "# TYPE pycgpu_gpu_device_memory_used_bytes gauge",
        'pycgpu_gpu_device_memory_used_bytes{device="renderD128"} 4096',
        "# HELP pycgpu_build_info " + exp_help("pycgpu_build_info"),
        "# TYPE pycgpu_build_info gauge",
        "# HELP pycgpu_exporter_errors " + exp_help("pycgpu_exporter_errors"),
        "# TYPE pycgpu_exporter_errors gauge",
        'pycgpu_exporter_errors{source="kernel"} 1',
        "# HELP pycgpu_scrape_errors_total " + exp_help("pycgpu_scrape_errors_total"),
        "# TYPE pycgpu_scrape_errors_total counter",
        'pycgpu_scrape_errors_total{cgroup="/ai/broken"} 1',
        "# HELP pycgpu_exporter_connections_dropped_total "
        + exp_help("pycgpu_exporter_connections_dropped_total"),
        "# TYPE pycgpu_exporter_connections_dropped_total counter",
        'pycgpu_exporter_connections_dropped_total{reason="disconnected"} 0',
        'pycgpu_exporter_connections_dropped_total{reason="idle"} 0',
        'pycgpu_exporter_connections_dropped_total{reason="over_limit"} 0']
    assert logged == ["gpu.stat of /ai/broken: not a number"]
    text = exp.scrape().decode()
    python = ".".join(map(str, sys.version_info[:3]))
    assert f'pycgpu_build_info{{version="{__version__}",python="{python}"}} 1\n' in text
    assert re.search(r'\npycgpu_exporter_scrape_duration_seconds\{source="kernel"\} '
                     r"[0-9.e-]+\n", text)
    assert 'pycgpu_scrape_errors_total{cgroup="/ai/broken"} 3' in _body(exp)


def exp_help(name: str) -> str:
    from pycgpu.monitoring.exporter import FAMILIES

    return FAMILIES[name].help


def test_exporter_fdinfo_text(tmp_path):
    s = fdinfo_sample(5, 1 * SECOND, 2 * SECOND)
    s.groups["/x"] = GroupUsage("/x", devices={DevT(226, 140): DeviceUsage(
        gpu_time_ns=0, clients=1, engines={"render": Engine(0, 4)})})
    s.frequency = {R128: {"gpu": (300_000_000, None), "video": (None, 1_000_000_000)}}
    exp, _ = exporter_of(s, tmp_path)
    lines = _body(exp)
    g = f'cgroup="{next(iter(s.groups))}",container="abababababab",pod="",namespace=""'
    for line in (
            f'pycgpu_gpu_clients{{{g},device="renderD128"}} 2',
            f'pycgpu_gpu_engine_busy_seconds_total{{{g},device="renderD128",engine="render"}} '
            "1.0",
            f'pycgpu_gpu_engine_busy_seconds_total{{{g},device="renderD128",engine="video"}} '
            "2.0",
            f'pycgpu_gpu_memory_region_total_bytes{{{g},device="renderD128",region="system0"}} '
            f"{3 << 20}",
            f'pycgpu_gpu_memory_region_resident_bytes{{{g},device="renderD128",'
            f'region="system0"}} {1 << 20}',
            'pycgpu_gpu_engine_capacity{device="renderD128",engine="render"} 1',
            'pycgpu_gpu_engine_capacity{device="renderD128",engine="video"} 2',
            'pycgpu_gpu_engine_capacity{device="226:140",engine="render"} 4',
            'pycgpu_gpu_engine_frequency_hertz{device="renderD128",engine="gpu"} 300000000',
            'pycgpu_gpu_engine_max_frequency_hertz{device="renderD128",engine="video"} '
            "1000000000",
            'pycgpu_exporter_errors{source="fdinfo"} 0'):
        assert line in lines, line
    assert not any("_frequency_hertz" in line and 'engine="video"' in line
                   and "max" not in line for line in lines)
    assert not any(line.startswith("pycgpu_gpu_engine_max_frequency_hertz{")
                   and 'engine="gpu"' in line for line in lines)
    assert not any(line.startswith("pycgpu_gpu_wait_seconds_total{") for line in lines)
    assert not any(line.startswith(("pycgpu_gpu_priority", "pycgpu_container_info{"))
                   and "/x" in line for line in lines)
    assert not any(line.startswith("pycgpu_scrape_errors_total{") for line in lines)


def test_exporter_counts_a_failed_scrape_and_keeps_serving(tmp_path):
    s = kernel_sample(10, 1, 1, 0)
    exp, logged = exporter_of(s, tmp_path)

    def broken() -> Sample:
        raise OSError(5, "Input/output error")

    exp.monitor.source.sample = broken
    lines = _body(exp)
    assert logged == ["scrape failed: [Errno 5] Input/output error"]
    assert 'pycgpu_exporter_errors{source="kernel"} 1' in lines
    assert 'pycgpu_scrape_errors_total{cgroup=""} 1' in lines
    assert 'pycgpu_gpu_device_info{device="renderD131",maj_min="226:131",pci="",driver=""} 1' \
        in lines
    assert not any(line.startswith("pycgpu_gpu_time_seconds_total{") for line in lines)
    assert not any(line.startswith("pycgpu_gpu_device_time_seconds_total{") for line in lines)


def test_exporter_label_values_are_escaped():
    from pycgpu.monitoring.exporter import escape

    # a cgroup name by formats.printable_name (a newline, a byte that is not
    # UTF-8 as \xNN), then the format's escapes
    assert escape('a\\b"c\nd') == 'a\\\\b\\"c\\\\x0ad'
    assert escape("caf\udce9") == "caf\\\\xe9"
    assert escape("plain") == "plain"
