"""Pod, namespace and container labels from the kubelet's PodResources API:
the device plugin's Allocate names the share IDs, the hook records them on
the container's cgroup (trusted.pycgpu.share_ids), the kubelet names the
container holding them; tested against a fake PodResources server on a unix
socket in a temporary directory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakepodresources import FakePodResources
from prometheus_client.parser import text_string_to_metric_families
from test_cli_monitor import TRAIN, WEB, env  # noqa: F401  (the fixture)

from pycgpu.k8s import podresources as pr
from pycgpu.monitoring import exporter as exp
from pycgpu.monitoring.kernel import KernelSource
from pycgpu.monitoring.view import Monitor
from pycgpu.runtime import kubepods

SHARE = "pycgpu.io/gpu-share"


@pytest.fixture
def sockdir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="pycgpu-pr-"))  # short: unix socket paths
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def kubelet(sockdir: Path) -> Iterator[FakePodResources]:
    k = FakePodResources(sockdir / "kubelet.sock", {
        ("ml", "train-7f9c", "worker"): {SHARE: ["renderD128-s0", "renderD128-s1"]},
        ("ml", "train-7f9c", "sidecar"): {"example.com/nic": ["nic0"]},
        ("web", "front-1", "app"): {SHARE: ["renderD128-s5"]},
    }).start()
    yield k
    k.stop()


def labels_of(text: str, name: str = "pycgpu_gpu_time_seconds_total") -> dict[str, dict]:
    return {s.labels["cgroup"]: s.labels for f in text_string_to_metric_families(text)
            for s in f.samples if s.name == name}


def test_list_shares(kubelet: FakePodResources) -> None:
    owners = pr.list_shares(kubelet.socket)
    assert owners == {"renderD128-s0": pr.Owner("ml", "train-7f9c", "worker"),
                      "renderD128-s1": pr.Owner("ml", "train-7f9c", "worker"),
                      "renderD128-s5": pr.Owner("web", "front-1", "app")}


def test_a_missing_socket_is_an_error(sockdir: Path) -> None:
    with pytest.raises(pr.PodResourcesError, match="PodResources API at"):
        pr.list_shares(sockdir / "none.sock", timeout=0.5)


def test_the_exporter_labels_a_container_by_its_recorded_shares(
        env: dict[str, str], kubelet: FakePodResources) -> None:  # noqa: F811
    root = Path(env["PYCGPU_CGROUP_ROOT"])
    kubepods.record_share_ids(root / TRAIN.lstrip("/"), ("renderD128-s0", "renderD128-s1"))
    logs: list[str] = []
    labels = pr.Labels(kubelet.socket, root, logs.append)
    e = exp.Exporter(Monitor(KernelSource(root)), pod_labels=labels)
    got = labels_of(e.scrape().decode())
    assert {k: got[TRAIN][k] for k in ("pod", "namespace", "container")} == {
        "pod": "train-7f9c", "namespace": "ml", "container": "worker"}
    # a group without recorded shares keeps what its path and runtime state say
    assert got[WEB]["pod"] == "" and got[WEB]["container"] == "a1b2c3d4e5f6"
    assert kubelet.calls == 1 and logs == []
    # the group-level families carry them too
    info = labels_of(e.scrape().decode(), "pycgpu_container_info")
    assert info[TRAIN]["pod"] == "train-7f9c" and info[TRAIN]["namespace"] == "ml"
    assert kubelet.calls == 2  # asked at every scrape


def test_a_share_claimed_by_two_cgroups_names_neither(
        env: dict[str, str], kubelet: FakePodResources) -> None:  # noqa: F811
    root = Path(env["PYCGPU_CGROUP_ROOT"])
    kubepods.record_share_ids(root / TRAIN.lstrip("/"), ("renderD128-s5",))
    kubepods.record_share_ids(root / WEB.lstrip("/"), ("renderD128-s5",))
    e = exp.Exporter(Monitor(KernelSource(root)), pod_labels=pr.Labels(kubelet.socket, root))
    got = labels_of(e.scrape().decode())
    assert got[TRAIN]["pod"] != "front-1" and got[WEB]["pod"] != "front-1"


def test_without_the_kubelet_the_labels_fall_back(env: dict[str, str],  # noqa: F811
                                                 sockdir: Path) -> None:
    root = Path(env["PYCGPU_CGROUP_ROOT"])
    kubepods.record_share_ids(root / TRAIN.lstrip("/"), ("renderD128-s0",))
    logs: list[str] = []
    e = exp.Exporter(Monitor(KernelSource(root)),
                     pod_labels=pr.Labels(sockdir / "gone.sock", root, logs.append))
    for _ in range(2):
        got = labels_of(e.scrape().decode())
        assert got[TRAIN]["container"] == "3f2a9c1b7d4e"  # the path's short ID
    assert len(logs) == 1 and "PodResources API" in logs[0]  # logged once


def test_exporter_command_with_the_socket(env: dict[str, str],  # noqa: F811
                                          kubelet: FakePodResources) -> None:
    root = Path(env["PYCGPU_CGROUP_ROOT"])
    kubepods.record_share_ids(root / TRAIN.lstrip("/"), ("renderD128-s1",))
    p = subprocess.Popen([sys.executable, "-m", "pycgpu", "exporter", "--listen", "127.0.0.1:0",
                          "--pod-resources", str(kubelet.socket)],
                         env={**os.environ, **env}, stderr=subprocess.PIPE, text=True)
    try:
        lines = [p.stderr.readline(), p.stderr.readline()]
        assert "pod labels from the kubelet's PodResources API" in lines[0], lines
        url = lines[1].split("serving ", 1)[1].split(" ", 1)[0]
        with urllib.request.urlopen(url, timeout=10) as resp:
            got = labels_of(resp.read().decode())
        assert got[TRAIN]["pod"] == "train-7f9c" and got[TRAIN]["container"] == "worker"
    finally:
        p.terminate()
        p.wait(10)
