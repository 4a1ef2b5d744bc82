"""What the commands share: exit codes, error translation, the global state
(which cgroup tree, which sysfs and /dev), and the parsing of PATH, DEV and
``DEV=VALUE`` arguments. Heavy modules (pyudev, cffi) are imported only by
the commands that need them, to keep ``import pycgpu.cli`` fast."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ...core.cgroup import (
    WRITE,
    Cgroup,
    CgroupError,
    DelegatedRefusal,
    InvalidPath,
    find_mount,
    resolve_path,
)
from ...core.formats import DevT, printable_name

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

    from ...core.devices import Device
    from ...core.interrupts import Signals
    from ...core.knobs import Settings
    from ...core.memory import Interface

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_PROBLEMS = 3
EXIT_CANNOT_EXECUTE = 126
EXIT_NOT_FOUND = 127


def exec_failed(program: str, e: OSError) -> int:
    """Say why COMMAND @program could not be executed (exec, run): the exit
    status a shell gives then, 127 (not found) or 126."""
    if isinstance(e, FileNotFoundError):
        click.echo(f"Error: {printable_name(program)}: command not found", err=True)
        return EXIT_NOT_FOUND
    click.echo(f"Error: cannot execute {printable_name(program)}: {e.strerror}", err=True)
    return EXIT_CANNOT_EXECUTE


class Refused(click.ClickException):
    """The kernel or the system refused, or lacks what is needed (exit 1)."""

    exit_code = EXIT_REFUSED

    def format_message(self) -> str:
        # a cgroup name in the message (cgroup X does not exist, rm's
        # refusals, a path the kernel refused) printed by the one rule
        return printable_name(self.message)


def stopped(message: str, signum: int) -> click.exceptions.Exit:
    """A signal stopped a change before its end, which was undone (or
    before anything was written): the one-line error, and exit 128 + the
    signal's number, as a shell reports a process the signal ended."""
    click.echo(f"Error: {message}", err=True)
    return click.exceptions.Exit(128 + signum)


class BadValue(click.ClickException):
    """A bad argument, reported on one line without the usage text (exit 2)."""

    exit_code = EXIT_USAGE

    def format_message(self) -> str:
        return printable_name(self.message)


# The CLI's advice for a library error's reason (pycgpu.Error.reason), in the
# CLI's words: its commands and options. "paren": " (ADVICE)" after the
# message; "inside": into the message's closing parenthesis ("(why; ADVICE)");
# "tail": appended as it is.
_ADVICE: dict[str, tuple[str, str]] = {
    "unknown-device": ("tail", " (see pycgpu devices)"),
    "no-group": ("paren", "create it: pycgpu create {group}"),
    "exists": ("paren", "change it with pycgpu set {group}, or pass --exist-ok"),
    "nothing-to-set": ("tail", ": give --weight, --priority, --memory-max or --max"),
    "no-controller": ("inside", "fix: see pycgpu check"),
    "gpu-not-enabled": ("inside", "fix: pycgpu create {group} --exist-ok"),
    "no-memory-support": ("paren", "fix: boot a kernel with the gpu memory support, or leave "
                                   "out --memory-max"),
    "no-cap-support": ("paren", "fix: boot a kernel of the series with gpu.max, or leave out "
                                "--max"),
    "priority-capped": ("paren", "fix: add --raise-ancestors, or pycgpu set {ancestor} "
                                 "--priority {priority}"),
    "outside-root": ("paren", "or pass --cgroup-root {mount}"),
    "several-writes": ("tail", ": give one value, or pass --hook to apply them from the "
                               "createRuntime hook"),
    "one-limit": ("tail", ": give one --memory-max"),
    "empty-stanza": ("tail", ": give --memory-max DEV=SIZE or --priority N with "
                             "--legacy-stanza"),
}


def advised(e: BaseException | str) -> str:
    """The message of a library error (or of a plan's
    :class:`pycgpu.core.knobs.Notice`), with the CLI's advice for its reason."""
    text = str(e.strerror or e) if isinstance(e, OSError) else str(e)
    rule = _ADVICE.get(getattr(e, "reason", ""))
    if rule is None:
        return text
    where, advice = rule
    advice = advice.format(**getattr(e, "details", {}))
    if where == "tail":
        return text + advice
    if where == "inside" and text.endswith(")"):
        return f"{text[:-1]}; {advice})"
    return f"{text} ({advice})"


_ACCESS_HINT = "run as root, or inside a cgroup subtree delegated to you"
_KNOBS = ("gpu.weight", "gpu.priority", "gpu.memory.max", "gpu.max")


def hint(e: OSError, path: str | None = None) -> str | None:
    """The fix for a refusal, chosen by what failed (a read or a write, of
    which file: :class:`pycgpu.core.cgroup.CgroupError` says) and then by errno:
    a knob the kernel refused a value for is a format or range matter; a
    file pycgpu could not read, or did not understand, is not."""
    code = e.errno or 0
    op = getattr(e, "op", "")
    file = getattr(e, "file", None)
    if isinstance(e, DelegatedRefusal):  # its message says who may
        return None
    if code in (errno.EACCES, errno.EPERM):
        return _ACCESS_HINT
    if code == errno.ENOENT:
        return f"see pycgpu check --path {path or 'PATH'}"
    if op == WRITE and file is not None and file.name in _KNOBS:
        if code == errno.EINVAL:
            return ("the kernel rejected the value: check the formats in pycgpu set --help "
                    "and the devices in pycgpu devices")
        if code == errno.ERANGE:
            return "see the ranges in pycgpu set --help"
    return None


def refused(e: OSError, path: str | None = None) -> Refused:
    """A one-line message for a refusal: what, why, and the fix."""
    msg = str(e.strerror or e)
    fix = hint(e, path)
    return Refused(f"{msg} (fix: {fix})" if fix else msg)


@contextmanager
def translated(path: str | None = None, signals: Signals | None = None) -> Iterator[None]:
    """Turn library errors into click exceptions with the right exit code;
    a stop by signals also names those of @signals that came meanwhile
    (while the change was undone)."""
    from ...core.interrupts import Interrupted
    from ...core.knobs import ApplyError, InvalidRequest, Unavailable

    try:
        yield
    except Interrupted as e:  # before the apply (waiting for the lock)
        e.add(signals.take() if signals else [])
        raise stopped(f"{e.strerror}; nothing was changed", e.signum) from None
    except ApplyError as e:
        if isinstance(e.cause, Interrupted):
            rest = str(e.strerror)[len(str(e.cause.strerror)):]  # "; nothing was changed"
            e.cause.add(signals.take() if signals else [])
            raise stopped(f"{e.cause.strerror}{rest}", e.cause.signum) from None
        raise refused(e, path) from None
    except InvalidRequest as e:
        raise BadValue(advised(e)) from None
    except Unavailable as e:  # its reason chooses the fix
        raise Refused(advised(e)) from None
    except OSError as e:
        raise refused(e, path) from None


@dataclass
class State:
    """The global options, resolved lazily."""

    cgroup_root: Path | None = None
    sysfs_root: Path = Path("/sys")
    dev_root: Path = Path("/dev")
    _mount: Path | None = field(default=None, repr=False)
    _devices: list[Device] | None = field(default=None, repr=False)
    _memory: tuple[Interface | None] | None = field(default=None, repr=False)

    @property
    def mount(self) -> Path:
        if self._mount is None:
            self._mount = self._find_mount()
        return self._mount

    def _find_mount(self) -> Path:
        if self.cgroup_root is not None:
            root = self.cgroup_root
            if not (root / "cgroup.controllers").is_file():
                raise Refused(
                    f"--cgroup-root {root} is not a cgroup2 mount (no cgroup.controllers; "
                    "fix: give the cgroup2 mount point, e.g. /sys/fs/cgroup)")
            return root
        try:
            return find_mount()
        except CgroupError as e:
            raise Refused(
                f"{e.strerror} (fix: sudo mount -t cgroup2 none /sys/fs/cgroup, "
                "or pass --cgroup-root; see pycgpu check)") from None

    def relpath(self, text: str, what: str = "PATH") -> Path:
        """PATH relative to the cgroup root, by the one rule of
        :func:`pycgpu.core.cgroup.resolve_path`; BadValue when it breaks it."""
        try:
            return resolve_path(self.mount, text)
        except InvalidPath as e:
            raise BadValue(f"{what}: {advised(e)}") from None

    def cgroup(self, text: str) -> Cgroup:
        """The group PATH names: relative to the cgroup root, with or without
        a leading slash, or an absolute path under the cgroup root."""
        return Cgroup(self.mount, self.relpath(text))

    def devices(self) -> list[Device]:
        if self._devices is None:
            from ...core.devices import discover

            self._devices = discover(self.sysfs_root, self.dev_root)
        return self._devices

    def device_names(self) -> dict[DevT, str]:
        """The render node name of each device number (``renderD128``), for
        human-readable output; empty when discovery fails: naming is a
        nicety, never the reason a command fails."""
        try:
            return {d.devt: d.name for d in self.devices()}
        except Exception:
            return {}

    def memory(self) -> Interface | None:
        """The kernel's memory interface and its regions (gpu.memory.* or
        dmem, :mod:`pycgpu.core.memory`); None when it has neither."""
        if self._memory is None:
            from ...core.memory import detect

            try:
                devices: list[Device] = self.devices()
            except Exception:  # naming regions by device is a nicety
                devices = []
            try:
                self._memory = (detect(self.mount, devices),)
            except CgroupError as e:
                raise Refused(e.strerror or str(e)) from None
        return self._memory[0]

    def resolve_devt(self, text: str) -> DevT:
        """The render node DEV names (DeviceError if none)."""
        from ...core.devices import resolve

        return resolve(text, self.devices()).devt

    def device(self, text: str, what: str) -> DevT:
        """Resolve a DEV argument; @what names the option in errors."""
        from ...core.devices import DeviceError, resolve

        try:
            return resolve(text, self.devices()).devt
        except DeviceError as e:
            raise BadValue(f"{what}: {e} (see pycgpu devices)") from None


pass_state = click.make_pass_decorator(State, ensure=True)


def settings_from_options(
    state: State, weights: tuple[str, ...], priority: str | tuple[str, ...] | None,
    memory_max: tuple[str, ...], caps: tuple[str, ...] = ()
) -> Settings:
    """Parse and check --weight/--priority/--memory-max/--max; raises BadValue."""
    from ...core.knobs import InvalidRequest, Names, parse_settings

    try:
        return parse_settings(weights, priority, memory_max, state.resolve_devt,
                              Names("--weight", "--priority", "--memory-max", "--max"),
                              state.memory() if memory_max else None, caps=caps)
    except InvalidRequest as e:
        raise BadValue(advised(e)) from None


# shell completion --------------------------------------------------------------


def _root_for_completion(ctx: click.Context) -> Path | None:
    root = ctx.find_root().params.get("cgroup_root")
    if root:
        return Path(root)
    try:
        return find_mount()
    except CgroupError:
        return None


def complete_path(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Complete PATH with the cgroup directories under the root."""
    from click.shell_completion import CompletionItem

    root = _root_for_completion(ctx)
    if root is None:
        return []
    lead = "/" if incomplete.startswith("/") else ""
    head, _, tail = incomplete.lstrip("/").rpartition("/")
    base = root / head if head else root
    try:
        names = sorted(e.name for e in os.scandir(base)
                       if e.is_dir(follow_symlinks=False) and e.name.startswith(tail))
    except OSError:
        return []
    return [CompletionItem(lead + (f"{head}/" if head else "") + n) for n in names]


def complete_dev_value(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Complete DEV= with the render node names."""
    from click.shell_completion import CompletionItem

    if "=" in incomplete:
        return []
    sysfs = Path(ctx.find_root().params.get("sysfs_root") or "/sys")
    try:
        names = sorted(p.name for p in (sysfs / "class" / "drm").glob("renderD*"))
    except OSError:
        return []
    return [CompletionItem(f"{n}=", type="plain") for n in names if n.startswith(incomplete)]
