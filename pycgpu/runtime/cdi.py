"""Container Device Interface specs for the render nodes.

CDI (podman, containerd, CRI-O, Docker 25+ with the cdi feature, default in
Docker 28) injects device nodes, mounts, environment and hooks into a
container's OCI config; it has no resource fields at all. So the spec gives
one device per render node (named after it: ``pycgpu.io/gpu=renderD128``)
plus ``all``, and optionally a createRuntime hook, ``pycgpu oci hook``,
which applies the knobs the container's ``pycgpu.io/gpu.*`` annotations ask
for (:mod:`pycgpu.runtime.annotations`) to its cgroup.

The Kubernetes device plugin's spec also has a device per GPU share
(``pycgpu.io/gpu=renderD128-s3``) whose only edit is a hook entry carrying
the share's ID (``/bin/true pycgpu-share-id=renderD128-s3``, a trivial
host program the runtime runs in no time): Allocate names
the devices of the shares it grants, the runtime copies their entries into
the container's config, and the hook records the IDs it finds there for the
exporter's pod labels. A pod cannot write hook entries, but the runtime
copies every entry of each CDI device a container names: whatever can name a
share's CDI device gets its ID (``--device pycgpu.io/gpu=renderD128-s3`` on
the node, ``cdi.k8s.io/*`` annotations where a runtime honours a pod's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..core.errors import Error
from .oci import CONTAINER_DRI, DEVICE_ACCESS, HookCommand, share_id_entry

if TYPE_CHECKING:
    from ..core.devices import Device
    from ..core.formats import Cap

# The lowest version that has every field the spec uses (deviceNodes.hostPath
# came in 0.5.0): CDI readers refuse versions newer than they know, and
# Debian 12's podman 4.3 and containerd 1.7 read at most 0.5.0.
CDI_VERSION = "0.5.0"
KIND = "pycgpu.io/gpu"
ALL = "all"


class SpecError(Error, ValueError):
    """A spec that cannot be written (CDI has no spec without devices)."""


def device_node(dev: Device) -> dict[str, Any]:
    """One CDI ``deviceNodes`` entry: the container path, the host path
    where it differs, and the device number (``permissions`` are the device
    cgroup access: CDI runtimes add the allow rule themselves)."""
    node: dict[str, Any] = {"path": f"{CONTAINER_DRI}/{dev.name}"}
    if str(dev.render_node) != node["path"]:
        node["hostPath"] = str(dev.render_node)
    node.update(type="c", major=dev.devt.major, minor=dev.devt.minor, permissions=DEVICE_ACCESS)
    return node


def spec(devices: list[Device], hook: HookCommand | None = None,
         share_ids: Mapping[str, Sequence[str]] | None = None,
         share_caps: Mapping[str, Cap] | None = None) -> dict[str, Any]:
    """The CDI spec for @devices (render nodes, in order), with the
    createRuntime @hook in the spec-wide edits (applied to every container
    that gets one of these devices) when given, and for each ID of
    @share_ids (by render node name: the device plugin's shares) a device
    named after it whose edit is a hook entry carrying the ID and, for a
    render node of @share_caps, the cap of one share
    (:func:`pycgpu.runtime.oci.share_id_entry`; @hook records the ID and
    caps the container by the sum of its shares' caps).
    :class:`SpecError` without devices, or with share IDs but no hook."""
    if not devices:
        raise SpecError("no render nodes to describe")
    if share_ids and hook is None:
        raise SpecError("share devices carry IDs that only the hook records: give the hook")
    entries: list[dict[str, Any]] = [
        {"name": d.name, "containerEdits": {"deviceNodes": [device_node(d)]}} for d in devices]
    entries.append({"name": ALL,
                    "containerEdits": {"deviceNodes": [device_node(d) for d in devices]}})
    for d in devices:
        for share in (share_ids or {}).get(d.name, ()):
            entries.append({"name": share, "containerEdits": {"hooks": [
                {"hookName": "createRuntime",
                 **share_id_entry(share, (share_caps or {}).get(d.name))}]}})
    doc: dict[str, Any] = {"cdiVersion": CDI_VERSION, "kind": KIND, "devices": entries}
    if hook is not None:
        doc["containerEdits"] = {"hooks": [{"hookName": "createRuntime", **hook.oci()}]}
    return doc


def qualified_name(name: str) -> str:
    """``pycgpu.io/gpu=renderD128``: what ``--device`` takes in podman and Docker."""
    return f"{KIND}={name}"
