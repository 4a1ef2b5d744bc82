"""The fdinfo source: every key format of Documentation/gpu/drm-usage-stats.rst
(fixtures in the styles of i915, amdgpu, xe, msm, panfrost and simgpu),
de-duplication by client id, non-monotonic engine values, attribution to
cgroups, percentages."""

from __future__ import annotations

import pytest
from fakeproc import Clock, FakeProc, client, fake_devnum, fixture

from pycgpu.core.formats import DevT, FormatError
from pycgpu.monitoring import fdinfo as fdinfo_mod
from pycgpu.monitoring import rates
from pycgpu.monitoring.fdinfo import FdinfoSource, parse_fdinfo

KiB, MiB = 1 << 10, 1 << 20
SEC = 1_000_000_000
R128, R129, R130 = DevT(226, 128), DevT(226, 129), DevT(226, 130)


# parsing ----------------------------------------------------------------------------


def test_i915():
    c = parse_fdinfo(fixture("i915"))
    assert (c.driver, c.client_id, c.pdev) == ("i915", 41, "0000:00:02.0")
    assert c.engines == {"render": 5520391204, "copy": 1200, "video": 88000000,
                         "video-enhance": 0}
    assert c.capacity == {"video": 2}
    assert c.memory["system0"] == {"total": 12 * MiB, "shared": 0, "active": 0,
                                   "resident": 8196 * KiB, "purgeable": 1024 * KiB}
    # a region name with a dash is not a kind
    assert c.memory["stolen-system0"]["total"] == 0
    assert c.memory_bytes() == 12 * MiB


def test_amdgpu_prefers_resident_over_legacy_memory_key():
    c = parse_fdinfo(fixture("amdgpu"))
    assert (c.driver, c.client_id, c.pdev) == ("amdgpu", 17, "0000:03:00.0")
    assert c.engines["gfx"] == 902511117 and c.engines["enc_1"] == 0
    assert set(c.memory) == {"cpu", "gtt", "vram"}  # amd-* keys are not drm keys
    assert c.memory["vram"]["resident"] == 262144 * KiB
    assert c.memory["vram"]["shared"] == 4096 * KiB
    assert c.memory_bytes() == (262144 + 2048) * KiB


def test_amdgpu_legacy_drm_memory_is_resident():
    c = parse_fdinfo(fixture("amdgpu-legacy"))
    assert c.memory == {"vram": {"resident": 16384 * KiB}, "gtt": {"resident": 512 * KiB},
                        "cpu": {"resident": 0}}
    assert c.memory_bytes() == (16384 + 512) * KiB  # no total: resident counts


def test_xe_cycles_and_total_cycles_are_not_memory():
    c = parse_fdinfo(fixture("xe"))
    assert (c.driver, c.client_id) == ("xe", 3)
    assert c.engines == {}
    assert c.cycles == {"rcs": 28257900, "bcs": 0, "vcs": 0, "vecs": 0, "ccs": 0}
    assert c.total_cycles["rcs"] == 7655183225
    assert c.capacity == {"vcs": 2, "vecs": 2, "ccs": 4}
    assert set(c.memory) == {"system", "gtt", "vram0", "stolen"}
    assert c.memory["vram0"] == {"total": 23992 * KiB, "shared": 16 * MiB, "active": 0,
                                 "resident": 23992 * KiB}


def test_msm_platform_device_without_pdev():
    c = parse_fdinfo(fixture("msm"))
    assert (c.driver, c.client_id, c.pdev) == ("msm", 9, None)
    assert c.engines == {"gpu": 4219800000}
    assert c.cycles == {"gpu": 2531880000}
    assert c.maxfreq == {"gpu": 710000000}
    assert c.memory["memory"]["total"] == 30 * MiB


def test_panfrost_engine_names_with_dashes_and_frequencies():
    c = parse_fdinfo(fixture("panfrost"))
    assert c.engines == {"fragment": 1846584880, "vertex-tiler": 71932239}
    assert c.curfreq == {"fragment": 799999987, "vertex-tiler": 799999987}
    assert c.memory["memory"] == {"total": 290 * MiB, "shared": 0, "active": 226 * MiB,
                                  "resident": 36496 * KiB, "purgeable": 128 * KiB}


def test_simgpu():
    c = parse_fdinfo(fixture("simgpu"))
    assert (c.driver, c.client_id, c.pdev) == ("simgpu", 7, None)
    assert c.engines == {"render": 1500000000}
    assert c.memory_bytes() == 8 * MiB


def test_not_a_drm_file():
    assert parse_fdinfo(fixture("not-drm")) is None


def test_client_name_and_unknown_keys():
    c = parse_fdinfo(client(extra="drm-client-name:\tblender\ndrm-future-key:\t3 ns\n"))
    assert c.client_name == "blender"


@pytest.mark.parametrize("line", ["drm-engine-render:\tmany ns", "drm-client-id:\t-1",
                                  "drm-total-vram:\t3 PiB", "drm-engine-render:\t5 ms"])
def test_malformed_values_name_the_file_and_key(line):
    with pytest.raises(FormatError) as e:
        parse_fdinfo(client(extra=line + "\n"), "/proc/9/fdinfo/4")
    assert "/proc/9/fdinfo/4" in str(e.value) and line.split(":")[0] in str(e.value)


# the scan ----------------------------------------------------------------------------


@pytest.fixture
def proc(tmp_path, monkeypatch):
    monkeypatch.setattr(fdinfo_mod, "fd_devnum", fake_devnum)
    return FakeProc(tmp_path)


@pytest.fixture
def source(proc, fake_sysfs):
    src = FdinfoSource(proc=proc.root, sysfs=fake_sysfs[0])
    src.clock = Clock()
    return src


def test_scan_finds_drm_fds_and_attributes_them_to_cgroups(proc, source):
    proc.process(100, "/a", {0: ("/dev/null", None), 1: ("pipe:[12]", None),
                             3: ("/dev/dri/renderD128", client(client_id=1, engines={"render": 10},
                                                                memory=4096))})
    proc.process(200, "/b", {5: ("/dev/dri/renderD129", client(client_id=2,
                                                                engines={"render": 20}))})
    proc.process(300, "/c", {7: ("/dev/nvidia0", None), 8: ("/home/x/file", None)})
    s = source.sample()
    assert sorted(s.groups) == ["/a", "/b"]
    a = s.groups["/a"].devices[R128]
    assert (a.gpu_time_ns, a.clients, a.driver, a.memory["current"]) == (10, 1, "simgpu", 4096)
    assert s.groups["/b"].devices[R129].engines["render"].busy_ns == 20
    assert s.groups["/a"].pids == [100]


def test_shared_client_is_counted_once(proc, source):
    info = client(client_id=5, engines={"render": 1000}, memory=1 << 20)
    proc.process(100, "/a", {3: ("/dev/dri/renderD128", info), 4: ("/dev/dri/renderD128", info)})
    proc.process(101, "/a", {3: ("/dev/dri/renderD128", info)})  # forked child
    proc.process(102, "/b", {9: ("/dev/dri/renderD128", info)})  # passed over a socket
    s = source.sample()
    du = s.groups["/a"].devices[R128]
    assert (du.clients, du.gpu_time_ns, du.memory["current"]) == (1, 1000, 1 << 20)
    assert s.groups["/a"].pids == [100, 101]
    assert "/b" not in s.groups  # the first holder (lowest PID) has it


def test_same_client_id_on_other_devices_are_other_clients(proc, source):
    proc.process(100, "/a", {
        3: ("/dev/dri/renderD128", client(client_id=5, engines={"render": 1},
                                          pdev="0000:00:02.0")),
        4: ("/dev/dri/renderD129", client(client_id=5, engines={"render": 2})),
        5: ("/dev/dri/renderD130", client(client_id=5, engines={"render": 4})),
    })
    s = source.sample()
    devs = s.groups["/a"].devices
    assert {d: du.gpu_time_ns for d, du in devs.items()} == {R128: 1, R129: 2, R130: 4}


def test_card_node_counts_against_its_render_node(proc, source):
    proc.process(100, "/a", {3: ("/dev/dri/card0", client(client_id=1, engines={"render": 7})),
                             4: ("/dev/dri/renderD128", client(client_id=2,
                                                               engines={"render": 3}))})
    du = source.sample().groups["/a"].devices[R128]
    assert (du.clients, du.gpu_time_ns) == (2, 10)


def test_engine_values_going_backwards_are_clamped(proc, source):
    proc.process(100, "/a", {3: ("/dev/dri/renderD128", client(engines={"render": 1000}))})
    s1 = source.sample()
    for value in (900, 950):  # lower than before: stay with 1000
        proc.set_info(100, 3, client(engines={"render": value}))
        source.clock.advance(1)
        s2 = source.sample()
        assert s2.groups["/a"].devices[R128].engines["render"].busy_ns == 1000
        r = rates(s1, s2)[("/a", R128)]
        assert r.engines["render"] == 0.0 and r.gpu_percent == 0.0
        s1 = s2
    proc.set_info(100, 3, client(engines={"render": 1500}))  # caught up: +500 from 1000
    source.clock.advance(1)
    s3 = source.sample()
    assert s3.groups["/a"].devices[R128].engines["render"].busy_ns == 1500


def test_percent_per_engine_uses_capacity(proc, source):
    text = fixture("i915")
    proc.process(100, "/a", {3: ("/dev/dri/renderD128", text)})
    s1 = source.sample()
    text = text.replace("drm-engine-render:\t5520391204", "drm-engine-render:\t6020391204")
    text = text.replace("drm-engine-video:\t88000000", "drm-engine-video:\t1088000000")
    proc.set_info(100, 3, text)
    source.clock.advance(2)
    s2 = source.sample()
    r = rates(s1, s2)[("/a", R128)]
    assert r.engines == {"copy": 0.0, "render": 25.0, "video": 25.0, "video-enhance": 0.0}
    assert r.gpu_percent == 75.0  # GPU time per wall time, all engines
    assert s2.groups["/a"].devices[R128].engines["video"].capacity == 2


def test_xe_utilisation_from_cycles(proc, source):
    proc.process(100, "/a", {3: ("/dev/dri/renderD128", fixture("xe"))})
    s1 = source.sample()
    text = fixture("xe").replace("drm-cycles-rcs:\t28257900", "drm-cycles-rcs:\t38257900")
    text = text.replace("7655183225", "7675183225")  # +20,000,000 timestamp ticks
    text = text.replace("drm-cycles-ccs:\t0", "drm-cycles-ccs:\t40000000")
    proc.set_info(100, 3, text)
    source.clock.advance(1)
    s2 = source.sample()
    r = rates(s1, s2)[("/a", R128)]
    assert r.engines["rcs"] == pytest.approx(50.0)  # 10M of 20M cycles
    assert r.engines["ccs"] == pytest.approx(50.0)  # 40M / 20M over 4 engines
    assert r.engines["bcs"] == 0.0


def test_a_group_percent_covers_its_own_clients_reads(proc, source):
    """The scan reads one process after another: each group's time is when
    its clients' fdinfo was read, its percentages cover its own two reads,
    and xe's cycles turn into time over the client's own interval."""
    proc.process(100, "/a", {3: ("/dev/dri/renderD128", client(client_id=1,
                                                                engines={"render": 0}))})
    proc.process(200, "/b", {3: ("/dev/dri/renderD129", fixture("xe"))})
    source.clock.step_ns = 1_000_000  # every reading of the clock: 1 ms
    s1 = source.sample()
    proc.set_info(100, 3, client(client_id=1, engines={"render": 10**9}))
    text = fixture("xe").replace("drm-cycles-rcs:\t28257900", "drm-cycles-rcs:\t38257900")
    proc.set_info(200, 3, text.replace("7655183225", "7675183225"))  # half busy
    source.clock.advance(2)
    source.clock.step_ns = 40_000_000  # the second scan is slower
    s2 = source.sample()
    a1, a2, b1, b2 = (s.groups[g] for g in ("/a", "/b") for s in (s1, s2))
    assert None not in (a1.time_ns, a2.time_ns, b1.time_ns, b2.time_ns)
    assert a2.time_ns != b2.time_ns  # read at different points of the scan
    ra, rb = rates(s1, s2)[("/a", R128)], rates(s1, s2)[("/b", R129)]
    assert ra.interval_s == (a2.time_ns - a1.time_ns) / 1e9
    assert ra.engines["render"] == pytest.approx(100.0 / ra.interval_s)
    assert ra.interval_s != (s2.time_ns - s1.time_ns) / 1e9
    assert rb.interval_s == (b2.time_ns - b1.time_ns) / 1e9
    assert rb.engines["rcs"] == pytest.approx(50.0)


def test_a_device_percent_covers_the_clients_read_twice(proc, source):
    """Two processes of one group, read at different points of the scan;
    one exits between the samples: the survivor's 1 s of GPU time counts
    over its own interval, not over the group's mean read time, which the
    gone client moved."""
    for pid, cid in ((100, 1), (900, 2)):
        proc.process(pid, "/a", {3: ("/dev/dri/renderD128",
                                     client(client_id=cid, engines={"render": 0}))})
    source.clock.step_ns = 30_000_000
    s1 = source.sample()
    key = (R128, 1)
    t1 = source._last[key].time_ns
    proc.exit(900)
    proc.set_info(100, 3, client(client_id=1, engines={"render": 10**9}))
    source.clock.advance(2)
    s2 = source.sample()
    span = source._last[key].time_ns - t1
    a1, a2 = s1.groups["/a"], s2.groups["/a"]
    assert a1.time_ns is not None and a2.time_ns is not None
    assert a2.time_ns - a1.time_ns != span
    r = rates(s1, s2)[("/a", R128)]
    assert r.interval_s == span / 1e9
    assert r.gpu_percent == pytest.approx(100.0 * 1e9 / span)


def test_a_device_that_comes_back_counts_from_where_it_was(proc, source):
    """A group keeps a device it used lately with 0 clients: a client that
    comes back on it counts from the group's counter, not the whole of it
    in one interval (10 s of GPU time as 500 % before)."""
    proc.process(100, "/a", {3: ("/dev/dri/renderD128", client(client_id=1,
                                                                engines={"render": 0}))})
    proc.process(101, "/a", {3: ("/dev/dri/renderD129", client(client_id=2,
                                                                engines={"render": 10**10}))})
    source.sample()
    proc.exit(101)
    source.clock.advance(2)
    s2 = source.sample()
    kept = s2.groups["/a"].devices[R129]
    assert (kept.clients, kept.gpu_time_ns) == (0, 10**10)
    proc.process(102, "/a", {3: ("/dev/dri/renderD129", client(client_id=3,
                                                                engines={"render": 10**9}))})
    source.clock.advance(2)
    s3 = source.sample()
    assert s3.groups["/a"].devices[R129].gpu_time_ns == 11 * 10**9
    assert rates(s2, s3)[("/a", R129)].gpu_percent == pytest.approx(50.0)


def test_counters_follow_a_process_that_moves(proc, source):
    proc.process(100, "/a", {3: ("/dev/dri/renderD128", client(engines={"render": 100}))})
    source.sample()
    proc.move(100, "/b")
    proc.set_info(100, 3, client(engines={"render": 130}))
    source.clock.advance(1)
    s = source.sample()
    assert list(s.groups) == ["/b"]
    assert s.groups["/b"].devices[R128].gpu_time_ns == 30  # only what it used in /b
    proc.move(100, "/a")
    proc.set_info(100, 3, client(engines={"render": 135}))
    source.clock.advance(1)
    assert source.sample().groups["/a"].devices[R128].gpu_time_ns == 105


def test_group_counter_does_not_drop_when_a_client_exits(proc, source):
    for pid, cid, ns in ((100, 1, 100), (101, 2, 50)):
        proc.process(pid, "/a", {3: ("/dev/dri/renderD128",
                                     client(client_id=cid, engines={"render": ns}))})
    assert source.sample().groups["/a"].devices[R128].gpu_time_ns == 150
    proc.exit(101)
    source.clock.advance(1)
    s = source.sample()
    assert s.groups["/a"].devices[R128].gpu_time_ns == 150
    assert s.groups["/a"].devices[R128].clients == 1


def test_memory_is_summed_per_group_and_region(proc, source):
    proc.process(100, "/a", {3: ("/dev/dri/renderD128", fixture("i915")),
                             4: ("/dev/dri/renderD128", fixture("i915").replace(
                                 "drm-client-id:\t41", "drm-client-id:\t42"))})
    du = source.sample().groups["/a"].devices[R128]
    assert du.memory == {"current": 24 * MiB}
    assert du.regions["system0"]["resident"] == 2 * 8196 * KiB


def test_malformed_fdinfo_is_reported_and_skipped(proc, source):
    proc.process(100, "/a", {3: ("/dev/dri/renderD128",
                                 client(extra="drm-engine-copy:\tlots ns\n"))})
    s = source.sample()
    assert s.groups == {}
    assert any("drm-engine-copy" in e and "/100/fdinfo/3" in e for e in s.errors)


def test_processes_that_vanish_mid_scan_are_skipped(proc, source):
    proc.process(100, "/a", {3: ("/dev/dri/renderD128", client())})
    (proc.root / "4242").mkdir()  # a pid directory without fd/: exited
    assert list(source.sample().groups) == ["/a"]


def test_real_proc_scan_runs():
    """The real /proc of this machine: no DRM devices needed, no errors other
    than permissions."""
    s = FdinfoSource().sample()
    assert all("permission" in e for e in s.errors)


# exact errors, order and accounting (mutation run of the monitoring layer) -------------------


@pytest.mark.parametrize(("line", "message"), [
    ("drm-client-id:\t-1", "'-1' is not a number"),
    ("drm-engine-capacity-video:\ttwo", "'two' is not a number"),
    ("drm-engine-render:\t5 ms", "'5 ms' is not a number (units: ns)"),
    ("drm-total-cycles-rcs:\t1.5", "'1.5' is not a number"),
    ("drm-cycles-rcs:\t1 2 3", "'1 2 3' is not a number"),
    ("drm-maxfreq-gpu:\t7 THz", "'7 THz' is not a number (units: Hz/KHz/kHz/MHz/GHz)"),
    ("drm-curfreq-gpu:\tfast", "'fast' is not a number (units: Hz/KHz/kHz/MHz/GHz)"),
    ("drm-memory-vram:\t3 PiB", "'3 PiB' is not a number (units: B/KiB/MiB/GiB)"),
    ("drm-resident-vram:\t-", "'-' is not a number (units: B/KiB/MiB/GiB)"),
])
def test_every_numeric_key_names_file_key_and_units(line, message):
    key = line.split(":")[0]
    with pytest.raises(FormatError) as e:
        parse_fdinfo(client(extra=line + "\n"), "/proc/9/fdinfo/4")
    assert str(e.value) == f"/proc/9/fdinfo/4: {key}: {message}"
    with pytest.raises(FormatError) as e:
        parse_fdinfo(client(extra=line + "\n"))
    assert str(e.value).startswith(f"fdinfo: {key}: ")


def test_a_drm_line_without_a_colon_is_skipped_not_the_end():
    c = parse_fdinfo(client(engines={"render": 5}).replace(
        "drm-driver", "drm-garbage-line\ndrm-driver"))
    assert (c.driver, c.engines) == ("simgpu", {"render": 5})
    assert parse_fdinfo(client(extra="drm-engine-copy:\t7\n")).engines["copy"] == 7  # ns
    assert parse_fdinfo("drm-total-vram:\t2 KiB\ndrm-driver:\tx\n").memory_bytes() == 2048


def test_memory_bytes_takes_total_else_resident_per_region():
    c = parse_fdinfo("drm-driver:\tx\ndrm-total-a:\t5\ndrm-resident-a:\t3\n"
                     "drm-resident-b:\t7\ndrm-shared-c:\t11\n")
    assert c.memory_bytes() == 5 + 7  # c has neither: 0


@pytest.fixture
def listing(monkeypatch):
    """os.listdir in a known order (/proc and fd/ entries by number,
    highest first, so later entries come after the skipped ones), and
    PermissionError for the fd directories of the pids in .denied."""
    import os

    real = os.listdir
    denied: set[str] = set()

    def listdir(path):
        if any(str(path).endswith(f"/{pid}/fd") for pid in denied):
            raise PermissionError(13, "Permission denied")
        names = real(path)
        return sorted(names, key=lambda n: (not n.isdigit(), -int(n) if n.isdigit() else 0))

    monkeypatch.setattr(os, "listdir", listdir)
    return denied


def test_skipped_fds_and_processes_do_not_end_the_scan(proc, source, listing):
    good = client(client_id=1, engines={"render": 10})
    proc.process(100, "/a", {
        9: ("/dev/null", None), 8: ("pipe:[3]", None), 7: ("/dev/nvidia0", None),
        6: ("/dev/dri/renderD128", "pos:\t0\n"),  # DRM, but no drm-driver
        5: ("/dev/dri/renderD128", client(client_id=2, extra="drm-engine-x:\tbad\n")),
        4: ("/dev/shm/x", None),
        1: ("/dev/dri/renderD128", good)})
    (proc.root / "100" / "fd" / "3").symlink_to("/dev/dri/renderD129")  # no fdinfo file
    proc.process(150, "/b")
    listing.add("150")
    proc.process(120, "/c", {2: ("/dev/dri/renderD129", client(client_id=3,
                                                                engines={"render": 4}))})
    proc.process(130, "/d")
    listing.add("130")
    s = source.sample()
    assert {g: du.gpu_time_ns for g in s.groups for du in s.groups[g].devices.values()} == {
        "/a": 10, "/c": 4}
    assert s.errors == [
        f"{proc.root}/100/fdinfo/5: drm-engine-x: 'bad' is not a number (units: ns)",
        "the file descriptors of 2 processes could not be read (permission denied): run as "
        "root to see every container"]


def test_a_proc_that_cannot_be_listed_is_an_error(tmp_path):
    src = FdinfoSource(proc=tmp_path / "nope")
    with pytest.raises(OSError) as e:
        src.scan()
    assert e.value.errno == 2
    assert e.value.strerror == f"cannot list {tmp_path}/nope: No such file or directory"


def test_the_lowest_pid_owns_a_shared_client_even_when_found_last(proc, source, listing):
    info = client(client_id=5, engines={"render": 1000})
    proc.process(200, "/b", {3: ("/dev/dri/renderD128", info)})  # listed first
    proc.process(100, "/a", {3: ("/dev/dri/renderD128", info)})
    s = source.sample()
    assert list(s.groups) == ["/a"] and s.groups["/a"].pids == [100]


def test_processes_without_a_cgroup_line_count_at_the_root(proc, source):
    proc.process(100, "/a", {3: ("/dev/dri/renderD128", client(client_id=1))})
    (proc.root / "100" / "cgroup").write_text("1:name=systemd:/old\n")  # no v2 line
    proc.process(101, "/a", {3: ("/dev/dri/renderD128", client(client_id=2))})
    (proc.root / "101" / "cgroup").unlink()  # exited between the fd and the cgroup
    proc.process(102, "/a", {3: ("/dev/dri/renderD128", client(client_id=3))})
    (proc.root / "102" / "cgroup").write_text("0::\n")
    proc.process(103, "/x", {3: ("/dev/dri/renderD128", client(client_id=4))})
    (proc.root / "103" / "cgroup").write_bytes(b"0::/caf\xe9\n")  # not UTF-8: kept as bytes
    s = source.sample()
    assert s.groups["/"].devices[R128].clients == 3
    assert s.groups["/"].pids == [100, 101, 102]
    assert "/caf\udce9" in s.groups


def test_frequencies_are_reported_per_device_and_engine(proc, source):
    proc.process(100, "/a", {3: ("/dev/dri/renderD128", fixture("panfrost"))})
    proc.process(101, "/a", {3: ("/dev/dri/renderD129", client(
        client_id=2, extra="drm-maxfreq-gpu:\t710 MHz\n"))})
    proc.process(102, "/a", {3: ("/dev/dri/renderD130", client(client_id=3))})
    s = source.sample()
    assert s.frequency == {
        R128: {"fragment": (799999987, 799999987), "vertex-tiler": (799999987, 799999987)},
        R129: {"gpu": (None, 710_000_000)}}


def _cycles(cyc: int, total: int, engine_ns: int | None = None) -> str:
    extra = f"drm-cycles-rcs:\t{cyc}\ndrm-total-cycles-rcs:\t{total}\n"
    extra += "drm-cycles-bcs:\t9\n"  # no total-cycles: no utilisation from it
    if engine_ns is not None:
        extra += f"drm-engine-rcs:\t{engine_ns} ns\n"
    return client(client_id=1, extra=extra)


def test_cycles_accumulate_and_stay_monotonic(proc, source):
    proc.process(100, "/a", {3: ("/dev/dri/renderD128", _cycles(100, 1000))})
    source.sample()
    busy = []
    # +1 of +1 (100 %), cycles back (0), total back (0), +1 of +2 past the high marks (50 %)
    for cyc, total in ((101, 1001), (50, 1002), (102, 900), (103, 1004)):
        proc.set_info(100, 3, _cycles(cyc, total))
        source.clock.advance(1)
        du = source.sample().groups["/a"].devices[R128]
        busy.append(du.engines["rcs"].busy_ns)
        assert "bcs" not in du.engines
    assert busy == [SEC, SEC, SEC, SEC + SEC // 2]


def test_engine_time_wins_over_cycles_of_the_same_engine(proc, source):
    proc.process(100, "/a", {3: ("/dev/dri/renderD128", _cycles(100, 1000, engine_ns=10))})
    source.sample()
    proc.set_info(100, 3, _cycles(200, 1100, engine_ns=30))
    source.clock.advance(1)
    assert source.sample().groups["/a"].devices[R128].engines["rcs"].busy_ns == 30


def test_engine_time_accumulates_over_samples(proc, source):
    proc.process(100, "/a", {3: ("/dev/dri/renderD128", client(engines={"render": 10}))})
    for ns in (10, 25, 45):
        proc.set_info(100, 3, client(engines={"render": ns}))
        du = source.sample().groups["/a"].devices[R128]
        source.clock.advance(1)
    assert du.engines["render"].busy_ns == 45 and du.gpu_time_ns == 45


def test_a_group_is_forgotten_after_forget_s_unseen(proc, source, monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(fdinfo_mod.time, "monotonic", lambda: now[0])
    proc.process(100, "/a", {3: ("/dev/dri/renderD128", client(client_id=1,
                                                                engines={"render": 100}))})
    source.sample()
    proc.exit(100)
    now[0] += source.forget_s  # exactly forget_s: still remembered
    source.sample()
    proc.process(101, "/a", {3: ("/dev/dri/renderD128", client(client_id=2,
                                                                engines={"render": 1}))})
    assert source.sample().groups["/a"].devices[R128].gpu_time_ns == 101
    proc.exit(101)
    now[0] += source.forget_s + 1  # past it: the counters start again
    source.sample()
    proc.process(102, "/a", {3: ("/dev/dri/renderD128", client(client_id=3,
                                                                engines={"render": 7}))})
    assert source.sample().groups["/a"].devices[R128].gpu_time_ns == 7
