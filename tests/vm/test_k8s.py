"""VM tier: the device plugin's Allocate answer, carried out the way a
container runtime does, on the simulated GPU.

The plugin runs for real (gRPC on unix sockets in a temporary directory)
and the test kubelet of the host tier (tests/host/fakekubelet.py) asks it
for two "pods": 3 and 1 of the GPU's 4 shares. Each answer becomes an OCI
bundle as containerd or CRI-O would build it: runc's default config, the
CDI edits of the devices named in ``cdi_devices`` (from the spec
``pycgpu cdi generate --hook`` writes: the render node, its allow rule,
the createRuntime hook) and the answer's annotations. runc runs both
bundles; the hook sets each container's cgroup from the annotations. The
containers run a saturating simgpu load from inside (Python and the venv
bind-mounted read-only): their cgroups must get gpu.weight 300 and 100,
gpu.memory.max 3/4 and 1/4 of the configured size, and GPU time about
75:25 (gpu.stat usage_usec).

The containers sit where the kubelet (cgroupfs driver) puts them: a
Burstable pod (``kubepods/burstable/pod<UID>/<ID>``, beside its sandbox,
which uses no GPU) and a Guaranteed one (``kubepods/pod<UID>/<ID>``), so
the weights meet at two levels: the hook gives the Burstable pod and its
QoS slice the 300 below them (pycgpu.runtime.kubepods), and the Guaranteed pod
100; without that, the slice and the pod would compete at 100 each.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from clients import assert_shares, devt, measure_shares
from test_runtimes import TESTS_ON_PATH, TIMEOUT, Running, host_python_mounts

from pycgpu.core.cgroup import Cgroup
from pycgpu.core.devices import discover
from pycgpu.runtime import cdi, oci

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "host"))

from fakekubelet import FakeKubelet, response_dict  # noqa: E402

from pycgpu.k8s import shares as sh  # noqa: E402
from pycgpu.k8s.plugin import DevicePlugin  # noqa: E402
from pycgpu.k8s.sources import PollSource  # noqa: E402

RUNC = Path("/usr/sbin/runc")
MB = 1 << 20
SIZE = 256 * MB  # the GPU memory size the plugin divides (simgpu reports none)
SHARES = 4

LOAD = TESTS_ON_PATH + r"""
from simgpu import Load
load = Load(sys.argv[1], None, 5_000_000)
print("ready", flush=True)
sys.stdin.readline()
load.stop()
"""


@pytest.fixture
def plugin_and_kubelet(simgpu_nodes) -> Iterator[FakeKubelet]:
    gpu = simgpu_nodes[0]
    sockdir = Path(tempfile.mkdtemp(prefix="pycgpu-k8s-"))
    config, warnings = sh.parse_config([str(SHARES)], 100, [f"{gpu.name}={SIZE}"], [gpu.name])
    assert warnings == []
    logs: list[str] = []
    plugin = DevicePlugin(config, PollSource(interval=1.0), log=logs.append,
                          plugin_dir=sockdir, check_interval=0.2)
    stop = threading.Event()
    thread = threading.Thread(target=plugin.run, args=(stop,), daemon=True)
    thread.start()
    kubelet = FakeKubelet(sockdir).start()
    try:
        kubelet.wait_registered()
        yield kubelet
    finally:
        kubelet.stop()
        stop.set()
        thread.join(10)
        shutil.rmtree(sockdir, ignore_errors=True)


def cdi_edits(config: dict, spec: dict, names: list[str]) -> None:
    """What a CDI runtime does with the devices @names of @spec: each
    device's deviceNodes into linux.devices with their device-cgroup allow
    rules, and the spec-wide edits (the hook) into hooks."""
    kind = spec["kind"]
    by_name = {f"{kind}={d['name']}": d for d in spec["devices"]}
    linux = config.setdefault("linux", {})
    resources = linux.setdefault("resources", {})
    for name in names:
        for node in by_name[name]["containerEdits"]["deviceNodes"]:
            linux.setdefault("devices", []).append(
                {"path": node["path"], "type": node["type"], "major": node["major"],
                 "minor": node["minor"], "fileMode": 0o666, "uid": 0, "gid": 0})
            resources.setdefault("devices", []).append(
                {"allow": True, "type": node["type"], "major": node["major"],
                 "minor": node["minor"], "access": node["permissions"]})
    for hook in spec.get("containerEdits", {}).get("hooks", []):
        entry = {k: v for k, v in hook.items() if k != "hookName"}
        config.setdefault("hooks", {}).setdefault(hook["hookName"], []).append(entry)


def bundle(workdir: Path, name: str, response: dict, spec: dict, cgroups_path: str,
           node: Path) -> Path:
    path = workdir / name
    rootfs = path / "rootfs"
    (rootfs / "bin").mkdir(parents=True)
    shutil.copy("/bin/busybox", rootfs / "bin" / "busybox")
    subprocess.run(["chroot", str(rootfs), "/bin/busybox", "--install", "-s", "/bin"],
                   check=True)
    config = oci.generate().doc
    config["process"]["terminal"] = False
    config["process"]["args"] = [sys.executable, "-c", LOAD, f"/dev/dri/{node.name}"]
    config["process"]["env"] += ["PYTHONDONTWRITEBYTECODE=1", "HOME=/"]
    config["mounts"] += host_python_mounts(rootfs)
    config["linux"]["cgroupsPath"] = cgroups_path
    config.setdefault("annotations", {}).update(response["annotations"])
    cdi_edits(config, spec, response["cdi_devices"])
    (path / "config.json").write_text(json.dumps(config, indent="\t"))
    return path


def test_two_pods_get_time_in_proportion_to_their_shares(plugin_and_kubelet, simgpu_nodes,
                                                         mount, tmp_path):
    kubelet = plugin_and_kubelet
    gpu = simgpu_nodes[0]
    dev = devt(gpu)
    everything = kubelet.devices()
    assert everything == [f"{gpu.name}-s{i}" for i in range(SHARES)]
    first = kubelet.preferred(everything, [], 3)
    second = kubelet.preferred([i for i in everything if i not in first], [], 1)
    resp_a, = map(response_dict, kubelet.allocate(first))
    resp_b, = map(response_dict, kubelet.allocate(second))
    assert resp_a["cdi_devices"] == resp_b["cdi_devices"] == [cdi.qualified_name(gpu.name)]
    assert resp_a["annotations"]["pycgpu.io/gpu.weight"] == f"{gpu.name}=300"
    assert resp_b["annotations"]["pycgpu.io/gpu.weight"] == f"{gpu.name}=100"

    hook = oci.hook_command(str(Path(sys.executable).parent / "pycgpu"))
    spec = cdi.spec(discover(), hook)
    kube = Cgroup(mount, "kubepods")
    assert not kube.exists(), "a kubepods cgroup is left from an earlier run"
    kube.create()
    pods = [kube.child("burstable").child(f"pod{uuid.uuid4()}"),
            kube.child(f"pod{uuid.uuid4()}")]
    ids = [f"pycgpu-test-k8s-{uuid.uuid4().hex[:8]}-{p}" for p in ("a", "b")]
    sandbox = pods[0].child("sandbox")  # the pod's pause container: no GPU, no weight
    sandbox.create()
    running: list[Running] = []
    try:
        for cid, resp, p in zip(ids, (resp_a, resp_b), pods, strict=True):
            b = bundle(tmp_path, cid, resp, spec, f"/{p.relpath}/{cid}", gpu)
            proc = subprocess.Popen([str(RUNC), "run", "--bundle", str(b), cid],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            running.append(Running(proc))
        for r in running:
            r.until("ready")
        groups = [p.child(cid) for p, cid in zip(pods, ids, strict=True)]
        assert groups[0].weights().devices[dev] == 300
        assert groups[1].weights().devices[dev] == 100
        # the pods, and the Burstable slice, weigh what is asked below them
        assert pods[0].weights().devices[dev] == 300
        assert kube.child("burstable").weights().devices[dev] == 300
        assert pods[1].weights().devices[dev] == 100
        assert groups[0].memory_max()[dev] == SIZE * 3 // SHARES
        assert groups[1].memory_max()[dev] == SIZE // SHARES
        got = measure_shares(groups, dev, seconds=3.0)
        assert_shares(got, [75.0, 25.0])
        for r in running:
            assert r.finish() == 0
    finally:
        for r in running:
            r.kill()
        for cid in ids:
            subprocess.run([str(RUNC), "delete", "-f", cid], capture_output=True,
                           timeout=TIMEOUT)
        if kube.exists():
            kube.remove(recursive=True)
