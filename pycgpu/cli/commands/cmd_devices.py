"""``pycgpu devices``: the GPUs the controller can key on (render nodes)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from .common import Refused, State, pass_state

if TYPE_CHECKING:
    from ...core.memory import Interface


def device_json(dev: Any) -> dict[str, Any]:
    """One item of the pycgpu.devices/v1 document."""
    return {
        "render_node": str(dev.render_node),
        "card_node": str(dev.card_node) if dev.card_node else None,
        "devt": str(dev.devt),
        "major": dev.devt.major,
        "minor": dev.devt.minor,
        "driver": dev.driver,
        "driver_version": dev.driver_version,
        "pci_address": dev.pci_address,
        "vendor_id": dev.vendor_id,
        "device_id": dev.device_id,
    }


@click.command("devices", short_help="List GPUs (DRM render nodes) and their MAJ:MIN keys.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the pycgpu.devices/v1 JSON document.")
@pass_state
def devices(state: State, as_json: bool) -> None:
    """List the DRM render nodes: the devices gpu.* files are keyed by.

    The DEVT column (MAJ:MIN) is the key in gpu.weight, gpu.memory.max and
    the other files; any of the NODE, CARD, PCI or DEVT forms can be given
    as DEV to create/set. The driver version is asked from the driver
    (DRM_IOCTL_VERSION) when the node can be opened, else shown as -.

    Then the memory regions the kernel counts GPU memory in (as pycgpu
    check finds them): one per device under gpu.memory.*; under dmem, a
    device's only region is named by the device, one of several by
    DEV:REGION (renderD128:vram0), the names --memory-max takes.

    \b
    Examples:
      pycgpu devices
      pycgpu devices --json | jq -r '.devices[] | select(.driver=="i915") | .devt'
    """
    from ...core.devices import discover
    from ...core.schemas import DEVICES_V1

    found = discover(state.sysfs_root, state.dev_root, query_driver=True)
    memory = _memory(state)
    if as_json:
        import json

        from ...core.snapshot import regions_json

        doc: dict[str, Any] = {"schema": DEVICES_V1, "devices": [device_json(d) for d in found]}
        if memory is not None:
            doc["memory"] = regions_json(memory)
        click.echo(json.dumps(doc, indent=2))
        return
    if not found:
        click.echo("no DRM render nodes found", err=True)
    else:
        _echo_devices(found)
    if memory is not None:
        click.echo()
        _echo_regions(memory, {d.devt: d.name for d in found})


def _memory(state: State) -> Interface | None:
    """The kernel's memory interface and its regions (State.memory, as show
    and set have them); None without a cgroup2 tree to read them from."""
    try:
        return state.memory()
    except Refused:
        return None


def _echo_devices(found: list[Any]) -> None:
    from ...monitoring.tables import echo, table

    header = ("NODE", "DEVT", "DRIVER", "VERSION", "CARD", "PCI", "VENDOR:DEVICE")
    rows = []
    for d in found:
        ids = f"{d.vendor_id}:{d.device_id}" if d.vendor_id else "-"
        rows.append((str(d.render_node), str(d.devt), d.driver or "-", d.driver_version or "-",
                     d.card_node.name if d.card_node else "-", d.pci_address or "-", ids))
    echo(table(header, rows, left=header))


def _echo_regions(memory: Interface, names: dict[Any, str]) -> None:
    """The regions: the name --memory-max takes (the render node, with its
    MAJ:MIN), the kernel's key, dmem's capacity."""
    from ...core.formats import format_size_human
    from ...core.memory import label
    from ...monitoring.tables import echo, table

    click.echo(f"memory regions ({memory.kind}):")
    header = ("REGION", "KERNEL KEY", "CAPACITY")
    rows = [(label(r.key, names), r.kernel_key,
             "-" if r.capacity is None else format_size_human(r.capacity))
            for r in memory.regions]
    echo(table(header, rows, left=header[:2]))
