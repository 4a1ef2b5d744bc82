"""Which container a cgroup belongs to, from the cgroup's path alone, and
(optionally) its name, pod and namespace from the runtime's state files.

Container runtimes name the cgroups they create after the container, in a
few shapes (``ID`` is the 64-hex container ID; systemd cgroup driver first,
then cgroupfs):

- Docker: ``/system.slice/docker-ID.scope``; ``/docker/ID``
- containerd (CRI): ``/kubepods.slice/kubepods-burstable.slice/``
  ``kubepods-burstable-pod<UID>.slice/cri-containerd-ID.scope``;
  ``/kubepods/burstable/pod<UID>/ID``
- CRI-O: ``.../kubepods-besteffort-pod<UID>.slice/crio-ID.scope``;
  ``.../pod<UID>/crio-ID``
- podman: ``/machine.slice/libpod-ID.scope`` (rootless: under
  ``user@UID.service``), in a pod ``/machine.slice/machine-libpod_pod_<PODID>.slice/
  libpod-ID.scope``; ``/libpod_parent/libpod-ID``
- nerdctl: ``/system.slice/nerdctl-ID.scope``; ``/<namespace>/ID``
- LXC / Incus: ``/lxc.payload.NAME``
- systemd: ``NAME.service``, ``NAME.scope`` and other units (not slices)

Kubernetes adds the pod and its QoS class around the container: the systemd
driver spells the pod UID with ``_`` (``pod1c2d..._..._...``), cgroupfs with
``-``; Guaranteed pods sit directly under ``kubepods``, Burstable and
BestEffort ones under a ``burstable``/``besteffort`` level. Some set-ups nest
it all under ``kubelet.slice`` (``kubelet-kubepods-...``), which matches too.

The innermost container component wins (crun's ``libpod-ID.scope/container``
sub-group belongs to container ID; a systemd service inside a container is
that container); a systemd unit counts only outside any container.
``conmon`` scopes (``crio-conmon-ID``, ``libpod-conmon-ID``) are the
runtime's monitor, not the container.

Names, pods and namespaces are not in the path: :class:`Resolver` reads them
from the runtime's state (the OCI ``config.json`` annotations that
containerd's and CRI-O's CRI plugins write, Docker's ``config.v2.json``,
containers/storage's ``containers.json`` for podman), under an injectable
root directory.
"""

from __future__ import annotations

import json
import os
import re
import time
from dataclasses import dataclass, replace
from pathlib import Path

DOCKER = "docker"
CONTAINERD = "containerd"
CRIO = "cri-o"
PODMAN = "podman"
CRI = "cri"  # a Kubernetes container whose runtime the path does not tell (cgroupfs driver)
LXC = "lxc"
SYSTEMD = "systemd"

QOS_GUARANTEED, QOS_BURSTABLE, QOS_BESTEFFORT = "guaranteed", "burstable", "besteffort"

_ID = r"[0-9a-f]{64}"
# (regex on one path component, runtime); the first group is the container ID
_CONTAINER_COMPONENTS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(rf"docker-({_ID})\.scope"), DOCKER),
    (re.compile(rf"cri-containerd-({_ID})\.scope"), CONTAINERD),
    (re.compile(rf"crio-({_ID})(?:\.scope)?"), CRIO),
    (re.compile(rf"libpod-({_ID})(?:\.scope)?"), PODMAN),
    (re.compile(rf"nerdctl-({_ID})\.scope"), CONTAINERD),
]
_BARE_ID = re.compile(_ID)
_CONMON = re.compile(rf"(?:crio|libpod)-conmon-{_ID}(?:\.scope)?")
_LXC = re.compile(r"lxc\.payload\.(.+)")
# pod<uid>, as kubepods-burstable-pod<uid>.slice or pod<uid>
_POD = re.compile(r"(?:[a-z]+-)*pod([0-9a-fA-F][0-9a-fA-F_-]+)(?:\.slice)?")
_PODMAN_POD = re.compile(r"machine-libpod_pod_([0-9a-f]{64})\.slice")
_QOS = re.compile(r"(?:[a-z]+-)*(burstable|besteffort)(?:\.slice)?")
_UNIT = re.compile(r"(.+)\.(service|scope|socket|mount|swap)")


@dataclass(frozen=True)
class Container:
    """What a cgroup path tells about the container in it, plus what a
    :class:`Resolver` found (name, pod, namespace)."""

    runtime: str
    id: str  # the container ID; the unit name for systemd, the name for LXC
    pod_uid: str | None = None
    qos: str | None = None
    name: str | None = None
    pod: str | None = None
    namespace: str | None = None

    @property
    def short_id(self) -> str:
        return self.id[:12] if _BARE_ID.fullmatch(self.id) else self.id

    @property
    def display_name(self) -> str:
        """The name if known, else the short ID (``3f2a9c1b7d4e``) or the unit."""
        return self.name or self.short_id

    def to_json(self) -> dict[str, str | None]:
        return {"runtime": self.runtime, "id": self.id, "name": self.name,
                "pod": self.pod, "pod_uid": self.pod_uid, "namespace": self.namespace,
                "qos": self.qos}


def _pod_uid(text: str) -> str:
    """``1c2d3e4f_aaaa_bbbb_cccc_111122223333`` -> ``1c2d3e4f-aaaa-bbbb-cccc-111122223333``."""
    return text.replace("_", "-").lower()


def identify(path: str) -> Container | None:
    """The container whose cgroup @path is (or is inside), or None for
    a group that no runtime or systemd unit made (``/``, ``/user.slice``,
    ``/ai/train``)."""
    parts = [p for p in path.split("/") if p]
    found: Container | None = None  # the innermost container
    unit: Container | None = None  # the innermost systemd unit, if no container
    kube = False
    pod_uid = qos = podman_pod = None
    for i, part in enumerate(parts):
        if "kubepods" in part:
            kube = True
        if kube:
            m = _QOS.fullmatch(part)
            if m:
                qos = m.group(1)
            m = _POD.fullmatch(part)
            if m:
                pod_uid = _pod_uid(m.group(1))
        m = _PODMAN_POD.fullmatch(part)
        if m:
            podman_pod = m.group(1)
        c = _component(part, parts[i - 1] if i else None, kube)
        if c is not None and c.runtime == SYSTEMD:
            unit = c
        elif c is not None:
            found = c
    if found is None:
        return unit
    if kube and pod_uid is not None:
        return replace(found, pod_uid=pod_uid, qos=qos or QOS_GUARANTEED)
    if podman_pod is not None and found.runtime == PODMAN:
        return replace(found, pod_uid=podman_pod)
    return found


def _component(part: str, parent: str | None, kube: bool) -> Container | None:
    """The container one path component names, if any."""
    if _CONMON.fullmatch(part):
        return None
    for regex, runtime in _CONTAINER_COMPONENTS:
        m = regex.fullmatch(part)
        if m:
            return Container(runtime, m.group(1))
    if _BARE_ID.fullmatch(part):
        if parent == "docker":
            return Container(DOCKER, part)
        if kube:
            return Container(CRI, part)
        return Container(CONTAINERD, part)  # nerdctl/ctr with cgroupfs: /<namespace>/ID
    m = _LXC.fullmatch(part)
    if m:
        return Container(LXC, m.group(1), name=m.group(1))
    m = _UNIT.fullmatch(part)
    if m and not part.startswith("user@") and not part.startswith("init."):
        return Container(SYSTEMD, part, name=m.group(1))
    return None


# names from the runtimes' state ---------------------------------------------------

# OCI config.json annotations of the CRI plugins: (name, pod, namespace)
_CRI_ANNOTATIONS = (
    ("io.kubernetes.cri.container-name", "io.kubernetes.cri.sandbox-name",
     "io.kubernetes.cri.sandbox-namespace"),  # containerd
    ("io.kubernetes.container.name", "io.kubernetes.pod.name",
     "io.kubernetes.pod.namespace"),  # CRI-O, and Docker labels under dockershim/cri-dockerd
)


_CACHE_MAX = 8192


class Resolver:
    """Looks up container names, pods and namespaces in the runtimes' state
    files under @root (``/`` on a host; a test tree in the tests). Results
    are cached; a container not found is looked up again after @retry_s."""

    def __init__(self, root: str | Path = "/", retry_s: float = 10.0) -> None:
        self.root = Path(root)
        self.retry_s = retry_s
        self._cache: dict[tuple[str, str], tuple[str | None, str | None, str | None]] = {}
        self._misses: dict[tuple[str, str], float] = {}
        self._podman_names: dict[str, str] | None = None
        self._podman_loaded = 0.0

    def resolve(self, c: Container | None) -> Container | None:
        if c is None or c.runtime in (SYSTEMD, LXC):
            return c
        key = (c.runtime, c.id)
        if len(self._cache) + len(self._misses) > _CACHE_MAX:  # containers come and go
            self._cache.clear()
            self._misses.clear()
        found = self._cache.get(key)
        if found is None:
            missed = self._misses.get(key)
            if missed is not None and time.monotonic() - missed < self.retry_s:
                return c
            found = self._lookup(c)
            if found == (None, None, None):
                self._misses[key] = time.monotonic()
                return c
            self._cache[key] = found
            self._misses.pop(key, None)
        name, pod, namespace = found
        return replace(c, name=name or c.name, pod=pod or c.pod,
                       namespace=namespace or c.namespace)

    def _lookup(self, c: Container) -> tuple[str | None, str | None, str | None]:
        if c.runtime == DOCKER:
            return self._docker(c.id)
        if c.runtime == PODMAN:
            return self._podman(c.id)
        # containerd, CRI-O, or a Kubernetes container of either (cgroupfs driver)
        for config in self._oci_configs(c.id):
            found = self._annotations(config)
            if found != (None, None, None):
                return found
        return None, None, None

    def _oci_configs(self, cid: str) -> list[Path]:
        r = self.root
        paths = [
            r / "run/containers/storage/overlay-containers" / cid / "userdata/config.json",
            r / "var/lib/containers/storage/overlay-containers" / cid / "userdata/config.json",
        ]
        task = r / "run/containerd/io.containerd.runtime.v2.task"
        try:
            namespaces = sorted(e.name for e in os.scandir(task) if e.is_dir())
        except OSError:
            namespaces = []
        paths += [task / ns / cid / "config.json" for ns in namespaces]
        return paths

    @staticmethod
    def _load(path: Path) -> dict[str, object] | None:
        try:
            with open(path, "rb") as f:
                doc = json.load(f)
        except (OSError, ValueError, RecursionError):  # damaged, or nested absurdly deep
            return None
        return doc if isinstance(doc, dict) else None

    def _annotations(self, path: Path) -> tuple[str | None, str | None, str | None]:
        doc = self._load(path)
        if doc is None:
            return None, None, None
        return _from_annotations(doc.get("annotations"))

    def _docker(self, cid: str) -> tuple[str | None, str | None, str | None]:
        doc = self._load(self.root / "var/lib/docker/containers" / cid / "config.v2.json")
        if doc is None:
            return None, None, None
        config = doc.get("Config")
        name, pod, namespace = _from_annotations(
            config.get("Labels") if isinstance(config, dict) else None)
        docker_name = doc.get("Name")
        if not name and isinstance(docker_name, str):
            name = docker_name.lstrip("/") or None
        return name, pod, namespace

    def _podman(self, cid: str) -> tuple[str | None, str | None, str | None]:
        now = time.monotonic()
        if self._podman_names is None or (cid not in self._podman_names
                                          and now - self._podman_loaded > self.retry_s):
            self._podman_loaded = now
            self._podman_names = {}
            for base in ("var/lib/containers/storage", "run/containers/storage"):
                doc = None
                try:
                    with open(self.root / base / "overlay-containers/containers.json",
                              "rb") as f:
                        doc = json.load(f)
                except (OSError, ValueError, RecursionError):
                    continue
                for entry in doc if isinstance(doc, list) else []:
                    if not isinstance(entry, dict):
                        continue
                    entry_id, names = entry.get("id"), entry.get("names")
                    if (isinstance(entry_id, str) and entry_id and isinstance(names, list) and names
                            and isinstance(names[0], str)):
                        self._podman_names[entry_id] = names[0]
        return self._podman_names.get(cid), None, None


def _from_annotations(a: object) -> tuple[str | None, str | None, str | None]:
    """(name, pod, namespace) from OCI annotations or Docker labels: a JSON
    object of strings (anything else, from a damaged file, names nothing)."""
    if not isinstance(a, dict):
        return None, None, None
    for keys in _CRI_ANNOTATIONS:
        name, pod, ns = (v if isinstance(v := a.get(k), str) and v else None for k in keys)
        if name or pod or ns:
            if name is None and a.get("io.kubernetes.cri.container-type") == "sandbox":
                name = "POD"
            return name, pod, ns
    return None, None, None
