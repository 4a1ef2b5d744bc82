"""The OCI createRuntime hook: the ``pycgpu-hook`` program (:func:`main`;
``pycgpu oci hook`` runs the same :func:`execute`).

The runtime (runc, crun; through CDI also podman, containerd, CRI-O and
Docker) runs the hook after it has created the container's cgroup and init
process and before the container's program starts, with the container's
state on stdin (runtime-spec "State": ``id``, ``pid``, ``bundle``,
``annotations``). The hook

1. reads the ``pycgpu.io/*`` annotations (from the state, or else from the
   bundle's ``config.json``) and parses them (:mod:`pycgpu.runtime.annotations`):
   only ``gpu.weight``, ``gpu.priority``, ``gpu.memory.max`` and ``gpu.max``
   can be set, plus ``image-check``; any other ``pycgpu.io/`` key refuses the
   container; and, for the device plugin's capped shares, the cap on each
   GPU that the container's shares add up to (:func:`granted_share_caps`:
   from the config's hook entries, never from an annotation), which replaces
   an annotation's cap on that GPU;
2. with ``pycgpu.io/image-check: enforce`` (or ``warn``), compares the
   container's root file system with the host's GPU drivers
   (:mod:`pycgpu.runtime.imagecheck`) and refuses a mismatch;
3. finds the container's cgroup: from ``/proc/PID/cgroup`` of the state's
   pid, or else from the config's ``linux.cgroupsPath``;
4. enables ``gpu`` in ``cgroup.subtree_control`` along the path where it is
   missing (systemd does not enable controllers it does not know in its
   slices) and sets the knobs, all or none (:mod:`pycgpu.core.knobs`), under the
   lock ``pycgpu create`` takes (:func:`pycgpu.core.locks.tree_lock`): containers
   that start together in one slice share the parents it enables;
5. under Kubernetes, when it set a weight, gives the container's pod and QoS
   slice the sum of the GPU weights below them (:mod:`pycgpu.runtime.kubepods`), so
   that pods share by their weights and not at 100 each, and records the
   share IDs the device plugin granted (:func:`granted_share_ids`: carried
   by the config's hook entries, never by an annotation) on the cgroup.

It fails closed: anything it cannot do or check makes it exit non-zero,
which makes the runtime abort the container. A container without
``pycgpu.io/`` annotations or capped shares is left alone.

The runtime starts the hook for every container, so ``pycgpu-hook`` is a
program of its own, not the click CLI: it imports the standard library and
what it uses of :mod:`pycgpu.core` and :mod:`pycgpu.runtime`, and no more
(tests/host/test_hook_entry.py checks).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.cgroup import Cgroup, CgroupError
from ..core.errors import Error
from ..core.formats import Cap
from . import annotations as ann
from .oci import CONFIG, ConfigError

PROG = "pycgpu-hook"
# exit codes: as the CLI's (pycgpu --help)
EXIT_REFUSED, EXIT_BAD_INPUT, EXIT_MISMATCH = 1, 2, 3
ALLOW_LIST = Path("/etc/pycgpu/runtime/annotations.allow")


class HookError(Error):
    """The hook refuses the container."""


class BadInput(HookError):
    """Malformed state or annotations (exit 2)."""


class HostRefused(HookError):
    """The host refused or lacks something (exit 1). (The CLI's own
    ``Refused`` is a click exception with that exit code.)"""


class ImageMismatch(HookError):
    """The image's GPU user space does not fit the host's drivers (exit 3)."""


STDIN = "the OCI state on stdin"


@dataclass(frozen=True)
class ContainerState:
    """The runtime-spec state of the container, which the runtime passes
    on stdin (not the CLI's global options, ``pycgpu.cli``'s ``State``)."""

    id: str
    pid: int | None
    bundle: Path
    annotations: dict[str, Any] | None

    @classmethod
    def parse(cls, data: str | bytes) -> ContainerState:
        """The state in @data (bytes: UTF-8), parsed as config.json is
        (:func:`pycgpu.core.jsontext.loads`); :class:`BadInput` with one
        line for anything else."""
        from ..core import jsontext

        try:
            doc = jsontext.loads(data, STDIN)
        except jsontext.NotJSON as e:
            hint = " - is this running as an OCI hook?" if e.reason == jsontext.SYNTAX else ""
            raise BadInput(f"{e}{hint}") from None
        if not isinstance(doc, dict):
            raise BadInput(f"{STDIN} is not a JSON object")
        cid, pid, bundle = doc.get("id"), doc.get("pid"), doc.get("bundle")
        if not isinstance(cid, str) or not cid:
            raise BadInput(f"{STDIN} has no container id")
        if pid is not None and (not isinstance(pid, int) or isinstance(pid, bool) or pid < 0):
            raise BadInput(f"container {cid}: the state's pid {pid!r} is not a process id")
        if not isinstance(bundle, str) or not bundle:
            raise BadInput(f"container {cid}: the state has no bundle path")
        annotations = doc.get("annotations")
        if annotations is not None and not isinstance(annotations, dict):
            raise BadInput(f"container {cid}: the state's annotations are not an object")
        return cls(cid, pid or None, Path(bundle), annotations)


@dataclass
class Outcome:
    """What the hook did."""

    request: ann.Request
    cgroup: Cgroup | None = None
    writes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # the pod's and QoS slice's gpu.weight, set to the sums below them
    pod_weights: list[str] = field(default_factory=list)


def _config(state: ContainerState) -> dict[str, Any]:
    from . import oci

    path = state.bundle / CONFIG
    try:
        return oci.load(path).doc
    except ConfigError as e:
        raise BadInput(f"container {state.id}: {e}") from None
    except OSError as e:
        raise HostRefused(f"container {state.id}: cannot read {path}: {e.strerror}") from None


def cgroup_of_pid(pid: int, mount: Path, proc_root: Path = Path("/proc")) -> Cgroup:
    """The cgroup v2 group of @pid, from /proc/PID/cgroup (``0::/path``)."""
    path = proc_root / str(pid) / "cgroup"
    try:  # a cgroup's name is bytes: kept as they are, as os.fsdecode would
        text = path.read_bytes().decode(errors="surrogateescape")
    except OSError as e:
        raise HostRefused(f"cannot read {path}: {e.strerror}") from None
    for line in text.splitlines():
        hid, _, rest = line.partition(":")
        controllers, _, rel = rest.partition(":")
        if hid == "0" and controllers == "":
            if rel.endswith(" (deleted)"):
                break
            return Cgroup(mount, rel)
    raise HostRefused(f"{path} has no cgroup v2 entry (0::/...): is the host on cgroup v1?")


def cgroup_of_config(config: dict[str, Any], mount: Path) -> Cgroup:
    """The group ``linux.cgroupsPath`` names, for the cgroupfs driver
    (``/parent/ctr``, relative to the cgroup2 mount)."""
    linux = config.get("linux")
    path = linux.get("cgroupsPath") if isinstance(linux, dict) else None
    if not isinstance(path, str) or not path:
        raise HostRefused("the state has no pid and the config no linux.cgroupsPath: the "
                          "container's cgroup is unknown")
    if ":" in path:
        raise HostRefused(f"linux.cgroupsPath {path!r} is a systemd unit path: the hook "
                          "needs the state's pid to find the cgroup")
    return Cgroup(mount, path)


def container_cgroup(state: ContainerState, mount: Path, proc_root: Path,
                     config: Callable[[], dict[str, Any]]) -> Cgroup:
    try:
        if state.pid is not None:
            cg = cgroup_of_pid(state.pid, mount, proc_root)
        else:
            cg = cgroup_of_config(config(), mount)
    except ValueError as e:  # '..' in a path
        raise HostRefused(str(e)) from None
    if cg.is_root:
        raise HostRefused("the container runs in the root cgroup, which has no gpu.* files")
    if not cg.exists():
        raise HostRefused(f"the container's cgroup {cg.path} does not exist")
    return cg


def container_devts(config: dict[str, Any]) -> set[Any]:
    """MAJ:MIN of the character devices in the config's ``linux.devices``."""
    from ..core.formats import DevT

    linux = config.get("linux")
    devices = linux.get("devices") if isinstance(linux, dict) else None
    out = set()
    for d in devices if isinstance(devices, list) else []:
        if (isinstance(d, dict) and d.get("type") == "c" and isinstance(d.get("major"), int)
                and isinstance(d.get("minor"), int)):
            out.add(DevT(d["major"], d["minor"]))
    return out


def _create_runtime_entries(config: dict[str, Any]) -> list[dict[str, Any]]:
    """The config's ``hooks.createRuntime`` entries that are objects."""
    hooks = config.get("hooks")
    entries = hooks.get("createRuntime") if isinstance(hooks, dict) else None
    return [e for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []


def granted_share_ids(config: dict[str, Any]) -> tuple[str, ...]:
    """The share IDs the device plugin granted the container: those its
    config's hook entries carry (``pycgpu-share-id=ID``, from the plugin's
    CDI devices; :func:`pycgpu.runtime.oci.share_id_of`), in order, once
    each. Only the runtime writes hook entries; an annotation, which a pod
    can set, never counts."""
    from .kubepods import SHARE_ID
    from .oci import share_id_of

    found = [share_id_of(e) for e in _create_runtime_entries(config)]
    return tuple(dict.fromkeys(i for i in found if i is not None and SHARE_ID.fullmatch(i)))


def granted_share_caps(config: dict[str, Any]) -> dict[str, Cap]:
    """The cap on each GPU (by render node name) that the container's
    capped shares add up to: the sum of the caps their hook entries carry
    (:func:`pycgpu.runtime.oci.share_cap_of`; each share once, at most
    the whole period; shares of one GPU with different periods are a
    :class:`ConfigError`: fail closed). As with the IDs, only hook entries count, which the
    device plugin's CDI spec writes and a pod cannot."""
    from .kubepods import SHARE_ID
    from .oci import share_cap_of, share_id_of

    caps: dict[str, Cap] = {}
    seen: set[str] = set()
    for e in _create_runtime_entries(config):
        share = share_id_of(e)
        if share is None or share in seen or not SHARE_ID.fullmatch(share):
            continue
        seen.add(share)
        cap = share_cap_of(e)
        if cap is None or cap.max_us is None:
            continue
        gpu = share.rsplit("-s", 1)[0]
        had = caps.get(gpu)
        if had is not None and had.period_us != cap.period_us:
            raise ConfigError(f"the capped shares of {gpu} have different periods "
                              f"({had.period_us} and {cap.period_us} µs): their caps do not "
                              "add up")
        total = cap.max_us + (had.max_us or 0 if had is not None else 0)
        caps[gpu] = Cap(min(total, cap.period_us), cap.period_us)
    return caps


def rootfs_of(state: ContainerState, config: dict[str, Any]) -> Path:
    root = config.get("root")
    path = root.get("path") if isinstance(root, dict) else None
    if not isinstance(path, str) or not path:
        raise BadInput(f"container {state.id}: config.json has no root.path to check")
    return state.bundle / path  # an absolute path stays absolute


def run(
    text: str | bytes,
    *,
    resolve: Callable[[str], Any],
    mount: Callable[[], Path],
    proc_root: Path = Path("/proc"),
    image_host: Callable[[], Any] | None = None,
    allowed: Collection[str] | None = None,
    memory: Callable[[], Any] | None = None,
) -> Outcome:
    """Run the hook on the state @text. @resolve turns a DEV of the knob
    annotations into its render node's number
    (:data:`pycgpu.core.knobs.DeviceResolver`), @mount gives the cgroup2 mount
    (asked only when there is something to set), @image_host the host's
    :class:`pycgpu.runtime.imagecheck.Host` (asked only for an image check),
    @allowed the annotation keys the node allows (default
    :data:`pycgpu.runtime.allowlist.DEFAULT`: no priority), @memory the
    kernel's memory interface (:func:`pycgpu.core.memory.detect`, asked only
    for a memory limit; None: gpu.memory.*). Raises
    :class:`HookError` subclasses; nothing is changed then."""
    from ..core import knobs, locks
    from . import imagecheck, kubepods

    state = ContainerState.parse(text)
    cached: dict[str, dict[str, Any]] = {}

    def config() -> dict[str, Any]:
        if "doc" not in cached:
            cached["doc"] = _config(state)
        return cached["doc"]

    annotations = state.annotations
    if annotations is None:
        found = config().get("annotations", {})
        annotations = found if isinstance(found, dict) else {}
    if allowed is None:
        from .allowlist import DEFAULT

        allowed = DEFAULT
    try:
        request = ann.parse(annotations, resolve, allowed, memory)
    except ann.AnnotationError as e:
        raise BadInput(f"container {state.id}: {e}") from None
    outcome = Outcome(request)
    outcome.warnings += [f"annotation {k} ignored: share IDs come from the device plugin's "
                         "CDI devices only" for k in request.ignored]
    # capped shares: their caps come from their hook entries, whatever the
    # annotations say (what the operator sold wins)
    if _has_config(state):
        try:
            share_caps = granted_share_caps(config())
        except ConfigError as e:
            raise BadInput(f"container {state.id}: {e}") from None
        for gpu, cap in share_caps.items():
            try:
                request.settings.caps[resolve(gpu)] = cap
            except (Error, ValueError) as e:
                raise HostRefused(f"container {state.id}: a capped share of {gpu}: "
                                  f"{e}") from None
    if request.is_empty():
        return outcome

    if request.image_check != ann.OFF:
        rootfs = rootfs_of(state, config())
        if not rootfs.is_dir():
            raise HostRefused(f"container {state.id}: its root file system {rootfs} is not a "
                              "directory")
        assert image_host is not None
        report = imagecheck.check(rootfs, image_host(), container_devts(config()))
        if not report.ok:
            if request.image_check == ann.ENFORCE:
                raise ImageMismatch(f"container {state.id}: image check failed: "
                                    f"{imagecheck.summary(report)} (fix: "
                                    f"{report.mismatches()[0].fix})")
            outcome.warnings += [f"image check: {f.message}" for f in report.mismatches()]

    if request.settings.is_empty():
        return outcome
    cg = container_cgroup(state, mount(), proc_root, config)
    outcome.cgroup = cg
    # read before anything changes: a config that cannot be read refuses
    share_ids = granted_share_ids(config()) if _has_config(state) else ()
    asked = kubepods.asked_of(request.settings.weight, request.settings.device_weights)
    pods: list[tuple[Cgroup, kubepods.Asked]] = []

    def pod_weights() -> None:
        if not asked.is_empty() and kubepods.kube_ancestors(cg):
            pods.extend(kubepods.apply(cg, asked))

    try:
        with locks.tree_lock(cg.mount):  # containers starting together share parents
            plan = knobs.plan_create(cg, request.settings, exist_ok=True)
            knobs.apply(plan, then=pod_weights)
    except knobs.InvalidRequest as e:
        raise BadInput(f"container {state.id}: {e}") from None
    except CgroupError as e:
        raise HostRefused(f"container {state.id}: {e.strerror or e}") from None
    outcome.writes = plan.steps()
    if share_ids:
        try:
            kubepods.record_share_ids(cg.path, share_ids)
        except OSError as e:  # labels only: the knobs are set
            outcome.warnings.append(f"cannot record the share IDs on {cg.path} for the "
                                    f"exporter's pod labels: {e.strerror or e}")
    outcome.pod_weights = [f"{anc.name}: " + ", ".join(total.format().splitlines())
                           for anc, total in pods]
    return outcome


def _has_config(state: ContainerState) -> bool:
    """Whether the bundle has a config to read share IDs from (a state
    that names its bundle only, as tests and hand-run hooks do, has none)."""
    return (state.bundle / CONFIG).is_file()


def _memory(mount: Path, sysfs_root: Path, dev_root: Path) -> Any:
    """The kernel's memory interface, for memory limits (pycgpu.core.memory)."""
    from ..core.devices import discover
    from ..core.memory import detect

    try:
        return detect(mount, discover(sysfs_root, dev_root))
    except CgroupError as e:
        raise HostRefused(f"reading the GPU memory regions: {e.strerror or e}") from None


def execute(data: bytes, *, allow: Collection[str], allow_list: Path, mount: Callable[[], Path],
            resolve: Callable[[str], Any], sysfs_root: Path, dev_root: Path, proc_root: Path,
            prog: str = PROG) -> int:
    """One run of the hook as the runtime starts it, on the state @data:
    the node's allow-list @allow_list plus @allow, then :func:`run`. Errors
    and warnings go to stderr, one line each, named by @prog; returns the
    exit code (0, or EXIT_*)."""
    from . import allowlist, imagecheck

    out = sys.stderr
    try:
        allowed = allowlist.for_hook(allow, allow_list)
    except allowlist.AllowListError as e:
        print(f"Error: {prog}: {e}", file=out)
        return EXIT_REFUSED
    try:
        outcome = run(data, resolve=resolve, mount=mount, proc_root=proc_root,
                      image_host=lambda: imagecheck.host(sysfs_root, dev_root, proc_root),
                      allowed=allowed, memory=lambda: _memory(mount(), sysfs_root, dev_root))
    except HookError as e:
        print(f"Error: {prog}: {e}", file=out)
        return (EXIT_BAD_INPUT if isinstance(e, BadInput) else
                EXIT_MISMATCH if isinstance(e, ImageMismatch) else EXIT_REFUSED)
    for warning in outcome.warnings:
        print(f"{prog}: warning: {warning}", file=out)
    return 0


USAGE = f"""usage: {PROG} [--allow KEY]... [--allow-list FILE] [--cgroup-root DIR]

The OCI createRuntime hook: applies a container's pycgpu.io/* annotations
to its cgroup. The container runtime runs it with the container's OCI
state on stdin (pycgpu oci hook --help says what it accepts and does).

  --allow KEY         accept this annotation too, on top of the node's
                      allow-list (repeatable)
  --allow-list FILE   the node's allow-list [$PYCGPU_ALLOW_LIST;
                      default {ALLOW_LIST}]
  --cgroup-root DIR   the cgroup2 mount [$PYCGPU_CGROUP_ROOT; default: the
                      first cgroup2 mount]

Exit codes: 0 applied (or nothing to do); 1 the host refused or lacks
something; 2 bad state or annotations; 3 the image check failed.
"""


def _options(argv: Sequence[str]) -> dict[str, list[str]] | None:
    """The options of @argv by name, or None for anything else (usage error)."""
    names = {"--allow": "allow", "--allow-list": "allow_list", "--cgroup-root": "cgroup_root",
             "--proc-root": "proc_root", "--sysfs-root": "sysfs_root", "--dev-root": "dev_root"}
    out: dict[str, list[str]] = {}
    args = list(argv)
    while args:
        arg = args.pop(0)
        name, eq, value = arg.partition("=")
        if name not in names:
            return None
        if not eq:
            if not args:
                return None
            value = args.pop(0)
        out.setdefault(names[name], []).append(value)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``pycgpu-hook``: the hook as its own program (see :data:`USAGE`)."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args in (["-h"], ["--help"]):
        print(USAGE, end="")
        return 0
    opts = _options(args)
    if opts is None:
        print(USAGE, end="", file=sys.stderr)
        return EXIT_BAD_INPUT
    if sys.stdin is None or sys.stdin.isatty():
        print(f"Error: {PROG} reads the container's OCI state on stdin: the runtime runs it "
              f"(see {PROG} --help)", file=sys.stderr)
        return EXIT_BAD_INPUT

    def last(name: str, env: str, default: str | None) -> str | None:
        return opts[name][-1] if name in opts else os.environ.get(env) or default

    root = last("cgroup_root", "PYCGPU_CGROUP_ROOT", None)
    sysfs_root = Path(last("sysfs_root", "PYCGPU_SYSFS_ROOT", "/sys") or "/sys")
    dev_root = Path(last("dev_root", "PYCGPU_DEV_ROOT", "/dev") or "/dev")
    found: list[Any] = []

    def mount() -> Path:
        from ..core.cgroup import find_mount

        if root is None:
            return find_mount()
        if not os.path.isfile(os.path.join(root, "cgroup.controllers")):
            raise CgroupError(2, f"the cgroup root {root} is not a cgroup2 mount "
                                 "(no cgroup.controllers)")
        return Path(root)

    def resolve(text: str) -> Any:
        from ..core.devices import discover
        from ..core.devices import resolve as resolve_device

        if not found:
            found.append(discover(sysfs_root, dev_root))
        return resolve_device(text, found[0]).devt

    try:
        return execute(sys.stdin.buffer.read(), allow=opts.get("allow", []),
                       allow_list=Path(last("allow_list", "PYCGPU_ALLOW_LIST", str(ALLOW_LIST))
                                       or ALLOW_LIST),
                       mount=mount, resolve=resolve, sysfs_root=sysfs_root, dev_root=dev_root,
                       proc_root=Path(last("proc_root", "PYCGPU_PROC_ROOT", "/proc") or "/proc"))
    except CgroupError as e:  # no cgroup2 mount
        print(f"Error: {PROG}: {e.strerror or e}", file=sys.stderr)
        return EXIT_REFUSED


if __name__ == "__main__":
    sys.exit(main())
