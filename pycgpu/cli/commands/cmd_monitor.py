"""``pycgpu top``, ``pycgpu stat`` and ``pycgpu exporter``: per-container GPU
usage from the gpu controller's files or from /proc/*/fdinfo
(:mod:`pycgpu.monitoring`). rich is imported by the commands that use it only;
the exporter writes its formats itself (:mod:`pycgpu.monitoring.exporter`)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ...core.formats import printable_name
from ...core.interrupts import stop_event
from .common import BadValue, Refused, State, complete_path, pass_state

if TYPE_CHECKING:
    from ...monitoring.view import Monitor

SOURCE_HELP = ("Where usage comes from: kernel (the gpu controller's gpu.stat, and "
               "gpu.memory.* or dmem.*), fdinfo (/proc/*/fdinfo of DRM clients, any "
               "kernel), or auto: kernel when the controller is enabled below the cgroup "
               "root, else fdinfo.")

SOURCES_EPILOG = """
\b
Sources:
  kernel  the controller's counters per cgroup: GPU time and wait time (gpu.stat),
          memory current/max/peak and limit hits (gpu.memory.*), weight, priority;
          hierarchical, kept after processes exit
  fdinfo  the DRM clients of every process (drm-engine-*, drm-total-*), de-duplicated
          by drm-client-id, summed per cgroup: per-engine busy %, any DRM driver,
          no controller needed; run as root to see every process
\b
Containers are named from their cgroup path (docker-ID.scope, cri-containerd-ID.scope,
crio-ID.scope, libpod-ID.scope, kubepods pod UID and QoS class, systemd units) and,
where readable, from the runtime's state (names, pods, namespaces).
"""


def _sort_choices() -> list[str]:
    return ["gpu", "wait", "memory", "max", "hits", "time", "weight", "priority", "cap",
            "throttled", "container", "pod", "device", "cgroup"]


def unused_option(f: Any) -> Any:
    return click.option("--unused", is_flag=True,
                        help="Also list devices a group never used (no GPU time, no memory, "
                             "no limit).")(f)


def monitor_options(f: Any) -> Any:
    f = click.option("--runtime-root", type=click.Path(file_okay=False, path_type=Path),
                     envvar="PYCGPU_RUNTIME_ROOT", default="/", hidden=True)(f)
    f = click.option("--proc-root", type=click.Path(file_okay=False, path_type=Path),
                     envvar="PYCGPU_PROC_ROOT", default="/proc", hidden=True)(f)
    f = click.option("--all", "all_groups", is_flag=True,
                     help="Also show inner groups (their counters include their children's).")(f)
    f = click.option("--source", type=click.Choice(["auto", "kernel", "fdinfo"]),
                     default="auto", show_default=True, help=SOURCE_HELP)(f)
    return f


def make_monitor(state: State, source: str, all_groups: bool, subtree: str | None,
                 proc_root: Path, runtime_root: Path) -> tuple[Monitor, Path | None]:
    from ...monitoring import SourceError, open_source
    from ...monitoring.containers import Resolver
    from ...monitoring.view import Monitor

    mount: Path | None
    if source == "fdinfo":
        mount = None
    else:
        try:
            mount = state.mount
        except Refused:
            if source == "kernel" or state.cgroup_root is not None:
                raise  # auto falls back to fdinfo only on hosts without cgroup2
            mount = None
    try:
        src = open_source(source, mount, proc=proc_root, sysfs=state.sysfs_root)
    except SourceError as e:
        raise Refused(f"{e.strerror} (fix: --source fdinfo, or see pycgpu check)") from None
    if subtree is not None and mount is not None:
        cg = state.cgroup(subtree)
        if not cg.exists():
            raise BadValue(f"cgroup {cg.name} does not exist (see pycgpu show -r)")
        if src.name == "kernel" and not cg.is_root and not cg.has("gpu.stat"):
            raise Refused(f"cgroup {cg.name} has no gpu.stat: gpu is not enabled for it "
                          f"(fix: pycgpu create {cg.name} --exist-ok, or --source fdinfo)")
        subtree = cg.name
    return Monitor(src, Resolver(runtime_root), all_groups, subtree), mount


def _measure(monitor: Monitor, interval: float) -> None:
    try:
        monitor.measure(interval)
    except OSError as e:
        raise Refused(f"reading usage: {e.strerror or e}") from None


# stat ----------------------------------------------------------------------------------


@click.command("stat", short_help="Per-container GPU usage, once (text or JSON).",
               epilog=SOURCES_EPILOG)
@click.argument("path", required=False, shell_complete=complete_path)
@click.option("--json", "as_json", is_flag=True,
              help="Print the pycgpu.stat/v1 JSON document (its schema: pycgpu schema stat).")
@click.option("--interval", "-i", type=click.FloatRange(0, 3600), default=1.0,
              show_default=True, metavar="S",
              help="Seconds between the two reads the percentages come from; 0: one read, "
                   "counters only.")
@click.option("--sort", type=click.Choice(_sort_choices()), default="cgroup", show_default=True,
              help="Order of the text rows.")
@unused_option
@monitor_options
@pass_state
def stat(state: State, path: str | None, as_json: bool, interval: float, sort: str,
         unused: bool, source: str, all_groups: bool, proc_root: Path,
         runtime_root: Path) -> None:
    """GPU usage per cgroup and device, for scripts: GPU time and GPU % over
    --interval, per-engine % (fdinfo), memory current/max/peak, limit hits,
    weight and priority. PATH limits the output to a subtree.

    The JSON has numbers as numbers: times in µs (usage_usec, wait_usec;
    engines' busy_ns in ns), bytes, percentages with 2 decimals (left out
    when --interval is 0), a memory limit of max as null; devices keyed MAJ:MIN.

    \b
    Examples:
      pycgpu stat
      pycgpu stat --json --interval 2 | jq '.groups[] | {path, devices}'
      pycgpu stat --source fdinfo --sort gpu
      pycgpu stat kubepods.slice --all
    """
    from ...monitoring.tables import echo
    from ...monitoring.view import columns, sort_rows, stat_document, table

    monitor, mount = make_monitor(state, source, all_groups, path, proc_root, runtime_root)
    _measure(monitor, interval)
    names = state.device_names()
    if as_json:
        import json

        doc = stat_document(monitor, str(mount) if mount else None, interval, names, unused)
        indent = 2 if sys.stdout.isatty() else None
        click.echo(json.dumps(doc, indent=indent))
        return
    assert monitor.sample is not None
    rows = sort_rows(monitor.rows(unused), sort)
    if rows:
        echo(table(*columns(rows, names, wide=True)))
    else:
        click.echo(f"no GPU usage found (source {monitor.sample.source})")
    for e in monitor.sample.errors:
        click.echo(f"warning: {printable_name(e)}", err=True)


# top ------------------------------------------------------------------------------------


@click.command("top", short_help="Live per-container GPU usage, refreshed every second.",
               epilog=SOURCES_EPILOG)
@click.argument("path", required=False, shell_complete=complete_path)
@click.option("--interval", "-i", type=click.FloatRange(0, 3600), default=1.0,
              show_default=True, metavar="S", help="Seconds between refreshes.")
@click.option("--sort", "-s", type=click.Choice(_sort_choices()), default="gpu",
              show_default=True, help="Sort rows by this column (numbers: biggest first).")
@click.option("--reverse", "-r", is_flag=True, help="Reverse the order.")
@click.option("--once", is_flag=True,
              help="Print one frame (measured over --interval) and exit: plain text when "
                   "the output is not a terminal.")
@click.option("--count", "-n", type=click.IntRange(1), default=None, metavar="N",
              help="Exit after N refreshes.")
@click.option("--wide", "-w", is_flag=True, help="Add the runtime and cgroup columns.")
@unused_option
@monitor_options
@pass_state
def top(state: State, path: str | None, interval: float, sort: str, reverse: bool, once: bool,
        count: int | None, wide: bool, unused: bool, source: str, all_groups: bool,
        proc_root: Path, runtime_root: Path) -> None:
    """A live view of GPU usage per container and device: GPU % (per engine
    with the fdinfo source), wait %, memory current and limit, limit hits,
    weight and effective priority. PATH limits it to a subtree.

    Plain ANSI output (rich): works over ssh and in any terminal; when the
    output is not a terminal, frames are printed one after another as text.

    \b
    Examples:
      pycgpu top
      pycgpu top --sort memory
      pycgpu top --source fdinfo --wide
      pycgpu top --once > gpu-usage.txt
      ssh gpu-host -t pycgpu top kubepods.slice
    """
    monitor, _ = make_monitor(state, source, all_groups, path, proc_root, runtime_root)
    names = state.device_names()
    from ...monitoring import frames

    try:
        frames.run(monitor, names, interval=interval, sort=sort, reverse=reverse, once=once,
                   count=count, wide=wide, unused=unused, tty=sys.stdout.isatty())
    except OSError as e:
        raise Refused(f"reading usage: {e.strerror or e}") from None


# exporter -------------------------------------------------------------------------------


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``:PORT`` (every interface) or ``[V6]:PORT``."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise BadValue(f"--listen {text!r}: give HOST:PORT, e.g. 127.0.0.1:9842, :9842 or "
                       "[::1]:9842")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


@click.command("exporter", short_help="Serve per-container GPU usage to Prometheus.",
               epilog=SOURCES_EPILOG)
@click.option("--listen", "-l", default="127.0.0.1:9842", show_default=True,
              metavar="HOST:PORT",
              help="Address to serve /metrics on; :9842 for every interface, port 0 for a "
                   "free port (printed at start).")
@click.option("--pod-resources", type=click.Path(dir_okay=False, path_type=Path),
              default="/var/lib/kubelet/pod-resources/kubelet.sock", show_default=True,
              metavar="SOCKET",
              help="The kubelet's PodResources API: pod, namespace and container labels of "
                   "the containers with pycgpu.io/gpu-share shares, when the socket exists "
                   "(needs the k8s extra).")
@monitor_options
@pass_state
def exporter(state: State, listen: str, pod_resources: Path, source: str, all_groups: bool,
             proc_root: Path, runtime_root: Path) -> None:
    """Serve Prometheus metrics of GPU usage per container and device on
    http://HOST:PORT/metrics, read from the source at each scrape.

    Metrics (labels cgroup, container, pod, namespace, device; see
    docs/monitoring.md): pycgpu_gpu_time_seconds_total,
    pycgpu_gpu_wait_seconds_total, pycgpu_gpu_engine_busy_seconds_total{engine},
    pycgpu_gpu_memory_bytes, pycgpu_gpu_memory_max_bytes,
    pycgpu_gpu_memory_peak_bytes, pycgpu_gpu_memory_limit_hits_total,
    pycgpu_gpu_weight, pycgpu_gpu_priority, pycgpu_container_info,
    pycgpu_gpu_device_info, pycgpu_build_info, pycgpu_scrape_errors_total, ...
    Only devices a group used get series; device is the render node name
    (renderD128), with maj_min, pci and driver on pycgpu_gpu_device_info. A
    group whose files cannot be read is counted in
    pycgpu_scrape_errors_total{cgroup} and the others are still served.
    Under Kubernetes, with the kubelet's PodResources socket mounted, pod,
    namespace and container come from the kubelet for the containers the
    device plugin gave shares to. OpenMetrics when the scraper asks for it
    (Accept), gzip when it accepts it, HEAD answered. A connection silent
    for 30 s, or whose request is not read in 10 s, is closed; at most 32
    are served at once, one more gets a 503; these, and scrapers gone
    mid-reply, are counted in pycgpu_exporter_connections_dropped_total{reason}.

    Runs until interrupted (Ctrl-C, SIGTERM).

    \b
    Examples:
      pycgpu exporter
      pycgpu exporter --listen :9842 --source fdinfo
      curl -s localhost:9842/metrics | grep pycgpu_gpu_time
    \b
    Prometheus:
      scrape_configs:
        - job_name: pycgpu
          static_configs: [{targets: ["gpu-host:9842"]}]
    PromQL: GPU % per container over 1m
      rate(pycgpu_gpu_time_seconds_total[1m]) * 100
    """
    host, port = parse_listen(listen)
    with stop_event() as stop:  # before any thread starts
        _export(state, host, port, listen, pod_resources, source, all_groups, proc_root,
                runtime_root, stop)


def _export(state: State, host: str, port: int, listen: str, pod_resources: Path, source: str,
            all_groups: bool, proc_root: Path, runtime_root: Path,
            stop: threading.Event) -> None:
    monitor, _ = make_monitor(state, source, all_groups, None, proc_root, runtime_root)
    from ...monitoring import exporter as exp

    try:
        devices = state.devices()
    except Exception:
        devices = []

    def log(msg: str) -> None:
        click.echo(f"pycgpu exporter: {msg}", err=True)

    labels = None
    if pod_resources.exists():
        from ...k8s.podresources import Labels

        try:
            labels = Labels(pod_resources, state.mount, log)
        except click.ClickException as e:  # no cgroup2 mount (an fdinfo-only host)
            log(f"no pod labels from {pod_resources}: {e.message}")
        else:
            log(f"pod labels from the kubelet's PodResources API at {pod_resources}")
    exporter_ = exp.Exporter(monitor, devices, log, sysfs=state.sysfs_root, pod_labels=labels)
    try:
        server, _thread = exp.serve(exporter_, host, port)
    except OSError as e:
        raise Refused(f"cannot listen on {listen}: {e.strerror or e}") from None
    shown = f"[{host}]" if ":" in host else host
    log(f"serving http://{shown}:{server.server_port}/metrics "
        f"(source {monitor.source.name}); Ctrl-C to stop")
    try:
        stop.wait()
    finally:
        server.shutdown()


COMMANDS = (top, stat, exporter)
