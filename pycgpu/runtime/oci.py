"""OCI bundles: load a runtime-spec ``config.json``, patch it for the gpu
controller, and write it back atomically.

A patch (:class:`Patch`, applied by :func:`apply`) does, for runc and crun:

- ``linux.devices``: one entry per render node (type, major, minor, file
  mode, uid and gid taken from the host's node);
- ``linux.resources.devices``: an explicit allow rule per node (``c MAJ:MIN
  rwm``): runc does not derive one from ``linux.devices``, and its default
  rule denies every device;
- ``linux.resources.unified``: ``gpu.weight``, ``gpu.priority``, ``gpu.max``
  and ``gpu.memory.max`` (``dmem.max`` on a kernel whose GPU memory is dmem's)
  as *string* values (the runtime-spec requires strings).
  runc and crun write each value with one write(2) and the kernel takes one
  key per write, so each file carries one value; knobs that need several
  (memory limits on two GPUs) go through the createRuntime hook instead;
- with a hook (:class:`HookCommand`): ``pycgpu.io/gpu.*`` annotations
  (:mod:`pycgpu.runtime.annotations`) and a ``hooks.createRuntime`` entry that runs
  ``pycgpu oci hook``;
- optionally the 2017 proof of concept's ``linux.resources.gpu {"memory":
  BYTES, "prio": N}``, with this project's ``"quota": US, "period": US``
  beside them (gpu.max, as ``linux.resources.cpu`` has its quota and
  period), which only patched runtimes read (stock runc and crun ignore it).

Every other field, and the order of the keys, is kept; new keys are added at
the end of their object. The indentation and the final newline of the input
are kept too. Input the patch cannot work with (not JSON, duplicate keys, a
field of the wrong type, values that do not fit) raises :class:`ConfigError`
before anything is written, and :func:`atomic_write` replaces a file only
once the new content is safely on disk.
"""

from __future__ import annotations

import json
import os
import re
import stat
import tempfile
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import formats
from ..core.errors import Error, file_error
from ..core.knobs import InvalidRequest, Settings
from . import annotations as ann  # not `annotations`: the __future__ import binds that name

if TYPE_CHECKING:
    from ..core.devices import Device

CONFIG = "config.json"
DEVICE_ACCESS = "rwm"
CONTAINER_DRI = "/dev/dri"


class ConfigError(Error, ValueError):
    """A config.json (or a request) the patch refuses; nothing was written."""


# Each knob a patch sets, by its annotation (pycgpu.runtime.annotations), and the
# files of linux.resources.unified that can carry it: a memory limit is
# gpu.memory.max, or dmem.max on a kernel whose GPU memory is dmem's
# (pycgpu.core.memory). A patch keeps one value per knob: the files and the
# annotation that it does not set now are removed; unpatch removes them all.
KNOB_FILES: dict[str, tuple[str, ...]] = {
    ann.WEIGHT: ("gpu.weight",),
    ann.PRIORITY: ("gpu.priority",),
    ann.MEMORY_MAX: ("gpu.memory.max", "dmem.max"),
    ann.MAX: ("gpu.max",),
}
_KNOB_OF_FILE = {file: knob for knob, files in KNOB_FILES.items() for file in files}


def knobs_of(settings: Settings) -> list[str]:
    """The knobs (their annotations) @settings sets."""
    return sorted({_KNOB_OF_FILE[file] for file in settings.files()})


# ConfigError.reason: a file linux.resources.unified cannot hold (details: file);
# a legacy stanza with nothing to carry, or with several memory limits
SEVERAL_WRITES, EMPTY_STANZA, ONE_LIMIT = "several-writes", "empty-stanza", "one-limit"


# loading and writing --------------------------------------------------------------


@dataclass(frozen=True)
class Style:
    """How a JSON document was laid out: kept when it is written back."""

    indent: str | None = "\t"
    separators: tuple[str, str] | None = None
    newline: bool = False


RUNC_STYLE = Style("\t", None, False)


@dataclass
class Config:
    """A parsed config.json and the layout to write it back with."""

    doc: dict[str, Any]
    style: Style = RUNC_STYLE
    path: Path | None = None

    def dumps(self) -> str:
        text = json.dumps(self.doc, indent=self.style.indent, separators=self.style.separators,
                          ensure_ascii=False)
        try:
            text.encode()
        except UnicodeEncodeError:  # a lone surrogate (a "\ud800" escape): keep it escaped
            text = json.dumps(self.doc, indent=self.style.indent,
                              separators=self.style.separators)
        return text + ("\n" if self.style.newline else "")


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ConfigError(f"duplicate key {key!r} (a rewrite would drop one of them)")
        out[key] = value
    return out


def _style(text: str) -> Style:
    newline = text.endswith("\n")
    m = re.search(r"\n([ \t]+)\S", text.strip())
    if m:
        return Style(m.group(1), None, newline)
    compact = '": ' not in text and '", ' not in text
    return Style(None, (",", ":") if compact else None, newline)


def parse(data: str | bytes, source: str = CONFIG) -> Config:
    """A config from JSON @data (bytes: UTF-8); @source names it in errors
    (:class:`ConfigError`, one line, for anything that is not a JSON object
    pycgpu can rewrite: not UTF-8, not JSON, duplicate keys, too deep)."""
    from ..core.jsontext import NotJSON, loads

    try:
        doc = loads(data, source, _no_duplicates)
    except NotJSON as e:
        raise ConfigError(str(e)) from None
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None
    text = data if isinstance(data, str) else data.decode()
    if not isinstance(doc, dict):
        raise ConfigError(f"{source}: not a runtime-spec config (the top level is "
                          f"{_type(doc)}, not an object)")
    return Config(doc, _style(text))


def load(path: Path) -> Config:
    """Read and parse @path (:class:`pycgpu.core.errors.FileError`, an
    OSError, if it cannot be read: :class:`~pycgpu.core.errors.FileMissing`,
    a FileNotFoundError, if it does not exist)."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise file_error(e) from None
    config = parse(data, str(path))
    config.path = Path(path)
    return config


def generate() -> Config:
    """A fresh config: runc 1.1.5's ``runc spec`` default."""
    from .runc_spec import TEXT

    return Config(json.loads(TEXT), RUNC_STYLE)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write(path: Path, text: str) -> None:
    """Replace @path with @text: a temporary file in the same directory,
    written, fsync'ed and given the mode (and, where permitted, the owner)
    of the file it replaces, then renamed over it. A symlink is followed: its
    target is replaced. On any error the original stays as it was and the
    temporary file is removed; the error is a
    :class:`pycgpu.core.errors.FileError` (an OSError; FileMissing, a
    FileNotFoundError, when the directory does not exist)."""
    try:
        _atomic_write(path, text)
    except OSError as e:
        raise file_error(e) from None


def _atomic_write(path: Path, text: str) -> None:
    target = Path(os.path.realpath(path))
    try:
        st = os.stat(target)
        mode, owner = stat.S_IMODE(st.st_mode), (st.st_uid, st.st_gid)
    except FileNotFoundError:
        mode, owner = 0o666 & ~_umask(), None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as e:  # name the directory, not the temporary file
        raise OSError(e.errno, e.strerror, str(target.parent)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fchmod(f.fileno(), mode)
            if owner is not None and owner != (os.getuid(), os.getgid()):
                with suppress(PermissionError):
                    os.fchown(f.fileno(), *owner)
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    with suppress(OSError):
        dfd = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


# what a patch adds ---------------------------------------------------------------


@dataclass(frozen=True)
class DeviceNode:
    """A render node as the container gets it (``linux.devices``)."""

    path: str
    major: int
    minor: int
    file_mode: int = 0o666
    uid: int = 0
    gid: int = 0

    @classmethod
    def from_device(cls, dev: Device) -> DeviceNode:
        """The node of @dev with the mode and owner of the host's node
        (:class:`pycgpu.core.errors.FileError` if the host node cannot be
        stat'ed)."""
        try:
            st = os.stat(dev.render_node)
        except OSError as e:
            raise file_error(e) from None
        return cls(f"{CONTAINER_DRI}/{dev.name}", dev.devt.major, dev.devt.minor,
                   stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid)

    @property
    def devt(self) -> formats.DevT:
        return formats.DevT(self.major, self.minor)

    def oci(self) -> dict[str, Any]:
        return {"path": self.path, "type": "c", "major": self.major, "minor": self.minor,
                "fileMode": self.file_mode, "uid": self.uid, "gid": self.gid}

    def allow_rule(self) -> dict[str, Any]:
        return {"allow": True, "type": "c", "major": self.major, "minor": self.minor,
                "access": DEVICE_ACCESS}


HOOK_PROGRAM = "pycgpu-hook"  # pycgpu.runtime.hook:main
ALLOW = "--allow"  # after the hook's command: an annotation the entry's author allows

# A share ID the device plugin granted travels in a hook entry of its own,
# the edit of the share's CDI device (pycgpu.runtime.cdi): the runtime runs
# it at every container start, so it runs a trivial host program (a fork and
# an exec, not a Python start per share) with the ID as an argument that
# program ignores. The hook reads the IDs from the container's config
# (share_id_of), where a pod cannot write: whatever can name the share's CDI
# device (pycgpu.runtime.cdi) gets the entry, though.
SHARE_ID_PROGRAM = "/bin/true"
SHARE_ID_ARG = "pycgpu-share-id="
# a capped share (the device plugin's --capped): the part of each engine one
# share caps, ``pycgpu-share-cap=MAX/PERIOD`` in µs, after the ID
SHARE_CAP_ARG = "pycgpu-share-cap="


@dataclass(frozen=True)
class HookCommand:
    """The command of the createRuntime hook (``pycgpu-hook``, or
    ``pycgpu oci hook``)."""

    path: str
    args: tuple[str, ...]

    def oci(self) -> dict[str, Any]:
        return {"path": self.path, "args": list(self.args)}


def share_id_entry(share_id: str, cap: formats.Cap | None = None) -> dict[str, Any]:
    """The hook entry that carries @share_id: ``/bin/true
    pycgpu-share-id=ID`` (:data:`SHARE_ID_PROGRAM`), and for a capped share
    the part of each engine it caps, ``pycgpu-share-cap=MAX/PERIOD`` (µs);
    read back by :func:`share_id_of` and :func:`share_cap_of`."""
    args = [os.path.basename(SHARE_ID_PROGRAM), SHARE_ID_ARG + share_id]
    if cap is not None and cap.max_us is not None:
        args.append(f"{SHARE_CAP_ARG}{cap.max_us}/{cap.period_us}")
    return {"path": SHARE_ID_PROGRAM, "args": args}


def _share_args(entry: dict[str, Any]) -> list[str] | None:
    args = entry.get("args")
    if not isinstance(args, list) or len(args) not in (2, 3) or not all(
            isinstance(a, str) for a in args[1:]):
        return None
    if not args[1].startswith(SHARE_ID_ARG):
        return None
    if len(args) == 3 and not args[2].startswith(SHARE_CAP_ARG):
        return None
    return args


def share_id_of(entry: dict[str, Any]) -> str | None:
    """The share ID a hook entry carries (:func:`share_id_entry`): the text
    after ``pycgpu-share-id=`` of its first argument, whatever program it
    runs; None for any other entry. The one rule of what the hook takes for
    a granted share ID: an entry's ``args``, never its ``env`` nor an
    annotation."""
    args = _share_args(entry)
    return None if args is None else args[1][len(SHARE_ID_ARG):]


def share_cap_of(entry: dict[str, Any]) -> formats.Cap | None:
    """The cap a share's hook entry carries (:func:`share_id_entry`), None
    for an uncapped share or any other entry; :class:`ConfigError` for a
    cap that does not parse or that the kernel would refuse."""
    args = _share_args(entry)
    if args is None or len(args) == 2:
        return None
    text = args[2][len(SHARE_CAP_ARG):]
    mx, sep, period = text.partition("/")
    try:
        if not sep:
            raise formats.FormatError("not MAX/PERIOD")
        return formats.check_cap(formats.Cap(
            formats.parse_number(mx, "MAX", signed=False, digits=7),
            formats.parse_number(period, "PERIOD", signed=False, digits=7)))
    except formats.FormatError as e:
        raise ConfigError(f"hook entry {SHARE_CAP_ARG}{formats.shown(text)}: {e}") from None


def _command(args: list[Any] | tuple[Any, ...]) -> list[Any]:
    """@args without the trailing ``--allow KEY`` options."""
    end = len(args)
    while end >= 2 and args[end - 2] == ALLOW:
        end -= 2
    return list(args[:end])


def hook_command(executable: str | None = None, allow: Iterable[str] = ()) -> HookCommand:
    """The hook's command: @executable, either ``pycgpu-hook`` (the hook's
    own program) or the ``pycgpu`` script (``pycgpu oci hook``); by
    default the pycgpu-hook on PATH, else the pycgpu on PATH, else this
    Python running :mod:`pycgpu.runtime.hook`. With ``--allow KEY`` for each
    of @allow (annotation keys the hook accepts on top of the node's
    allow-list: :mod:`pycgpu.runtime.allowlist`). Hooks need absolute
    paths: the runtime does not search PATH."""
    import shutil
    import sys

    extra = tuple(a for k in sorted(set(allow)) for a in (ALLOW, k))
    if executable is None:
        executable = shutil.which(HOOK_PROGRAM) or shutil.which("pycgpu")
    if executable is not None:
        path = os.path.abspath(executable)
        name = os.path.basename(path)
        if name.startswith(HOOK_PROGRAM):
            return HookCommand(path, (name, *extra))
        return HookCommand(path, (name, "oci", "hook", *extra))
    return HookCommand(os.path.abspath(sys.executable),
                       ("python3", "-m", "pycgpu.runtime.hook", *extra))


@dataclass
class Patch:
    """What to change in a config; empty fields change nothing."""

    devices: list[DeviceNode] = field(default_factory=list)
    settings: Settings = field(default_factory=Settings)
    legacy_stanza: bool | None = None
    cgroups_path: str | None = None
    hook: HookCommand | None = None
    image_check: str | None = None
    args: list[str] | None = None
    terminal: bool | None = None

    def is_empty(self) -> bool:
        return (not self.devices and self.settings.is_empty() and self.legacy_stanza is None
                and self.cgroups_path is None and self.hook is None and self.image_check is None
                and self.args is None and self.terminal is None)


def unified(settings: Settings) -> dict[str, str]:
    """``linux.resources.unified`` for @settings: one string per file.
    Raises :class:`ConfigError` for a file that needs several writes."""
    by_file: dict[str, list[str]] = {}
    try:
        writes = settings.writes()
    except InvalidRequest as e:
        raise ConfigError(str(e)) from None
    for w in writes:
        by_file.setdefault(w.file, []).append(w.value)
    for name, values in by_file.items():
        if len(values) > 1:
            shown = "; ".join(repr(v) for v in values)
            raise ConfigError(
                f"{name} needs {len(values)} writes ({shown}) but linux.resources.unified holds "
                "one per file (runc and crun write it with one write(2); the kernel takes one "
                "key per write)").because(SEVERAL_WRITES, file=name)
    return {name: values[0] for name, values in by_file.items()}


def legacy_stanza(settings: Settings) -> dict[str, int]:
    """The 2017 proof of concept's ``linux.resources.gpu``: one memory limit
    (single GPU) and a priority, a number (``default`` has no form there);
    and one cap, ``quota`` and ``period`` in µs (gpu.max's MAX and PERIOD,
    as ``linux.resources.cpu`` has them; no quota: no cap)."""
    out: dict[str, int] = {}
    if len(settings.memory_max) > 1:
        raise ConfigError("the legacy linux.resources.gpu stanza has one memory limit (the "
                          "2017 proof of concept drove one GPU)").because(ONE_LIMIT)
    if len(settings.caps) > 1:
        raise ConfigError("the legacy linux.resources.gpu stanza has one cap (quota and "
                          "period, for one GPU)").because(ONE_LIMIT)
    for cap in settings.caps.values():
        if cap is None:
            raise ConfigError("the legacy linux.resources.gpu stanza has no form for a "
                              "device's cap of default (give a cap, or max)")
        if cap.max_us is not None:
            out["quota"] = cap.max_us
        out["period"] = cap.period_us
    for size in settings.memory_max.values():
        if size is not None:
            out["memory"] = size
    if settings.priority is formats.UNSET:
        raise ConfigError("the legacy linux.resources.gpu stanza's prio is a number: it cannot "
                          "carry the priority default (leave out --priority: a new container's "
                          "group has none of its own and inherits its parent's)")
    if settings.priority is not None:
        out["prio"] = settings.priority
    if not out:
        raise ConfigError("the legacy linux.resources.gpu stanza carries memory, prio, quota "
                          "and period, and none is given").because(EMPTY_STANZA)
    return out


# applying a patch ----------------------------------------------------------------


def _type(value: Any) -> str:
    """What @value is, with its article: "an array", "a number", "null"."""
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


def _object(parent: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    """parent[key] as an object, created empty if missing or null."""
    if parent.get(key) is None:
        parent[key] = {}
    value = parent[key]
    if not isinstance(value, dict):
        raise ConfigError(f"{where} is {_type(value)}, not an object")
    return value


def _set_all(table: dict[str, Any], values: dict[str, str], where: str) -> list[str]:
    """Sets each of @values in @table, the object at @where: what changed."""
    changes = []
    for key, value in values.items():
        if table.get(key) != value:
            table[key] = value
            changes.append(f"set {where}[{key!r}] = {value!r}")
    return changes


def _array(parent: dict[str, Any], key: str, where: str) -> list[Any]:
    """parent[key] as an array of objects, created empty if missing or null
    (Go encodes a nil slice as null)."""
    if parent.get(key) is None:
        parent[key] = []
    value = parent[key]
    if not isinstance(value, list):
        raise ConfigError(f"{where} is {_type(value)}, not an array")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise ConfigError(f"{where}[{i}] is {_type(item)}, not an object")
    return value


def _strings(obj: dict[str, Any], where: str) -> None:
    for key, value in obj.items():
        if not isinstance(value, str):
            raise ConfigError(f"{where}[{key!r}] is {json.dumps(value)}, not a string (the "
                              "runtime-spec requires string values)")


def check(doc: dict[str, Any]) -> None:
    """Refuse a document in which a field a patch may touch has the wrong
    type (checked on a copy: @doc is not changed)."""
    doc = json.loads(json.dumps(doc))
    linux = _object(doc, "linux", "linux")
    _array(linux, "devices", "linux.devices")
    if not isinstance(linux.get("cgroupsPath", ""), str):
        raise ConfigError(f"linux.cgroupsPath is {_type(linux['cgroupsPath'])}, not a string")
    resources = _object(linux, "resources", "linux.resources")
    _array(resources, "devices", "linux.resources.devices")
    _strings(_object(resources, "unified", "linux.resources.unified"),
             "linux.resources.unified")
    _object(resources, "gpu", "linux.resources.gpu")
    _strings(_object(doc, "annotations", "annotations"), "annotations")
    _array(_object(doc, "hooks", "hooks"), "createRuntime", "hooks.createRuntime")
    _object(doc, "process", "process")


def check_cgroups_path(path: str) -> str:
    if not path.strip() or "\n" in path or "\0" in path:
        raise ConfigError(f"cgroups path {path!r} is empty or has a newline")
    if ".." in re.split(r"[/:]", path):
        raise ConfigError(f"cgroups path {path!r} must not contain '..'")
    return path


def apply(doc: dict[str, Any], patch: Patch) -> list[str]:
    """Apply @patch to @doc in place; the changes made, for ``--dry-run``.
    Raises :class:`ConfigError` (with @doc untouched) when the document or
    the request does not fit."""
    # everything that can be refused is refused before the first change
    check(doc)
    unified_values = {} if patch.hook is not None else unified(patch.settings)
    if patch.hook is not None:
        try:
            patch.settings.writes()  # the ranges, as unified() checks them
        except InvalidRequest as e:
            raise ConfigError(str(e)) from None
    stanza = legacy_stanza(patch.settings) if patch.legacy_stanza else None
    if patch.cgroups_path is not None:
        check_cgroups_path(patch.cgroups_path)
    if patch.image_check is not None and patch.image_check not in ann.IMAGE_CHECK_MODES:
        raise ConfigError(f"image check {patch.image_check!r}: give "
                          + ", ".join(ann.IMAGE_CHECK_MODES))

    changes: list[str] = []
    if patch.args is not None:
        _object(doc, "process", "process")["args"] = list(patch.args)
        changes.append(f"set process.args = {json.dumps(patch.args)}")
    if patch.terminal is not None:
        _object(doc, "process", "process")["terminal"] = patch.terminal
        changes.append(f"set process.terminal = {json.dumps(patch.terminal)}")
    linux = _object(doc, "linux", "linux")
    if patch.cgroups_path is not None:
        linux["cgroupsPath"] = patch.cgroups_path
        changes.append(f"set linux.cgroupsPath = {patch.cgroups_path!r}")
    if patch.devices:
        changes += _add_devices(linux, patch.devices)
    if patch.hook is None:
        # a knob set in unified replaces the annotation an earlier --hook patch
        # left, and its value in the other file (dmem.max for gpu.memory.max)
        knobs = knobs_of(patch.settings)
        changes += _drop_annotations(doc, knobs)
        changes += _drop_unified(doc, [f for k in knobs for f in KNOB_FILES[k]
                                       if f not in unified_values])
    if unified_values or stanza is not None or patch.legacy_stanza is False:
        resources = _object(linux, "resources", "linux.resources")
        if unified_values:
            table = _object(resources, "unified", "linux.resources.unified")
            changes += _set_all(table, unified_values, "linux.resources.unified")
        if stanza is not None:
            resources["gpu"] = stanza
            changes.append(f"set linux.resources.gpu = {json.dumps(stanza)}")
        elif patch.legacy_stanza is False and resources.pop("gpu", None) is not None:
            changes.append("remove linux.resources.gpu")
    if patch.hook is not None:
        changes += _add_hook(doc, patch)
    return changes


def _add_devices(linux: dict[str, Any], nodes: list[DeviceNode]) -> list[str]:
    changes = []
    entries = _array(linux, "devices", "linux.devices")
    rules = _array(_object(linux, "resources", "linux.resources"), "devices",
                   "linux.resources.devices")
    for node in nodes:
        entry = node.oci()
        where = next((i for i, e in enumerate(entries) if e.get("path") == node.path), None)
        desc = (f"{node.path} (c {node.devt}, mode {node.file_mode:04o}, uid {node.uid}, "
                f"gid {node.gid})")
        if where is None:
            entries.append(entry)
            changes.append(f"add linux.devices {desc}")
        elif entries[where] != entry:
            entries[where] = entry
            changes.append(f"replace linux.devices {desc}")
        rule = node.allow_rule()
        if rule not in rules:
            rules.append(rule)
            changes.append(f"add linux.resources.devices allow c {node.devt} {DEVICE_ACCESS}")
    return changes


def is_pycgpu_hook(entry: dict[str, Any]) -> bool:
    """Whether a hook entry runs pycgpu's hook, whatever its path:
    ``pycgpu-hook``, ``pycgpu oci hook`` (the script, or ``python -m
    pycgpu``) or ``python -m pycgpu.runtime.hook``; ``--allow KEY``
    options after it."""
    args = entry.get("args")
    if not isinstance(args, list):
        return False
    head = _command(args)
    path = entry.get("path")
    base = os.path.basename(path) if isinstance(path, str) else ""
    if head[-2:] == ["oci", "hook"]:
        return "pycgpu" in args or base.startswith("pycgpu")
    if head[-2:] == ["-m", "pycgpu.runtime.hook"]:
        return True
    return len(head) == 1 and (base.startswith(HOOK_PROGRAM)
                               or (isinstance(head[0], str) and head[0].startswith(HOOK_PROGRAM)))


def _pop_all(table: Any, keys: list[str], where: str, why: str = "") -> list[str]:
    """Removes each of @keys from @table, the object at @where (nothing if
    it is no object): what changed."""
    if not isinstance(table, dict):
        return []
    return [f"remove {where}[{key!r}]{why}" for key in keys if table.pop(key, None) is not None]


def _drop_annotations(doc: dict[str, Any], keys: list[str]) -> list[str]:
    return _pop_all(doc.get("annotations"), keys, "annotations")


def _drop_unified(doc: dict[str, Any], files: list[str], why: str = "") -> list[str]:
    linux = doc.get("linux")
    resources = linux.get("resources") if isinstance(linux, dict) else None
    table = resources.get("unified") if isinstance(resources, dict) else None
    return _pop_all(table, files, "linux.resources.unified", why)


def _add_hook(doc: dict[str, Any], patch: Patch) -> list[str]:
    """The knobs as annotations (replacing the same knobs in unified: one
    value per knob) and exactly one createRuntime entry for the hook."""
    assert patch.hook is not None
    changes = _drop_unified(doc, [f for k in knobs_of(patch.settings) for f in KNOB_FILES[k]],
                            " (now in annotations)")
    values = ann.format_settings(patch.settings)
    if patch.image_check is not None:
        values[ann.IMAGE_CHECK] = patch.image_check
    if values:
        changes += _set_all(_object(doc, "annotations", "annotations"), values, "annotations")
    hooks = _array(_object(doc, "hooks", "hooks"), "createRuntime", "hooks.createRuntime")
    entry = patch.hook.oci()
    # the knobs off the default allow-list that the bundle carries, from this
    # patch or an earlier one (knobs not given stay): its entry allows them
    table = doc.get("annotations")
    carried = [k for k in (ann.PRIORITY, ann.MAX) if isinstance(table, dict) and k in table]
    args = list(entry["args"])
    given = {args[i + 1] for i in range(len(args) - 1) if args[i] == ALLOW}
    keys = sorted(given | set(carried))
    entry["args"] = _command(args) + [a for k in keys for a in (ALLOW, k)]
    # the entry that applies the knobs; those that carry share IDs stay
    ours = [i for i, h in enumerate(hooks) if is_pycgpu_hook(h)]
    if [hooks[i] for i in ours] == [entry]:
        return changes
    for i in reversed(ours):
        old = hooks.pop(i)
        changes.append(f"remove hooks.createRuntime {' '.join(map(str, old['args']))} "
                       f"({old.get('path')})")
    hooks.insert(ours[0] if ours else len(hooks), entry)
    changes.append(f"add hooks.createRuntime {' '.join(entry['args'])} ({entry['path']})")
    return changes


_RENDER_NODE = re.compile(re.escape(CONTAINER_DRI) + r"/renderD\d+")


def unpatch(doc: dict[str, Any], keep_devices: bool = False) -> list[str]:
    """Remove what patches added to @doc, in place: the knobs' files in
    ``linux.resources.unified`` (:data:`KNOB_FILES`: gpu.weight,
    gpu.priority, gpu.max, gpu.memory.max, dmem.max), the ``pycgpu.io/`` annotations, the hook
    entries that run ``pycgpu oci hook`` or carry a share ID
    (:func:`share_id_entry`), ``linux.resources.gpu`` and, unless
    @keep_devices, the render nodes of ``linux.devices`` with their allow
    rules. ``linux.cgroupsPath`` and ``process`` stay. Returns the changes;
    raises :class:`ConfigError` (with @doc untouched) for a field of the
    wrong type."""
    check(doc)
    changes = _drop_unified(doc, [f for files in KNOB_FILES.values() for f in files])
    table = doc.get("annotations")
    if isinstance(table, dict):
        changes += _drop_annotations(
            doc, [k for k in table if k.startswith(ann.PREFIX)])
    hooks_obj = doc.get("hooks")
    hooks = hooks_obj.get("createRuntime") if isinstance(hooks_obj, dict) else None
    if isinstance(hooks, list):
        for i in reversed([i for i, h in enumerate(hooks)
                           if is_pycgpu_hook(h) or share_id_of(h) is not None]):
            old = hooks.pop(i)
            changes.append(f"remove hooks.createRuntime {' '.join(map(str, old['args']))} "
                           f"({old.get('path')})")
    linux = doc.get("linux")
    resources = linux.get("resources") if isinstance(linux, dict) else None
    if isinstance(resources, dict) and resources.pop("gpu", None) is not None:
        changes.append("remove linux.resources.gpu")
    if keep_devices or not isinstance(linux, dict):
        return changes
    entries = linux.get("devices")
    removed = []
    if isinstance(entries, list):
        for e in [e for e in entries if isinstance(e.get("path"), str)
                  and _RENDER_NODE.fullmatch(e["path"]) and e.get("type") == "c"]:
            entries.remove(e)
            removed.append((e.get("major"), e.get("minor")))
            changes.append(f"remove linux.devices {e['path']}")
    rules = resources.get("devices") if isinstance(resources, dict) else None
    if isinstance(rules, list):
        for major, minor in removed:
            rule = {"allow": True, "type": "c", "major": major, "minor": minor,
                    "access": DEVICE_ACCESS}
            if rule in rules:
                rules.remove(rule)
                changes.append(f"remove linux.resources.devices allow c {major}:{minor} "
                               f"{DEVICE_ACCESS}")
    return changes
