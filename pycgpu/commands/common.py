"""What the commands share: exit codes, error translation, the global state
(which cgroup tree, which sysfs and /dev), and the parsing of PATH, DEV and
``DEV=VALUE`` arguments. Heavy modules (pyudev, cffi) are imported only by
the commands that need them, to keep ``import pycgpu.cli`` fast."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..cgroup import Cgroup, CgroupError, find_mount
from ..formats import DevT

if TYPE_CHECKING:
    from click.shell_completion import CompletionItem

    from ..devices import Device
    from ..knobs import Settings

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_PROBLEMS = 3
EXIT_CANNOT_EXECUTE = 126
EXIT_NOT_FOUND = 127


class Refused(click.ClickException):
    """The kernel or the system refused, or lacks what is needed (exit 1)."""

    exit_code = EXIT_REFUSED


class BadValue(click.ClickException):
    """A bad argument, reported on one line without the usage text (exit 2)."""

    exit_code = EXIT_USAGE


_HINTS = {
    errno.EACCES: "run as root, or inside a cgroup subtree delegated to you",
    errno.EPERM: "run as root, or inside a cgroup subtree delegated to you",
    errno.EINVAL: "the kernel rejected the value: check the formats in pycgpu set --help "
                  "and the devices in pycgpu devices",
    errno.ERANGE: "see the ranges in pycgpu set --help",
    errno.ENOENT: "see pycgpu check --path PATH",
}


def refused(e: OSError, path: str | None = None) -> Refused:
    """A one-line message for a refusal: what, why, and the fix."""
    msg = str(e.strerror or e)
    hint = _HINTS.get(e.errno or 0)
    if hint:
        hint = hint.replace("PATH", path or "PATH")
        msg = f"{msg} (fix: {hint})"
    return Refused(msg)


@contextmanager
def translated(path: str | None = None) -> Iterator[None]:
    """Turn library errors into click exceptions with the right exit code."""
    from ..knobs import InvalidRequest, Unavailable

    try:
        yield
    except InvalidRequest as e:
        raise BadValue(str(e)) from None
    except Unavailable as e:  # its message carries the fix
        raise Refused(str(e.strerror)) from None
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

    def cgroup(self, text: str) -> Cgroup:
        """The group PATH names: relative to the cgroup root, with or without
        a leading slash, or an absolute path under the cgroup root."""
        mount = self.mount
        rel = text
        prefix = str(mount).rstrip("/") + "/"
        if text.startswith(prefix):
            rel = text[len(prefix):]
        elif text == str(mount):
            rel = ""
        try:
            return Cgroup(mount, rel)
        except ValueError as e:
            raise BadValue(f"PATH {text!r}: {e}") from None

    def devices(self) -> list[Device]:
        if self._devices is None:
            from ..devices import discover

            self._devices = discover(self.sysfs_root, self.dev_root)
        return self._devices

    def device(self, text: str, what: str) -> DevT:
        """Resolve a DEV argument; @what names the option in errors."""
        from ..devices import DeviceError, resolve

        try:
            return resolve(text, self.devices()).devt
        except DeviceError as e:
            raise BadValue(f"{what}: {e} (see pycgpu devices)") from None


pass_state = click.make_pass_decorator(State, ensure=True)


def _number(what: str, text: str, expected: str, check: Callable[[int], int]) -> int:
    """An integer option value, range-checked; BadValue names @what."""
    from .. import formats

    try:
        value = int(text.strip(), 10)
    except ValueError:
        raise BadValue(f"{what}: {text!r} is not an integer (give {expected})") from None
    try:
        return check(value)
    except formats.FormatError as e:
        raise BadValue(f"{what}: {e}") from None


def settings_from_options(
    state: State, weights: tuple[str, ...], priority: str | None, memory_max: tuple[str, ...]
) -> Settings:
    """Parse and check --weight/--priority/--memory-max; raises BadValue."""
    from .. import formats
    from ..knobs import Settings

    settings = Settings()
    for raw in weights:
        what = f"--weight {raw!r}"
        dev_text, sep, value = raw.rpartition("=")
        dev = state.device(dev_text, what) if sep else None
        if sep and value.strip() == "default":
            w = None
        else:
            w = _number(what, value, "W or DEV=W with W in [1, 10000], or DEV=default",
                        formats.check_weight)
        if dev is None:
            if settings.weight is not None:
                raise BadValue(f"{what}: the default weight is given twice")
            assert w is not None
            settings.weight = w
        else:
            if dev in settings.device_weights:
                raise BadValue(f"{what}: the weight of {dev} is given twice")
            settings.device_weights[dev] = w
    if priority is not None:
        settings.priority = _number(f"--priority {priority!r}", priority,
                                    "N in [-1023, 1023]", formats.check_priority)
    for raw in memory_max:
        what = f"--memory-max {raw!r}"
        dev_text, sep, value = raw.rpartition("=")
        if not sep or not dev_text:
            raise BadValue(f"{what}: give DEV=SIZE, e.g. renderD128=2G or renderD128=max")
        dev = state.device(dev_text, what)
        try:
            size = formats.check_size(formats.parse_size(value))
        except formats.FormatError as e:
            raise BadValue(f"{what}: {e}") from None
        if dev in settings.memory_max:
            raise BadValue(f"{what}: the limit of {dev} is given twice")
        settings.memory_max[dev] = size
    return settings


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
