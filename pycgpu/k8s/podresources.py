"""Pod, namespace and container names from the kubelet's PodResources API
(gRPC ``v1.PodResourcesLister/List`` on
``/var/lib/kubelet/pod-resources/kubelet.sock``), as DCGM-exporter gets
them, for the exporter's labels.

The API names each container that holds device plugin resources, with the
device IDs it got: for ``pycgpu.io/gpu-share``, the share IDs
(``renderD128-s3``). It does not name cgroups, so the link is made by the
createRuntime hook: it records the share IDs of the container it sets up
(carried by the hook entries of the share devices the plugin's Allocate
names: :func:`pycgpu.runtime.hook.granted_share_ids`; never an annotation,
which a pod could forge) in the ``trusted.pycgpu.share_ids`` extended
attribute of the container's cgroup
(:data:`pycgpu.runtime.kubepods.SHARE_IDS_XATTR`), where the exporter reads
them back: ``trusted.*`` takes CAP_SYS_ADMIN to set, where a ``user.*``
attribute could be set by whoever can write the cgroup's directory (a
delegated subtree, a pod with a writable cgroupfs), so none is read. A share ID
held by two cgroups (a stale or forged attribute) names neither.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import Error
from ..runtime.kubepods import share_ids_of
from .api import POD_RESOURCES, ApiUnavailable, load

SOCKET = Path("/var/lib/kubelet/pod-resources/kubelet.sock")
TIMEOUT = 2.0
RESOURCE = "pycgpu.io/gpu-share"


class PodResourcesError(Error, RuntimeError):
    """The kubelet's PodResources API did not answer."""


@dataclass(frozen=True)
class Owner:
    """The container a share belongs to."""

    namespace: str
    pod: str
    container: str


def list_shares(socket: Path = SOCKET, resource: str = RESOURCE,
                timeout: float = TIMEOUT) -> dict[str, Owner]:
    """Share ID -> the container that holds it, from one List call on
    @socket (PodResourcesError when it fails)."""
    api = load(POD_RESOURCES)  # ApiUnavailable without grpcio (the k8s extra)
    import grpc

    try:
        with grpc.insecure_channel(f"unix:{socket}",
                                   options=[("grpc.use_local_subchannel_pool", 1)]) as ch:
            stub = api.grpc.PodResourcesListerStub(ch)
            resp = stub.List(api.pb2.ListPodResourcesRequest(), timeout=timeout)
    except grpc.RpcError as e:
        detail = e.details() if hasattr(e, "details") else str(e)
        raise PodResourcesError(f"the kubelet's PodResources API at {socket}: {detail}") from None
    out: dict[str, Owner] = {}
    for pod in resp.pod_resources:
        for ctr in pod.containers:
            for dev in ctr.devices:
                if dev.resource_name == resource:
                    owner = Owner(pod.namespace, pod.name, ctr.name)
                    for device_id in dev.device_ids:
                        out[device_id] = owner
    return out


class Labels:
    """Pod, namespace and container of a cgroup, by its recorded share IDs
    and the kubelet's answer, asked once per :meth:`refresh` (a scrape).
    Failures are logged once each and leave the labels to the other sources."""

    def __init__(self, socket: Path, mount: Path, log: Callable[[str], None] | None = None,
                 resource: str = RESOURCE) -> None:
        self.socket, self.mount, self.log, self.resource = socket, mount, log, resource
        self._owners: dict[str, Owner] = {}
        self._ids: dict[str, tuple[str, ...]] = {}  # cgroup path -> recorded share IDs
        self._claims: dict[str, int] = {}
        self._last_error: str | None = None
        self._lock = threading.Lock()

    def refresh(self, paths: Iterable[str]) -> None:
        """Ask the kubelet again; read the attribute of cgroups not seen before."""
        with self._lock:
            try:
                self._owners = list_shares(self.socket, self.resource)
                self._last_error = None
            except (PodResourcesError, ApiUnavailable) as e:
                self._owners = {}
                if str(e) != self._last_error and self.log is not None:
                    self.log(f"{e} (pod labels left to the cgroup paths)")
                self._last_error = str(e)
            keep = {}
            for path in paths:
                ids = self._ids.get(path)
                if not ids:  # new, or seen before its hook ran
                    ids = share_ids_of(f"{self.mount}{path}")
                keep[path] = ids
            self._ids = keep
            claims: dict[str, int] = {}
            for ids in keep.values():
                for i in ids:
                    claims[i] = claims.get(i, 0) + 1
            self._claims = claims

    def owner(self, path: str) -> Owner | None:
        """The container of cgroup @path, if the kubelet names it."""
        owners = {self._owners.get(i) for i in self._ids.get(path, ())
                  if self._claims.get(i) == 1}
        owners.discard(None)
        if len(owners) != 1:
            return None
        (found,) = owners
        return found
