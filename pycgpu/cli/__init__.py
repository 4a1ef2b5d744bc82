"""The pycgpu command line (click).

Commands: ``devices``, ``create``, ``set``, ``show``, ``rm``, ``exec``,
``check``, ``oci``, ``cdi``, ``image``, ``k8s``, ``top``, ``stat``, ``exporter``,
``schema`` (one module each under :mod:`pycgpu.cli.commands`). Importing this
module stays cheap (click and the stdlib only): pyudev, cffi and the JSON
schemas are imported by the commands that use them.

Exit codes (also in ``pycgpu --help``):

- 0: success
- 1: the kernel or the system refused or lacks something (a value the
  kernel rejects, permission, gpu controller or knob missing, a gpu.* file
  that does not parse); a create/set has been rolled back
- 2: usage error (a malformed or out-of-range option value, unknown device,
  missing cgroup); nothing was written
- 3: ``pycgpu check`` found problems
- ``pycgpu exec``: the command's own status; 126 it cannot be executed,
  127 it was not found
"""

from __future__ import annotations

from pathlib import Path

import click

from .. import __version__
from .commands import (
    cmd_cdi,
    cmd_check,
    cmd_devices,
    cmd_exec,
    cmd_image,
    cmd_k8s,
    cmd_monitor,
    cmd_oci,
    cmd_run,
    cmd_schema,
    cmd_show,
    cmd_tree,
)
from .commands.common import State

EPILOG = """\b
Exit codes:
  0  success
  1  the kernel or the system refused or lacks something (a value the kernel
     rejects, permission, gpu controller or knob missing); create/set rolled back
  2  usage error: a malformed or out-of-range value, unknown device or cgroup;
     nothing written
  3  pycgpu check found problems
  exec passes the command's status through (126: cannot execute, 127: not found)

\b
Shell completion (click's own):
  bash: eval "$(_PYCGPU_COMPLETE=bash_source pycgpu)"   # in ~/.bashrc
  zsh:  eval "$(_PYCGPU_COMPLETE=zsh_source pycgpu)"    # in ~/.zshrc
  fish: _PYCGPU_COMPLETE=fish_source pycgpu > ~/.config/fish/completions/pycgpu.fish

\b
Examples:
  pycgpu check
  pycgpu devices
  pycgpu create ai/train --weight 300 --memory-max renderD128=2G
  pycgpu exec ai/train -- python train.py
  pycgpu show -r --json ai
"""


class _InOrder(click.Group):
    """Lists the commands in the order they were added, not alphabetically."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)


@click.group(cls=_InOrder, context_settings={"help_option_names": ["-h", "--help"]},
             epilog=EPILOG)
@click.version_option(__version__, prog_name="pycgpu")
@click.option("--cgroup-root", type=click.Path(file_okay=False, path_type=Path),
              envvar="PYCGPU_CGROUP_ROOT", show_envvar=True,
              help="The cgroup2 mount to work on (default: the first cgroup2 mount).")
@click.option("--sysfs-root", type=click.Path(file_okay=False, path_type=Path),
              envvar="PYCGPU_SYSFS_ROOT", default="/sys", hidden=True)
@click.option("--dev-root", type=click.Path(file_okay=False, path_type=Path),
              envvar="PYCGPU_DEV_ROOT", default="/dev", hidden=True)
@click.pass_context
def main(ctx: click.Context, cgroup_root: Path | None, sysfs_root: Path, dev_root: Path) -> None:
    """Manage GPU cgroups: GPU time shares, priority, hard caps and GPU memory
    limits.

    Drives the gpu cgroup v2 controller: gpu.weight, gpu.priority, gpu.max
    and gpu.memory.max of groups under the cgroup2 mount, keyed by the
    MAJ:MIN of each GPU's DRM render node. On a kernel whose GPU memory is the dmem
    controller's (Linux 6.14 and later), memory limits go to dmem.max, by
    memory region: a device's only region is named by the device, one of
    several as DEV:REGION (renderD128:vram0; pycgpu devices lists them).
    """
    ctx.obj = State(cgroup_root=cgroup_root, sysfs_root=sysfs_root, dev_root=dev_root)


for _command in (cmd_devices.devices, cmd_tree.create, cmd_tree.set_, cmd_show.show, cmd_tree.rm,
                 cmd_exec.exec_, cmd_run.run, cmd_check.check,
                 cmd_oci.oci, cmd_cdi.cdi, cmd_image.image, cmd_k8s.k8s, *cmd_monitor.COMMANDS,
                 cmd_schema.schema):
    main.add_command(_command)
