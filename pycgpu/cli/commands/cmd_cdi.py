"""``pycgpu cdi generate``: a Container Device Interface spec for the render
nodes (podman, containerd, CRI-O, Docker)."""

from __future__ import annotations

from pathlib import Path

import click

from .cmd_oci import complete_device, resolve_devices, write_output
from .common import BadValue, Refused, State, pass_state


@click.group("cdi", short_help="CDI specs for podman, containerd, CRI-O, Docker.")
def cdi() -> None:
    """Container Device Interface (CDI) specs: how podman, containerd,
    CRI-O and Docker (25+, default in 28) give containers devices. CDI has
    no resource fields: knobs travel as pycgpu.io/gpu.* annotations that the
    spec's createRuntime hook (pycgpu oci hook) applies.

    \b
    Examples:
      pycgpu cdi generate --hook -o /etc/cdi/pycgpu.json
      podman run --device pycgpu.io/gpu=renderD128 --annotation pycgpu.io/gpu.weight=300 IMAGE
    """


@cdi.command("generate", short_help="A CDI spec: one device per render node, plus all.")
@click.option("--device", "devices", multiple=True, metavar="DEV",
              shell_complete=complete_device,
              help="Only this render node (default: every one). Repeatable.")
@click.option("--hook", "use_hook", is_flag=True,
              help="Add the createRuntime hook that applies pycgpu.io/* annotations.")
@click.option("--hook-path", metavar="FILE",
              help="The hook's program: pycgpu-hook, or the pycgpu script (default: "
                   "pycgpu-hook on PATH, else pycgpu).")
@click.option("--hook-allow", "hook_allow", multiple=True, metavar="KEY",
              help="Let the hook accept this annotation too (e.g. gpu.priority), on top of "
                   "the node's allow-list (implies --hook). Repeatable.")
@click.option("--output", "-o", metavar="FILE", default="-", show_default=True,
              help="Write the spec to FILE (atomically; '-': stdout).")
@pass_state
def generate(state: State, devices: tuple[str, ...], use_hook: bool, hook_path: str | None,
             hook_allow: tuple[str, ...], output: str) -> None:
    """Print (or write to --output) a CDI spec of kind pycgpu.io/gpu
    (cdiVersion 0.5.0) with one device per render node, named after it
    (pycgpu.io/gpu=renderD128), and pycgpu.io/gpu=all. Put it in /etc/cdi
    or /var/run/cdi, where CDI runtimes look; JSON is valid CDI YAML.

    With --hook every container that gets one of these devices runs
    pycgpu oci hook at createRuntime: it applies pycgpu.io/gpu.weight,
    pycgpu.io/gpu.priority, pycgpu.io/gpu.max and pycgpu.io/gpu.memory.max
    annotations (and pycgpu.io/image-check) that the node's allow-list allows
    (/etc/pycgpu/runtime/annotations.allow, else all but gpu.priority and
    gpu.max; --hook-allow adds keys) and does nothing for containers without
    them.

    Exit codes: 0 written; 1 no render nodes or the file cannot be written;
    2 unknown DEV or --hook-allow KEY.

    \b
    Examples:
      pycgpu cdi generate
      pycgpu cdi generate --hook -o /etc/cdi/pycgpu.json
      pycgpu cdi generate --device renderD128 --hook --hook-path /usr/local/bin/pycgpu
    """
    import json

    from ...runtime import allowlist
    from ...runtime import cdi as cdimod
    from ...runtime.oci import hook_command

    try:
        extra = allowlist.keys(hook_allow)
    except allowlist.AllowListError as e:
        raise BadValue(f"--hook-allow: {e}") from None
    chosen = resolve_devices(state, devices) if devices else state.devices()
    if not chosen:
        raise Refused("no DRM render nodes found on this host (see pycgpu devices)")
    hook = hook_command(hook_path, extra) if use_hook or hook_path or extra else None
    doc = cdimod.spec(chosen, hook)
    write_output(json.dumps(doc, indent=2) + "\n", output, Path(output))
    if output != "-":
        names = " ".join(cdimod.qualified_name(d["name"]) for d in doc["devices"])
        click.echo(f"wrote {output}: {names}")
