"""The Kubernetes device plugin against a test kubelet (fakekubelet.py,
written from the same API): registration, the advertised shares, what
Allocate gives for them, packing, render nodes that come and go, kubelet
restarts and bad configuration. The plugin runs for real (gRPC over unix
sockets in a temporary directory), in a thread or as the CLI in a
subprocess."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from conftest import _node
from fakekubelet import FakeKubelet, response_dict

from pycgpu.core.devices import Device, resolve
from pycgpu.core.formats import DevT
from pycgpu.core.formats import format_size_exact as exact
from pycgpu.core.knobs import gpu_memory_region
from pycgpu.k8s import shares as sh
from pycgpu.k8s.plugin import DevicePlugin
from pycgpu.k8s.sources import StaticSource
from pycgpu.runtime import annotations as ann

GIB = 1 << 30


def per(size: int, k: int, n: int) -> int:
    """The memory limit of k shares of n: size x k / n, whole 4 KiB pages."""
    return size * k // n // 4096 * 4096


def gpu(minor: int) -> Device:
    return Device(Path(f"/dev/dri/renderD{minor}"), None, DevT(226, minor), "simgpu")


@pytest.fixture
def sockdir() -> Iterator[Path]:
    """A short directory (unix socket paths are limited to 107 bytes)."""
    d = Path(tempfile.mkdtemp(prefix="pycgpu-k8s-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


class Running:
    def __init__(self, plugin: DevicePlugin, source: StaticSource, logs: list[str]) -> None:
        self.plugin, self.source, self.logs = plugin, source, logs
        self.stop = threading.Event()
        self.thread = threading.Thread(target=plugin.run, args=(self.stop,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        assert not self.thread.is_alive()


@pytest.fixture
def start(sockdir):
    running: list[Running] = []

    def go(devices: list[Device], shares=("10",), memory=(), only=(), weight=100) -> Running:
        config, warnings = sh.parse_config(shares, weight, memory, only)
        logs: list[str] = list(warnings)
        source = StaticSource(devices)
        plugin = DevicePlugin(config, source, log=logs.append, plugin_dir=sockdir,
                              check_interval=0.05)
        r = Running(plugin, source, logs)
        running.append(r)
        return r

    yield go
    for r in running:
        r.close()


@pytest.fixture
def kubelet(sockdir) -> Iterator[FakeKubelet]:
    k = FakeKubelet(sockdir).start()
    yield k
    k.stop()


def ids(name: str, n: int) -> list[str]:
    return [f"{name}-s{i}" for i in range(n)]


# registration and the list --------------------------------------------------------------------


def test_registers_and_advertises_shares(start, kubelet):
    start([gpu(128), gpu(129)])
    req = kubelet.wait_registered()
    assert req.version == "v1beta1"
    assert req.endpoint == "pycgpu-gpu-share.sock"
    assert req.resource_name == "pycgpu.io/gpu-share"
    assert req.options.get_preferred_allocation_available is True
    assert req.options.pre_start_required is False
    assert kubelet.options.get_preferred_allocation_available is True
    assert kubelet.devices() == ids("renderD128", 10) + ids("renderD129", 10)
    assert {h for _, h in kubelet.lists[-1]} == {"Healthy"}


def test_per_device_shares(start, kubelet):
    start([gpu(128), gpu(129)], shares=("4", "renderD129=2"))
    kubelet.wait_registered()
    assert kubelet.devices() == ids("renderD128", 4) + ids("renderD129", 2)


def test_waits_for_the_kubelet(start, sockdir):
    r = start([gpu(128)])
    time.sleep(0.3)
    assert any("waiting for the kubelet" in line for line in r.logs), r.logs
    k = FakeKubelet(sockdir).start()
    try:
        k.wait_registered()
        assert k.devices() == ids("renderD128", 10)
    finally:
        k.stop()


# Allocate ---------------------------------------------------------------------------------------


def resolver(devices: list[Device]):
    return lambda text: resolve(text, devices).devt


def test_allocate_turns_shares_into_weight_and_memory(start, kubelet):
    devices = [gpu(128), gpu(129)]
    start(devices, memory=("renderD128=8G",))
    kubelet.wait_registered()
    three, one, spread = kubelet.allocate(["renderD128-s0", "renderD128-s1", "renderD128-s2"],
                                          ["renderD129-s7"],
                                          ["renderD128-s5", "renderD128-s6", "renderD129-s0"])
    three, one, spread = map(response_dict, (three, one, spread))
    assert three["cdi_devices"] == ["pycgpu.io/gpu=renderD128"]
    limit = per(8 * GIB, 3, 10)
    assert three["annotations"] == {ann.WEIGHT: "renderD128=300",
                                    ann.MEMORY_MAX: f"renderD128={exact(limit)}"}
    assert three["envs"] == {} and three["devices"] == [] and three["mounts"] == []
    # no size known for renderD129: weight only
    assert one == {"cdi_devices": ["pycgpu.io/gpu=renderD129"],
                   "annotations": {ann.WEIGHT: "renderD129=100"},
                   "envs": {}, "devices": [], "mounts": []}
    assert spread["cdi_devices"] == ["pycgpu.io/gpu=renderD128", "pycgpu.io/gpu=renderD129"]
    assert spread["annotations"][ann.WEIGHT] == "renderD128=200,renderD129=100"
    # no CDI spec of its own: no share devices (test_issue39_runtime_share_ids.py)
    # what the createRuntime hook makes of them
    request = ann.parse(three["annotations"], resolver(devices))
    assert request.settings.device_weights == {DevT(226, 128): 300}
    assert request.settings.memory_max == {gpu_memory_region(DevT(226, 128)): limit}
    request = ann.parse(spread["annotations"], resolver(devices))
    assert request.settings.device_weights == {DevT(226, 128): 200, DevT(226, 129): 100}
    assert request.settings.memory_max == {gpu_memory_region(DevT(226, 128)): per(8 * GIB, 2, 10)}


def test_weights_are_proportional_to_shares(start, kubelet):
    start([gpu(128)], shares=("20",), weight=50, memory=("4G",))
    kubelet.wait_registered()
    for k in (1, 2, 7, 20):
        (resp,) = kubelet.allocate(ids("renderD128", k))
        assert resp.annotations[ann.WEIGHT] == f"renderD128={50 * k}"
        assert resp.annotations[ann.MEMORY_MAX] == f"renderD128={exact(per(4 * GIB, k, 20))}"


def test_sysfs_memory_size_is_used(tmp_path, fake_sysfs):
    sysfs, _ = fake_sysfs
    (sysfs / "class" / "drm" / "renderD128" / "device" / sh.VRAM_FILE).write_text(
        f"{16 * GIB}\n")
    from pycgpu.core.devices import discover

    inv = sh.build(discover(sysfs, fake_sysfs[1]), sh.parse_config(["4"], 100, ["1G"])[0],
                   sysfs)
    assert inv.gpus["renderD128"].memory == 16 * GIB
    assert inv.gpus["renderD128"].memory_from == "sysfs"
    assert inv.gpus["renderD129"].memory == GIB  # the default size
    assert sh.grant(inv, ["renderD128-s0"]).annotations[ann.MEMORY_MAX] == "renderD128=4G"


def test_dmem_capacity_sizes_the_shares(fake_sysfs):
    """A kernel with dmem: a device's region sizes its shares (before sysfs
    and the default); a device with several regions gets a limit per region,
    which the hook resolves; a device size given for it is said to be unused."""
    from pycgpu.core.devices import discover
    from pycgpu.core.memory import DMEM, Interface, Region

    sysfs, dev = fake_sysfs
    (sysfs / "class" / "drm" / "renderD129" / "device" / sh.VRAM_FILE).write_text(f"{GIB}\n")
    r128, r129 = DevT(226, 128), DevT(226, 129)
    memory = Interface(DMEM, (
        Region("226:128:vram0", "drm/0000:00:02.0/vram0", r128, "vram0", 8 * GIB, DMEM),
        Region("226:128:vram1", "drm/0000:00:02.0/vram1", r128, "vram1", 4 * GIB, DMEM),
        Region("226:129", "drm/vgem/system", r129, "system", 16 * GIB, DMEM)))
    devices = discover(sysfs, dev)
    config, _ = sh.parse_config(["4"], 100, ["renderD128=2G", "1G"])
    inv = sh.build(devices, config, sysfs, memory)
    g128, g129 = inv.gpus["renderD128"], inv.gpus["renderD129"]
    assert (g129.memory, g129.memory_from, g129.regions) == (16 * GIB, "dmem", ())
    assert g128.regions == (("vram0", 8 * GIB), ("vram1", 4 * GIB))
    assert (g128.memory, g128.memory_from, g128.memory_max(1)) == (12 * GIB, "dmem", None)
    assert inv.warnings == ["device memory renderD128: it has several memory regions (vram0, "
                            "vram1); each is sized from dmem.capacity instead"]
    annotations = sh.grant(inv, ["renderD128-s0", "renderD128-s1", "renderD129-s3"]).annotations
    assert annotations[ann.MEMORY_MAX] == ("renderD128:vram0=4G,renderD128:vram1=2G,"
                                           "renderD129=4G")
    request = ann.parse(annotations, resolver(devices), memory=lambda: memory)
    assert {r.key: v for r, v in request.settings.memory_max.items()} == {
        "226:128:vram0": 4 * GIB, "226:128:vram1": 2 * GIB, "226:129": 4 * GIB}
    assert g128.memory_text() == "memory vram0 8G, vram1 4G (dmem)"
    # a kernel without the region: as before
    inv = sh.build(devices, config, sysfs, Interface(DMEM, ()))
    assert inv.gpus["renderD128"].memory_from == "device"
    assert inv.gpus["renderD129"].memory_from == "sysfs"


def dmem_plugin(tmp_path, monkeypatch, fake_sysfs, sockdir, controllers: str
                ) -> tuple[DevicePlugin, list[str]]:
    """A plugin (4 shares per GPU) refreshed once on a fake dmem kernel with
    @controllers, vgem's system region 16 GiB; and its log."""
    from conftest import FakeKernel

    from pycgpu.core.devices import discover

    fake = FakeKernel(tmp_path, controllers=controllers, memory=False,
                      dmem={"drm/vgem/system": 16 * GIB})
    fake.install(monkeypatch)
    logs: list[str] = []
    config, _ = sh.parse_config(["4"], 100, [])
    plugin = DevicePlugin(config, StaticSource(discover(*fake_sysfs)), log=logs.append,
                          plugin_dir=sockdir, sysfs_root=fake_sysfs[0], cgroup_root=fake.root)
    plugin.refresh()
    return plugin, logs


def test_the_plugin_reads_dmem_capacity_of_its_cgroup_root(tmp_path, monkeypatch, fake_sysfs,
                                                          sockdir):
    plugin, logs = dmem_plugin(tmp_path, monkeypatch, fake_sysfs, sockdir, "cpu memory gpu")
    assert plugin.inventory()[0].gpus["renderD129"].memory_max(1) == 4 * GIB
    assert "renderD129: 4 shares, 16G of memory (dmem)" in logs[-1]


def test_without_the_gpu_controller_shares_carry_memory_limits_only(tmp_path, monkeypatch,
                                                                     fake_sysfs, sockdir):
    """A kernel with dmem and no gpu controller: a weight annotation would
    make the hook refuse the container, so Allocate gives memory limits only."""
    plugin, logs = dmem_plugin(tmp_path, monkeypatch, fake_sysfs, sockdir, "cpu memory")
    annotations = sh.grant(plugin.inventory()[0], ["renderD129-s0"]).annotations
    assert ann.WEIGHT not in annotations
    assert annotations[ann.MEMORY_MAX] == "renderD129=4G"
    assert any("no gpu controller" in line for line in logs), logs


def test_cli_inventory_on_a_dmem_kernel(tmp_path, monkeypatch, fake_sysfs):
    from conftest import Cli, FakeKernel

    fake = FakeKernel(tmp_path, memory=False, dmem={
        "drm/0000:00:02.0/vram0": 8 * GIB, "drm/0000:00:02.0/vram1": 4 * GIB,
        "drm/vgem/system": 16 * GIB}).install(monkeypatch)
    cli = Cli(fake, *fake_sysfs)
    doc = json.loads(cli("k8s", "inventory", "--shares", "4", "--json").stdout)
    by = {g["device"]: g for g in doc["gpus"]}
    assert by["renderD128"]["memory_regions"] == [
        {"region": "vram0", "bytes": 8 * GIB, "per_share_bytes": 2 * GIB},
        {"region": "vram1", "bytes": 4 * GIB, "per_share_bytes": GIB}]
    assert (by["renderD129"]["memory_per_share_bytes"], by["renderD129"]["memory_from"],
            by["renderD129"]["memory_regions"]) == (4 * GIB, "dmem", [])
    text = cli("k8s", "inventory", "--shares", "4").stdout
    assert "vram0 2G of 8G, vram1 1G of 4G (dmem)" in text
    assert "4G of 16G (dmem)" in text


def test_allocate_refuses_unknown_ids(start, kubelet):
    r = start([gpu(128)], shares=("2",))
    kubelet.wait_registered()
    for bad in (["renderD128-s2"], ["renderD130-s0"], ["nvidia0"]):
        with pytest.raises(grpc.RpcError) as e:
            kubelet.allocate(bad)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert bad[0] in e.value.details()
    assert any(line.startswith("Allocate refused") for line in r.logs)


# GetPreferredAllocation -------------------------------------------------------------------------


def test_preferred_allocation_packs_one_pod_on_one_gpu(start, kubelet):
    start([gpu(128), gpu(129), gpu(130)])
    kubelet.wait_registered()
    everything = kubelet.devices()
    got = kubelet.preferred(everything, [], 4)
    assert len(got) == 4 and len({i.split("-")[0] for i in got}) == 1
    # best fit: renderD129 has 3 free, renderD130 10, renderD128 5
    free = ids("renderD128", 10)[5:] + ids("renderD129", 10)[7:] + ids("renderD130", 10)
    assert kubelet.preferred(free, [], 3) == ["renderD129-s7", "renderD129-s8", "renderD129-s9"]
    assert kubelet.preferred(free, [], 5) == ids("renderD128", 10)[5:]
    assert {i.split("-")[0] for i in kubelet.preferred(free, [], 6)} == {"renderD130"}
    # must-include: the rest goes to the same GPU when it has room
    got = kubelet.preferred(free, ["renderD130-s4"], 3)
    assert got[0] == "renderD130-s4" and {i.split("-")[0] for i in got} == {"renderD130"}
    # too big for one GPU: as few GPUs as possible, fullest first
    got = kubelet.preferred(free, [], 12)
    assert got[:10] == ids("renderD130", 10) and len(got) == 12
    assert got[10:] == ids("renderD128", 10)[5:7]


def test_preferred_ignores_foreign_ids_until_needed():
    inv = sh.build([gpu(128)], sh.Config(shares=2))
    assert sh.preferred(inv, ["x", "renderD128-s1", "renderD128-s0"], [], 2) == [
        "renderD128-s0", "renderD128-s1"]
    assert sh.preferred(inv, ["x", "renderD128-s1"], [], 2) == ["renderD128-s1", "x"]


# render nodes that come and go ------------------------------------------------------------------


def test_hot_add_and_remove(start, kubelet):
    r = start([gpu(128)], shares=("3",))
    kubelet.wait_registered()
    assert kubelet.devices() == ids("renderD128", 3)
    r.source.set([gpu(128), gpu(129)])
    kubelet.wait_devices(lambda d: d == ids("renderD128", 3) + ids("renderD129", 3), "hot add")
    r.source.set([gpu(129)])
    kubelet.wait_devices(lambda d: d == ids("renderD129", 3), "removal")
    with pytest.raises(grpc.RpcError) as e:
        kubelet.allocate(["renderD128-s0"])
    assert "not advertised" in e.value.details()
    r.source.set([])
    kubelet.wait_devices(lambda d: d == [], "all gone")
    r.source.set([gpu(128)])
    kubelet.wait_devices(lambda d: d == ids("renderD128", 3), "back")
    (resp,) = kubelet.allocate(["renderD128-s1"])
    assert resp.annotations[ann.WEIGHT] == "renderD128=100"
    assert any("gone: renderD128" in line for line in r.logs), r.logs


def test_config_for_a_device_that_appears_later(start, kubelet):
    r = start([gpu(128)], shares=("2", "renderD129=5"))
    kubelet.wait_registered()
    assert kubelet.devices() == ids("renderD128", 2)
    assert any("shares renderD129" in line and "ignored until it appears" in line
               for line in r.logs), r.logs
    r.source.set([gpu(128), gpu(129)])
    kubelet.wait_devices(lambda d: d == ids("renderD128", 2) + ids("renderD129", 5), "renderD129")


# kubelet restarts ---------------------------------------------------------------------------------


def test_kubelet_restart_reregisters(start, kubelet):
    r = start([gpu(128)], shares=("2",))
    kubelet.wait_registered()
    first_lists = len(kubelet.lists)
    kubelet.restart()  # deletes the plugin's socket too, as the kubelet does
    kubelet.wait_registered(2)
    kubelet.wait(lambda: len(kubelet.lists) > first_lists, "a list on the new connection")
    assert kubelet.devices() == ids("renderD128", 2)
    (resp,) = kubelet.allocate(["renderD128-s0", "renderD128-s1"])
    assert resp.annotations[ann.WEIGHT] == "renderD128=200"
    assert r.plugin.registrations == 2
    assert (r.plugin.plugin_dir / "pycgpu-gpu-share.sock").exists()
    # a kubelet that comes back without touching the plugin's socket
    kubelet.stop(remove_sockets=False)
    kubelet.socket.unlink(missing_ok=True)  # grpc removes it
    kubelet.start()
    kubelet.wait_registered(3)


def test_refused_registration_is_retried(start, kubelet):
    kubelet.reject = "resource name already taken"
    r = start([gpu(128)])
    deadline = time.monotonic() + 5
    while not any("resource name already taken" in line for line in r.logs):
        assert time.monotonic() < deadline, r.logs
        time.sleep(0.05)
    time.sleep(0.3)  # retried every 0.05s, logged once
    assert sum("cannot register" in line for line in r.logs) == 1, r.logs
    kubelet.reject = None
    kubelet.wait_registered()


# configuration ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("shares", "weight", "memory", "message"), [
    (["0"], 100, [], "shares '0': 0 shares is out of range [1, 100]"),
    (["101"], 100, [], "out of range [1, 100]"),
    (["ten"], 100, [], "is not a whole number"),
    (["20"], 1000, [], "exceeds the largest gpu.weight 10000"),
    (["10"], 0, [], "weight per share 0 is out of range"),
    (["10"], 100, ["lots"], "is not a size"),
    (["10"], 100, ["0"], "at least 4K"),
])
def test_bad_defaults_raise(shares, weight, memory, message):
    with pytest.raises(sh.ShareError, match=message.replace("[", r"\[").replace("]", r"\]")):
        sh.parse_config(shares, weight, memory)


def test_messages_call_the_settings_as_the_caller_names_them():
    cli_names = sh.ConfigNames("--shares", "--weight-per-share", "--device-memory", "--device")
    with pytest.raises(sh.ShareError) as info:
        sh.parse_config(["20"], 1000, [], names=cli_names)
    assert str(info.value) == ("--shares '20': 20 shares x weight 1000 per share = 20000 "
                               "exceeds the largest gpu.weight 10000 (fix: fewer shares or a "
                               "smaller --weight-per-share)")
    config, warnings = sh.parse_config(["renderD128=0"], 100, ["renderD128=x"], ["renderD140"],
                                       cli_names)
    assert [w.split(" ", 1)[0] for w in warnings] == ["--shares", "--device-memory"]
    assert sh.build([gpu(128)], config).warnings[0].startswith("--device renderD140: ")


def test_bad_device_entries_are_warnings():
    config, warnings = sh.parse_config(["renderD128=0", "renderD129=3"], 100,
                                       ["renderD128=huge", "renderD129=2G"])
    assert config.device_shares == {"renderD129": 3}
    assert config.device_memory == {"renderD129": 2 * GIB}
    assert len(warnings) == 2
    assert warnings[0].startswith("shares 'renderD128=0': 0 shares is out of range")
    assert warnings[1].startswith("device memory 'renderD128=huge'")
    inv = sh.build([gpu(128)], sh.parse_config([], 100, [], ["renderD128", "renderD140"])[0])
    assert list(inv.gpus) == ["renderD128"]
    assert inv.warnings == ["device renderD140: unknown device 'renderD140'; known "
                            "devices: renderD128 (226:128, simgpu); ignored until it appears"]


def test_cli_bad_default_is_one_line(cli):
    r = cli("k8s", "device-plugin", "--shares", "0", code=2)
    assert r.output.strip().splitlines() == [
        "Error: --shares '0': 0 shares is out of range [1, 100]"]
    r = cli("k8s", "device-plugin", "--plugin-dir", "/nonexistent/dir", code=1)
    lines = r.output.strip().splitlines()
    assert lines[-1] == ("Error: /nonexistent/dir is not a directory (is the kubelet's "
                         "device-plugins directory mounted?)"), r.output


def test_cli_inventory(cli):
    r = cli("k8s", "inventory", "--shares", "4", "--device-memory", "renderD128=16G", "--json")
    import json

    doc = json.loads(r.stdout)
    assert doc["resource"] == "pycgpu.io/gpu-share"
    by = {g["device"]: g for g in doc["gpus"]}
    assert by["renderD128"]["shares"] == 4
    assert by["renderD128"]["ids"] == ["renderD128-s0", "renderD128-s3"]
    assert by["renderD128"]["memory_per_share_bytes"] == 4 * GIB
    assert by["renderD129"]["memory_bytes"] is None
    text = cli("k8s", "inventory", "--shares", "4", "--device-memory", "renderD128=16G").stdout
    header, first, second = text.splitlines()
    assert header.split() == ["DEVICE", "SHARES", "IDS", "WEIGHT/SHARE", "MEMORY/SHARE"]
    assert first.split() == ["renderD128", "4", "renderD128-s0", "..", "renderD128-s3", "100",
                             "4G", "of", "16G", "(device)"]
    assert second.split()[-2:] == ["no", "limit"]
    # aligned: each column starts where its header does, numbers end where theirs does
    assert first.index("renderD128-s0") == header.index("IDS")
    assert first.index("100") + 3 == header.index("WEIGHT/SHARE") + len("WEIGHT/SHARE")
    # a size that is no whole number of a unit is rounded to one decimal, as everywhere
    text = cli("k8s", "inventory", "--shares", "3", "--device-memory", "renderD128=16G").stdout
    assert "5.3G of 16G (device)" in text


# the CLI as the DaemonSet runs it --------------------------------------------------------------


def test_cli_plugin_process(sockdir, fake_sysfs):
    """The real command in a subprocess, polling the fake sysfs: a bad
    per-device entry is one line and the rest is served; a render node
    added to sysfs is advertised, and gone again when removed; SIGTERM
    stops it and removes its socket."""
    sysfs, dev = fake_sysfs
    kubelet = FakeKubelet(sockdir).start()
    env = {**os.environ, "PYCGPU_SYSFS_ROOT": str(sysfs), "PYCGPU_DEV_ROOT": str(dev)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pycgpu", "k8s", "device-plugin", "--plugin-dir", str(sockdir),
         "--poll-interval", "0.1", "--check-interval", "0.1", "--shares", "2",
         "--shares", "renderD129=500", "--device-memory", "renderD130=1G"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        kubelet.wait_registered()
        assert kubelet.devices() == ids("renderD128", 2) + ids("renderD129", 2)
        vgem = sysfs / "devices" / "platform" / "vgem"
        _node(sysfs, vgem, "renderD130", "226:130")
        kubelet.wait_devices(lambda d: ids("renderD130", 2) == d[-2:], "renderD130 added")
        (resp,) = kubelet.allocate(["renderD130-s0"])
        assert dict(resp.annotations) == {ann.WEIGHT: "renderD130=100",
                                          ann.MEMORY_MAX: "renderD130=512M"}
        (sysfs / "class" / "drm" / "renderD130").unlink()
        kubelet.wait_devices(lambda d: not any(i.startswith("renderD130") for i in d),
                             "renderD130 removed")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
        kubelet.stop()
    assert proc.returncode == 0, err
    lines = err.splitlines()
    bad = [ln for ln in lines if "renderD129=500" in ln]
    assert bad == ["pycgpu k8s device-plugin: --shares 'renderD129=500': 500 shares is out of "
                   "range [1, 100]; ignored"], err
    assert any("registered pycgpu.io/gpu-share" in ln for ln in lines), err
    assert not (sockdir / "pycgpu-gpu-share.sock").exists()


# the CDI spec follows the GPUs -----------------------------------------------------------------


def test_the_cdi_spec_follows_gpus_that_come_and_go(sockdir, tmp_path):
    """Written at the first refresh, rewritten atomically (a new file
    renamed over the old one: a new inode) when the set of GPUs changes, left
    alone when it does not, removed when no GPU is left."""
    from pycgpu.runtime.oci import hook_command

    spec = tmp_path / "cdi" / "pycgpu.json"
    spec.parent.mkdir()
    config, _ = sh.parse_config(("10",), 100, (), ())
    source = StaticSource([gpu(128)])
    logs: list[str] = []
    plugin = DevicePlugin(config, source, log=logs.append, plugin_dir=sockdir,
                          cdi_spec=spec, cdi_hook=hook_command("/opt/pycgpu/bin/pycgpu"))

    def names() -> list[str]:
        """The GPUs' devices (those of their shares: checked once, below)."""
        return [d["name"] for d in json.loads(spec.read_text())["devices"]
                if "-s" not in d["name"]]

    plugin.refresh()
    assert names() == ["renderD128", "all"]
    assert [d["name"] for d in json.loads(spec.read_text())["devices"]][2:] == ids(
        "renderD128", 10)  # a device per share, whose hook entry carries its ID
    doc = json.loads(spec.read_text())
    assert doc["containerEdits"]["hooks"][0]["path"] == "/opt/pycgpu/bin/pycgpu"
    first = spec.stat().st_ino
    plugin.refresh()  # nothing changed: not rewritten
    assert spec.stat().st_ino == first
    source.set([gpu(128), gpu(129)])
    plugin.refresh()
    assert names() == ["renderD128", "renderD129", "all"]
    assert spec.stat().st_ino != first  # replaced, not written in place
    source.set([gpu(129)])
    plugin.refresh()
    assert names() == ["renderD129", "all"]
    assert sorted(p.name for p in spec.parent.iterdir()) == ["pycgpu.json"]  # no temp files
    source.set([])
    plugin.refresh()
    assert not spec.exists()
    source.set([gpu(128)])
    plugin.refresh()
    assert names() == ["renderD128", "all"]
    assert any("wrote the CDI spec" in line and "pycgpu.io/gpu=renderD129" in line
               for line in logs)


def test_an_unwritable_cdi_spec_is_logged_and_retried(sockdir, tmp_path):
    spec = tmp_path / "missing-dir" / "pycgpu.json"
    config, _ = sh.parse_config(("10",), 100, (), ())
    logs: list[str] = []
    plugin = DevicePlugin(config, StaticSource([gpu(128)]), log=logs.append,
                          plugin_dir=sockdir, cdi_spec=spec)
    plugin.refresh()
    assert any("cannot write the CDI spec" in line for line in logs)
    assert plugin.inventory()[0].device_ids() == ids("renderD128", 10)  # still advertised
    spec.parent.mkdir()
    plugin.refresh()
    assert json.loads(spec.read_text())["devices"][0]["name"] == "renderD128"
