"""The kubelet device plugin (API v1beta1, gRPC over unix sockets).

Life cycle, as the kubelet's device manager expects it:

1. serve the DevicePlugin service on ``DIR/ENDPOINT`` (DIR is the kubelet's
   ``/var/lib/kubelet/device-plugins``);
2. call ``Registration.Register`` on the kubelet's socket (``DIR/kubelet.sock``)
   with the API version, ENDPOINT, the resource name and the options
   (GetPreferredAllocation available, no PreStartContainer);
3. the kubelet then calls ListAndWatch (kept open: the plugin sends the
   full list again whenever render nodes come or go), GetPreferredAllocation
   at admission and Allocate before each container is created.

With a CDI spec path (``--cdi-spec``), the plugin also writes the CDI spec
of the GPUs it advertises (one device per render node, one per share whose
hook entry carries its ID, the createRuntime hook), at start and again
whenever the set of GPUs or their shares change, atomically (a
temporary file in the same directory, then ``os.replace``): a runtime never
reads half a spec, and a GPU that comes is in the spec before the kubelet
can hand out its shares. Without GPUs the spec is removed (CDI has no empty
spec).

A kubelet that restarts deletes the sockets in DIR and creates its own
anew. The plugin checks every ``check_interval`` seconds: when its own
socket is gone it serves again, and when the kubelet's socket is a new file
(inode and change time differ) it registers again. Failures are logged as
one line each (once until the failure changes) and retried; nothing stops
the plugin but :meth:`DevicePlugin.run`'s stop event.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc

from ..core.cgroup import CgroupError
from ..core.devices import Device
from ..core.errors import Error
from ..core.memory import Interface, detect
from ..runtime import cdi
from ..runtime.oci import HookCommand, atomic_write
from . import shares as sh
from .api import DEVICE_PLUGIN, load
from .sources import DeviceSource

PLUGIN_DIR = Path("/var/lib/kubelet/device-plugins")
KUBELET_SOCKET = "kubelet.sock"
ENDPOINT = "pycgpu-gpu-share.sock"
# a kubelet answers Register at once; a registration sent to a kubelet that is
# stopping (its socket not yet gone) gets no answer, and the plugin retries
# only after this (as NVIDIA's plugin, 5 s)
REGISTER_TIMEOUT = 5.0
# a fresh connection per registration: the process-wide subchannel pool would
# hand back the connection to the kubelet's previous socket, in reconnect backoff
CHANNEL_OPTIONS = [("grpc.use_local_subchannel_pool", 1)]

API_VERSION = "v1beta1"

Log = Callable[[str], None]


class PluginError(Error, RuntimeError):
    """The plugin cannot serve (its socket cannot be created)."""


class DevicePlugin:
    """The plugin's state: the inventory, the server, the registration."""

    def __init__(self, config: sh.Config, source: DeviceSource, *, log: Log,
                 plugin_dir: Path = PLUGIN_DIR, kubelet_socket: Path | None = None,
                 endpoint: str = ENDPOINT, resource_name: str = sh.RESOURCE,
                 sysfs_root: Path = Path("/sys"), check_interval: float = 1.0,
                 cdi_spec: Path | None = None, cdi_hook: HookCommand | None = None,
                 cgroup_root: Path | None = None) -> None:
        if "/" in endpoint or not endpoint:
            raise PluginError(f"endpoint {endpoint!r}: give a file name, it is created "
                              f"in {plugin_dir}")
        if config.capped and (cdi_spec is None or cdi_hook is None):
            raise PluginError("capped shares travel in the plugin's CDI spec (the hook "
                              "entries of the shares' devices): give the CDI spec's path")
        self.config, self.source, self.log = config, source, log
        self.plugin_dir = plugin_dir
        self.kubelet_socket = kubelet_socket or plugin_dir / KUBELET_SOCKET
        self.endpoint, self.resource_name = endpoint, resource_name
        self.sysfs_root, self.check_interval = sysfs_root, check_interval
        self.cgroup_root = cgroup_root  # dmem.capacity sizes the shares' memory
        self.cdi_spec, self.cdi_hook = cdi_spec, cdi_hook
        self._cdi_text: str | None = None  # what the spec holds now (None: unknown)
        self.api = load(DEVICE_PLUGIN)
        self._cond = threading.Condition()
        self._inventory = sh.Inventory(config)
        self._revision = 0
        self._said: set[str] = set()
        self._server: grpc.Server | None = None
        self._socket_id: tuple[int, int] | None = None
        self._registered: tuple[int, int] | None = None
        self._last_error: str | None = None
        self.registrations = 0

    @property
    def share_devices(self) -> bool:
        """Whether the CDI spec is the plugin's, with a device per share
        whose hook entry carries its ID (Allocate then names them)."""
        return self.cdi_spec is not None and self.cdi_hook is not None

    @property
    def socket(self) -> Path:
        return self.plugin_dir / self.endpoint

    # the inventory ---------------------------------------------------------------------------

    def inventory(self) -> tuple[sh.Inventory, int]:
        with self._cond:
            return self._inventory, self._revision

    def refresh(self) -> None:
        """Rediscover; on a change, tell every ListAndWatch stream."""
        try:
            devices = self.source.devices()
        except Exception as e:  # a broken sysfs must not kill the plugin
            self._say(f"cannot list render nodes: {e}")
            return
        weights = self._weights()
        inv = sh.build(devices, self.config, self.sysfs_root, self._memory(devices), weights)
        if not weights:
            self._say(sh.NO_WEIGHTS)
        for warning in inv.warnings:
            self._say(warning)
        # the spec first: a GPU's shares are advertised once its CDI device exists
        self.write_cdi_spec(inv)
        with self._cond:
            if inv.fingerprint() == self._inventory.fingerprint():
                self._inventory = inv
                return
            old = {g.name for g in self._inventory.gpus.values()}
            self._inventory = inv
            self._revision += 1
            self._cond.notify_all()
        new = {g.name for g in inv.gpus.values()}
        gone = sorted(old - new)
        parts = [f"{g.name}: {g.shares} shares" + (f", {g.memory_text()}" if g.memory_text()
                                                     else "")
                 for g in inv.gpus.values()]
        self.log("advertising " + ("; ".join(parts) if parts else "no GPUs")
                 + (f" (gone: {', '.join(gone)})" if gone else ""))

    def _weights(self) -> bool:
        """Whether shares carry a weight (:func:`pycgpu.k8s.shares.weights_apply`)."""
        return sh.weights_apply(self.cgroup_root)

    def _memory(self, devices: list[Device]) -> Interface | None:
        """The kernel's memory regions and their capacities, when the host's
        cgroup2 tree is given (None without it, or when it cannot be read:
        said once)."""
        if self.cgroup_root is None:
            return None
        try:
            return detect(self.cgroup_root, devices)
        except CgroupError as e:
            self._say(f"cannot read the GPU memory regions: {e.strerror or e}")
            return None

    def write_cdi_spec(self, inv: sh.Inventory) -> None:
        """Write the CDI spec of @inv's GPUs to :attr:`cdi_spec` if it
        differs from what the spec holds (remove it when there are none);
        a failure is logged and retried at the next refresh."""
        if self.cdi_spec is None:
            return
        import json

        devices = sorted((g.device for g in inv.gpus.values()), key=lambda d: d.devt)
        share_ids = {g.name: g.ids() for g in inv.gpus.values()} if self.cdi_hook else None
        caps = {g.name: g.cap(1) for g in inv.gpus.values()} if inv.config.capped else None
        text = (json.dumps(cdi.spec(devices, self.cdi_hook, share_ids, caps), indent=2) + "\n"
                if devices else "")
        if text == self._cdi_text:
            return
        try:
            if text:
                atomic_write(self.cdi_spec, text)
            else:
                self.cdi_spec.unlink(missing_ok=True)
        except OSError as e:
            self._cdi_text = None
            self._error(f"cannot write the CDI spec {self.cdi_spec}: {e.strerror or e} "
                        "(retrying)")
            return
        self._cdi_text = text
        self.log(f"wrote the CDI spec {self.cdi_spec}: "
                 + (" ".join(cdi.qualified_name(d.name) for d in devices) if devices
                    else "removed, no GPUs"))

    def _say(self, message: str) -> None:
        """Log @message once (configuration warnings are rechecked at each refresh)."""
        if message not in self._said:
            self._said.add(message)
            self.log(message)

    # the servicer ----------------------------------------------------------------------------

    def list_and_watch(self, context: grpc.ServicerContext) -> Iterator[Any]:
        pb2 = self.api.pb2
        seen = -1
        while context.is_active():
            with self._cond:
                if self._revision == seen:
                    self._cond.wait(timeout=1.0)
                    continue
                inv, seen = self._inventory, self._revision
            yield pb2.ListAndWatchResponse(devices=[
                pb2.Device(ID=i, health=sh.HEALTHY) for i in inv.device_ids()])

    def preferred(self, request: Any) -> Any:
        pb2 = self.api.pb2
        inv, _ = self.inventory()
        out = []
        for req in request.container_requests:
            ids = sh.preferred(inv, req.available_deviceIDs, req.must_include_deviceIDs,
                               req.allocation_size)
            out.append(pb2.ContainerPreferredAllocationResponse(deviceIDs=ids))
        return pb2.PreferredAllocationResponse(container_responses=out)

    def allocate(self, request: Any, context: grpc.ServicerContext) -> Any:
        pb2 = self.api.pb2
        inv, _ = self.inventory()
        out = []
        for req in request.container_requests:
            try:
                g = sh.grant(inv, req.devices_ids, share_devices=self.share_devices)
            except sh.ShareError as e:
                self.log(f"Allocate refused: {e}")
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(e))
            out.append(pb2.ContainerAllocateResponse(
                annotations=g.annotations,
                cdi_devices=[pb2.CDIDevice(name=n) for n in g.cdi_devices]))
            self.log("allocated " + ", ".join(f"{k} of {n}" for n, k in g.shares.items())
                     + ": " + ", ".join(f"{k}={v}" for k, v in g.annotations.items()))
        return pb2.AllocateResponse(container_responses=out)

    def _servicer(self) -> Any:
        plugin, pb2 = self, self.api.pb2

        # the base class and the messages are in the generated stubs (api/),
        # untyped: mypy refuses a base class of type Any
        base: Any = self.api.grpc.DevicePluginServicer

        class Servicer(base):  # type: ignore[misc]
            def GetDevicePluginOptions(self, request: Any,
                                       context: grpc.ServicerContext) -> Any:
                return pb2.DevicePluginOptions(pre_start_required=False,
                                               get_preferred_allocation_available=True)

            def ListAndWatch(self, request: Any,
                             context: grpc.ServicerContext) -> Iterator[Any]:
                return plugin.list_and_watch(context)

            def GetPreferredAllocation(self, request: Any,
                                       context: grpc.ServicerContext) -> Any:
                return plugin.preferred(request)

            def Allocate(self, request: Any, context: grpc.ServicerContext) -> Any:
                return plugin.allocate(request, context)

            def PreStartContainer(self, request: Any, context: grpc.ServicerContext) -> Any:
                return pb2.PreStartContainerResponse()

        return Servicer()

    # serving and registering -----------------------------------------------------------------

    def serve(self) -> None:
        """(Re)start the server on the plugin's socket (PluginError if it cannot)."""
        self.stop_serving()
        path = self.socket
        try:
            path.unlink(missing_ok=True)
        except OSError as e:
            raise PluginError(f"cannot remove the stale socket {path}: {e.strerror}") from None
        if not self.plugin_dir.is_dir():
            raise PluginError(f"{self.plugin_dir} is not a directory (is the kubelet's "
                              "device-plugins directory mounted?)")
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        self.api.grpc.add_DevicePluginServicer_to_server(self._servicer(), server)
        try:
            port = server.add_insecure_port(f"unix:{path}")
        except RuntimeError as e:
            port, why = 0, str(e)
        else:
            why = "grpc refused the address"
        if not port or not path.exists():
            server.stop(0)
            raise PluginError(f"cannot listen on {path}: {why} (fix: the directory must be "
                              "writable; unix socket paths are limited to 107 bytes)")
        server.start()
        self._server = server
        st = path.stat()
        self._socket_id = (st.st_ino, st.st_ctime_ns)
        self._registered = None  # a new socket: register again

    def stop_serving(self) -> None:
        if self._server is not None:
            # wait: grpc unlinks the socket path as the server ends, which
            # would take the next server's socket with it
            self._server.stop(0).wait()
            self._server = None
            with self._cond:
                self._cond.notify_all()

    def _socket_ok(self) -> bool:
        try:
            st = self.socket.stat()
        except OSError:
            return False
        return (st.st_ino, st.st_ctime_ns) == self._socket_id

    def register(self) -> bool:
        """Register if the kubelet's socket is new; True when registered."""
        try:
            st = self.kubelet_socket.stat()
        except OSError as e:
            self._error(f"waiting for the kubelet: {self.kubelet_socket}: {e.strerror}")
            return False
        key = (st.st_ino, st.st_ctime_ns)
        if key == self._registered:
            return True
        pb2 = self.api.pb2
        request = pb2.RegisterRequest(
            version=API_VERSION, endpoint=self.endpoint, resource_name=self.resource_name,
            options=pb2.DevicePluginOptions(pre_start_required=False,
                                            get_preferred_allocation_available=True))
        try:
            with grpc.insecure_channel(f"unix:{self.kubelet_socket}",
                                       options=CHANNEL_OPTIONS) as channel:
                stub = self.api.grpc.RegistrationStub(channel)
                stub.Register(request, timeout=REGISTER_TIMEOUT, wait_for_ready=False)
        except grpc.RpcError as e:
            detail = e.details() if hasattr(e, "details") else str(e)
            self._error(f"cannot register with the kubelet at {self.kubelet_socket}: "
                        f"{detail} (retrying every {self.check_interval:g}s)")
            return False
        self._registered = key
        self._last_error = None
        self.registrations += 1
        self.log(f"registered {self.resource_name} with the kubelet at {self.kubelet_socket} "
                 f"(endpoint {self.endpoint}, API {API_VERSION})")
        return True

    def _error(self, message: str) -> None:
        if message != self._last_error:
            self._last_error = message
            self.log(message)

    def tick(self) -> None:
        """One check: serve if the socket is gone, register if the kubelet is new."""
        if self._server is None or not self._socket_ok():
            if self._server is not None:
                self.log(f"{self.socket} was removed (kubelet restart?): serving again")
            try:
                self.serve()
            except PluginError as e:
                self._error(str(e))
                return
        self.register()

    def run(self, stop: threading.Event) -> None:
        """Serve until @stop is set. The first socket failure raises
        :class:`PluginError`; later ones are logged and retried."""
        self.refresh()
        self.serve()
        watcher = threading.Thread(target=self.source.watch, args=(self.refresh, stop),
                                   name="pycgpu-devices", daemon=True)
        watcher.start()
        try:
            while not stop.is_set():
                self.tick()
                stop.wait(self.check_interval)
        finally:
            self.stop_serving()
            with contextlib.suppress(OSError):
                if self._socket_ok():
                    os.unlink(self.socket)
            watcher.join(timeout=5)
