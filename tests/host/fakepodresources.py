"""A test kubelet's PodResources API (v1.PodResourcesLister/List), written
from the same .proto the exporter uses, served on a unix socket in a
temporary directory (the kubelet's is
/var/lib/kubelet/pod-resources/kubelet.sock)."""

from __future__ import annotations

from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from pycgpu.k8s.api import POD_RESOURCES, load

# (namespace, pod, container) -> {resource name: [device IDs]}
Pods = dict[tuple[str, str, str], dict[str, list[str]]]


class FakePodResources:
    def __init__(self, socket: Path, pods: Pods | None = None) -> None:
        self.socket = socket
        self.pods: Pods = dict(pods or {})
        self.calls = 0
        self.api = load(POD_RESOURCES)
        self._server: grpc.Server | None = None

    def response(self) -> Any:
        pb2 = self.api.pb2
        by_pod: dict[tuple[str, str], list[Any]] = {}
        for (ns, pod, ctr), resources in self.pods.items():
            by_pod.setdefault((ns, pod), []).append(pb2.ContainerResources(
                name=ctr, devices=[pb2.ContainerDevices(resource_name=r, device_ids=ids)
                                   for r, ids in resources.items()]))
        return pb2.ListPodResourcesResponse(pod_resources=[
            pb2.PodResources(namespace=ns, name=pod, containers=ctrs)
            for (ns, pod), ctrs in by_pod.items()])

    def start(self) -> FakePodResources:
        fake = self

        class Lister(self.api.grpc.PodResourcesListerServicer):  # type: ignore[name-defined]
            def List(self, request: Any, context: Any) -> Any:
                fake.calls += 1
                return fake.response()

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        self.api.grpc.add_PodResourcesListerServicer_to_server(Lister(), server)
        server.add_insecure_port(f"unix:{self.socket}")
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(0).wait()
            self._server = None
