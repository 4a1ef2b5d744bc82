"""``pycgpu devices``: the GPUs the controller can key on (render nodes)."""

from __future__ import annotations

from typing import Any

import click

from .common import State, pass_state


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

    \b
    Examples:
      pycgpu devices
      pycgpu devices --json | jq -r '.devices[] | select(.driver=="i915") | .devt'
    """
    from ...core.devices import discover
    from ...core.schemas import DEVICES_V1

    found = discover(state.sysfs_root, state.dev_root, query_driver=True)
    if as_json:
        import json

        doc = {"schema": DEVICES_V1, "devices": [device_json(d) for d in found]}
        click.echo(json.dumps(doc, indent=2))
        return
    if not found:
        click.echo("no DRM render nodes found", err=True)
        return
    from ...monitoring.tables import echo, table

    header = ("NODE", "DEVT", "DRIVER", "VERSION", "CARD", "PCI", "VENDOR:DEVICE")
    rows = []
    for d in found:
        ids = f"{d.vendor_id}:{d.device_id}" if d.vendor_id else "-"
        rows.append((str(d.render_node), str(d.devt), d.driver or "-", d.driver_version or "-",
                     d.card_node.name if d.card_node else "-", d.pci_address or "-", ids))
    echo(table(header, rows, left=header))
