"""The versioned JSON documents the CLI prints with ``--json``.

Every document carries ``"schema": "pycgpu.<command>/v<N>"``. Within a
version fields are only ever added; a removed or retyped field bumps the
version. Conventions: numbers are JSON numbers (bytes, microseconds, weights,
priorities), a limit of ``max`` is ``null``, devices are keyed by the render
node's ``"MAJ:MIN"``, and a file the kernel does not have is an absent key. A
group whose gpu.priority reads ``default`` (none of its own: it inherits its
parent's effective priority) has ``"priority_inherited": true`` and no
``priority`` (show/v1 and stat/v1, added in v1: ``priority`` stays a number).
The JSON Schema (draft 2020-12) of each document is below; the host tests
validate the CLI's output against them, and ``pycgpu schema NAME`` prints
them (they ship inside the package).

What v1 promises: the fields listed stay, with their types and meaning;
new optional fields may appear in any object; enumerations documented as
open lists (finding ids, container runtimes, QoS classes, sources) may gain
values, so a consumer must accept unknown ones. A kernel counter has one
name in every document: ``usage_usec`` and ``wait_usec`` of gpu.stat (stat/v1
also keeps ``gpu_time_usec``, the same number, for v1 consumers).
"""

from __future__ import annotations

from typing import Any

from .errors import Error
from .model import show_schema

SHOW_V1 = "pycgpu.show/v1"
DEVICES_V1 = "pycgpu.devices/v1"
CHECK_V1 = "pycgpu.check/v1"

_DEVT = r"^[0-9]+:[0-9]+$"
_INT = {"type": "integer"}
_STR_OR_NULL = {"type": ["string", "null"]}


def _per_device(value: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "propertyNames": {"pattern": _DEVT},
            "additionalProperties": value}


# the kernel's memory interface and its regions (pycgpu.core.memory): the
# "memory" of show/v1 and of devices/v1
_REGIONS: dict[str, Any] = {
    "type": "object",
    "required": ["interface", "regions"],
    "properties": {
        "interface": {"enum": ["gpu.memory", "dmem"]},
        "regions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["key", "kernel_key", "devt", "region", "capacity"],
                "properties": {
                    "key": {"type": "string"},
                    "kernel_key": {"type": "string"},
                    "devt": {"type": ["string", "null"], "pattern": _DEVT},
                    "region": _STR_OR_NULL,
                    "capacity": {"type": ["integer", "null"]},
                },
            },
        },
    },
}


SHOW_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": SHOW_V1,
    "type": "object",
    "required": ["schema", "cgroup_root", "cgroups"],
    "properties": {
        "schema": {"const": SHOW_V1},
        "cgroup_root": {"type": "string"},
        "cgroups": {
            "type": "array",
            # one item per group: the projection of pycgpu.core.model's files
            "items": show_schema(),
        },
        # the kernel's memory interface and its regions (pycgpu.core.memory), added in v1
        "memory": _REGIONS,
    },
}

DEVICES_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": DEVICES_V1,
    "type": "object",
    "required": ["schema", "devices"],
    "properties": {
        "schema": {"const": DEVICES_V1},
        "devices": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["render_node", "card_node", "devt", "major", "minor", "driver",
                             "driver_version", "pci_address", "vendor_id", "device_id"],
                "properties": {
                    "render_node": {"type": "string"},
                    "card_node": _STR_OR_NULL,
                    "devt": {"type": "string", "pattern": _DEVT},
                    "major": _INT,
                    "minor": _INT,
                    "driver": _STR_OR_NULL,
                    "driver_version": _STR_OR_NULL,
                    "pci_address": _STR_OR_NULL,
                    "vendor_id": _STR_OR_NULL,
                    "device_id": _STR_OR_NULL,
                },
            },
        },
        # the kernel's memory interface and its regions, as show/v1 has them (added in v1)
        "memory": _REGIONS,
    },
}

CHECK_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": CHECK_V1,
    "type": "object",
    "required": ["schema", "ok", "cgroup_root", "findings"],
    "properties": {
        "schema": {"const": CHECK_V1},
        "ok": {"type": "boolean"},
        "cgroup_root": _STR_OR_NULL,
        "findings": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["id", "status", "message", "fix"],
                "properties": {
                    # open list: cgroup2, gpu, path, systemd, memory, kfd, sched today;
                    # more may come
                    "id": {"type": "string"},
                    "status": {"enum": ["ok", "problem", "info"]},
                    "message": {"type": "string"},
                    "fix": _STR_OR_NULL,
                },
            },
        },
    },
}

SCHEMAS = {SHOW_V1: SHOW_SCHEMA, DEVICES_V1: DEVICES_SCHEMA, CHECK_V1: CHECK_SCHEMA}


# pycgpu stat --json ---------------------------------------------------------------

STAT_V1 = "pycgpu.stat/v1"

_PCT = {"type": ["number", "null"], "minimum": 0}
_NONNEG = {"type": "integer", "minimum": 0}

# a group's memory on a device (the device's only region), or in one region
_MEMORY: dict[str, Any] = {
    "type": "object",
    "properties": {"current": _NONNEG,
                   "max": {"type": ["integer", "null"]},
                   "peak": _NONNEG,
                   "limit_hits": _NONNEG},
}
# a device with several dmem regions: region name -> its memory (added in v1)
_MEMORY_REGIONS: dict[str, Any] = {"type": "object", "additionalProperties": _MEMORY}

STAT_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": STAT_V1,
    "type": "object",
    "required": ["schema", "source", "cgroup_root", "time", "interval_s", "devices", "groups",
                 "errors"],
    "properties": {
        "schema": {"const": STAT_V1},
        "source": {"type": "string"},  # kernel or fdinfo (open list)
        "cgroup_root": _STR_OR_NULL,
        "time": {"type": "number"},  # Unix time when the last read began
        "interval_s": {"type": ["number", "null"]},  # null: one read, no percentages
        "devices": _per_device({
            "type": "object", "required": ["node"], "properties": {
                "node": _STR_OR_NULL,
                # the device's totals from the root cgroup's files (kernel source, added in v1)
                "total": {"type": "object", "properties": {
                    "usage_usec": _NONNEG, "wait_usec": _NONNEG, "memory_current": _NONNEG,
                    "memory_regions": _MEMORY_REGIONS}},
                # on dmem: the size of each of the device's regions (added in v1)
                "memory_capacity": {"type": "object", "additionalProperties": _NONNEG},
            }}),
        "groups": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["path", "leaf", "container", "devices"],
                "properties": {
                    "path": {"type": "string", "pattern": "^/"},
                    "leaf": {"type": "boolean"},
                    # when the group's counters were read (Unix time, added in v1)
                    "time": {"type": "number"},
                    "container": {
                        "type": ["object", "null"],
                        "required": ["runtime", "id", "name", "pod", "pod_uid", "namespace",
                                     "qos"],
                        "properties": {
                            # open list: docker, containerd, cri-o, podman, cri, lxc,
                            # systemd today
                            "runtime": {"type": "string"},
                            "id": {"type": "string"},
                            "name": _STR_OR_NULL,
                            "pod": _STR_OR_NULL,
                            "pod_uid": _STR_OR_NULL,
                            "namespace": _STR_OR_NULL,
                            # guaranteed, burstable, besteffort (open list)
                            "qos": _STR_OR_NULL,
                        },
                    },
                    "priority": _INT,
                    # gpu.priority reads default: no "priority" (added in v1)
                    "priority_inherited": {"type": "boolean"},
                    "priority_effective": _INT,
                    "pids": {"type": "array", "items": _INT},
                    "devices": _per_device({
                        "type": "object",
                        "properties": {
                            "usage_usec": _NONNEG,  # gpu.stat's name, as in show/v1
                            "gpu_time_usec": _NONNEG,  # the same value (its v1 name)
                            "wait_usec": _NONNEG,
                            "gpu_percent": _PCT,
                            "wait_percent": _PCT,
                            # the interval the percentages cover, between the
                            # group's (its clients') own reads (added in v1)
                            "interval_s": {"type": ["number", "null"]},
                            # gpu.max on the device and gpu.stat's throttling
                            # counters, where the kernel has them (added in v1)
                            "cap": {"type": "object", "required": ["max_us", "period_us"],
                                    "properties": {"max_us": {"type": ["integer", "null"]},
                                                   "period_us": _NONNEG}},
                            "nr_periods": _NONNEG,
                            "nr_throttled": _NONNEG,
                            "throttled_usec": _NONNEG,
                            "throttled_percent": _PCT,
                            "engines": {
                                "type": "object",
                                "additionalProperties": {
                                    "type": "object",
                                    "required": ["busy_ns", "capacity"],
                                    "properties": {"busy_ns": _NONNEG,
                                                   "capacity": {"type": "integer",
                                                                "minimum": 1},
                                                   "percent": _PCT},
                                },
                            },
                            "memory": _MEMORY,
                            "memory_regions": _MEMORY_REGIONS,
                            "regions": {
                                "type": "object",
                                "additionalProperties": {"type": "object",
                                                         "additionalProperties": _NONNEG},
                            },
                            "weight": _INT,
                            "clients": _NONNEG,
                            "driver": {"type": "string"},
                        },
                    }),
                },
            },
        },
        "errors": {"type": "array", "items": {"type": "string"}},
    },
}

SCHEMAS[STAT_V1] = STAT_SCHEMA


class UnknownSchema(Error, KeyError):
    """No schema by that name; the message lists the known ones."""

    def __str__(self) -> str:  # KeyError's own quotes the message
        return str(self.args[0])


def get(name: str) -> dict[str, Any]:
    """The schema of @name: ``pycgpu.stat/v1``, ``stat/v1`` or ``stat``
    (the latest version); :class:`UnknownSchema` (a KeyError) if there is none."""
    key = name if name.startswith("pycgpu.") else f"pycgpu.{name}"
    if "/" not in key:
        versions = sorted(k for k in SCHEMAS if k.startswith(key + "/"))
        key = versions[-1] if versions else key
    if key not in SCHEMAS:
        raise UnknownSchema(f"no schema {name!r}; known: " + ", ".join(sorted(SCHEMAS)))
    return SCHEMAS[key]
