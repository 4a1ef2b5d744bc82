"""What this host lacks for the gpu controller, and the exact fix for each.

:func:`check` returns one :class:`Finding` per question:

==============  ===================================================================
id              question
==============  ===================================================================
``cgroup2``     is a cgroup2 tree mounted, and is this a pure v2 host (not v1/hybrid)?
``gpu``         is ``gpu`` in the root's ``cgroup.controllers`` (else: kernel without
                CONFIG_CGROUP_GPU, or ``cgroup_disable=gpu``)?
``path``        is ``gpu`` enabled in ``cgroup.subtree_control`` down to a given path?
``systemd``     does systemd manage the tree? It does not enable controllers it does
                not know, so its slices and scopes lack ``gpu`` until it is enabled
``memory``      which interface counts GPU memory: the gpu controller's ``gpu.memory.*``
                (6.12 series) or the ``dmem`` controller (Linux 6.14+, the 7.3 series),
                its regions, and the render nodes none of them counts (information)
``kfd``         only where ``/dev/kfd`` exists: amdgpu's compute queues (ROCm) bypass
                the GPU scheduler, so the controller neither charges nor orders them
                (information)
``sched``       only on Linux 7.x with drm_sched loaded: does drm_sched run a policy the
                cgroup order extends (FIFO, the default, or fair), not round robin?
==============  ===================================================================

A finding's status is ``ok``, ``problem`` (with a ``fix``: a command to run)
or ``info``. The fixes fit the host: systemd's kernel parameter and steps
only where systemd booted the host (``/run/systemd/system``, as
sd_booted(3) tests), a GRUB edit only where ``/etc/default/grub`` exists
(else the kernel command line of whatever boot loader there is), and
``make kernel`` only in a checkout of pycgpu's repository (else: build a
kernel with the patch series from it). All paths are injectable so tests
run on fake trees and fake hosts.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path

OK, PROBLEM, INFO = "ok", "problem", "info"
CONTROLLER = "gpu"


@dataclass(frozen=True)
class Finding:
    id: str
    status: str
    message: str
    fix: str | None = None


# the patch series next to the package in a checkout of pycgpu's repository
# (absent from an installed wheel)
CHECKOUT_SERIES = Path(__file__).resolve().parent.parent / "kernel" / "drivers-gpu-cgroup"


@dataclass(frozen=True)
class Host:
    """Where to look: the real /proc by default; ``cgroup_root`` set means a
    tree given by the user (``--cgroup-root``), used without the mount table.
    ``systemd_run`` exists when systemd booted the host, ``grub_default``
    when GRUB is its boot loader, ``checkout_series`` when pycgpu runs from
    a checkout of its repository (``make kernel`` is there)."""

    cgroup_root: Path | None = None
    mountinfo: Path = Path("/proc/self/mountinfo")
    proc_cgroups: Path = Path("/proc/cgroups")
    pid1_comm: Path = Path("/proc/1/comm")
    systemd_run: Path = Path("/run/systemd/system")
    grub_default: Path = Path("/etc/default/grub")
    checkout_series: Path = CHECKOUT_SERIES
    kfd: Path = Path("/dev/kfd")
    sysfs_root: Path = Path("/sys")  # for the render nodes dmem's regions belong to
    dev_root: Path = Path("/dev")
    cmdline: Path = Path("/proc/cmdline")
    osrelease: Path = Path("/proc/sys/kernel/osrelease")

    @property
    def systemd_booted(self) -> bool:
        return self.systemd_run.is_dir()

    @property
    def grub(self) -> bool:
        return self.grub_default.is_file()

    @property
    def checkout(self) -> bool:
        return self.checkout_series.is_dir()


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    cgroup_root: Path | None = None

    @property
    def ok(self) -> bool:
        return all(f.status != PROBLEM for f in self.findings)


def _read(path: Path) -> str | None:
    try:
        return path.read_bytes().decode(errors="surrogateescape")
    except OSError:
        return None


def _words(path: Path) -> set[str] | None:
    text = _read(path)
    return None if text is None else set(text.split())


def _mounts(mountinfo: Path) -> list[tuple[str, str, str]]:
    """(mount point, fstype, super options) of every mount."""
    from .mountinfo import parse

    return [(m.mount_point, m.fstype, m.super_options) for m in parse(_read(mountinfo) or "")]


def _echo_gpu(files: list[Path]) -> str:
    """One command that enables gpu in @files, outermost first."""
    inner = " && ".join(f"echo +gpu > {shlex.quote(str(f))}" for f in files)
    return f"sudo sh -c {shlex.quote(inner)}"


def _add_to_cmdline(host: Host, arg: str) -> str:
    """The fix that adds @arg to the kernel command line: GRUB's file where
    the host has one, else the boot loader's configuration."""
    if not host.grub:
        return f"add {arg} to the kernel command line of your boot loader and reboot"
    grub = shlex.quote(str(host.grub_default))
    return (f"add {arg} to the kernel command line and reboot, e.g. "
            f"sudo sed -i 's/^GRUB_CMDLINE_LINUX=\"/&{arg} /' {grub} "
            "&& sudo update-grub && sudo reboot")


def _remove_from_cmdline(host: Host, arg: str) -> str:
    if not host.grub:
        return f"remove {arg} from the kernel command line of your boot loader and reboot"
    return (f"remove {arg} from GRUB_CMDLINE_LINUX in {host.grub_default}, "
            "then sudo update-grub && sudo reboot")


def _unified_fix(host: Host) -> str:
    """Make a v1/hybrid host pure v2: systemd's parameter where systemd
    booted it, else the kernel's own (v1 hierarchies get no controller)."""
    if host.systemd_booted:
        return _add_to_cmdline(host, "systemd.unified_cgroup_hierarchy=1")
    return ("have the init system mount cgroup2 only, at /sys/fs/cgroup (OpenRC: "
            "rc_cgroup_mode=\"unified\" in /etc/rc.conf), and "
            + _add_to_cmdline(host, "cgroup_no_v1=all"))


def _kernel_fix(host: Host) -> str:
    """Get a kernel with the controller: ``make kernel`` in a checkout,
    the patch series from the repository otherwise (a pip install)."""
    if host.checkout:
        return ("boot a kernel built with the pycgpu patch series (CONFIG_CGROUP_GPU=y): "
                "make kernel, see README")
    return ("boot a kernel built with the pycgpu patch series (CONFIG_CGROUP_GPU=y): take the "
            "series from kernel/drivers-gpu-cgroup/ of pycgpu's source repository (its README "
            "tells how to apply it to Linux 6.12 or 7.3) and build the kernel with it")


def _check_mount(host: Host, report: Report) -> Path | None:
    if host.cgroup_root is not None:
        root = host.cgroup_root
        if (root / "cgroup.controllers").is_file():
            report.findings.append(Finding("cgroup2", OK, f"cgroup2 tree at {root} (given)"))
            return root
        report.findings.append(Finding(
            "cgroup2", PROBLEM, f"{root} is not a cgroup2 mount (no cgroup.controllers)",
            "give the cgroup2 mount point: --cgroup-root /sys/fs/cgroup",
        ))
        return None
    mounts = _mounts(host.mountinfo)
    v2 = [m for m, fs, _ in mounts if fs == "cgroup2"]
    v1 = [(m, opts) for m, fs, opts in mounts if fs == "cgroup"]
    v1_controllers = sorted({o for _, opts in v1 for o in opts.split(",")}
                            - {"rw", "ro", "relatime", "nosuid", "nodev", "noexec"})
    if v1:
        where = f"cgroup2 only at {v2[0]}" if v2 else "no cgroup2 mount"
        report.findings.append(Finding(
            "cgroup2", PROBLEM,
            f"cgroup v1/hybrid host: v1 hierarchies ({', '.join(v1_controllers)}), {where}; "
            "container runtimes use v1 here and ignore gpu.*",
            _unified_fix(host),
        ))
        return Path(v2[0]) if v2 else None
    if not v2:
        report.findings.append(Finding(
            "cgroup2", PROBLEM, "no cgroup2 file system is mounted",
            "sudo mount -t cgroup2 none /sys/fs/cgroup",
        ))
        return None
    report.findings.append(Finding("cgroup2", OK, f"cgroup2 mounted at {v2[0]}"))
    return Path(v2[0])


def _disabling_word(host: Host) -> str | None:
    """The ``cgroup_disable=...`` word of the kernel command line that names
    gpu (a comma-separated list), if any."""
    for word in (_read(host.cmdline) or "").split():
        name, sep, value = word.partition("=")
        if sep and name == "cgroup_disable" and "gpu" in value.split(","):
            return word
    return None


def _proc_cgroups_entry(path: Path) -> tuple[int, int] | None:
    """(hierarchy, enabled) of gpu in /proc/cgroups, None if not listed."""
    for line in (_read(path) or "").splitlines():
        words = line.split()
        if len(words) >= 4 and words[0] == CONTROLLER:
            return int(words[1]), int(words[3])
    return None


def _check_controller(host: Host, root: Path, report: Report) -> bool:
    controllers = _words(root / "cgroup.controllers") or set()
    if CONTROLLER in controllers:
        report.findings.append(Finding("gpu", OK, f"gpu controller available in {root}"))
        return True
    entry = _proc_cgroups_entry(host.proc_cgroups)
    word = _disabling_word(host)
    # 7.3 lists in /proc/cgroups only the controllers with v1 support: the
    # command line says it there
    if (entry is not None and entry[1] == 0) or word is not None:
        # /proc/cgroups listing it says the kernel has it; the word alone does not
        maybe = "" if entry is not None else f" ({word}), or this kernel lacks it"
        finding = Finding(
            "gpu", PROBLEM, f"the gpu controller is disabled on the kernel command line{maybe}",
            _remove_from_cmdline(host, "cgroup_disable=gpu" if word in (None, "cgroup_disable=gpu")
                                 else f"gpu (only) of {word}"),
        )
    elif entry is not None and entry[0] != 0:
        finding = Finding(
            "gpu", PROBLEM, f"the gpu controller is bound to cgroup v1 hierarchy {entry[0]}",
            "unmount that v1 hierarchy (grep gpu /proc/self/mountinfo; sudo umount MOUNTPOINT)",
        )
    else:
        finding = Finding(
            "gpu", PROBLEM,
            f"no gpu controller in {root}/cgroup.controllers: kernel without CONFIG_CGROUP_GPU",
            _kernel_fix(host),
        )
    if "dmem" in controllers:
        finding = Finding(finding.id, finding.status, finding.message + (
            "; GPU memory limits work without it, through dmem (gpu.weight and "
            "gpu.priority need it)"), finding.fix)
    report.findings.append(finding)
    return False


def _check_path(root: Path, path: str, report: Report) -> None:
    from .cgroup import resolve_path

    rel = resolve_path(root, path)
    chain = [root] + [root.joinpath(*rel.parts[: i + 1]) for i in range(len(rel.parts))]
    target = chain[-1]
    missing = [cg for cg in chain[:-1]
               if cg.is_dir() and CONTROLLER not in (_words(cg / "cgroup.subtree_control") or ())]
    name = "/" + str(rel) if rel.parts else "/"
    if missing:
        report.findings.append(Finding(
            "path", PROBLEM,
            f"gpu is not enabled in cgroup.subtree_control of "
            f"{', '.join(str(m) for m in missing)}, so {name} has no gpu.* files",
            _echo_gpu([m / "cgroup.subtree_control" for m in missing]),
        ))
    elif not target.is_dir():
        report.findings.append(Finding(
            "path", PROBLEM, f"cgroup {name} does not exist",
            f"pycgpu create {shlex.quote(name)}",
        ))
    else:
        report.findings.append(Finding("path", OK, f"gpu is enabled down to {name}"))


def _systemd_managed(host: Host, root: Path) -> bool:
    """systemd booted the host and runs the tree (its init.scope, or pid 1)."""
    return host.systemd_booted and (
        (root / "init.scope").is_dir() or (_read(host.pid1_comm) or "").strip() == "systemd")


def _check_systemd(host: Host, root: Path, gpu_ok: bool, report: Report) -> None:
    if not _systemd_managed(host, root):
        report.findings.append(Finding("systemd", INFO, "the tree is not managed by systemd"))
        return
    if not gpu_ok:
        report.findings.append(Finding(
            "systemd", INFO, "systemd manages the tree (enable gpu once the kernel has it)"))
        return
    levels = [root, *sorted(p for p in root.glob("*.slice") if p.is_dir())]
    missing = [p for p in levels
               if CONTROLLER not in (_words(p / "cgroup.subtree_control") or ())]
    if not missing:
        report.findings.append(Finding(
            "systemd", OK, "systemd manages the tree; gpu is enabled in its top-level slices"))
        return
    report.findings.append(Finding(
        "systemd", PROBLEM,
        "systemd manages the tree and does not enable controllers it does not know: gpu is "
        f"missing in {', '.join(str(p / 'cgroup.subtree_control') for p in missing)}, so "
        "container scopes get no gpu.* files (enable it again after each boot, and in nested "
        "slices such as kubepods.slice/*)",
        _echo_gpu([p / "cgroup.subtree_control" for p in missing]),
    ))


def _check_memory(host: Host, root: Path, report: Report) -> None:
    from .cgroup import CgroupError
    from .devices import discover
    from .memory import DMEM, detect

    try:
        devices = discover(host.sysfs_root, host.dev_root)
    except Exception:  # naming regions by device is a nicety
        devices = []
    try:
        iface = detect(root, devices)
    except CgroupError as e:
        report.findings.append(Finding("memory", INFO, f"GPU memory: {e.strerror}"))
        return
    if iface is None:
        report.findings.append(Finding(
            "memory", INFO, "no interface counts GPU memory: the kernel has neither the series' "
            "gpu.memory.* nor the dmem controller (Linux 6.14+), so memory limits are not "
            "available"))
        return
    if iface.kind != DMEM:
        report.findings.append(Finding(
            "memory", INFO, "GPU memory is counted in gpu.memory.* per render node (the gpu "
            "controller of the 6.12 series); every GEM buffer is charged to its creator"))
        return
    regions = ", ".join(f"{r.key} ({r.kernel_key})" for r in iface.regions) or "none"
    missing = [d.name for d in devices if not iface.of_device(d.devt)]
    msg = f"GPU memory is counted by the dmem controller (dmem.*), in regions: {regions}"
    if missing:
        msg += (f"; no region counts the memory of {', '.join(missing)} (its driver registers "
                "none, and the kernel lacks the series' GEM charging): no limit applies there")
    report.findings.append(Finding("memory", INFO, msg))


def _check_kfd(host: Host, report: Report) -> None:
    if host.kfd.exists():
        report.findings.append(Finding(
            "kfd", INFO,
            f"{host.kfd}: amdgpu's compute queues (ROCm) bypass the GPU scheduler, so the gpu "
            "controller neither charges nor orders them; gpu.weight and gpu.priority act on the "
            "device's drm_sched rings (graphics, video) only"))


# drm_sched's policies (its sched_policy parameter); the series' cgroup
# order extends FIFO and fair on Linux 7.x, and leaves round robin alone
_SCHED_POLICIES = {"0": "round-robin", "1": "FIFO", "2": "fair"}


def _linux_major(release: str) -> int:
    head = release.split(".", 1)[0]
    return int(head) if head.isdigit() else 0


def _check_sched(host: Host, gpu_ok: bool, report: Report) -> None:
    policy = (_read(host.sysfs_root / "module/gpu_sched/parameters/sched_policy") or "").strip()
    if not gpu_ok or not policy or _linux_major((_read(host.osrelease) or "").strip()) < 7:
        return
    name = _SCHED_POLICIES.get(policy)
    if name is None:
        report.findings.append(Finding(
            "sched", INFO, f"drm_sched runs a policy pycgpu does not know "
            f"(gpu_sched.sched_policy={policy}): the cgroup order extends FIFO (1) and fair (2)"))
        return
    if policy != "0":
        report.findings.append(Finding(
            "sched", OK, f"drm_sched runs its {name} policy (gpu_sched.sched_policy={policy}), "
            "which the cgroup order extends"))
        return
    arg = "gpu_sched.sched_policy=0"
    if arg in (_words(host.cmdline) or set()):
        fix = _remove_from_cmdline(host, arg)
    else:
        fix = ("give gpu_sched sched_policy=1 (FIFO) or 2 (fair) where its options are set "
               "(/etc/modprobe.d/*.conf), then reboot or reload the drm drivers and gpu_sched")
    report.findings.append(Finding(
        "sched", PROBLEM, "drm_sched runs its round-robin policy (gpu_sched.sched_policy=0), "
        "under which drm_sched devices follow neither gpu.weight nor gpu.priority (gpu.stat "
        "says sched=0 and a per-device gpu.weight is refused); only GPU time is charged", fix))


# where gpu.max is enforced (the kernel README's driver table): drm_sched's
# scheduler-owned queues and i915's execlists; elsewhere a device's cap fails
# with EOPNOTSUPP
_CAPS_ENFORCED = frozenset({"simgpu", "v3d", "panfrost", "lima", "etnaviv", "msm", "amdgpu",
                            "i915"})
_CAPS_WHY = {
    "xe": "firmware (GuC) scheduling",
    "nouveau": "a scheduler per user queue",
    "panthor": "a scheduler per user queue",
    "powervr": "a scheduler per user queue",
    "vgem": "no scheduler",
}


def cap_enforced(driver: str | None) -> bool:
    """Whether the kernel enforces gpu.max on a device of @driver (its bound
    driver's name; msm's display drivers are msm_*), by the kernel README's
    driver table: drm_sched's scheduler-owned queues (on Linux 7 under FIFO
    and fair only: :func:`_check_caps` says so for round robin; this looks
    at the driver alone) and i915 under execlists (under GuC submission the
    kernel refuses the device's cap: :func:`_check_caps` says so)."""
    name = driver or ""
    return name in _CAPS_ENFORCED or name.startswith("msm")


def cap_caveat(driver: str | None) -> str | None:
    """Where :func:`cap_enforced` says yes for @driver only under a condition
    the kernel decides at run time: the condition, else None."""
    if driver == "i915":
        return ("only under execlists submission: under GuC submission (the default from "
                "Alder Lake-P and DG2 on) the kernel refuses a cap of the device and the "
                "default line does not act there")
    return None


def cap_not_enforced_why(driver: str | None) -> str:
    """Why a device of @driver takes no cap (:func:`cap_enforced` False)."""
    return _CAPS_WHY.get(driver or "", "not known to hold work back")


def _check_caps(host: Host, root: Path, gpu_ok: bool, report: Report) -> None:
    """Which devices take a hard cap (gpu.max), by their drivers, on a
    kernel that has it (its gpu.stat counts throttling)."""
    from .devices import discover

    if not gpu_ok or "nr_periods=" not in (_read(root / "gpu.stat") or ""):
        return
    try:
        devices = discover(host.sysfs_root, host.dev_root)
    except OSError:
        return
    if not devices:
        return
    policy = (_read(host.sysfs_root / "module/gpu_sched/parameters/sched_policy") or "").strip()
    if policy == "0" and _linux_major((_read(host.osrelease) or "").strip()) >= 7:
        report.findings.append(Finding(
            "caps", INFO, "gpu.max (a hard cap) is enforced on no device: drm_sched runs its "
            "round-robin policy (gpu_sched.sched_policy=0), which has no cgroup order; a cap "
            "on a device fails with EOPNOTSUPP"))
        return
    yes = [f"{d.name} ({d.driver})" for d in devices if cap_enforced(d.driver)]
    no = [f"{d.name} ({d.driver or 'unknown driver'}: {cap_not_enforced_why(d.driver)})"
          for d in devices if not cap_enforced(d.driver)]
    msg = "gpu.max (a hard cap) is enforced on " + (", ".join(yes) or "no device")
    if no:
        msg += ("; a cap on " + ", ".join(no) + " fails with EOPNOTSUPP, and the default "
                "line does not act there")
    drivers = {d.driver for d in devices}
    if "amdgpu" in drivers:
        msg += "; on amdgpu it holds the kernel's rings, not KFD or MES user queues"
    if "i915" in drivers:
        msg += ("; on i915 only under execlists: under GuC submission (the default from "
                "Alder Lake-P and DG2 on) a cap on the device fails with EOPNOTSUPP")
    report.findings.append(Finding("caps", INFO, msg))


def check(host: Host | None = None, path: str | None = None) -> Report:
    """The findings for @host; @path (a cgroup PATH argument) that breaks the
    path rule raises :class:`pycgpu.core.cgroup.InvalidPath`."""
    from .cgroup import check_relpath

    if path is not None:
        check_relpath(path)
    host = host or Host()
    report = Report()
    root = _check_mount(host, report)
    report.cgroup_root = root
    if root is None:
        return report
    gpu_ok = _check_controller(host, root, report)
    if path is not None and gpu_ok:
        _check_path(root, path, report)
    elif path is not None:
        report.findings.append(Finding("path", INFO, f"{path} not checked: no gpu controller"))
    _check_systemd(host, root, gpu_ok, report)
    _check_memory(host, root, report)
    _check_kfd(host, report)
    _check_sched(host, gpu_ok, report)
    _check_caps(host, root, gpu_ok, report)
    return report
