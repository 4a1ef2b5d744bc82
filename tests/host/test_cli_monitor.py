"""`pycgpu stat`, `pycgpu top` and `pycgpu exporter` on a fake cgroup tree with
containers of several runtimes, and on a fake /proc."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner
from fakeproc import FakeProc, client, fake_devnum, fixture
from prometheus_client.parser import text_string_to_metric_families

from pycgpu import monitoring
from pycgpu.cli import main
from pycgpu.cli.commands.cmd_monitor import parse_listen
from pycgpu.core.formats import DevT
from pycgpu.core.schemas import STAT_SCHEMA
from pycgpu.monitoring import exporter as exp
from pycgpu.monitoring import fdinfo as fdinfo_mod
from pycgpu.monitoring import view
from pycgpu.monitoring.containers import Resolver
from pycgpu.monitoring.fdinfo import FdinfoSource
from pycgpu.monitoring.kernel import KernelSource
from pycgpu.monitoring.view import Monitor

ID = "3f2a9c1b7d4e" + "0" * 52
ID2 = "a1b2c3d4e5f6" + "1" * 52
UID = "1c2d3e4f-aaaa-bbbb-cccc-111122223333"
POD = (f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID.replace('-', '_')}"
       ".slice")
TRAIN = f"/{POD}/cri-containerd-{ID}.scope"
WEB = f"/system.slice/docker-{ID2}.scope"
COMMANDS = ["top", "stat", "exporter"]


@pytest.fixture
def env(cli, tmp_path):
    """The fake tree with a Kubernetes container (named through containerd's
    state), a Docker container and a plain group, and the CLI environment."""
    fake = cli.fake
    for rel in (TRAIN, WEB, "/ai/train"):
        fake.make(rel.lstrip("/"))
    root = fake.root
    (root / TRAIN.lstrip("/") / "gpu.stat").write_text(
        "226:128 usage_usec=4000000 wait_usec=1000000\n226:129 usage_usec=0 wait_usec=0\n")
    (root / TRAIN.lstrip("/") / "gpu.memory.current").write_text("226:128 1073741824\n226:129 0\n")
    (root / TRAIN.lstrip("/") / "gpu.memory.max").write_text("226:128 2147483648\n226:129 max\n")
    (root / TRAIN.lstrip("/") / "gpu.memory.events").write_text("226:128 max=2\n226:129 max=0\n")
    (root / TRAIN.lstrip("/") / "gpu.weight").write_text("default 300\n")
    (root / WEB.lstrip("/") / "gpu.stat").write_text("226:128 usage_usec=1500 wait_usec=0\n")
    (root / WEB.lstrip("/") / "gpu.priority").write_text("-5\n")
    (root / WEB.lstrip("/") / "gpu.priority.effective").write_text("-5\n")
    (root / "ai/train/gpu.stat").write_text("226:128 usage_usec=0 wait_usec=0\n")
    state = tmp_path / "state"
    config = state / f"run/containerd/io.containerd.runtime.v2.task/k8s.io/{ID}/config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"annotations": {
        "io.kubernetes.cri.container-name": "trainer",
        "io.kubernetes.cri.sandbox-name": "train-0",
        "io.kubernetes.cri.sandbox-namespace": "ml"}}))
    return {**cli.env, "PYCGPU_RUNTIME_ROOT": str(state)}


def run(env, *args, code=0):
    r = CliRunner().invoke(main, list(args), env=env)
    if r.exception and not isinstance(r.exception, SystemExit):
        raise r.exception
    assert r.exit_code == code, (r.exit_code, r.output)
    return r.output


@pytest.mark.parametrize("name", COMMANDS)
def test_help_has_examples(name):
    r = CliRunner().invoke(main, [name, "--help"])
    assert r.exit_code == 0
    assert f"pycgpu {name}" in r.output.split("Examples:")[1]


def test_commands_are_listed():
    out = CliRunner().invoke(main, ["--help"]).output
    for name in COMMANDS:
        assert f"  {name} " in out


def test_import_stays_lazy():
    code = ("import sys, pycgpu.cli; print(sorted(m for m in ('rich', 'prometheus_client', "
            "'pycgpu.monitoring', 'pycgpu.monitoring.containers', 'psutil') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# stat --------------------------------------------------------------------------------------


def capped(env_root: Path) -> None:
    """WEB capped at 30% on every device, its work throttled 25 times for 0.8 s."""
    web = env_root / WEB.lstrip("/")
    (web / "gpu.max").write_text("default 30000 100000\n226:129 max 100000\n")
    (web / "gpu.stat").write_text(
        "226:128 usage_usec=1500 wait_usec=0 sched=1 nr_periods=40 nr_throttled=25 "
        "throttled_usec=800000\n"
        "226:129 usage_usec=0 wait_usec=0 sched=1 nr_periods=0 nr_throttled=0 throttled_usec=0\n")


def test_the_hard_cap_in_stat_top_and_the_exporter(env, cli):
    capped(cli.fake.root)
    doc = json.loads(run(env, "stat", "--json", "--interval", "0"))
    jsonschema.validate(doc, STAT_SCHEMA)
    web = {g["path"]: g for g in doc["groups"]}[WEB]["devices"]
    assert web == {"226:128": {
        "usage_usec": 1500, "gpu_time_usec": 1500, "wait_usec": 0,
        "cap": {"max_us": 30000, "period_us": 100000},
        "nr_periods": 40, "nr_throttled": 25, "throttled_usec": 800000,
        "weight": 100}}  # 226:129 is uncapped there and never used: left out
    lines = run(env, "top", "--once", "-i", "0", "--sort", "cap", "--reverse").splitlines()
    lines = lines[lines.index(next(x for x in lines if x.startswith("CONTAINER"))):]
    header = lines[0].split()
    assert header[header.index("WAIT%") + 1:header.index("WAIT%") + 3] == ["CAP%", "THR%"]
    first = lines[1].split()
    assert first[0] == WEB.rsplit("-", 1)[1][:12] and first[header.index("CAP%")] == "30.0"
    monitor = Monitor(KernelSource(Path(env["PYCGPU_CGROUP_ROOT"])))
    text = exp.Exporter(monitor).scrape().decode()
    found = {(s.name, s.labels.get("cgroup"), s.labels.get("device")): s.value
             for m in text_string_to_metric_families(text) for s in m.samples}
    assert found[("pycgpu_gpu_max_ratio", WEB, "226:128")] == 0.3
    assert found[("pycgpu_gpu_max_period_seconds", WEB, "226:128")] == 0.1
    assert found[("pycgpu_gpu_periods_total", WEB, "226:128")] == 40
    assert found[("pycgpu_gpu_throttled_periods_total", WEB, "226:128")] == 25
    assert found[("pycgpu_gpu_throttled_seconds_total", WEB, "226:128")] == 0.8
    # an uncapped group that no cap acted on has none of these series
    assert not [k for k in found if k[1] == TRAIN and k[0] in (
        "pycgpu_gpu_max_ratio", "pycgpu_gpu_max_period_seconds", "pycgpu_gpu_periods_total",
        "pycgpu_gpu_throttled_periods_total", "pycgpu_gpu_throttled_seconds_total")]



def test_stat_json_schema_and_values(env):
    doc = json.loads(run(env, "stat", "--json", "--interval", "0"))
    jsonschema.validate(doc, STAT_SCHEMA)
    assert (doc["schema"], doc["source"], doc["interval_s"]) == ("pycgpu.stat/v1", "kernel", None)
    assert doc["devices"] == {"226:128": {"node": "renderD128"}, "226:129": {"node": "renderD129"}}
    groups = {g["path"]: g for g in doc["groups"]}
    assert sorted(groups) == ["/ai/train", TRAIN, WEB]  # leaves only
    train = groups[TRAIN]
    assert train["container"] == {"runtime": "containerd", "id": ID, "name": "trainer",
                                  "pod": "train-0", "pod_uid": UID, "namespace": "ml",
                                  "qos": "burstable"}
    assert train["devices"]["226:128"] == {
        "usage_usec": 4000000, "gpu_time_usec": 4000000, "wait_usec": 1000000,
        "memory": {"current": 1073741824, "max": 2147483648, "limit_hits": 2},
        "weight": 300, "cap": {"max_us": None, "period_us": 100000}}
    assert "226:129" not in train["devices"]  # never used: only with --unused
    doc = json.loads(run(env, "stat", "--json", "--interval", "0", "--unused"))
    train = {g["path"]: g for g in doc["groups"]}[TRAIN]
    assert train["devices"]["226:129"]["memory"]["max"] is None
    assert groups[WEB]["container"]["runtime"] == "docker"
    assert groups[WEB]["priority_effective"] == -5
    assert groups["/ai/train"]["container"] is None


def test_stat_json_with_interval_has_percentages(env):
    doc = json.loads(run(env, "stat", "--json", "--interval", "0.05"))
    jsonschema.validate(doc, STAT_SCHEMA)
    assert doc["interval_s"] >= 0.05
    dev = {g["path"]: g for g in doc["groups"]}[TRAIN]["devices"]["226:128"]
    assert dev["gpu_percent"] == 0.0 and dev["wait_percent"] == 0.0


def test_stat_all_and_subtree(env):
    paths = [g["path"] for g in json.loads(run(env, "stat", "--json", "-i", "0", "--all",
                                               "kubepods.slice"))["groups"]]
    assert paths == ["/kubepods.slice", "/kubepods.slice/kubepods-burstable.slice",
                     f"/{POD}", TRAIN]


def test_stat_text(env):
    out = run(env, "stat", "-i", "0", "--sort", "time").splitlines()
    assert re.split(r"\s+", out[0]) == ["CONTAINER", "POD", "DEVICE", "GPU%", "WAIT%", "MEMORY",
                                        "MAX", "HITS", "WEIGHT", "PRIO", "RUNTIME", "CGROUP"]
    first = re.split(r"\s+", out[1])
    assert first[:10] == ["trainer", "ml/train-0", "renderD128", "-", "-", "1G", "2G", "2",
                          "300", "0"]
    assert any(line.startswith("a1b2c3d4e5f6") for line in out)


def test_stat_kernel_source_needs_cgroup2(tmp_path):
    r = CliRunner().invoke(main, ["--cgroup-root", str(tmp_path), "stat", "--source", "kernel"])
    assert r.exit_code == 1 and "not a cgroup2 mount" in r.output


@pytest.fixture
def proc_env(env, tmp_path, monkeypatch):
    monkeypatch.setattr(fdinfo_mod, "fd_devnum", fake_devnum)
    proc = FakeProc(tmp_path)
    proc.process(4100, TRAIN, {5: ("/dev/dri/renderD128", fixture("i915"))})
    proc.process(4101, TRAIN, {5: ("/dev/dri/renderD128", fixture("i915"))})  # same client
    proc.process(4200, WEB, {3: ("/dev/dri/card0", client(client_id=99, engines={"render": 5},
                                                          memory=4096))})
    return {**env, "PYCGPU_PROC_ROOT": str(proc.root)}


def test_stat_fdinfo_source(proc_env):
    doc = json.loads(run(proc_env, "stat", "--json", "-i", "0", "--source", "fdinfo"))
    jsonschema.validate(doc, STAT_SCHEMA)
    assert doc["source"] == "fdinfo"
    groups = {g["path"]: g for g in doc["groups"]}
    assert sorted(groups) == [TRAIN, WEB]
    train = groups[TRAIN]
    assert train["pids"] == [4100, 4101]
    dev = train["devices"]["226:128"]
    assert dev["clients"] == 1 and dev["driver"] == "i915"
    assert dev["engines"]["video"] == {"busy_ns": 88000000, "capacity": 2}
    assert dev["gpu_time_usec"] == (5520391204 + 1200 + 88000000) // 1000
    assert dev["memory"] == {"current": 12 << 20}
    assert groups[WEB]["devices"]["226:128"]["engines"]["render"]["busy_ns"] == 5


# top ---------------------------------------------------------------------------------------


def test_top_once_plain(env):
    out = run(env, "top", "--once", "--interval", "0", "--sort", "container").splitlines()
    assert out[0].startswith("pycgpu top - ")
    assert "source kernel  |  2 groups  |  1 devices" in out[0]
    assert re.split(r"\s+", out[2]) == ["CONTAINER", "POD", "DEVICE", "GPU%", "WAIT%", "MEMORY",
                                        "MAX", "HITS", "WEIGHT", "PRIO"]
    names = [line.split()[0] for line in out[3:]]
    assert names == ["a1b2c3d4e5f6", "trainer"]  # devices never used are left out
    out = run(env, "top", "--once", "-i", "0", "--sort", "container", "--unused").splitlines()
    assert "3 groups  |  2 devices" in out[0]
    assert [line.split()[0] for line in out[3:]] == ["a1b2c3d4e5f6", "train", "trainer",
                                                     "trainer"]


def test_top_once_fdinfo_shows_engines(proc_env):
    out = run(proc_env, "top", "--once", "-i", "0", "--source", "fdinfo", "--wide").splitlines()
    header = re.split(r"\s+", out[2])
    assert header == ["CONTAINER", "POD", "DEVICE", "GPU%", "COPY%", "RENDER%", "VIDEO%",
                      "VIDEO-ENHANCE%", "MEMORY", "CLIENTS", "RUNTIME", "CGROUP"]
    assert any(line.split()[:3] == ["a1b2c3d4e5f6", "-", "renderD128"] for line in out)


def test_top_rich_frame(env):
    from rich.console import Console

    from pycgpu.monitoring.frames import rich_frame

    monitor = Monitor(KernelSource(Path(env["PYCGPU_CGROUP_ROOT"])),
                      Resolver(env["PYCGPU_RUNTIME_ROOT"]))
    monitor.measure(0)
    console = Console(file=io.StringIO(), width=160, record=True)
    console.print(rich_frame(monitor, "memory", False, {}, True, 2, unused=True))
    text = console.export_text()
    assert "CONTAINER" in text and "trainer" in text and "ml/train-0" in text
    assert "2 more rows" in text  # 4 rows (trainer on two devices), 2 shown


def test_top_in_a_pseudo_terminal(env):
    """Two refreshes in a pty through rich's live display, then a clean exit."""
    pid, fd = pty.fork()
    if pid == 0:  # child
        try:
            os.environ.update(env)
            os.environ.update(TERM="xterm-256color", COLUMNS="150", LINES="40")
            os.execv(sys.executable, [sys.executable, "-m", "pycgpu", "top", "--count", "2",
                                      "--interval", "0.2"])
        finally:
            os._exit(127)
    out = b""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    text = out.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, text
    assert "CONTAINER" in text and "trainer" in text
    assert "Traceback" not in text
    assert text.count("pycgpu top - ") >= 2  # refreshed
    assert "\x1b[?1049h" in text  # the alternate screen, left again at exit
    assert "\x1b[?1049l" in text


def test_top_batch_mode_when_not_a_terminal(env):
    out = run(env, "top", "--count", "2", "--interval", "0.1")
    assert out.count("pycgpu top - ") == 2


# exporter ----------------------------------------------------------------------------------


def families(text: str) -> dict:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_collector_kernel(env):
    monitor = Monitor(KernelSource(Path(env["PYCGPU_CGROUP_ROOT"])),
                      Resolver(env["PYCGPU_RUNTIME_ROOT"]))
    text = exp.Exporter(monitor).scrape().decode()
    f = families(text)
    samples = {(s.name, s.labels.get("cgroup"), s.labels.get("device")): s
               for fam in f.values() for s in fam.samples}
    t = samples[("pycgpu_gpu_time_seconds_total", TRAIN, "226:128")]
    assert t.value == 4.0
    assert t.labels == {"cgroup": TRAIN, "container": "trainer", "pod": "train-0",
                        "namespace": "ml", "device": "226:128"}
    assert samples[("pycgpu_gpu_wait_seconds_total", TRAIN, "226:128")].value == 1.0
    assert samples[("pycgpu_gpu_memory_bytes", TRAIN, "226:128")].value == 1 << 30
    assert samples[("pycgpu_gpu_memory_max_bytes", TRAIN, "226:128")].value == 2 << 30
    assert ("pycgpu_gpu_memory_max_bytes", TRAIN, "226:129") not in samples  # max: absent
    assert samples[("pycgpu_gpu_memory_limit_hits_total", TRAIN, "226:128")].value == 2
    assert samples[("pycgpu_gpu_weight", TRAIN, "226:128")].value == 300
    assert samples[("pycgpu_gpu_priority_effective", WEB, None)].value == -5
    info = samples[("pycgpu_container_info", TRAIN, None)]
    assert info.labels["runtime"] == "containerd" and info.labels["qos"] == "burstable"
    assert info.labels["pod_uid"] == UID and info.labels["container_id"] == ID
    assert f["pycgpu_gpu_time_seconds"].type == "counter"
    assert f["pycgpu_gpu_memory_bytes"].type == "gauge"
    assert "# TYPE pycgpu_gpu_time_seconds_total counter" in text
    assert "pycgpu_exporter_scrape_duration_seconds" in text
    for name in f:  # every name is documented
        assert any(m.startswith(name) for m in exp.METRICS), name


def samples_of(text: str) -> dict:
    return {(s.name, s.labels.get("cgroup"), s.labels.get("device"), s.labels.get("engine"),
             s.labels.get("region"), s.labels.get("kind")): s
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def test_collector_fdinfo_engines(proc_env):
    monitor = Monitor(FdinfoSource(proc=Path(proc_env["PYCGPU_PROC_ROOT"]),
                                   sysfs=Path(proc_env["PYCGPU_SYSFS_ROOT"])))
    got = samples_of(exp.Exporter(monitor).scrape().decode())
    video = ("pycgpu_gpu_engine_busy_seconds_total", TRAIN, "226:128", "video", None, None)
    assert got[video].value == 0.088
    # pod is always a name: the UID (all the cgroup path tells) is on the info metric
    assert got[video].labels == {"cgroup": TRAIN, "container": "3f2a9c1b7d4e", "pod": "",
                                 "namespace": "", "device": "226:128", "engine": "video"}
    assert got[("pycgpu_container_info", TRAIN, None, None, None, None)].labels["pod_uid"] == UID
    # capacity is the device's, not the group's
    assert got[("pycgpu_gpu_engine_capacity", None, "226:128", "video", None, None)].value == 2
    # one family per kind: summable over region
    assert got[("pycgpu_gpu_memory_region_resident_bytes", TRAIN, "226:128", None, "system0",
                None)].value == 8196 * 1024
    # the card0 fd of the docker container counts against renderD128
    assert got[("pycgpu_gpu_clients", WEB, "226:128", None, None, None)].value == 1
    assert got[("pycgpu_gpu_time_seconds_total", WEB, "226:128", None, None, None)].value == 5e-9
    assert not any(k[0] == "pycgpu_gpu_wait_seconds_total" for k in got)


def test_collector_reads_at_scrape_time(env):
    monitor = Monitor(KernelSource(Path(env["PYCGPU_CGROUP_ROOT"])))
    reg = exp.Exporter(monitor)
    key = ("pycgpu_gpu_time_seconds_total", WEB, "226:128", None, None, None)
    assert samples_of(reg.scrape().decode())[key].value == 0.0015
    stat = Path(env["PYCGPU_CGROUP_ROOT"]) / WEB.lstrip("/") / "gpu.stat"
    stat.write_text("226:128 usage_usec=2500000 wait_usec=0\n")
    assert samples_of(reg.scrape().decode())[key].value == 2.5


def test_http_server_on_a_free_port(env):
    monitor = Monitor(KernelSource(Path(env["PYCGPU_CGROUP_ROOT"])))
    server, _ = exp.serve(exp.Exporter(monitor), "127.0.0.1", 0)
    try:
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
            assert r.headers["Content-Type"].startswith("text/plain")
    finally:
        server.shutdown()
        server.server_close()
    key = ("pycgpu_gpu_time_seconds_total", TRAIN, "226:128", None, None, None)
    assert samples_of(text)[key].value == 4.0


def test_exporter_command(env):
    """The command in a subprocess: prints its address, serves, stops on SIGTERM."""
    p = subprocess.Popen([sys.executable, "-m", "pycgpu", "exporter", "--listen", "127.0.0.1:0"],
                         env={**os.environ, **env}, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stderr.readline()
        m = re.search(r"serving (http://127\.0\.0\.1:\d+/metrics) \(source kernel\)", line)
        assert m, line
        with urllib.request.urlopen(m.group(1), timeout=10) as r:
            text = r.read().decode()
        assert "pycgpu_gpu_time_seconds_total" in text and "trainer" in text
        p.send_signal(signal.SIGTERM)
        assert p.wait(10) == 0
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        p.stderr.close()


@pytest.mark.parametrize("text, want", [
    ("127.0.0.1:9842", ("127.0.0.1", 9842)), (":9842", ("0.0.0.0", 9842)),
    ("[::1]:0", ("::1", 0)), ("localhost:80", ("localhost", 80)),
    ("[::]:65535", ("::", 65535))])
def test_parse_listen(text, want):
    assert parse_listen(text) == want


@pytest.mark.parametrize("text", ["9842", "host:", "host:http", "h:70000", "h:65536"])
def test_bad_listen(env, text):
    out = run(env, "exporter", "--listen", text, code=2)
    assert out == (f"Error: --listen {text!r}: give HOST:PORT, e.g. 127.0.0.1:9842, :9842 or "
                   "[::1]:9842\n")


def test_a_read_error_of_the_source_is_one_line(env, monkeypatch):
    def fail(self, sample, error=None):
        raise error or OSError(5, "Input/output error")

    monkeypatch.setattr(KernelSource, "_read", fail)
    for command in ("stat", "top"):
        out = run(env, command, *(["--once"] if command == "top" else []), "-i", "0", code=1)
        assert out == "Error: reading usage: Input/output error\n"
    monkeypatch.setattr(KernelSource, "_read",
                        lambda self, sample: fail(self, sample, OSError("no errno")))
    assert run(env, "stat", "-i", "0", code=1) == "Error: reading usage: no errno\n"


# exporter fit for a fleet --------------------------------------------------------------------


def kernel_exporter(env, **kw):
    monitor = Monitor(KernelSource(Path(env["PYCGPU_CGROUP_ROOT"])),
                      Resolver(env["PYCGPU_RUNTIME_ROOT"]))
    return exp.Exporter(monitor, **kw)


def test_exporter_has_no_series_for_unused_devices(env):
    got = samples_of(kernel_exporter(env).scrape().decode())
    assert ("pycgpu_gpu_time_seconds_total", TRAIN, "226:128", None, None, None) in got
    # TRAIN lists 226:129 (the kernel lists every device) but never used it
    assert not [k for k in got if k[1] == TRAIN and k[2] == "226:129"]
    # /ai/train used nothing at all: not even its group-level series
    assert not [k for k in got if k[1] == "/ai/train"]


def test_exporter_device_label_is_the_render_node(env, fake_sysfs):
    from pycgpu.core.devices import discover

    devices = discover(*fake_sysfs)
    text = kernel_exporter(env, devices=devices).scrape().decode()
    got = samples_of(text)
    assert ("pycgpu_gpu_time_seconds_total", TRAIN, "renderD128", None, None, None) in got
    assert not [k for k in got if k[2] == "226:128"]
    info = got[("pycgpu_gpu_device_info", None, "renderD128", None, None, None)]
    assert info.labels == {"device": "renderD128", "maj_min": "226:128", "pci": "0000:00:02.0",
                           "driver": "i915"}
    assert got[("pycgpu_gpu_device_info", None, "renderD129", None, None, None)].labels[
        "maj_min"] == "226:129"


def test_exporter_families_are_summable_and_documented(env):
    text = kernel_exporter(env).scrape().decode()
    fams = families(text)
    for fam in fams.values():
        for s in fam.samples:
            assert "kind" not in s.labels
    build = fams["pycgpu_build_info"].samples[0]
    assert build.labels["version"] and build.value == 1
    for name in fams:
        assert any(m.startswith(name) for m in exp.METRICS), name


def test_broken_group_is_counted_and_the_rest_served(env):
    broken = Path(env["PYCGPU_CGROUP_ROOT"]) / WEB.lstrip("/") / "gpu.stat"
    broken.write_bytes(b"226:128 usage_usec=\xff\xfe wait_usec=0\n")
    logged: list[str] = []
    exporter = kernel_exporter(env, log=logged.append)
    server, _ = exp.serve(exporter, "127.0.0.1", 0)
    try:
        for n in (1, 2):
            url = f"http://127.0.0.1:{server.server_port}/metrics"
            with urllib.request.urlopen(url, timeout=10) as r:
                assert r.status == 200
                got = samples_of(r.read().decode())
            assert got[("pycgpu_scrape_errors_total", WEB, None, None, None, None)].value == n
            assert got[("pycgpu_gpu_time_seconds_total", TRAIN, "226:128", None, None,
                        None)].value == 4.0
    finally:
        server.shutdown()
        server.server_close()
    assert any("not UTF-8" in line and WEB in line for line in logged)


def test_scrape_survives_a_source_that_fails(env, tmp_path):
    missing = tmp_path / "gone"
    missing.mkdir()
    exporter = exp.Exporter(Monitor(KernelSource(missing)))
    missing.rmdir()
    got = samples_of(exporter.scrape().decode())
    assert got[("pycgpu_scrape_errors_total", "", None, None, None, None)].value == 1
    assert ("pycgpu_build_info", None, None, None, None, None) in got


def test_stat_on_a_missing_group_is_an_error(env):
    out = run(env, "stat", "--interval", "0", "no/such", code=2)
    assert "cgroup /no/such does not exist" in out
    out = run(env, "top", "--once", "--interval", "0", "no/such", code=2)
    assert "cgroup /no/such does not exist" in out


def test_kernel_source_without_the_controller_is_an_error(env):
    (Path(env["PYCGPU_CGROUP_ROOT"]) / "cgroup.controllers").write_text("cpu memory\n")
    out = run(env, "stat", "--source", "kernel", "--interval", "0", code=1)
    assert "no gpu controller in" in out and "--source fdinfo" in out
    out = run(env, "top", "--source", "kernel", "--once", "--interval", "0", code=1)
    assert "no gpu controller in" in out


def test_stat_with_a_non_utf8_file_warns_and_goes_on(env):
    broken = Path(env["PYCGPU_CGROUP_ROOT"]) / WEB.lstrip("/") / "gpu.stat"
    broken.write_bytes(b"\xff\n")
    r = CliRunner().invoke(main, ["stat", "--interval", "0", "--json"], env=env)
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert any("not UTF-8" in e for e in doc["errors"])
    assert TRAIN in [g["path"] for g in doc["groups"]]


def test_device_totals_from_the_root_in_stat_and_the_exporter(env, fake_sysfs):
    from pycgpu.core.devices import discover

    root = Path(env["PYCGPU_CGROUP_ROOT"])
    (root / "gpu.stat").write_text("226:128 usage_usec=9000000 wait_usec=2000000 sched=1\n"
                                   "226:129 usage_usec=0 wait_usec=0 sched=0\n")
    (root / "gpu.memory.current").write_text("226:128 3221225472\n226:129 0\n")
    doc = json.loads(run(env, "stat", "--json", "--interval", "0"))
    jsonschema.validate(doc, STAT_SCHEMA)
    assert doc["devices"]["226:128"]["total"] == {
        "usage_usec": 9000000, "wait_usec": 2000000, "memory_current": 3 << 30}
    assert doc["devices"]["226:129"]["total"] == {
        "usage_usec": 0, "wait_usec": 0, "memory_current": 0}
    assert "/" not in {g["path"] for g in doc["groups"]}
    got = samples_of(kernel_exporter(env, devices=discover(*fake_sysfs)).scrape().decode())
    assert got[("pycgpu_gpu_device_time_seconds_total", None, "renderD128", None, None,
                None)].value == 9.0
    assert got[("pycgpu_gpu_device_wait_seconds_total", None, "renderD128", None, None,
                None)].value == 2.0
    assert got[("pycgpu_gpu_device_memory_used_bytes", None, "renderD128", None, None,
                None)].value == 3 << 30
    assert got[("pycgpu_gpu_device_memory_used_bytes", None, "renderD129", None, None,
                None)].value == 0


def test_no_device_totals_without_root_files(env):
    doc = json.loads(run(env, "stat", "--json", "--interval", "0"))
    assert all("total" not in d for d in doc["devices"].values())
    text = kernel_exporter(env).scrape().decode()
    assert "pycgpu_gpu_device_time_seconds_total" not in text


# the numbers, the order and the text of the views --------------------------------------------

SECOND = 1_000_000_000


@pytest.fixture
def clock(env, monkeypatch):
    """A fake monotonic clock; the sleep of a measurement advances it by the
    interval and makes the train container's counters move: 1 s of GPU
    time and 3 s of waiting (three queues) in 2 s, and as much for its pod,
    whose counters include it."""
    now = [1000 * SECOND]
    monkeypatch.setattr(monitoring.Source, "clock", staticmethod(lambda: now[0]))
    root = Path(env["PYCGPU_CGROUP_ROOT"])
    (root / POD.lstrip("/") / "gpu.stat").write_text("226:128 usage_usec=4000000 "
                                                      "wait_usec=1000000\n")
    (root / POD.lstrip("/") / "gpu.memory.current").write_text("226:128 1073741824\n")

    def sleep(seconds: float) -> None:
        now[0] += int(seconds * SECOND)
        for group in (TRAIN, POD):
            (root / group.lstrip("/") / "gpu.stat").write_text(
                "226:128 usage_usec=5000000 wait_usec=4000000\n")

    monkeypatch.setattr(view.time, "sleep", sleep)
    return now


# numbers -------------------------------------------------------------------------------------


def test_stat_json_wait_percent_is_the_rate(env, clock):
    doc = json.loads(run(env, "stat", "--json", "--interval", "2"))
    assert doc["interval_s"] == 2.0
    dev = {g["path"]: g for g in doc["groups"]}[TRAIN]["devices"]["226:128"]
    assert dev["gpu_percent"] == 50.0  # 1 s of GPU time in 2 s
    assert dev["wait_percent"] == 150.0  # 3 s of waiting in 2 s: summed over queues
    assert dev["wait_usec"] == 4000000 and dev["usage_usec"] == 5000000
    web = {g["path"]: g for g in doc["groups"]}[WEB]["devices"]["226:128"]
    assert web["gpu_percent"] == 0.0 and web["wait_percent"] == 0.0


def test_stat_text_shows_the_rates(env, clock):
    out = run(env, "stat", "--interval", "2", "--sort", "gpu").splitlines()
    header = re.split(r"\s+", out[0])
    first = dict(zip(header, re.split(r"\s+", out[1]), strict=False))
    assert (first["CONTAINER"], first["GPU%"], first["WAIT%"]) == ("trainer", "50.0", "150.0")


def test_exporter_priority_effective_is_its_own_value(env, cli):
    """A group whose priority is capped by an ancestor: the two metrics differ."""
    cli.fake.make("team/job")
    cli("set", "team/job", "--priority", "500")  # capped by /team's 0
    monitor = Monitor(KernelSource(Path(env["PYCGPU_CGROUP_ROOT"])),
                      Resolver(env["PYCGPU_RUNTIME_ROOT"]))
    (Path(env["PYCGPU_CGROUP_ROOT"]) / "team/job/gpu.stat").write_text(
        "226:128 usage_usec=7 wait_usec=0\n")
    text = exp.Exporter(monitor).scrape().decode()
    got = {(s.name, s.labels.get("cgroup")): s.value
           for fam in text_string_to_metric_families(text) for s in fam.samples}
    assert got[("pycgpu_gpu_priority", "/team/job")] == 500
    assert got[("pycgpu_gpu_priority_effective", "/team/job")] == 0
    assert got[("pycgpu_gpu_priority", WEB)] == -5
    assert got[("pycgpu_gpu_priority_effective", WEB)] == -5


def test_an_unset_priority_has_no_own_series_and_inherits(env, cli):
    """A group whose gpu.priority reads default: no pycgpu_gpu_priority series,
    its inherited effective one; stat/v1 says priority_inherited, no priority."""
    cli.fake.make("team/job")
    cli("set", "team", "--priority", "40")
    root = Path(env["PYCGPU_CGROUP_ROOT"])
    (root / "team/job/gpu.stat").write_text("226:128 usage_usec=7 wait_usec=0\n")
    monitor = Monitor(KernelSource(root), Resolver(env["PYCGPU_RUNTIME_ROOT"]))
    text = exp.Exporter(monitor).scrape().decode()
    got = {(s.name, s.labels.get("cgroup")): s.value
           for fam in text_string_to_metric_families(text) for s in fam.samples}
    assert ("pycgpu_gpu_priority", "/team/job") not in got
    assert got[("pycgpu_gpu_priority_effective", "/team/job")] == 40
    assert got[("pycgpu_gpu_priority", WEB)] == -5
    doc = json.loads(run(env, "stat", "--json", "--interval", "0"))
    jsonschema.validate(doc, STAT_SCHEMA)
    groups = {g["path"]: g for g in doc["groups"]}
    job = groups["/team/job"]
    assert (job["priority_inherited"], job["priority_effective"]) == (True, 40)
    assert "priority" not in job
    assert (groups[WEB]["priority"], "priority_inherited" in groups[WEB]) == (-5, False)


# order ---------------------------------------------------------------------------------------


def _names(out: str) -> list[str]:
    return [line.split()[0] for line in out.splitlines()[3:]]


def test_top_reverse_reverses_the_order(env):
    args = ("top", "--once", "-i", "0", "--unused")
    for key in ("container", "memory", "cgroup"):
        ordered = _names(run(env, *args, "--sort", key))
        assert _names(run(env, *args, "--sort", key, "--reverse")) == ordered[::-1], key
    # numbers: the biggest first, reversed the smallest first (no memory reading last)
    assert _names(run(env, *args, "--sort", "memory"))[0] == "trainer"
    assert _names(run(env, *args, "--sort", "container")) == [
        "a1b2c3d4e5f6", "train", "trainer", "trainer"]
    assert _names(run(env, *args, "--sort", "container", "-r")) == [
        "trainer", "trainer", "train", "a1b2c3d4e5f6"]


def test_top_summary_with_all_counts_leaves_only(env, clock):
    """--all adds the inner groups as rows; the device totals of the summary
    still sum the leaves (an inner group's counters include its children's)."""
    out = run(env, "top", "--once", "-i", "2", "--all", "--sort", "cgroup")
    summary = out.splitlines()[0]
    assert "source kernel  |  3 groups  |  1 devices" in summary
    rows = {line.split()[0]: line.split() for line in out.splitlines()[3:]}
    pod = POD.rsplit("/", 1)[1]
    assert list(rows) == [pod, "trainer", "a1b2c3d4e5f6"]
    assert rows[pod][3:6] == ["50.0", "150.0", "1G"]  # the pod's own row: its counters
    assert rows["trainer"][3:6] == ["50.0", "150.0", "1G"]
    assert summary.endswith("renderD128 GPU 50.0% mem 1G")  # not 100.0%, not 2G


def test_stat_rows_sort_by_device_number(env, cli):
    root = Path(env["PYCGPU_CGROUP_ROOT"])
    (root / WEB.lstrip("/") / "gpu.stat").write_text(
        "226:1000 usage_usec=1 wait_usec=0\n226:129 usage_usec=1 wait_usec=0\n"
        "226:128 usage_usec=1 wait_usec=0\n")
    out = run(env, "stat", "-i", "0", "--sort", "device")
    devices = [re.split(r"\s+", line)[2] for line in out.splitlines()[1:]
               if line.startswith("a1b2c3d4e5f6")]
    assert devices == ["renderD128", "renderD129", "226:1000"]  # unnamed: MAJ:MIN
    assert sorted([DevT(226, 1000), DevT(226, 129)]) == [DevT(226, 129), DevT(226, 1000)]


# where text goes -----------------------------------------------------------------------------


def test_warnings_go_to_stderr(env, cli):
    broken = Path(env["PYCGPU_CGROUP_ROOT"]) / WEB.lstrip("/") / "gpu.stat"
    broken.write_bytes(b"\xff\n")
    r = CliRunner().invoke(main, ["stat", "-i", "0"], env=env)
    assert r.exit_code == 0
    assert r.stderr.startswith("warning: ") and "not UTF-8" in r.stderr
    assert "warning" not in r.stdout and "not UTF-8" not in r.stdout
    assert r.stdout.startswith("CONTAINER")
    # with --json the document carries them: stdout stays one JSON document
    r = CliRunner().invoke(main, ["stat", "-i", "0", "--json"], env=env)
    assert any("not UTF-8" in e for e in json.loads(r.stdout)["errors"])
    cli.fake.make("team/job")
    r = CliRunner().invoke(main, ["set", "team/job", "--priority", "500"], env=env)
    assert r.exit_code == 0 and r.stdout == ""
    assert r.stderr.startswith("warning: /team/job gets priority 500")
    r = CliRunner().invoke(main, ["k8s", "inventory", "--json", "--shares", "renderD7=3"],
                           env=env)
    assert r.exit_code == 0 and "renderD7" in r.stderr
    assert json.loads(r.stdout)["warnings"]  # stdout stays one JSON document


def test_tables_are_plain_text_when_not_a_terminal(env):
    out = run(env, "stat", "-i", "0")
    assert "\x1b" not in out
    assert all(line == line.rstrip() for line in out.splitlines())
    header, *rows = out.splitlines()
    # text columns start under their header, numbers end under theirs
    trainer = next(line for line in rows if line.startswith("trainer"))
    assert trainer.index("ml/train-0") == header.index("POD")
    assert trainer[:header.index("WEIGHT") + len("WEIGHT")].endswith("  300")
    assert trainer[:header.index("MEMORY") + len("MEMORY")].endswith("  1G")
    # a long cell is neither cut nor wrapped
    assert any(line.endswith(TRAIN) for line in out.splitlines())
