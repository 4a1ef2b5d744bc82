"""Setting several gpu.* knobs of one cgroup as a unit: all or none.

:class:`Settings` says what to set; :func:`plan_create` and :func:`plan_set`
validate everything that can be checked without writing (ranges, the group
exists or not, the controller is available, the files of every knob exist)
and return a :class:`Plan`: the directories to create, the
``cgroup.subtree_control`` files to enable ``gpu`` in, and the writes, in
order. :func:`apply` carries a plan out; when the kernel refuses a step it
undoes what it did (restores each written key's previous value, removes the
groups it created, disables ``gpu`` where it enabled it) and raises
:class:`ApplyError`. A dry run prints :meth:`Plan.steps` instead.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field

from . import formats
from .cgroup import CONTROLLER, Cgroup, CgroupError
from .formats import DevT

WEIGHT, PRIORITY, MEMORY_MAX = "gpu.weight", "gpu.priority", "gpu.memory.max"


class InvalidRequest(ValueError):
    """A request that is wrong whatever the kernel says (bad value, missing group)."""


class Unavailable(CgroupError):
    """The host lacks what a request needs (controller, knob): nothing was written."""


class ApplyError(CgroupError):
    """The kernel refused a step; what was done before it has been undone
    (``rollback_errors`` lists the undo steps that failed, if any)."""

    def __init__(self, cause: CgroupError, rollback_errors: list[CgroupError]) -> None:
        msg = str(cause.strerror or cause)
        if rollback_errors:
            msg += "; rollback incomplete: " + "; ".join(
                str(e.strerror or e) for e in rollback_errors)
        else:
            msg += "; nothing was changed"
        super().__init__(cause.errno or 0, msg)
        self.cause = cause
        self.rollback_errors = rollback_errors


@dataclass
class Settings:
    """Knobs to set; empty fields are left alone. A device weight or memory
    limit of None resets it (``MAJ:MIN default`` / ``MAJ:MIN max``)."""

    weight: int | None = None
    device_weights: dict[DevT, int | None] = field(default_factory=dict)
    priority: int | None = None
    memory_max: dict[DevT, int | None] = field(default_factory=dict)

    def is_empty(self) -> bool:
        return (self.weight is None and not self.device_weights and self.priority is None
                and not self.memory_max)

    def files(self) -> list[str]:
        """The interface files these settings write."""
        out = []
        if self.weight is not None or self.device_weights:
            out.append(WEIGHT)
        if self.priority is not None:
            out.append(PRIORITY)
        if self.memory_max:
            out.append(MEMORY_MAX)
        return out

    def writes(self) -> list[Write]:
        """One write per key, validated (raises :class:`InvalidRequest`)."""
        try:
            out = []
            if self.weight is not None:
                out.append(Write(WEIGHT, formats.format_weight_write(self.weight)))
            for dev, w in sorted(self.device_weights.items()):
                out.append(Write(WEIGHT, formats.format_weight_write(w, dev), dev))
            if self.priority is not None:
                out.append(Write(PRIORITY, str(formats.check_priority(self.priority))))
            for dev, size in sorted(self.memory_max.items()):
                formats.check_size(size)
                out.append(Write(MEMORY_MAX, formats.format_flat_keyed_write(dev, size), dev))
        except formats.FormatError as e:
            raise InvalidRequest(str(e)) from None
        return out


@dataclass(frozen=True)
class Write:
    """One write to an interface file; @key is the device it sets, if any."""

    file: str
    value: str
    key: DevT | None = None

    def undo_value(self, cg: Cgroup) -> str:
        """What to write to restore the key's current value."""
        text = cg.read(self.file)
        if self.file == WEIGHT:
            weights = formats.parse_weight(text)
            if self.key is None:
                return formats.format_weight_write(weights.default)
            return formats.format_weight_write(weights.devices.get(self.key), self.key)
        if self.file == MEMORY_MAX:
            assert self.key is not None
            return formats.format_flat_keyed_write(
                self.key, formats.parse_flat_keyed(text).get(self.key))
        return text.strip()


ENABLE, MKDIR = "enable", "mkdir"


@dataclass
class Plan:
    target: Cgroup
    structure: list[tuple[str, Cgroup]] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def steps(self) -> list[str]:
        """Human-readable steps, for --dry-run."""
        out = []
        for kind, cg in self.structure:
            if kind == MKDIR:
                out.append(f"mkdir {cg.path}")
            else:
                out.append(f"write '+{CONTROLLER}' to {cg.path / 'cgroup.subtree_control'}")
        out += [f"write {w.value!r} to {self.target.path / w.file}" for w in self.writes]
        return out


def _missing_knob(cg: Cgroup, name: str) -> Unavailable:
    if name.startswith("gpu.memory.") and cg.has(WEIGHT):
        why = (f"this kernel lacks {name} (fix: boot a kernel with the gpu memory support, "
               f"or leave out --memory-max)")
    else:
        why = (f"the gpu controller is not enabled for {cg.name} (no {name}; "
               f"fix: pycgpu create {cg.name} --exist-ok)")
    return Unavailable(errno.ENOENT, why)


def _check_controller(cg: Cgroup) -> None:
    root = Cgroup(cg.mount)
    try:
        available = CONTROLLER in root.controllers()
    except CgroupError as e:
        raise Unavailable(e.errno or 0, f"{cg.mount} is not a cgroup2 tree: {e.strerror}") from None
    if not available:
        raise Unavailable(
            errno.ENOENT,
            f"no gpu controller in {cg.mount}/cgroup.controllers "
            "(kernel without CONFIG_CGROUP_GPU; fix: see pycgpu check)",
        )


def plan_set(cg: Cgroup, settings: Settings) -> Plan:
    """Validate @settings for the existing group @cg."""
    if cg.is_root:
        raise InvalidRequest("the root cgroup has no gpu.* files: name a child group")
    if not cg.exists():
        raise InvalidRequest(
            f"cgroup {cg.name} does not exist (create it: pycgpu create {cg.name})")
    if settings.is_empty():
        raise InvalidRequest("nothing to set: give --weight, --priority or --memory-max")
    writes = settings.writes()
    _check_controller(cg)
    for name in settings.files():
        if not cg.has(name):
            raise _missing_knob(cg, name)
    return Plan(cg, [], writes, settings.files())


def plan_create(cg: Cgroup, settings: Settings, exist_ok: bool = False) -> Plan:
    """Validate creating @cg (and its missing parents, enabling gpu along the
    path) with @settings."""
    if cg.is_root:
        raise InvalidRequest("the root cgroup always exists: name a child group")
    if cg.exists() and not exist_ok:
        raise InvalidRequest(
            f"cgroup {cg.name} already exists (change it with pycgpu set {cg.name}, "
            "or pass --exist-ok)")
    writes = settings.writes()
    _check_controller(cg)
    structure: list[tuple[str, Cgroup]] = []
    parent_is_new = False
    for level in cg.ancestors()[1:]:
        parent = level.parent
        assert parent is not None
        if parent_is_new or CONTROLLER not in parent.subtree_control():
            structure.append((ENABLE, parent))
        parent_is_new = not level.exists()
        if parent_is_new:
            structure.append((MKDIR, level))
    # an existing group that has gpu but not a knob's file: the kernel lacks it
    for level in reversed(cg.ancestors()[1:]):
        if level.exists() and level.has(WEIGHT):
            for name in settings.files():
                if not level.has(name):
                    raise _missing_knob(level, name)
            break
    return Plan(cg, structure, writes, settings.files())


def apply(plan: Plan) -> None:
    """Carry out @plan, all or nothing (see the module docstring)."""
    done_structure: list[tuple[str, Cgroup]] = []
    done_writes: list[tuple[Write, str]] = []
    try:
        for kind, cg in plan.structure:
            if kind == MKDIR:
                if cg.mkdir():
                    done_structure.append((kind, cg))
            elif CONTROLLER not in cg.subtree_control():
                cg.write("cgroup.subtree_control", f"+{CONTROLLER}")
                done_structure.append((kind, cg))
        for name in plan.files:
            if not plan.target.has(name):
                raise _missing_knob(plan.target, name)
        for w in plan.writes:
            undo = w.undo_value(plan.target)
            plan.target.write(w.file, w.value)
            done_writes.append((w, undo))
    except CgroupError as e:
        errors = _rollback(plan.target, done_structure, done_writes)
        if isinstance(e, Unavailable) and not errors:
            raise
        raise ApplyError(e, errors) from None


def _rollback(
    target: Cgroup,
    structure: list[tuple[str, Cgroup]],
    writes: list[tuple[Write, str]],
) -> list[CgroupError]:
    errors: list[CgroupError] = []
    # any directory created means the target was created: removing it drops its values
    if not any(kind == MKDIR for kind, _ in structure):
        for w, undo in reversed(writes):
            try:
                target.write(w.file, undo)
            except CgroupError as e:
                errors.append(e)
    for kind, cg in reversed(structure):
        try:
            if kind == MKDIR:
                cg.remove()
            else:
                cg.write("cgroup.subtree_control", f"-{CONTROLLER}")
        except CgroupError as e:
            errors.append(e)
    return errors
