"""``pycgpu k8s device-plugin`` and ``pycgpu k8s inventory``: GPU shares for
Kubernetes (:mod:`pycgpu.k8s`). grpc is imported by device-plugin only."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import click

from ...core.interrupts import stop_event
from .common import BadValue, Refused, State, pass_state

if TYPE_CHECKING:
    from ...k8s.shares import Config

PLUGIN_DIR = "/var/lib/kubelet/device-plugins"


class InventoryRow(TypedDict):
    """One GPU of ``pycgpu k8s inventory --json``."""

    device: str
    devt: str
    shares: int
    ids: list[str]
    weight_per_share: int | None  # None: shares carry no weight (no gpu controller)
    memory_bytes: int | None
    memory_from: str | None
    memory_per_share_bytes: int | None
    cap_per_share_us: int | None  # --capped: gpu.max of one share, µs of every 100 ms
    # a device with several dmem regions: each region's size and share
    memory_regions: list[RegionRow]


class RegionRow(TypedDict):
    region: str
    bytes: int
    per_share_bytes: int


SHARES_EPILOG = """
\b
What a container with k shares of a GPU split in N gets (Allocate):
  cdi_devices   pycgpu.io/gpu=renderD128   (node, allow rule, createRuntime hook)
  annotations   pycgpu.io/gpu.weight: renderD128=W      W = k x weight-per-share
                (none on a kernel with dmem and no gpu controller)
                pycgpu.io/gpu.memory.max: renderD128=M  M = memory size x k / N
  with --capped, also a hard cap (gpu.max) of k/N of each engine, carried by
  the CDI devices of the shares (needs --cdi-spec), not by an annotation
The memory size: --device-memory DEV=SIZE, else the region's size in
dmem.capacity (a kernel with dmem), else what the driver reports in sysfs
(amdgpu), else --device-memory SIZE; without any, no memory limit. A GPU with
several dmem regions gets one limit per region: renderD128:vram0=M0,...
"""


def share_options(f: Any) -> Any:
    f = click.option("--capped", is_flag=True,
                     help="Shares are also a hard cap: k of N shares may use at most k/N of "
                          "each engine (gpu.max), even on an idle GPU.")(f)
    f = click.option("--device", "only", multiple=True, metavar="DEV",
                     help="Only this render node (default: every one). Repeatable.")(f)
    f = click.option("--device-memory", "memory", multiple=True, metavar="[DEV=]SIZE",
                     help="GPU memory size to divide: SIZE for GPUs whose size is unknown, "
                          "DEV=SIZE for one GPU (K/M/G suffixes). Repeatable.")(f)
    f = click.option("--weight-per-share", type=int, default=100, show_default=True,
                     metavar="W", help="gpu.weight of one share.")(f)
    f = click.option("--shares", "shares", multiple=True, metavar="[DEV=]N",
                     help="Shares per GPU, N in [1, 100] (default 10); DEV=N for one GPU. "
                          "Repeatable.")(f)
    return f


def make_config(shares: tuple[str, ...], weight_per_share: int, memory: tuple[str, ...],
                only: tuple[str, ...], capped: bool = False) -> tuple[Config, list[str]]:
    from ...k8s.shares import ConfigNames, ShareError, parse_config

    try:
        return parse_config(shares, weight_per_share, memory, only,
                            ConfigNames("--shares", "--weight-per-share", "--device-memory",
                                        "--device"), capped)
    except ShareError as e:
        raise BadValue(str(e)) from None


@click.group("k8s", short_help="Kubernetes: a device plugin that sells GPU shares.")
def k8s() -> None:
    """Kubernetes: a kubelet device plugin that advertises each GPU as
    shares (pycgpu.io/gpu-share) enforced by the gpu controller: a
    container's shares become its gpu.weight and gpu.memory.max, applied by
    the createRuntime hook of pycgpu's CDI spec. See docs/kubernetes.md.

    \b
    Examples:
      pycgpu k8s inventory
      pycgpu k8s device-plugin --shares 10 --device-memory 8G
    """


@k8s.command("inventory", short_help="The shares the device plugin would advertise.",
             epilog=SHARES_EPILOG)
@share_options
@click.option("--json", "as_json", is_flag=True, help="One JSON document.")
@pass_state
def inventory(state: State, shares: tuple[str, ...], weight_per_share: int,
              memory: tuple[str, ...], only: tuple[str, ...], capped: bool,
              as_json: bool) -> None:
    """Show, for each render node, the shares the device plugin would
    advertise with these options, and what one share gets.

    Exit codes: 0 shown; 2 a bad default (a per-device entry that is wrong
    is a warning, as in the plugin).

    \b
    Examples:
      pycgpu k8s inventory
      pycgpu k8s inventory --shares 4 --device-memory renderD128=16G --json
      pycgpu k8s inventory --shares 4 --capped
    """
    import json

    from ...core import formats
    from ...k8s import shares as sh

    config, warnings = make_config(shares, weight_per_share, memory, only, capped)
    try:
        regions = state.memory()
    except click.ClickException as e:  # no cgroup2 tree, or dmem.capacity unreadable
        regions = None
        warnings.append(f"no memory region sizes ({e.message}): sizes from sysfs and the "
                        f"options only")
    try:  # the plugin's rule: no weight on a dmem kernel without the gpu controller
        root: Path | None = state.mount
    except click.ClickException:
        root = None
    inv = sh.build(state.devices(), config, state.sysfs_root, regions, sh.weights_apply(root))
    warnings += inv.warnings
    if not inv.weights:
        warnings.append(sh.NO_WEIGHTS)
    for w in warnings:
        click.echo(f"pycgpu k8s: {w}", err=True)
    rows: list[InventoryRow] = [
        {"device": g.name, "devt": str(g.device.devt), "shares": g.shares,
         "ids": [g.ids()[0], g.ids()[-1]] if g.shares > 1 else g.ids(),
         "weight_per_share": inv.weight(g.name, 1),
         "memory_bytes": g.memory, "memory_from": g.memory_from or None,
         "memory_per_share_bytes": g.memory_max(1),
         "cap_per_share_us": g.cap(1).max_us if capped else None,
         "memory_regions": [{"region": name, "bytes": size, "per_share_bytes": g.part(size, 1)}
                            for name, size in g.regions]} for g in inv.gpus.values()]
    if as_json:
        click.echo(json.dumps({"resource": sh.RESOURCE, "gpus": rows,
                               "warnings": warnings}, indent=2))
        return
    if not rows:
        click.echo("no GPUs to advertise (see pycgpu devices)")
        return
    from ...monitoring.tables import echo, table

    cells = []
    for r in rows:
        per = r["memory_per_share_bytes"]
        if r["memory_regions"]:
            mem = ", ".join(f"{x['region']} {formats.format_size_human(x['per_share_bytes'])} of "
                            f"{formats.format_size_human(x['bytes'])}"
                            for x in r["memory_regions"]) + f" ({r['memory_from']})"
        elif per is not None:
            mem = (f"{formats.format_size_human(per)} of "
                   f"{formats.format_size_human(r['memory_bytes'] or 0)} ({r['memory_from']})")
        else:
            mem = "no limit"
        weight = r["weight_per_share"]
        cap = r["cap_per_share_us"]
        cells.append([r["device"], str(r["shares"]), " .. ".join(r["ids"]),
                      "none" if weight is None else str(weight), mem]
                     + ([formats.format_cap(formats.Cap(cap))] if cap is not None else []))
    header = ["DEVICE", "SHARES", "IDS", "WEIGHT/SHARE", "MEMORY/SHARE"]
    echo(table(header + (["CAP/SHARE"] if capped else []), cells,
               left={"DEVICE", "IDS", "MEMORY/SHARE", "CAP/SHARE"}))


@k8s.command("device-plugin", short_help="Serve the kubelet device plugin API.",
             epilog=SHARES_EPILOG)
@share_options
@click.option("--plugin-dir", type=click.Path(file_okay=False, path_type=Path),
              default=PLUGIN_DIR, show_default=True,
              help="The kubelet's device-plugins directory: the plugin's socket goes here.")
@click.option("--kubelet-socket", type=click.Path(dir_okay=False, path_type=Path),
              help="The kubelet's Registration socket (default: PLUGIN_DIR/kubelet.sock).")
@click.option("--endpoint", default="pycgpu-gpu-share.sock", show_default=True,
              help="The plugin's socket name in PLUGIN_DIR.")
@click.option("--resource-name", default="pycgpu.io/gpu-share", show_default=True,
              help="The extended resource pods ask for.")
@click.option("--watch", type=click.Choice(["auto", "udev", "poll"]), default="auto",
              show_default=True,
              help="How render nodes that come and go are noticed: udev events (auto: "
                   "when sysfs is /sys), or polling sysfs.")
@click.option("--poll-interval", type=click.FloatRange(min=0.05), default=5.0,
              show_default=True, metavar="SECONDS",
              help="Rediscover render nodes this often (with udev: a safety net, 30s).")
@click.option("--cdi-spec", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="Write the CDI spec of the advertised GPUs and their shares here (e.g. "
                   "/etc/cdi/pycgpu.json), at start and whenever GPUs come or go.")
@click.option("--cdi-hook-path", metavar="FILE", default="/opt/pycgpu/bin/pycgpu-hook",
              show_default=True,
              help="The program on the host that the spec's createRuntime hook runs: "
                   "pycgpu-hook (or the pycgpu script, as pycgpu oci hook).")
@click.option("--check-interval", type=click.FloatRange(min=0.05), default=2.0,
              show_default=True, metavar="SECONDS",
              help="Check the sockets this often (kubelet restarts: serve and register "
                   "again).")
@pass_state
def device_plugin(state: State, shares: tuple[str, ...], weight_per_share: int,
                  memory: tuple[str, ...], only: tuple[str, ...], capped: bool, plugin_dir: Path,
                  kubelet_socket: Path | None, endpoint: str, resource_name: str, watch: str,
                  poll_interval: float, cdi_spec: Path | None, cdi_hook_path: str,
                  check_interval: float) -> None:
    """Serve the kubelet device plugin API (v1beta1) on
    PLUGIN_DIR/ENDPOINT, register with the kubelet, and advertise each GPU
    (render node) as N shares of the extended resource pycgpu.io/gpu-share
    (device IDs renderD128-s0 .. renderD128-s9). The list follows render
    nodes that come and go. GetPreferredAllocation packs a container's
    shares on one GPU. Allocate answers with the CDI device and the
    pycgpu.io/gpu.* annotations that the hook of
    `pycgpu cdi generate --hook` applies: the CDI spec must be in /etc/cdi
    on the node (--cdi-spec writes it, and writes it again, atomically, when
    GPUs come or go), and the runtime must pass the annotations
    (docs/kubernetes.md). With --cdi-spec the spec also has a device per
    share, whose hook entry carries the share's ID, and Allocate names the
    devices of the shares it grants: the hook records their IDs on the
    container's cgroup for the exporter's pod labels (never from an
    annotation, which a pod could forge). With --capped (and --cdi-spec),
    each share's entry also carries a hard cap of 1/N of each engine, and
    the hook caps the container at the sum of its shares' (gpu.max).

    A wrong per-device entry or a missing device is logged on one line and
    left out; the kubelet's socket missing or refusing is logged and retried.
    When the kubelet restarts (it recreates its socket and deletes the
    plugin's), the plugin serves and registers again. Runs until SIGTERM
    or Ctrl-C; logs go to stderr.

    Exit codes: 0 stopped; 1 the plugin's socket cannot be created or
    grpcio/protobuf are missing (pip install 'pycgpu[k8s]'); 2 a bad default
    option value.

    \b
    Examples:
      pycgpu k8s device-plugin
      pycgpu k8s device-plugin --shares 4 --shares renderD129=8 --device-memory 8G
      pycgpu k8s device-plugin --cdi-spec /etc/cdi/pycgpu.json
      pycgpu k8s device-plugin --cdi-spec /etc/cdi/pycgpu.json --shares 4 --capped
      pycgpu k8s device-plugin --plugin-dir /tmp/dp --watch poll --poll-interval 1
    \b
    A pod asking for 3 shares:
      resources: {limits: {pycgpu.io/gpu-share: 3}}
    """
    config, warnings = make_config(shares, weight_per_share, memory, only, capped)
    if capped and cdi_spec is None:
        raise BadValue("--capped: capped shares travel in the plugin's CDI spec (the hook "
                       "entries of the shares' devices): give --cdi-spec")

    def log(message: str) -> None:
        click.echo(f"pycgpu k8s device-plugin: {message}", err=True)

    for w in warnings:
        log(w)
    with stop_event() as stop:  # before the plugin starts a thread
        from ...k8s.api import EXTRA, ApiUnavailable
        from ...k8s.sources import PollSource, UdevSource
        from ...runtime.oci import hook_command

        try:
            from ...k8s.plugin import DevicePlugin, PluginError
        except ImportError as e:
            raise Refused(f"the device plugin needs grpcio and protobuf ({e}; fix: "
                          f"{EXTRA})") from None
        source: Any
        use_udev = watch == "udev" or (watch == "auto" and state.sysfs_root == Path("/sys")
                                       and state.dev_root == Path("/dev"))
        if use_udev:
            source = UdevSource(log, interval=max(poll_interval, 30.0))
        else:
            source = PollSource(state.sysfs_root, state.dev_root, poll_interval)
        try:  # the regions' sizes in dmem.capacity, on the host's tree (--cgroup-root)
            cgroup_root: Path | None = state.mount
        except click.ClickException:
            cgroup_root = None
        try:
            plugin = DevicePlugin(config, source, log=log, plugin_dir=plugin_dir,
                                  kubelet_socket=kubelet_socket, endpoint=endpoint,
                                  resource_name=resource_name, sysfs_root=state.sysfs_root,
                                  check_interval=check_interval, cdi_spec=cdi_spec,
                                  cdi_hook=hook_command(cdi_hook_path) if cdi_spec else None,
                                  cgroup_root=cgroup_root)
        except (PluginError, ApiUnavailable) as e:
            raise Refused(str(e)) from None
        log(f"serving {plugin.socket}")
        try:
            plugin.run(stop)
        except PluginError as e:
            raise Refused(str(e)) from None
    log("stopped")
