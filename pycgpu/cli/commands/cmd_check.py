"""``pycgpu check``: what this host lacks for the gpu controller."""

from __future__ import annotations

import click

from .common import EXIT_PROBLEMS, BadValue, State, complete_path, pass_state


@click.command("check", short_help="What this host lacks for the gpu controller, with fixes.")
@click.option("--path", "path", metavar="PATH", shell_complete=complete_path,
              help="Also check that gpu is enabled down to this cgroup.")
@click.option("--json", "as_json", is_flag=True, help="Print the pycgpu.check/v1 JSON document.")
@pass_state
def check(state: State, path: str | None, as_json: bool) -> None:
    """Check the host for the gpu controller and print the fix for each
    problem: cgroup v2 mounted (not a v1/hybrid host), a kernel with the gpu
    controller, gpu enabled along --path, a systemd-managed tree (systemd
    does not enable controllers it does not know, so its slices and scopes
    lack gpu), which interface counts GPU memory (gpu.memory.* of the 6.12
    series, or the dmem controller, with its regions and the render nodes
    none counts), where /dev/kfd exists, that amdgpu's compute queues (ROCm)
    bypass the controller, and on Linux 7.x that drm_sched does not run its
    round-robin policy, which the cgroup order does not extend.

    The fixes fit this host: systemd's kernel parameter and steps only where
    systemd booted it, a GRUB edit only where /etc/default/grub exists (else
    the boot loader's kernel command line), make kernel only in a checkout
    of pycgpu's repository (else the patch series from that repository).

    Exits 0 when everything is in place and 3 when a problem was found.

    \b
    Examples:
      pycgpu check
      pycgpu check --path system.slice/docker-1234.scope
      pycgpu check --json | jq -r '.findings[] | select(.status=="problem") | .fix'
    """
    from ...core.capabilities import PROBLEM, Host
    from ...core.capabilities import check as run_check
    from ...core.cgroup import InvalidPath

    try:
        report = run_check(Host(cgroup_root=state.cgroup_root, sysfs_root=state.sysfs_root,
                                dev_root=state.dev_root), path)
    except InvalidPath as e:
        raise BadValue(f"--path: {e}") from None
    if as_json:
        import json

        from ...core.schemas import CHECK_V1

        doc = {
            "schema": CHECK_V1,
            "ok": report.ok,
            "cgroup_root": str(report.cgroup_root) if report.cgroup_root else None,
            "findings": [{"id": f.id, "status": f.status, "message": f.message, "fix": f.fix}
                         for f in report.findings],
        }
        click.echo(json.dumps(doc, indent=2))
    else:
        from ...monitoring.tables import echo, listing

        rows = []
        for f in report.findings:
            rows.append([f.status, f.id, f.message])
            if f.fix:
                rows.append(["", "", f"fix: {f.fix}"])
        echo(listing(rows, widths=(8, 8)))
        problems = sum(f.status == PROBLEM for f in report.findings)
        click.echo("all good" if not problems else
                   f"{problems} problem{'s' if problems > 1 else ''} found")
    if not report.ok:
        click.get_current_context().exit(EXIT_PROBLEMS)
