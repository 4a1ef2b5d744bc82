"""``pycgpu image check``: does an image's GPU user space fit this host's
GPU kernel drivers?"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from .cmd_oci import EXIT_MISMATCH, complete_device, resolve_devices
from .common import BadValue, State, pass_state

if TYPE_CHECKING:
    from rich.table import Table

    from ...runtime.imagecheck import Report


@click.group("image", short_help="Container images: check GPU user space against the host.")
def image() -> None:
    """Container images (root file systems).

    \b
    Examples:
      pycgpu image check /var/lib/containers/storage/overlay/ID/merged
    """


@image.command("check", short_help="Compare an image's GPU drivers with the host's.")
@click.argument("rootfs", type=click.Path(path_type=Path))
@click.option("--device", "devices", multiple=True, metavar="DEV",
              shell_complete=complete_device,
              help="Check for this render node only (default: every one). Repeatable.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the pycgpu.image-check/v1 JSON document.")
@click.option("--proc-root", type=click.Path(file_okay=False, path_type=Path),
              envvar="PYCGPU_PROC_ROOT", default="/proc", hidden=True)
@pass_state
def check(state: State, rootfs: Path, devices: tuple[str, ...], as_json: bool,
          proc_root: Path) -> None:
    """Find the GPU user-space drivers in the root file system ROOTFS (by
    file name: Mesa DRI drivers and libgallium, libdrm, the Intel media
    driver and compute runtime, NVIDIA libcuda/libnvidia-*) and check them
    against this host's kernel drivers:

    \b
      NVIDIA  the user-space version must equal the kernel module's
              (/proc/driver/nvidia/version)
      Intel   an i915 GPU needs Mesa's iris, crocus or i915 driver (or
              libgallium), an xe GPU iris (or libgallium)

    Symbolic links in the image are not followed out of it. Exits 0 when
    everything fits, 3 on a mismatch, 2 when ROOTFS is not a directory.
    The OCI hook runs the same check for containers annotated
    pycgpu.io/image-check=enforce.

    \b
    Examples:
      pycgpu image check ./rootfs
      pycgpu image check "$(podman image mount docker.io/library/ubuntu)" --device renderD128
      pycgpu image check ./rootfs --json | jq '.findings[] | select(.status=="mismatch")'
    """
    from ...runtime import imagecheck

    if not rootfs.is_dir():
        raise BadValue(f"ROOTFS {rootfs} is not a directory (give an unpacked root file "
                       "system, e.g. a bundle's rootfs)")
    devts = {d.devt for d in resolve_devices(state, devices)} if devices else None
    host = imagecheck.host(state.sysfs_root, state.dev_root, proc_root)
    report = imagecheck.check(rootfs, host, devts)
    if as_json:
        import json

        click.echo(json.dumps(imagecheck.to_json(report), indent=2))
    else:
        from ...monitoring.tables import echo

        lines, findings = render(report)
        for line in lines:
            click.echo(line)
        echo(findings)
        click.echo(verdict(report))
    if not report.ok:
        click.get_current_context().exit(EXIT_MISMATCH)


def render(report: Report) -> tuple[list[str], Table]:
    """The text report: the lines about the image and the host, and the
    table of findings (:mod:`pycgpu.monitoring.tables`)."""
    from ...monitoring.tables import listing
    from ...runtime.imagecheck import KINDS

    host = report.host
    gpus = ", ".join(d.describe() for d in host.devices) or "no render nodes"
    nvidia = f"; NVIDIA kernel module {host.nvidia_version}" if host.nvidia_version else ""
    lines = [f"image {report.rootfs}", f"host   {gpus}{nvidia}"]
    for kind in KINDS:
        found = sorted({c.describe() for c in report.components if c.kind == kind})
        if found:
            lines.append(f"  {kind:<14}{', '.join(found)}")
    rows = []
    for f in report.findings:
        rows.append([f.status, f.id, f.message])
        if f.fix:
            rows.append(["", "", f"fix: {f.fix}"])
    return lines, listing(rows, widths=(8, 7))


def verdict(report: Report) -> str:
    bad = len(report.mismatches())
    return "image fits the host" if not bad else f"{bad} mismatch{'es' if bad > 1 else ''} found"
