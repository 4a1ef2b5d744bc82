"""``pycgpu oci patch|unpatch|generate|hook``: OCI bundles for runc and crun, and the
createRuntime hook that applies ``pycgpu.io/gpu.*`` annotations."""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from .cmd_tree import knob_options
from .common import BadValue, Refused, State, advised, pass_state, settings_from_options

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

    from ...core.devices import Device
    from ...runtime.oci import Config, Patch

F = TypeVar("F", bound=Callable[..., Any])

EXIT_MISMATCH = 3


class Mismatch(click.ClickException):
    """The image's GPU user space does not fit the host (exit 3)."""

    exit_code = EXIT_MISMATCH


def complete_device(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Complete DEV with the render node names."""
    from click.shell_completion import CompletionItem

    sysfs = Path(ctx.find_root().params.get("sysfs_root") or "/sys")
    try:
        names = sorted(p.name for p in (sysfs / "class" / "drm").glob("renderD*"))
    except OSError:
        return []
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]


def resolve_devices(state: State, texts: tuple[str, ...], what: str = "--device") -> list[Device]:
    """The render nodes DEV arguments name, in order, without duplicates."""
    from ...core.devices import DeviceError, resolve

    out: list[Device] = []
    for text in texts:
        try:
            dev = resolve(text, state.devices())
        except DeviceError as e:
            raise BadValue(f"{what} {text!r}: {e} (see pycgpu devices)") from None
        if dev not in out:
            out.append(dev)
    return out


@contextmanager
def file_errors(unchanged: Path | None = None) -> Iterator[None]:
    """ConfigError -> exit 2; OSError -> exit 1, saying that @unchanged was
    left as it was."""
    from ...runtime.oci import ConfigError

    try:
        yield
    except ConfigError as e:
        raise BadValue(advised(e)) from None
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        left = f" ({unchanged} is unchanged)" if unchanged else ""
        raise Refused(f"{where}{e.strerror or e}{left}") from None


def write_output(text: str, output: str | None, default: Path,
                 unchanged: Path | None = None) -> None:
    """@text to stdout (``-``), to @output, or to @default, atomically."""
    from ...runtime.oci import atomic_write

    if output == "-":
        click.echo(text, nl=not text.endswith("\n"))
        return
    with file_errors(unchanged):
        atomic_write(Path(output) if output else default, text)


PATCH_HELP = """
\b
What is added (DEV is renderD128, /dev/dri/renderD128, card0, a PCI address
or MAJ:MIN; see pycgpu devices):
  --device DEV          linux.devices entry (type, major, minor, mode, uid, gid of
                        the host node) and a linux.resources.devices allow rule
                        (c MAJ:MIN rwm: runc adds none by itself)
  --weight [DEV=]W      linux.resources.unified["gpu.weight"], 1..10000
  --priority N          linux.resources.unified["gpu.priority"], -1023..1023, or
                        default (none of its own: it inherits, as a new group does)
  --memory-max DEV=SIZE linux.resources.unified["gpu.memory.max"]: 512M, 2G, max
                        (a kernel with dmem: "dmem.max"; DEV:REGION=SIZE for
                        one of a device's regions, see pycgpu devices)
  --max [DEV=]CAP       linux.resources.unified["gpu.max"]: the hard cap on GPU
                        time, 30%, 30ms/100ms or max (a cap per device beside
                        the default needs --hook: one value per file)
  --cgroups-path PATH   linux.cgroupsPath (cgroupfs driver: /parent/name)
  --hook                the knobs as pycgpu.io/gpu.* annotations plus a
                        hooks.createRuntime entry running pycgpu oci hook,
                        instead of unified (needed for several values per file,
                        e.g. memory limits on two GPUs)
  --image-check MODE    pycgpu.io/image-check annotation (implies --hook):
                        enforce refuses an image whose GPU user space does not
                        fit the host (see pycgpu image check), warn only warns
  --legacy-stanza       linux.resources.gpu {"memory": BYTES, "prio": N} of the
                        2017 proof of concept (read by patched runtimes only),
                        with "quota" and "period" (µs) for --max;
                        --no-legacy-stanza removes it
unified values are strings (the runtime-spec rejects numbers) and each file
takes one value: runc and crun write it with one write(2).

\b
Exit codes: 0 done; 1 the file cannot be read or written (it is unchanged);
2 bad input (not JSON, a field of the wrong type, a bad value, unknown DEV):
nothing is written.
"""


def patch_options(f: F) -> F:
    f = click.option("--legacy-stanza/--no-legacy-stanza", "legacy_stanza", default=None,
                     help="Add (or remove) the 2017 linux.resources.gpu stanza.")(f)
    f = click.option("--image-check", type=click.Choice(["enforce", "warn"]),
                     help="Make the hook check the image's GPU user space (implies --hook).")(f)
    f = click.option("--hook-path", metavar="FILE",
                     help="The hook's program: pycgpu-hook, or the pycgpu script "
                          "(default: pycgpu-hook on PATH, else pycgpu).")(f)
    f = click.option("--hook", "use_hook", is_flag=True,
                     help="Apply the knobs from a createRuntime hook (annotations) "
                          "instead of linux.resources.unified.")(f)
    f = click.option("--cgroups-path", metavar="PATH",
                     help="Set linux.cgroupsPath, e.g. /gpu-jobs/job1.")(f)
    f = knob_options(f)
    f = click.option("--device", "devices", multiple=True, metavar="DEV",
                     shell_complete=complete_device,
                     help="Give the container this render node. Repeatable.")(f)
    return f


def build_patch(state: State, devices: tuple[str, ...], weights: tuple[str, ...],
                priority: tuple[str, ...], memory_max: tuple[str, ...], caps: tuple[str, ...],
                cgroups_path: str | None,
                use_hook: bool, hook_path: str | None, image_check: str | None,
                legacy_stanza: bool | None) -> Patch:
    """A Patch from the options; raises BadValue/Refused."""
    from ...runtime import oci

    settings = settings_from_options(state, weights, priority, memory_max, caps)
    nodes = []
    for dev in resolve_devices(state, devices):
        with file_errors():
            nodes.append(oci.DeviceNode.from_device(dev))
    hook = None
    if use_hook or image_check or hook_path:
        # a priority or a cap set by the bundle's own author: its hook entry
        # allows it (a pod cannot write hook entries; see pycgpu.runtime.allowlist)
        from ...runtime.annotations import MAX, PRIORITY

        allow = ([PRIORITY] if settings.priority is not None else []) + (
            [MAX] if settings.caps else [])
        hook = oci.hook_command(hook_path, allow=allow)
    return oci.Patch(devices=nodes, settings=settings, legacy_stanza=legacy_stanza,
                     cgroups_path=cgroups_path, hook=hook, image_check=image_check)


def _finish(config: Config, patch: Patch, dry_run: bool, output: str | None, default: Path,
            unchanged: Path | None) -> None:
    from ...runtime import oci

    with file_errors(unchanged):
        changes = oci.apply(config.doc, patch)
    if _dry_run(changes, dry_run):
        return
    write_output(config.dumps(), output, default, unchanged)


def _dry_run(changes: list[str], dry_run: bool) -> bool:
    """Says what a dry run would change; whether it was one."""
    if dry_run:
        for change in changes:
            click.echo(f"would {change}")
    return dry_run


@click.group("oci", short_help="OCI bundles for runc/crun: patch, unpatch, generate, the hook.")
def oci() -> None:
    """OCI runtime bundles (runc, crun): give a container render nodes and
    gpu knobs through its config.json, and the createRuntime hook that
    applies pycgpu.io/gpu.* annotations (CDI, Docker, Kubernetes).

    \b
    Examples:
      pycgpu oci generate --device renderD128 --weight 300 --memory-max renderD128=2G
      pycgpu oci patch mybundle/config.json --device renderD128 --priority 50
      pycgpu oci patch config.json --hook --memory-max renderD128=1G --memory-max renderD129=1G
      pycgpu oci unpatch config.json
    """


@oci.command("patch", short_help="Add render nodes and gpu knobs to a config.json.",
             epilog=PATCH_HELP)
@click.argument("config", type=click.Path(path_type=Path))
@patch_options
@click.option("--output", "-o", metavar="FILE",
              help="Write the result to FILE ('-': stdout) instead of replacing CONFIG.")
@pass_state
def patch(state: State, config: Path, devices: tuple[str, ...], weights: tuple[str, ...],
          priority: tuple[str, ...], memory_max: tuple[str, ...], caps: tuple[str, ...],
          dry_run: bool,
          cgroups_path: str | None, use_hook: bool, hook_path: str | None,
          image_check: str | None, legacy_stanza: bool | None, output: str | None) -> None:
    """Patch the runtime-spec CONFIG (a config.json, or a bundle directory
    holding one) in place: every other field and the key order are kept,
    and the file is replaced atomically (a temporary file in the same
    directory, fsync'ed, with the original's mode, renamed over it) under a
    lock (.config.json.lock beside it) that concurrent patches wait for. On
    bad input nothing is written.

    Patching again converges: a knob given again replaces its earlier value
    wherever it was (linux.resources.unified or, with --hook, the
    pycgpu.io/ annotations: never both), and the config keeps exactly one
    pycgpu hook entry (a new --hook-path replaces the old one). pycgpu oci
    unpatch removes it all.

    \b
    Examples:
      pycgpu oci patch bundle/config.json --device renderD128 --weight 300 --priority 50
      pycgpu oci patch bundle --device renderD128 --memory-max renderD128=2G --dry-run
      pycgpu oci patch config.json --device 0000:03:00.0 --cgroups-path /gpu-jobs/job1
      pycgpu oci patch config.json --hook --image-check enforce --memory-max renderD128=1G
      pycgpu oci patch config.json --memory-max renderD128=1G --priority 5 --legacy-stanza
      pycgpu oci patch config.json --weight 300 -o - | jq .linux.resources.unified
      pycgpu oci patch bundle --device renderD128 --max 30%
    """
    from ...runtime import oci as ocimod

    path = config / ocimod.CONFIG if config.is_dir() else config
    built = build_patch(state, devices, weights, priority, memory_max, caps, cgroups_path,
                        use_hook, hook_path, image_check, legacy_stanza)
    if built.is_empty():
        raise BadValue("nothing to patch: give --device, --weight, --priority, --memory-max, "
                       "--max, --cgroups-path, --hook or --legacy-stanza")
    with _locked(path, dry_run, output):
        _finish(_load(path), built, dry_run, output, path, path)


@oci.command("unpatch", short_help="Remove what pycgpu oci patch added to a config.json.")
@click.argument("config", type=click.Path(path_type=Path))
@click.option("--keep-devices", is_flag=True,
              help="Keep the render nodes in linux.devices and their allow rules.")
@click.option("--dry-run", is_flag=True, help="Print what would be removed, write nothing.")
@click.option("--output", "-o", metavar="FILE",
              help="Write the result to FILE ('-': stdout) instead of replacing CONFIG.")
def unpatch(config: Path, keep_devices: bool, dry_run: bool, output: str | None) -> None:
    """Undo pycgpu oci patch on the runtime-spec CONFIG (a config.json, or a
    bundle directory holding one): remove the knobs' keys of
    linux.resources.unified (gpu.weight, gpu.priority, gpu.max,
    gpu.memory.max, dmem.max), every pycgpu.io/ annotation, the
    hooks.createRuntime entries that run pycgpu oci hook,
    linux.resources.gpu and (unless --keep-devices) the /dev/dri/renderD*
    entries of linux.devices with their allow rules. linux.cgroupsPath and
    process are left as they are. The file is replaced atomically, under
    the lock pycgpu oci patch takes; on bad input nothing is written.

    \b
    Examples:
      pycgpu oci unpatch bundle/config.json
      pycgpu oci unpatch bundle --keep-devices --dry-run
    """
    from ...runtime import oci as ocimod

    path = config / ocimod.CONFIG if config.is_dir() else config
    with _locked(path, dry_run, output):
        loaded = _load(path)
        with file_errors(path):
            changes = ocimod.unpatch(loaded.doc, keep_devices)
        if _dry_run(changes, dry_run):
            return
        if not changes and output is None:
            return
        write_output(loaded.dumps(), output, path, path)


@contextmanager
def _locked(path: Path, dry_run: bool, output: str | None) -> Iterator[None]:
    """Hold the lock of @path (:func:`pycgpu.core.locks.file_lock`) while it is
    read, changed and replaced, so that concurrent patches of one config
    each see the other's result; nothing to hold when it is not replaced."""
    from ...core.locks import file_lock

    if dry_run or output is not None or not path.is_file():  # _load says what is wrong
        yield
        return
    with file_errors(path), file_lock(path):
        yield


def _load(path: Path) -> Config:
    from ...runtime import oci as ocimod

    try:
        return ocimod.load(path)
    except ocimod.ConfigError as e:
        raise BadValue(advised(e)) from None
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.EISDIR, errno.ENOTDIR):
            raise BadValue(f"{path} does not exist (create one: pycgpu oci generate)") from None
        raise Refused(f"{path}: {e.strerror}") from None


@oci.command("generate", short_help="A fresh config.json (runc spec's defaults), patched.",
             epilog=PATCH_HELP)
@click.option("--bundle", "-b", type=click.Path(file_okay=False, path_type=Path), default=".",
              help="Write BUNDLE/config.json (default: the current directory).")
@click.option("--output", "-o", metavar="FILE",
              help="Write to FILE instead ('-': stdout).")
@click.option("--force", is_flag=True, help="Replace an existing config.json.")
@click.option("--terminal/--no-terminal", default=None,
              help="process.terminal (runc's default: true; --no-terminal for "
                   "non-interactive runs).")
@patch_options
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[-- COMMAND [ARG]...]")
@pass_state
def generate(state: State, bundle: Path, output: str | None, force: bool,
             terminal: bool | None, devices: tuple[str, ...], weights: tuple[str, ...],
             priority: tuple[str, ...], memory_max: tuple[str, ...], caps: tuple[str, ...],
             dry_run: bool, cgroups_path: str | None, use_hook: bool, hook_path: str | None,
             image_check: str | None, legacy_stanza: bool | None,
             command: tuple[str, ...]) -> None:
    """Write a new config.json: exactly what runc 1.1.5's `runc spec` writes
    (built in: runc is not needed), then patched with the options (see
    pycgpu oci patch), and process.args set to COMMAND when given. Like runc
    spec, an existing config.json is not replaced without --force.

    \b
    Examples:
      pycgpu oci generate
      pycgpu oci generate --bundle ctr --device renderD128 --weight 300 \\
          --memory-max renderD128=64M --cgroups-path /gpu-jobs/ctr --no-terminal -- ls /dev/dri
      pycgpu oci generate -o - --device renderD128 --hook --image-check enforce
    """
    from ...runtime import oci as ocimod

    built = build_patch(state, devices, weights, priority, memory_max, caps, cgroups_path,
                        use_hook, hook_path, image_check, legacy_stanza)
    built.terminal = terminal
    built.args = list(command) if command else None
    target = Path(output) if output and output != "-" else bundle / ocimod.CONFIG
    if output != "-" and not dry_run and target.exists() and not force:
        raise BadValue(f"{target} exists: remove it, pass --force, or patch it with "
                       f"pycgpu oci patch {target}")
    if output != "-" and not dry_run and not target.parent.is_dir():
        raise BadValue(f"{target.parent} is not a directory (create the bundle directory first)")
    _finish(ocimod.generate(), built, dry_run, output, target, None)


@oci.command("hook", short_help="The createRuntime hook: apply pycgpu.io/gpu.* annotations.")
@click.option("--allow", "allow", multiple=True, metavar="KEY",
              help="Accept this annotation too (e.g. gpu.priority), on top of the node's "
                   "allow-list. Repeatable.")
@click.option("--allow-list", "allow_list", type=click.Path(dir_okay=False, path_type=Path),
              envvar="PYCGPU_ALLOW_LIST", default="/etc/pycgpu/runtime/annotations.allow",
              show_default=True,
              help="The node's allow-list: one annotation key per line, a root-owned file "
                   "writable by root only (absent: gpu.weight, gpu.memory.max, image-check).")
@click.option("--proc-root", type=click.Path(file_okay=False, path_type=Path),
              envvar="PYCGPU_PROC_ROOT", default="/proc", hidden=True)
@pass_state
def hook(state: State, allow: tuple[str, ...], allow_list: Path, proc_root: Path) -> None:
    """Run by the container runtime as a createRuntime hook, with the
    container's OCI state on stdin: applies the container's pycgpu.io/*
    annotations to its cgroup. Only these are accepted:

    \b
      pycgpu.io/gpu.weight      300, renderD128=50, 300,renderD129=20
      pycgpu.io/gpu.priority    -10, default (off unless the node allows it)
      pycgpu.io/gpu.memory.max  renderD128=2G, renderD128=2G,renderD129=512M
      pycgpu.io/gpu.max         30%, renderD128=30ms/100ms (off unless allowed)
      pycgpu.io/image-check     enforce | warn | off (see pycgpu image check)

    and of these only the ones on the node's allow-list: the --allow-list
    file, else gpu.weight, gpu.memory.max and image-check; plus the keys of
    --allow (the hook entry's author, who controls the runtime's
    configuration, allows them). See docs/kubernetes.md, "Trust".

    Any other pycgpu.io/ annotation, a bad value, a cgroup that cannot be
    found or a knob the kernel refuses makes it fail (the runtime then
    refuses to start the container) and nothing is changed. The cgroup is
    found from the state's pid (/proc/PID/cgroup), else from the config's
    linux.cgroupsPath; gpu is enabled along its path where missing (systemd
    leaves it out of its slices). Containers without pycgpu.io/ annotations
    or capped shares are left alone.

    Under Kubernetes it records the share IDs the device plugin granted on
    the container's cgroup, for the exporter's pod labels: those of the
    config's hook entries that run /bin/true pycgpu-share-id=ID (one per
    share, from the plugin's CDI devices: whatever can name such a device
    gets its ID). A pycgpu.io/share-ids annotation, which a pod could forge,
    is ignored. Where such an entry also carries pycgpu-share-cap=MAX/PERIOD
    (the plugin's --capped shares), the container's gpu.max on that GPU is
    the sum of its shares' caps, whatever an annotation asks.

    Exit codes: 0 applied (or nothing to do); 1 the host refused or lacks
    something, or the allow-list file is not trusted; 2 bad state or
    annotations (an annotation not on the allow-list included); 3 the image
    check failed.

    \b
    Examples:
      pycgpu oci patch config.json --hook --weight 300   # the entry runc/crun run
      pycgpu cdi generate --hook -o /etc/cdi/pycgpu.json  # the entry CDI runtimes run
      echo '{"id":"c1","pid":4242,"bundle":"/run/c1","annotations":
            {"pycgpu.io/gpu.weight":"300"}}' | pycgpu oci hook
    """
    import sys

    from ...runtime import hook as hookmod

    stdin = sys.stdin
    if stdin.isatty():
        raise BadValue("pycgpu oci hook reads the container's OCI state on stdin: the runtime "
                       "runs it (see pycgpu oci hook --help)")
    code = hookmod.execute(stdin.buffer.read(), allow=allow, allow_list=allow_list,
                           mount=lambda: state.mount, resolve=state.resolve_devt,
                           sysfs_root=state.sysfs_root, dev_root=state.dev_root,
                           proc_root=proc_root, prog="pycgpu oci hook")
    if code:
        raise click.exceptions.Exit(code)
