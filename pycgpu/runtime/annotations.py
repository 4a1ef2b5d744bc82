"""The ``pycgpu.io/*`` container annotations: GPU knobs and the image check
for containers whose runtime path has no ``linux.resources.unified`` (CDI
with Docker, containerd, CRI-O; Kubernetes pods).

The annotations are read by the createRuntime hook (:mod:`pycgpu.runtime.hook`) and
written by ``pycgpu oci patch --hook``. Their values use the syntax of the
CLI options, comma-separated when there are several:

- ``pycgpu.io/gpu.weight``: ``300``, ``renderD128=50``, ``300,226:129=default``
- ``pycgpu.io/gpu.priority``: ``-10``, or ``default`` (none of its own: the
  container's group inherits its parent's, its pod's, effective priority,
  as a new group does)
- ``pycgpu.io/gpu.memory.max``: ``renderD128=2G,renderD129=max``
- ``pycgpu.io/gpu.max``: ``30%``, ``renderD128=30ms/100ms``,
  ``20%,226:129=default`` (the hard cap on GPU time)
- ``pycgpu.io/image-check``: ``enforce``, ``warn`` or ``off``

Only these keys are accepted under the ``pycgpu.io/`` prefix: any other
``pycgpu.io/`` key makes the whole request invalid (fail closed), but for
``pycgpu.io/share-ids``, which the device plugin once set and a pod can
forge: it is ignored (:attr:`Request.ignored`). The share IDs a container was
granted come from the hook entries of its config instead
(:func:`pycgpu.runtime.oci.share_id_of`). CRI-O's
CVE-2023-6476 came from an annotation that passed arbitrary cgroup files
through; here every value is parsed by the parser of the CLI's options
(:func:`pycgpu.core.knobs.parse_settings`) and written back in the kernel's
format, to the four knob files only.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from ..core import formats
from ..core.errors import Error
from ..core.knobs import DeviceResolver, InvalidRequest, Names, Settings, parse_settings
from ..core.memory import Interface

PREFIX = "pycgpu.io/"
WEIGHT = PREFIX + "gpu.weight"
PRIORITY = PREFIX + "gpu.priority"
MEMORY_MAX = PREFIX + "gpu.memory.max"
MAX = PREFIX + "gpu.max"
IMAGE_CHECK = PREFIX + "image-check"
# share IDs claimed in an annotation: ignored, whoever wrote it (a pod can,
# where the runtime copies pod annotations); the device plugin's grants reach
# the hook in the container's hook entries
SHARE_IDS = PREFIX + "share-ids"
IGNORED = (SHARE_IDS,)
KNOBS = (WEIGHT, PRIORITY, MEMORY_MAX, MAX)
ALLOWED = (*KNOBS, IMAGE_CHECK)
ENFORCE, WARN, OFF = "enforce", "warn", "off"
IMAGE_CHECK_MODES = (ENFORCE, WARN, OFF)

class AnnotationError(Error, ValueError):
    """An annotation that is not allowed or does not parse: nothing is applied."""


@dataclass
class Request:
    """What a container's annotations ask for."""

    settings: Settings = field(default_factory=Settings)
    image_check: str = OFF
    keys: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # keys of IGNORED that were given

    def is_empty(self) -> bool:
        return self.settings.is_empty() and self.image_check == OFF


def _values(key: str, value: str) -> tuple[str, ...]:
    items = tuple(v.strip() for v in value.split(","))
    if not value.strip() or any(not v for v in items):
        raise AnnotationError(f"annotation {key}={formats.shown(value)}: empty value (give e.g. "
                              f"{_EXAMPLES[key]})")
    return items


_EXAMPLES = {
    WEIGHT: "'300' or 'renderD128=50'",
    PRIORITY: "'-10' or 'default'",
    MEMORY_MAX: "'renderD128=2G' or 'renderD128=2G,renderD129=512M'",
    MAX: "'30%' or 'renderD128=30ms/100ms'",
}

_NAMES = Names(WEIGHT, PRIORITY, MEMORY_MAX, MAX)


def parse(annotations: Mapping[str, object], resolve: DeviceResolver,
          allowed: Collection[str] = ALLOWED,
          memory: Callable[[], Interface | None] | None = None) -> Request:
    """The request in @annotations; keys outside ``pycgpu.io/`` are ignored;
    @resolve turns a DEV into the render node's number; @allowed are the
    keys this node accepts (a subset of :data:`ALLOWED`: the node's
    allow-list, :mod:`pycgpu.runtime.allowlist`); @memory gives the kernel's
    memory interface (:func:`pycgpu.core.memory.detect`; asked only for a
    memory limit; None: gpu.memory.*). Raises :class:`AnnotationError`
    for an unknown ``pycgpu.io/`` key, a known one that is not allowed, or
    a value that does not parse; the keys of :data:`IGNORED` are left out
    (listed in :attr:`Request.ignored`)."""
    ours = {k: v for k, v in annotations.items() if k.startswith(PREFIX)}
    ignored = sorted(k for k in ours if k in IGNORED)
    for k in ignored:
        del ours[k]
    unknown = sorted(k for k in ours if k not in ALLOWED)
    if unknown:
        raise AnnotationError(
            f"annotation {unknown[0]} is not allowed: only {', '.join(ALLOWED)} are "
            "accepted (no other cgroup file is ever written)")
    refused = sorted(k for k in ours if k not in allowed)
    if refused:
        raise AnnotationError(
            f"annotation {refused[0]} is not on this node's allow-list ("
            + (", ".join(k for k in ALLOWED if k in allowed) or "nothing")
            + " allowed; the node's administrator sets it: /etc/pycgpu/runtime/annotations.allow "
            "or the hook's --allow)")
    request = Request(keys=sorted(ours), ignored=ignored)
    for key, value in ours.items():
        if not isinstance(value, str):
            raise AnnotationError(f"annotation {key} is {value!r}, not a string")
    if IMAGE_CHECK in ours:
        mode = str(ours[IMAGE_CHECK]).strip()
        if mode not in IMAGE_CHECK_MODES:
            raise AnnotationError(f"annotation {IMAGE_CHECK}={mode!r}: give "
                                  + ", ".join(IMAGE_CHECK_MODES))
        request.image_check = mode
    parts: list[Settings] = []
    for key in KNOBS:
        if key not in ours:
            continue
        values = _values(key, str(ours[key]))
        try:
            if key == WEIGHT:
                parts.append(parse_settings(values, None, (), resolve, _NAMES))
            elif key == PRIORITY:
                if len(values) > 1:
                    raise AnnotationError(f"annotation {key} takes one value")
                parts.append(parse_settings((), values[0], (), resolve, _NAMES))
            elif key == MAX:
                parts.append(parse_settings((), None, (), resolve, _NAMES, caps=values))
            else:
                parts.append(parse_settings((), None, values, resolve, _NAMES,
                                            memory() if memory is not None else None))
        except InvalidRequest as e:
            raise AnnotationError(f"annotation {e}") from None
    for part in parts:
        s = request.settings
        s.weight = part.weight if part.weight is not None else s.weight
        s.device_weights.update(part.device_weights)
        s.priority = part.priority if part.priority is not None else s.priority
        s.memory_max.update(part.memory_max)
        s.caps.update(part.caps)
    return request


def format_settings(settings: Settings) -> dict[str, str]:
    """The annotations that carry @settings (the inverse of :func:`parse`)."""
    out: dict[str, str] = {}
    weights = [] if settings.weight is None else [str(settings.weight)]
    weights += [f"{dev}={formats.DEFAULT if w is None else w}"
                for dev, w in sorted(settings.device_weights.items())]
    if weights:
        out[WEIGHT] = ",".join(weights)
    if settings.priority is not None:
        out[PRIORITY] = formats.format_priority(settings.priority)
    if settings.memory_max:
        out[MEMORY_MAX] = ",".join(
            f"{region.key}={formats.format_size(v)}"
            for region, v in sorted(settings.memory_max.items(), key=lambda kv: kv[0].key))
    caps = [formats.format_cap_write(cap) for dev, cap in settings.caps.items()
            if dev is None and cap is not None]
    caps += [f"{dev}={formats.DEFAULT if cap is None else formats.format_cap_write(cap)}"
             for dev, cap in sorted((d, c) for d, c in settings.caps.items() if d is not None)]
    if caps:
        out[MAX] = ",".join(caps)
    return out
