"""One typed model of a cgroup's ``gpu.*`` files, and the one function that
reads them.

:data:`FILES` says, once, what each file of a group is: its name, its field
in :class:`GroupFiles`, its parser (:mod:`pycgpu.core.formats`), whether
people write it (a setting: read back to undo a write) or the kernel counts
it, and where and how it appears in the ``pycgpu.show/v1`` document.
:func:`read_group` reads a group's files into a frozen :class:`GroupFiles`.
The rest are projections of it:

- ``pycgpu show`` (:mod:`pycgpu.core.snapshot`): :func:`show_item`;
- the show/v1 JSON schema (:mod:`pycgpu.core.schemas`): :func:`show_schema`;
- the rollback of a plan (:class:`pycgpu.core.knobs.Write`): the value to
  write back, :meth:`KernelFile.undo`;
- the kernel source of ``pycgpu stat``/``top`` and the exporter
  (:mod:`pycgpu.monitoring.kernel`): its files, in its order
  (:data:`USAGE_FILES`), read by :func:`read_texts` and parsed by the
  parsers here.

A new kernel file is one :class:`KernelFile` in :data:`FILES` (and a field
of :class:`GroupFiles`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from . import formats
from .cgroup import read_interface
from .formats import DevT, Weights
from .memory import Interface

SETTING, COUNTER = "setting", "counter"
# show/v1's key for a gpu.priority that reads ``default`` (formats.UNSET): the
# group has no priority of its own and inherits its parent's effective one
INHERITED = "priority_inherited"

# JSON Schema pieces of show/v1 (draft 2020-12)
_DEVT = r"^[0-9]+:[0-9]+$"
_INT: dict[str, Any] = {"type": "integer"}


def _per_device(value: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "propertyNames": {"pattern": _DEVT},
            "additionalProperties": value}


_COUNTER_KEYS: dict[str, Any] = {"type": "object", "additionalProperties": _INT}
_COUNTERS = _per_device(_COUNTER_KEYS)
# a memory region: a device (MAJ:MIN), one of its regions (MAJ:MIN:REGION), or
# dmem's name of a region no render node owns (pycgpu.core.memory)
_REGION = r"^([0-9]+:[0-9]+(:[A-Za-z][A-Za-z0-9_-]*)?|[^ ]+/[^ ]+)$"


def _per_region(value: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "propertyNames": {"pattern": _REGION},
            "additionalProperties": value}


def _keyed(d: Mapping[DevT, Any]) -> dict[str, Any]:
    return {str(k): v for k, v in d.items()}


def _weight_json(w: Weights) -> dict[str, Any]:
    return {"default": w.default, "devices": _keyed(w.devices)}


def _cap_json(cap: formats.Cap) -> dict[str, Any]:
    return {"max_us": cap.max_us, "period_us": cap.period_us}


def _caps_json(caps: formats.Caps) -> dict[str, Any]:
    return {"default": _cap_json(caps.default),
            "devices": {str(k): _cap_json(v) for k, v in caps.devices.items()}}


# a gpu.max line: max_us null is no cap
_CAP: dict[str, Any] = {"type": "object", "required": ["max_us", "period_us"],
                        "properties": {"max_us": {"type": ["integer", "null"]},
                                       "period_us": _INT}}


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class KernelFile:
    """One gpu.* interface file of a group."""

    name: str  # gpu.weight
    attr: str  # its field in GroupFiles
    parse: Callable[[str], Any]  # its text -> its value (FormatError)
    kind: str  # SETTING (written by people) or COUNTER (kept by the kernel)
    show_key: tuple[str, ...]  # where show/v1 has it: ("weight",), ("memory", "max")
    to_json: Callable[[Any], Any]  # its value as show/v1 has it
    schema: dict[str, Any]  # the JSON Schema of that

    def undo(self, files: GroupFiles, key: DevT | str | None) -> str:
        """What to write to this file to restore the value of @key (a
        device, or a memory region in the file's words; None: the file's
        only value, or gpu.weight's default) that @files holds: the
        rollback of a write. FormatError when the file did not parse, and
        for a file nobody writes."""
        value = files.value(self.name)
        if self.name == "gpu.weight":
            dev = DevT.parse(key) if isinstance(key, str) else key
            if dev is None:
                return formats.format_weight_write(value.default)
            return formats.format_weight_write(value.devices.get(dev), dev)
        if self.name == "gpu.max":
            dev = DevT.parse(key) if isinstance(key, str) else key
            if dev is None:
                return formats.format_max_write(value.default)
            return formats.format_max_write(value.devices.get(dev), dev)
        if self.name == "gpu.memory.max" and key is not None:
            dev = DevT.parse(key) if isinstance(key, str) else key
            return formats.format_flat_keyed_write(dev, value.get(dev))
        if self.name in DMEM_SETTINGS and key is not None:
            return formats.format_region_keyed_write(str(key), value.get(str(key)))
        if self.name == "gpu.priority":
            return formats.format_priority(value)
        raise formats.FormatError(f"{self.name} is not a setting pycgpu writes back")


FILES: tuple[KernelFile, ...] = (
    KernelFile("gpu.weight", "weight", formats.parse_weight, SETTING, ("weight",),
               _weight_json, {"type": "object", "required": ["default", "devices"],
                              "properties": {"default": _INT, "devices": _per_device(_INT)}}),
    # unset (``default``): no "priority", "priority_inherited": true (show_item)
    KernelFile("gpu.priority", "priority", partial(formats.parse_priority, what="gpu.priority"),
               SETTING, ("priority",), _same, _INT),
    KernelFile("gpu.priority.effective", "priority_effective",
               partial(formats.parse_number, what="gpu.priority.effective"),
               COUNTER, ("priority_effective",), _same, _INT),
    # added in v1: a kernel with gpu.max (the hard cap on GPU time)
    KernelFile("gpu.max", "caps", formats.parse_max, SETTING, ("max",), _caps_json,
               {"type": "object", "required": ["default", "devices"],
                "properties": {"default": _CAP, "devices": _per_device(_CAP)}}),
    KernelFile("gpu.memory.max", "memory_max", formats.parse_flat_keyed, SETTING,
               ("memory", "max"), _keyed, _per_device({"type": ["integer", "null"]})),
    KernelFile("gpu.memory.current", "memory_current", formats.parse_flat_keyed, COUNTER,
               ("memory", "current"), _keyed, _per_device(_INT)),
    KernelFile("gpu.memory.peak", "memory_peak", formats.parse_flat_keyed, COUNTER,
               ("memory", "peak"), _keyed, _per_device(_INT)),
    KernelFile("gpu.memory.events", "memory_events", formats.parse_nested_keyed, COUNTER,
               ("memory", "events"), _keyed, _COUNTERS),
    KernelFile("gpu.memory.events.local", "memory_events_local", formats.parse_nested_keyed,
               COUNTER, ("memory", "events_local"), _keyed, _COUNTERS),
    KernelFile("gpu.stat", "stat", formats.parse_nested_keyed, COUNTER, ("stat",), _keyed,
               _COUNTERS),
    # the dmem controller's (pycgpu.core.memory), keyed by region; show/v1 has
    # them in "memory" as gpu.memory.*'s, by pycgpu's region keys
    KernelFile("dmem.max", "dmem_max", formats.parse_region_keyed, SETTING,
               ("memory", "max"), _same, _per_region({"type": ["integer", "null"]})),
    KernelFile("dmem.min", "dmem_min", formats.parse_region_keyed, SETTING,
               ("memory", "min"), _same, _per_region(_INT)),
    KernelFile("dmem.low", "dmem_low", formats.parse_region_keyed, SETTING,
               ("memory", "low"), _same, _per_region(_INT)),
    KernelFile("dmem.current", "dmem_current", formats.parse_region_keyed, COUNTER,
               ("memory", "current"), _same, _per_region(_INT)),
    KernelFile("dmem.peak", "dmem_peak", formats.parse_region_keyed, COUNTER,
               ("memory", "peak"), _same, _per_region(_INT)),
    KernelFile("dmem.events", "dmem_events", formats.parse_region_nested_keyed, COUNTER,
               ("memory", "events"), _same, _per_region(_COUNTER_KEYS)),
    KernelFile("dmem.events.local", "dmem_events_local", formats.parse_region_nested_keyed,
               COUNTER, ("memory", "events_local"), _same, _per_region(_COUNTER_KEYS)),
)
DMEM_SETTINGS = frozenset({"dmem.max", "dmem.min", "dmem.low"})
FILE: dict[str, KernelFile] = {f.name: f for f in FILES}
# what the kernel source of stat, top and the exporter reads, in its order:
# gpu.stat first (a group without it has no gpu-enabled descendants)
USAGE_FILES: tuple[str, ...] = ("gpu.stat", "gpu.memory.current", "gpu.memory.max",
                                "gpu.memory.peak", "gpu.memory.events", "gpu.weight",
                                "gpu.priority", "gpu.priority.effective", "gpu.max")


@dataclass(frozen=True)
class GroupFiles:
    """The gpu.* files of one group, parsed. A field is None when the group
    has no such file (this kernel lacks it, or the controller does not
    show it there) or when it did not parse: :attr:`errors` then names the
    file and why, in the order of :data:`FILES`."""

    path: str  # from the cgroup root, "/a/b"
    present: frozenset[str] = frozenset()  # the files the group has
    weight: Weights | None = None
    priority: formats.Priority | None = None
    priority_effective: int | None = None
    caps: formats.Caps | None = None
    memory_max: Mapping[DevT, int | None] | None = None
    memory_current: Mapping[DevT, int | None] | None = None
    memory_peak: Mapping[DevT, int | None] | None = None
    memory_events: Mapping[DevT, Mapping[str, int]] | None = None
    memory_events_local: Mapping[DevT, Mapping[str, int]] | None = None
    stat: Mapping[DevT, Mapping[str, int]] | None = None
    dmem_max: Mapping[str, int | None] | None = None
    dmem_min: Mapping[str, int | None] | None = None
    dmem_low: Mapping[str, int | None] | None = None
    dmem_current: Mapping[str, int | None] | None = None
    dmem_peak: Mapping[str, int | None] | None = None
    dmem_events: Mapping[str, Mapping[str, int]] | None = None
    dmem_events_local: Mapping[str, Mapping[str, int]] | None = None
    errors: tuple[tuple[str, formats.FormatError], ...] = field(default=(), compare=False)

    @property
    def gpu_enabled(self) -> bool:
        """Whether the gpu controller is enabled for the group (it has the
        knobs; the root has only counters)."""
        return "gpu.weight" in self.present

    def value(self, name: str) -> Any:
        """The parsed value of file @name; FormatError when the group lacks
        it or it did not parse."""
        for failed, error in self.errors:
            if failed == name:
                raise error
        value = getattr(self, FILE[name].attr)
        if value is None:
            raise formats.FormatError(f"{self.path}: no {name}")
        return value


def read_texts(where: str | int, names: Collection[str]) -> dict[str, str | None]:
    """The texts of files @names of the group directory @where (a path, or
    a directory file descriptor), None for a file that does not exist;
    :class:`pycgpu.core.cgroup.CgroupError` when one cannot be read."""
    if isinstance(where, int):
        return {name: read_interface(name, where) for name in names}
    return {name: read_interface(os.path.join(where, name)) for name in names}


def parse_texts(path: str, texts: Mapping[str, str | None]) -> GroupFiles:
    """A group's files from their texts (:func:`read_texts`)."""
    values: dict[str, Any] = {}
    errors: list[tuple[str, formats.FormatError]] = []
    present = []
    for f in FILES:
        text = texts.get(f.name)
        if text is None:
            continue
        present.append(f.name)
        try:
            values[f.attr] = f.parse(text)
        except formats.FormatError as e:
            errors.append((f.name, e))
    return GroupFiles(path, frozenset(present), errors=tuple(errors), **values)


def read_group(where: str | int, path: str, present: Collection[str] | None = None,
               names: Collection[str] | None = None) -> GroupFiles:
    """The one reader of a group's gpu.* files: those of the directory
    @where (a path or a directory file descriptor) of the group @path
    ("/a/b"); only @present when the caller listed the directory already,
    only @names when given (default: every file of :data:`FILES`).
    A file that does not parse is in :attr:`GroupFiles.errors`; one that
    cannot be read raises :class:`pycgpu.core.cgroup.CgroupError`."""
    wanted = [f.name for f in FILES if (names is None or f.name in names)
              and (present is None or f.name in present)]
    return parse_texts(path, read_texts(where, wanted))


# projections ------------------------------------------------------------------------


def memory(files: GroupFiles, what: str, regions: Interface | None = None) -> dict[str, Any] | None:
    """The group's memory values @what (``max``, ``min``, ``low``, ``current``,
    ``peak``, ``events``, ``events_local``) by region key
    (:mod:`pycgpu.core.memory`; dmem's names of regions @regions does not
    know), from gpu.memory.* or dmem.*, whichever the kernel has; None when
    the group has no such file. FormatError when it did not parse."""
    for prefix in ("gpu.memory.", "dmem."):
        for f in FILES:
            if f.name.startswith(prefix) and f.show_key == ("memory", what) \
                    and f.name in files.present:
                value = files.value(f.name)
                if prefix == "dmem." and regions is not None:
                    return regions.keyed(value)
                return {str(k): v for k, v in value.items()}
    return None


def show_item(files: GroupFiles, regions: Interface | None = None) -> dict[str, Any]:
    """The ``cgroups`` item of ``pycgpu.show/v1``: numbers as numbers,
    ``max`` as null, a gpu.priority of ``default`` as ``priority_inherited``
    true (and no ``priority``), devices keyed ``MAJ:MIN``, memory by region key
    (:mod:`pycgpu.core.memory`; dmem's names of regions @regions does not
    know), a file the group lacks left out. FormatError for the first file
    that did not parse."""
    if files.errors:
        raise files.errors[0][1]
    item: dict[str, Any] = {"path": files.path, "gpu_enabled": files.gpu_enabled}
    memory: dict[str, Any] = {}
    # a kernel has one memory interface; were there both, gpu.memory.* is the gpu controller's
    gpu_memory = any(name.startswith("gpu.memory.") for name in files.present)
    for f in FILES:
        value = getattr(files, f.attr)
        if value is None:
            continue
        if f.name.startswith("dmem."):
            if gpu_memory:
                continue
            if regions is not None:
                value = regions.keyed(value)
        if value is formats.UNSET:  # gpu.priority's default: show/v1's priority is a number
            item[INHERITED] = True
        elif len(f.show_key) == 1:
            item[f.show_key[0]] = f.to_json(value)
        else:
            memory[f.show_key[1]] = f.to_json(value)
    if memory:
        item["memory"] = memory
    return item


def show_schema() -> dict[str, Any]:
    """The JSON Schema of a show/v1 ``cgroups`` item, from :data:`FILES`."""
    props: dict[str, Any] = {"path": {"type": "string", "pattern": "^/"},
                             "gpu_enabled": {"type": "boolean"}}
    memory: dict[str, Any] = {}
    for f in FILES:
        if len(f.show_key) == 1:
            props[f.show_key[0]] = f.schema
            if f.show_key[0] == "priority":
                # gpu.priority reads default: no "priority" (added in v1)
                props[INHERITED] = {"type": "boolean"}
            if f.show_key[0] == "priority_effective":
                # the ancestor whose gpu.priority caps the effective one, or for a
                # group without one, that the effective one comes from (added in v1)
                props["priority_capped_by"] = {"type": "string", "pattern": "^/"}
        else:
            memory[f.show_key[1]] = f.schema
    props["memory"] = {"type": "object", "properties": memory}
    stat = props.pop("stat")
    props["stat"] = stat
    return {"type": "object", "required": ["path", "gpu_enabled"], "properties": props}
