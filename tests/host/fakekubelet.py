"""A test kubelet, written from the device plugin API v1beta1 (the same
.proto the plugin uses): the Registration server on DIR/kubelet.sock, and
the client side of DevicePlugin (GetDevicePluginOptions, ListAndWatch,
GetPreferredAllocation, Allocate) on the socket a plugin registers.

Like the kubelet's device manager it connects to the plugin when the
plugin registers, keeps ListAndWatch open and records every list; and on a
restart it deletes the sockets in DIR and creates its own anew. Used by
the host tier (tests/host/test_k8s_plugin.py) and by the VM tier
(tests/vm/test_k8s.py), which imports it from here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from pycgpu.k8s.api import DEVICE_PLUGIN, load

TIMEOUT = 10.0


class FakeKubelet:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.api = load(DEVICE_PLUGIN)
        self.socket = directory / "kubelet.sock"
        self.requests: list[Any] = []
        self.options: Any = None
        self.lists: list[list[tuple[str, str]]] = []
        self.stream_errors: list[str] = []
        self._cond = threading.Condition()
        self._server: grpc.Server | None = None
        self._channel: grpc.Channel | None = None
        self.stub: Any = None
        self.reject: str | None = None  # refuse registrations with this message

    # the Registration service -------------------------------------------------------------

    def start(self) -> FakeKubelet:
        kubelet, pb2 = self, self.api.pb2

        class Registration(self.api.grpc.RegistrationServicer):  # type: ignore[name-defined]
            def Register(self, request, context):
                if kubelet.reject is not None:
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, kubelet.reject)
                with kubelet._cond:
                    kubelet.requests.append(request)
                    kubelet._cond.notify_all()
                threading.Thread(target=kubelet._connect, args=(request.endpoint,),
                                 daemon=True).start()
                return pb2.Empty()

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.api.grpc.add_RegistrationServicer_to_server(Registration(), server)
        assert server.add_insecure_port(f"unix:{self.socket}")
        server.start()
        self._server = server
        return self

    def stop(self, remove_sockets: bool = True) -> None:
        """Stop; with @remove_sockets delete every socket in the directory,
        as a starting kubelet does."""
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        if self._server is not None:
            # wait for the shutdown: grpc unlinks the socket path as it ends,
            # which would take the next server's socket with it
            self._server.stop(0).wait()
            self._server = None
        if remove_sockets:
            for p in self.dir.glob("*.sock"):
                p.unlink(missing_ok=True)

    def restart(self) -> None:
        self.stop()
        self.start()

    # the DevicePlugin client ------------------------------------------------------------------

    def _connect(self, endpoint: str) -> None:
        channel = grpc.insecure_channel(f"unix:{self.dir / endpoint}",
                                        options=[("grpc.use_local_subchannel_pool", 1)])
        stub = self.api.grpc.DevicePluginStub(channel)
        try:
            options = stub.GetDevicePluginOptions(self.api.pb2.Empty(), timeout=TIMEOUT)
        except grpc.RpcError as e:
            self.stream_errors.append(f"GetDevicePluginOptions: {e}")
            return
        with self._cond:
            if self._channel is not None:
                self._channel.close()
            self._channel, self.stub, self.options = channel, stub, options
            self._cond.notify_all()
        try:
            for response in stub.ListAndWatch(self.api.pb2.Empty()):
                with self._cond:
                    self.lists.append([(d.ID, d.health) for d in response.devices])
                    self._cond.notify_all()
        except grpc.RpcError as e:
            self.stream_errors.append(f"ListAndWatch: {e.code()}")

    def wait(self, predicate: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out waiting for {what}; registrations "
                                         f"{len(self.requests)}, lists {self.lists[-3:]}, "
                                         f"stream errors {self.stream_errors}")
                self._cond.wait(timeout=min(left, 0.2))

    def wait_registered(self, count: int = 1) -> Any:
        self.wait(lambda: len(self.requests) >= count and self.stub is not None
                  and len(self.lists) > 0, f"registration {count}")
        return self.requests[count - 1]

    def wait_devices(self, predicate: Callable[[list[str]], bool], what: str) -> list[str]:
        self.wait(lambda: bool(self.lists) and predicate([i for i, _ in self.lists[-1]]), what)
        return self.devices()

    def devices(self) -> list[str]:
        with self._cond:
            return [i for i, _ in self.lists[-1]] if self.lists else []

    def preferred(self, available: list[str], must: list[str], size: int) -> list[str]:
        pb2 = self.api.pb2
        req = pb2.PreferredAllocationRequest(container_requests=[
            pb2.ContainerPreferredAllocationRequest(available_deviceIDs=available,
                                                    must_include_deviceIDs=must,
                                                    allocation_size=size)])
        resp = self.stub.GetPreferredAllocation(req, timeout=TIMEOUT)
        return list(resp.container_responses[0].deviceIDs)

    def allocate(self, *containers: list[str]) -> list[Any]:
        """Allocate for one pod's containers: a ContainerAllocateResponse each."""
        pb2 = self.api.pb2
        req = pb2.AllocateRequest(container_requests=[
            pb2.ContainerAllocateRequest(devices_ids=ids) for ids in containers])
        return list(self.stub.Allocate(req, timeout=TIMEOUT).container_responses)


def response_dict(resp: Any) -> dict[str, Any]:
    """A ContainerAllocateResponse as plain data."""
    return {"cdi_devices": [d.name for d in resp.cdi_devices],
            "annotations": dict(resp.annotations), "envs": dict(resp.envs),
            "devices": [d.host_path for d in resp.devices],
            "mounts": [m.host_path for m in resp.mounts]}
