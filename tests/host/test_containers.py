"""Container identity from cgroup paths, for every runtime's path shape, and
names from the runtimes' state files."""

from __future__ import annotations

import json

import pytest

from pycgpu.monitoring.containers import Container, Resolver, identify

ID = "3f2a9c1b7d4e" + "0" * 52
ID2 = "b" * 64
UID = "1c2d3e4f-aaaa-bbbb-cccc-111122223333"
SUID = UID.replace("-", "_")


@pytest.mark.parametrize("path, want", [
    # Docker: systemd and cgroupfs drivers, rootless
    (f"/system.slice/docker-{ID}.scope", Container("docker", ID)),
    (f"/docker/{ID}", Container("docker", ID)),
    (f"/user.slice/user-1000.slice/user@1000.service/user.slice/docker-{ID}.scope",
     Container("docker", ID)),
    # containerd through CRI, systemd driver, each QoS class
    (f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{SUID}.slice/"
     f"cri-containerd-{ID}.scope", Container("containerd", ID, UID, "burstable")),
    (f"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{SUID}.slice/"
     f"cri-containerd-{ID}.scope", Container("containerd", ID, UID, "besteffort")),
    (f"/kubepods.slice/kubepods-pod{SUID}.slice/cri-containerd-{ID}.scope",
     Container("containerd", ID, UID, "guaranteed")),
    # kind/k3s style: under kubelet.slice
    (f"/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-burstable.slice/"
     f"kubelet-kubepods-burstable-pod{SUID}.slice/cri-containerd-{ID}.scope",
     Container("containerd", ID, UID, "burstable")),
    # cgroupfs driver: the runtime is not in the path
    (f"/kubepods/burstable/pod{UID}/{ID}", Container("cri", ID, UID, "burstable")),
    (f"/kubepods/pod{UID}/{ID}", Container("cri", ID, UID, "guaranteed")),
    (f"/kubepods/besteffort/pod{UID}/{ID}", Container("cri", ID, UID, "besteffort")),
    # CRI-O, systemd and cgroupfs
    (f"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{SUID}.slice/"
     f"crio-{ID}.scope", Container("cri-o", ID, UID, "besteffort")),
    (f"/kubepods/burstable/pod{UID}/crio-{ID}", Container("cri-o", ID, UID, "burstable")),
    # Docker as a Kubernetes runtime (cri-dockerd)
    (f"/kubepods.slice/kubepods-pod{SUID}.slice/docker-{ID}.scope",
     Container("docker", ID, UID, "guaranteed")),
    # podman: rootful, rootless, crun's sub-group, pods, cgroupfs
    (f"/machine.slice/libpod-{ID}.scope", Container("podman", ID)),
    (f"/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-{ID}.scope",
     Container("podman", ID)),
    (f"/machine.slice/libpod-{ID}.scope/container", Container("podman", ID)),
    (f"/machine.slice/machine-libpod_pod_{ID2}.slice/libpod-{ID}.scope",
     Container("podman", ID, pod_uid=ID2)),
    (f"/libpod_parent/libpod-{ID}", Container("podman", ID)),
    # nerdctl / ctr
    (f"/system.slice/nerdctl-{ID}.scope", Container("containerd", ID)),
    (f"/default/{ID}", Container("containerd", ID)),
    # LXC / Incus
    ("/lxc.payload.web1", Container("lxc", "web1", name="web1")),
    # systemd units
    ("/system.slice/ollama.service", Container("systemd", "ollama.service", name="ollama")),
    ("/user.slice/user-1000.slice/user@1000.service/app.slice/app-firefox-1234.scope",
     Container("systemd", "app-firefox-1234.scope", name="app-firefox-1234")),
    # a service inside a container is the container
    (f"/system.slice/docker-{ID}.scope/system.slice/nginx.service", Container("docker", ID)),
])
def test_identify(path, want):
    assert identify(path) == want


@pytest.mark.parametrize("path", [
    "/", "/ai/train", "/system.slice", "/user.slice/user-1000.slice",
    "/user.slice/user-1000.slice/user@1000.service", "/kubepods.slice",
    f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{SUID}.slice",
    f"/kubepods.slice/kubepods-pod{SUID}.slice/crio-conmon-{ID}.scope",
    f"/machine.slice/libpod-conmon-{ID}.scope",
])
def test_not_a_container(path):
    c = identify(path)
    assert c is None


def test_display_names():
    assert Container("docker", ID).display_name == "3f2a9c1b7d4e"
    assert Container("docker", ID, name="web").display_name == "web"
    assert Container("systemd", "ollama.service", name="ollama").short_id == "ollama.service"


def write(path, doc):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


def test_resolver_containerd_and_crio(tmp_path):
    write(tmp_path / f"run/containerd/io.containerd.runtime.v2.task/k8s.io/{ID}/config.json",
          {"annotations": {"io.kubernetes.cri.container-name": "trainer",
                           "io.kubernetes.cri.sandbox-name": "train-7d9f",
                           "io.kubernetes.cri.sandbox-namespace": "ml"}})
    write(tmp_path / f"run/containers/storage/overlay-containers/{ID2}/userdata/config.json",
          {"annotations": {"io.kubernetes.container.name": "infer",
                           "io.kubernetes.pod.name": "infer-0",
                           "io.kubernetes.pod.namespace": "serving"}})
    r = Resolver(tmp_path)
    c = r.resolve(Container("containerd", ID, UID, "burstable"))
    assert (c.name, c.pod, c.namespace, c.pod_uid) == ("trainer", "train-7d9f", "ml", UID)
    c = r.resolve(Container("cri-o", ID2, UID, "guaranteed"))
    assert (c.name, c.pod, c.namespace) == ("infer", "infer-0", "serving")
    c = r.resolve(Container("cri", ID, UID, "guaranteed"))  # cgroupfs: tries both
    assert c.name == "trainer"


def test_resolver_pause_container(tmp_path):
    write(tmp_path / f"run/containerd/io.containerd.runtime.v2.task/k8s.io/{ID}/config.json",
          {"annotations": {"io.kubernetes.cri.container-type": "sandbox",
                           "io.kubernetes.cri.sandbox-name": "train-7d9f",
                           "io.kubernetes.cri.sandbox-namespace": "ml"}})
    c = Resolver(tmp_path).resolve(Container("containerd", ID))
    assert (c.name, c.pod) == ("POD", "train-7d9f")


def test_resolver_docker_and_podman(tmp_path):
    write(tmp_path / f"var/lib/docker/containers/{ID}/config.v2.json",
          {"Name": "/web", "Config": {"Labels": {}}})
    write(tmp_path / "var/lib/containers/storage/overlay-containers/containers.json",
          [{"id": ID2, "names": ["jupyter"]}])
    r = Resolver(tmp_path)
    assert r.resolve(Container("docker", ID)).name == "web"
    assert r.resolve(Container("podman", ID2)).name == "jupyter"


def test_resolver_misses_are_retried_later(tmp_path):
    r = Resolver(tmp_path, retry_s=0.0)
    c = Container("docker", ID)
    assert r.resolve(c) == c
    write(tmp_path / f"var/lib/docker/containers/{ID}/config.v2.json", {"Name": "/late"})
    assert r.resolve(c).name == "late"
    assert r.resolve(None) is None
    r = Resolver(tmp_path / "nothing", retry_s=3600)
    assert r.resolve(c) == c and r.resolve(c) == c  # cached miss: no second lookup


@pytest.mark.parametrize("data", [b"{not json", b'{"Name": "/caf\xe9"}',
                                  b'{"Name": "/x", "a": ' + b"[" * 5000 + b"]" * 5000 + b"}"])
def test_resolver_ignores_broken_state(tmp_path, data):
    """Not JSON, not UTF-8, nested past the parser's recursion limit: the
    state names nothing (no traceback out of a scrape)."""
    p = tmp_path / f"var/lib/docker/containers/{ID}/config.v2.json"
    p.parent.mkdir(parents=True)
    p.write_bytes(data)
    q = tmp_path / "var/lib/containers/storage/overlay-containers/containers.json"
    q.parent.mkdir(parents=True)
    q.write_bytes(b"[" * 5000 + b"]" * 5000)
    r = Resolver(tmp_path)
    assert r.resolve(Container("docker", ID)).name is None
    assert r.resolve(Container("podman", ID2)).name is None


def test_resolver_ignores_state_of_the_wrong_shape(tmp_path):
    # valid JSON, wrong types: no name, and no AttributeError out of a scrape
    write(tmp_path / f"var/lib/docker/containers/{ID}/config.v2.json",
          {"Name": 5, "Config": {"Labels": ["x"]}})
    write(tmp_path / f"run/containers/storage/overlay-containers/{ID2}/userdata/config.json",
          {"annotations": ["x"]})
    write(tmp_path / "var/lib/containers/storage/overlay-containers/containers.json",
          ["x", {"id": 3, "names": "n"}, {"id": ID, "names": [7]}])
    r = Resolver(tmp_path)
    assert r.resolve(Container("docker", ID)).name is None
    assert r.resolve(Container("cri-o", ID2)).name is None
    assert r.resolve(Container("podman", ID)).name is None
    write(tmp_path / f"var/lib/docker/containers/{ID2}/config.v2.json",
          {"Name": "/web", "Config": {"Labels": {"io.kubernetes.pod.name": 3}}})
    assert r.resolve(Container("docker", ID2)).name == "web"
