"""Setting several gpu.* knobs of one cgroup as a unit: all or none.

:class:`Settings` says what to set; :func:`plan_create` and :func:`plan_set`
validate everything that can be checked without writing (ranges, the group
exists or not, the controller is available, the files of every knob exist)
and return a :class:`Plan`: the directories to create, the
``cgroup.subtree_control`` files to enable ``gpu`` in, and the writes, in
order. :func:`apply` carries a plan out; when the kernel refuses a step, or
anything else goes wrong (SIGINT, SIGTERM and the other signals that would
end the process included: they stop the plan between two steps), it undoes
what it did (restores each written key's previous value, removes the groups
it created, disables ``gpu`` where it enabled it, unless groups came to
depend on it since the plan) and raises
:class:`ApplyError`. Across processes, the caller holds
:func:`pycgpu.core.locks.tree_lock` from the plan to the end of the apply. A dry
run prints :meth:`Plan.steps` instead.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from . import formats, interrupts
from .cgroup import CONTROLLER, DMEM, READ, Cgroup, CgroupError, delegated_to_caller
from .errors import Error
from .formats import DevT
from .memory import Interface, Region, RegionError

WEIGHT, PRIORITY, MEMORY_MAX, MAX = "gpu.weight", "gpu.priority", "gpu.memory.max", "gpu.max"

# what went wrong, as :attr:`pycgpu.Error.reason` (and :attr:`Notice.reason`) say
# it, for a caller adding its own advice (the CLI: commands/common.py)
UNKNOWN_DEVICE = "unknown-device"  # details: none
NO_GROUP = "no-group"  # details: group
EXISTS = "exists"  # details: group
NOTHING_TO_SET = "nothing-to-set"
NO_CONTROLLER = "no-controller"
GPU_NOT_ENABLED = "gpu-not-enabled"  # details: group
NO_MEMORY_SUPPORT = "no-memory-support"  # details: file
NO_CAP_SUPPORT = "no-cap-support"  # a kernel without gpu.max
PRIORITY_CAPPED = "priority-capped"  # details: ancestor, priority (the one asked for)


class Notice(str):
    """A warning of a plan: its text, and @reason and @details as an
    error's (:class:`pycgpu.Error`)."""

    reason: str = ""
    details: dict[str, str]

    def __new__(cls, text: str, reason: str = "", **details: str) -> Notice:
        self = super().__new__(cls, text)
        self.reason, self.details = reason, details
        return self


class InvalidRequest(Error, ValueError):
    """A request that is wrong whatever the kernel says (bad value, missing group)."""


class Unavailable(CgroupError):
    """The host lacks what a request needs (controller, knob): nothing was written."""


class PartialUndo(CgroupError):
    """A step failed and could not undo all of its own changes (its message
    says which); :func:`apply` then does not claim that nothing changed."""


class ApplyError(CgroupError):
    """The kernel refused a step, or a signal stopped the plan (the cause is
    then :class:`pycgpu.core.interrupts.Interrupted`); what was done before it
    has been undone (``rollback_errors`` lists the undo steps that failed,
    ``kept`` the ``+gpu`` left because other groups came to need it)."""

    def __init__(self, cause: CgroupError, rollback_errors: list[CgroupError],
                 kept: list[str] | None = None) -> None:
        kept = kept or []
        msg = str(cause.strerror or cause)
        if rollback_errors:
            msg += "; rollback incomplete: " + "; ".join(
                [str(e.strerror or e) for e in rollback_errors] + kept)
        elif kept:
            msg += "; " + "; ".join(kept) + "; nothing else was changed"
        elif not isinstance(cause, PartialUndo):
            msg += "; nothing was changed"
        super().__init__(cause.errno or 0, msg, cause.op, cause.file)
        self.cause = cause
        self.rollback_errors = rollback_errors
        self.kept = kept


def gpu_memory_region(dev: DevT) -> Region:
    """A device's one region under gpu.memory.* (:mod:`pycgpu.core.memory`)."""
    return Region(str(dev), str(dev), dev)


@dataclass
class Settings:
    """Knobs to set; empty fields are left alone. A device weight or memory
    limit of None resets it (``MAJ:MIN default`` / ``MAJ:MIN max``); so does
    a cap of None (``MAJ:MIN default``: the device follows the default
    line again); the cap keyed None is gpu.max's default line. Memory
    limits are per region of the kernel's memory interface: gpu.memory.max,
    or dmem.max on a kernel whose memory is dmem's (:mod:`pycgpu.core.memory`:
    ``Interface.region_of``, ``Interface.resolve``)."""

    weight: int | None = None
    device_weights: dict[DevT, int | None] = field(default_factory=dict)
    # formats.UNSET writes ``default``: the group inherits its parent's effective priority
    priority: formats.Priority | None = None
    memory_max: dict[Region, int | None] = field(default_factory=dict)
    # gpu.max: None keys the default line; a device's None drops its override
    caps: dict[DevT | None, formats.Cap | None] = field(default_factory=dict)

    def is_empty(self) -> bool:
        return (self.weight is None and not self.device_weights and self.priority is None
                and not self.memory_max and not self.caps)

    def files(self) -> list[str]:
        """The interface files these settings write."""
        out = []
        if self.weight is not None or self.device_weights:
            out.append(WEIGHT)
        if self.priority is not None:
            out.append(PRIORITY)
        if self.caps:
            out.append(MAX)
        out += sorted({region.file("max") for region in self.memory_max})
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
                out.append(Write(PRIORITY, formats.format_priority(self.priority)))
            # the default line first: a device's override is written beside it
            for key, cap in sorted(self.caps.items(), key=lambda kv: (kv[0] is not None,
                                                                      kv[0] or DevT(0, 0))):
                out.append(Write(MAX, formats.format_max_write(cap, key), key))
            for region, size in sorted(self.memory_max.items(), key=lambda kv: kv[0].key):
                out.append(Write(region.file("max"), region.write(size), region.kernel_key))
        except formats.FormatError as e:
            raise InvalidRequest(str(e)) from None
        return out


DeviceResolver = Callable[[str], DevT]
"""Turns a DEV text (``renderD128``, ``card0``, a PCI address, ``226:128``)
into the render node's number; raises :class:`pycgpu.core.devices.DeviceError` or
:class:`pycgpu.core.formats.FormatError`."""


@dataclass(frozen=True)
class Names:
    """What the three knob values are called in messages: the CLI's options,
    or the container annotations."""

    weight: str = "weight"
    priority: str = "priority"
    memory_max: str = "memory.max"
    max: str = "max"


def _number(what: str, text: str, expected: str, check: Callable[[int], int]) -> int:
    try:
        return check(formats.parse_number(text, what, expected))
    except formats.FormatError as e:
        msg = str(e)
        raise InvalidRequest(msg if msg.startswith(what) else f"{what}: {msg}") from None


def _priority(what: str, text: str) -> formats.Priority:
    """@text as gpu.priority takes it: N in range, or ``default``."""
    try:
        value = formats.parse_priority(text, what, "N in [-1023, 1023], or default")
        return value if value is formats.UNSET else formats.check_priority(value)
    except formats.FormatError as e:
        msg = str(e)
        raise InvalidRequest(msg if msg.startswith(what) else f"{what}: {msg}") from None


def _device(resolve: DeviceResolver, text: str, what: str) -> DevT:
    from .devices import DeviceError

    try:
        return resolve(text)
    except (DeviceError, formats.FormatError) as e:
        raise InvalidRequest(f"{what}: {e}").because(UNKNOWN_DEVICE) from None


def _region(resolve: DeviceResolver, memory: Interface | None, text: str,
            what: str) -> Region:
    from .devices import DeviceError

    if memory is None:
        return gpu_memory_region(_device(resolve, text, what))
    try:
        return memory.resolve(text, resolve)
    except (DeviceError, formats.FormatError, RegionError) as e:
        raise InvalidRequest(f"{what}: {e}").because(UNKNOWN_DEVICE) from None


def parse_settings(weights: tuple[str, ...] | list[str],
                   priority: str | tuple[str, ...] | list[str] | None,
                   memory_max: tuple[str, ...] | list[str], resolve: DeviceResolver,
                   names: Names = Names(), memory: Interface | None = None, *,
                   caps: tuple[str, ...] | list[str] = ()) -> Settings:
    """Settings from the texts of the knob options (``W``, ``DEV=W``,
    ``DEV=default``; ``N`` or ``default``, or the texts of a repeated option,
    of which there must be one at most; ``DEV=SIZE`` or ``DEV:REGION=SIZE``;
    @caps ``CAP``, ``default=CAP``, ``DEV=CAP`` or ``DEV=default``, CAP as
    :func:`pycgpu.core.formats.parse_cap` reads it), checked;
    raises :class:`InvalidRequest` naming the value as @names calls it.
    Memory limits name regions of @memory, the kernel's memory interface
    (None: gpu.memory.*, one region per device)."""
    if priority is not None and not isinstance(priority, str):
        if len(priority) > 1:
            raise InvalidRequest(f"{names.priority} {formats.shown(priority[-1])}: the priority "
                                 "is given twice")
        priority = priority[0] if priority else None
    settings = Settings()
    for raw in weights:
        what = f"{names.weight} {formats.shown(raw)}"
        dev_text, sep, value = raw.rpartition("=")
        dev = _device(resolve, dev_text, what) if sep else None
        if sep and value.strip() == formats.DEFAULT:
            w = None
        else:
            w = _number(what, value, "W or DEV=W with W in [1, 10000], or DEV=default",
                        formats.check_weight)
        if dev is None:
            if settings.weight is not None:
                raise InvalidRequest(f"{what}: the default weight is given twice")
            settings.weight = w
        else:
            if dev in settings.device_weights:
                raise InvalidRequest(f"{what}: the weight of {dev} is given twice")
            settings.device_weights[dev] = w
    if priority is not None:
        settings.priority = _priority(f"{names.priority} {formats.shown(priority)}", priority)
    for raw in memory_max:
        what = f"{names.memory_max} {formats.shown(raw)}"
        dev_text, sep, value = raw.rpartition("=")
        if not sep or not dev_text:
            raise InvalidRequest(f"{what}: give DEV=SIZE, e.g. renderD128=2G or renderD128=max"
                                 " (DEV:REGION=SIZE for one of a device's regions)")
        region = _region(resolve, memory, dev_text, what)
        try:
            size = formats.check_size(formats.parse_size(value))
        except formats.FormatError as e:
            raise InvalidRequest(f"{what}: {e}") from None
        if region in settings.memory_max:
            raise InvalidRequest(f"{what}: the limit of {region.key} is given twice")
        settings.memory_max[region] = size
    for raw in caps:
        what = f"{names.max} {formats.shown(raw)}"
        dev_text, sep, value = raw.rpartition("=")
        key = (_device(resolve, dev_text, what)
               if sep and dev_text.strip() != formats.DEFAULT else None)
        if key is not None and value.strip() == formats.DEFAULT:
            cap = None
        else:
            try:
                cap = formats.parse_cap(value, what)
            except formats.FormatError as e:
                raise InvalidRequest(str(e)) from None
        if key in settings.caps:
            raise InvalidRequest(f"{what}: the cap of {key or 'the default line'} is "
                                 "given twice")
        settings.caps[key] = cap
    return settings


@dataclass(frozen=True)
class Write:
    """One write to an interface file; @key is the device (the region, in
    the file's own words) it sets, if any."""

    file: str
    value: str
    key: DevT | str | None = None
    group: Cgroup | None = None  # None: the plan's target
    # a lift of gpu.priority to this, made only when the group's own priority,
    # read when the plan is carried out, is a number below it (a group the plan
    # makes: a kernel with gpu.priority's default gives it none, one before, 0)
    below: int | None = None

    def needed(self, cg: Cgroup) -> bool:
        """Whether to make this write to @cg now (see @below)."""
        if self.below is None:
            return True
        value = cg.priority()
        return value is not formats.UNSET and value < self.below

    def undo_value(self, cg: Cgroup) -> str:
        """What to write to restore the key's current value, from the model
        of the group's files (:meth:`pycgpu.core.model.KernelFile.undo`);
        CgroupError if the file cannot be read or does not parse."""
        from . import model

        kernel_file = model.FILE[self.file]  # a plan writes settings only
        files = model.read_group(str(cg.path), cg.name, names=(self.file,))
        path = cg.path / self.file
        if self.file not in files.present:
            cg.read(self.file)  # raises the error that says why it is missing
        try:
            return kernel_file.undo(files, self.key)
        except formats.FormatError as e:
            raise CgroupError(errno.EINVAL, f"reading {path}: {e}", READ, path) from None


ENABLE, ENABLE_DMEM, MKDIR = "enable", "enable-dmem", "mkdir"


def _controller(kind: str) -> str:
    """The controller an ENABLE step enables: gpu, or dmem (the kernel's
    device-memory controller, where it has one: pycgpu.core.memory)."""
    return DMEM if kind == ENABLE_DMEM else CONTROLLER


@dataclass(frozen=True)
class Shape:
    """What a group looked like when a plan enabled gpu in it: its child
    groups and its cgroup.subtree_control (both empty for a group the plan
    creates). A rollback takes ``+gpu`` back only from a group that still
    looks like this."""

    children: frozenset[str]
    controls: frozenset[str]

    @classmethod
    def of(cls, cg: Cgroup) -> Shape:
        if not cg.exists():
            return cls(frozenset(), frozenset())
        try:
            children = frozenset(c.relpath.name for c in cg.children())
        except OSError as e:
            raise CgroupError(e.errno or 0, f"reading {cg.path}: {e.strerror}") from None
        return cls(children, frozenset(cg.subtree_control()))


@dataclass
class Plan:
    target: Cgroup
    structure: list[tuple[str, Cgroup]] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    warnings: list[Notice] = field(default_factory=list)  # what the plan will not achieve
    # the groups the plan enables gpu in, as they were at the plan
    shapes: dict[Path, Shape] = field(default_factory=dict)

    def steps(self) -> list[str]:
        """Human-readable steps, for --dry-run (paths printed by
        :func:`pycgpu.core.formats.printable_name`)."""
        shown = formats.printable_name
        out = []
        for kind, cg in self.structure:
            if kind == MKDIR:
                out.append(f"mkdir {shown(str(cg.path))}")
            else:
                out.append(f"write '+{_controller(kind)}' to "
                           f"{shown(str(cg.path / 'cgroup.subtree_control'))}")
        for w in self.writes:
            step = f"write {w.value!r} to {shown(str((w.group or self.target).path / w.file))}"
            if w.below is not None:
                step += (f" if it reads a number below {w.below} once made (a kernel before "
                         f"gpu.priority's default)")
            out.append(step)
        return out


class Cap(NamedTuple):
    """What caps a group's effective priority (:func:`ceiling`)."""

    priority: int
    group: Cgroup  # the outermost ancestor that sets it
    own: bool  # a priority of its own; False: a top-level group's default, 0


def _cap_of(level: Cgroup, top: bool) -> tuple[int, bool] | None:
    """What @level caps its descendants' effective priority at: its own
    gpu.priority, the default 0 when it is a top-level (@top) group without
    one, nothing (None) when it is a deeper one without one: it inherits. A
    group without the file yet (not created, or gpu not enabled in its
    parent) counts as a new group of a kernel with ``default``."""
    value = level.priority() if level.has(PRIORITY) else formats.UNSET
    if value is not formats.UNSET:
        return value, True
    return (formats.PRIORITY_DEFAULT, False) if top else None


def ceiling(cg: Cgroup) -> Cap | None:
    """The cap the ancestors put on @cg's effective priority, as the kernel
    computes it: the smallest gpu.priority set on the groups between the
    root and @cg, where a top-level group without one (``default``, or not
    created yet) counts as 0 and a deeper one does not count (it inherits
    its parent's); with the outermost ancestor that sets it. None for a
    child of the root. On a kernel before gpu.priority's ``default`` every
    group has a number (0 when new): the minimum along the path, as ever."""
    found: Cap | None = None
    for i, level in enumerate(cg.ancestors()[1:-1]):
        cap = _cap_of(level, i == 0)
        if cap is not None and (found is None or cap[0] < found.priority):
            found = Cap(cap[0], level, cap[1])
    return found


def _priority_plan(cg: Cgroup, settings: Settings, raise_ancestors: bool,
                   plan: Plan) -> None:
    """With @raise_ancestors, the writes that lift every ancestor that caps
    the requested priority below it up to it (before the target's own
    writes): a set priority below it, a top-level group's default (0);
    deeper ancestors without a priority of their own inherit the lifted one
    and are left alone. Without, a warning when an ancestor caps it."""
    if settings.priority is None or settings.priority is formats.UNSET:
        return
    want = settings.priority
    if raise_ancestors:
        lifts = []
        for i, level in enumerate(cg.ancestors()[1:-1]):
            if i > 0 and not level.has(PRIORITY):
                # the plan makes it (or enables gpu in its parent): it reads
                # default and inherits, but a kernel before that gives it 0
                if want > formats.PRIORITY_DEFAULT:
                    lifts.append(Write(PRIORITY, str(want), None, level, below=want))
                continue
            own = _cap_of(level, i == 0)
            if own is not None and own[0] < want:
                lifts.append(Write(PRIORITY, str(want), None, level))
        plan.writes[:0] = lifts
        return
    cap = ceiling(cg)
    if cap is not None and cap.priority < want:
        value, level = cap.priority, cap.group
        has = (f"has gpu.priority {value}" if cap.own
               else f"has gpu.priority default, {value} for a top-level group")
        what = (f"{cg.name} gets priority {want} but its effective priority stays {value}: "
                f"ancestor {level.name} {has}")
        if delegated_to_caller(level.path / PRIORITY):
            plan.warnings.append(Notice(
                f"{what} (only the owner of {level.name}'s parent can raise it: a delegated "
                f"subtree can lower its priority, never raise it)"))
        else:
            plan.warnings.append(Notice(what, PRIORITY_CAPPED, ancestor=level.name,
                                        priority=str(want)))


def _missing_knob(cg: Cgroup, name: str) -> Unavailable:
    if name.startswith(f"{DMEM}."):
        parent = cg.parent
        offered = parent is not None and DMEM in parent.controllers()
        e = Unavailable(errno.ENOENT, (
            f"the dmem controller is not enabled for {cg.name} (no {name}): "
            f"'+{DMEM}' in its parent's cgroup.subtree_control enables it (pycgpu create "
            f"does)") if offered else (
            f"the dmem controller is not available to {cg.name} (no {name}, and its "
            f"parent's cgroup.controllers lacks {DMEM}: not delegated)"))
        e.because(NO_MEMORY_SUPPORT, file=name)
    elif name.startswith("gpu.memory.") and cg.has(WEIGHT):
        e = Unavailable(errno.ENOENT, f"this kernel lacks {name}")
        e.because(NO_MEMORY_SUPPORT, file=name)
    elif name == MAX and cg.has(WEIGHT):
        e = Unavailable(errno.ENOENT, "this kernel lacks gpu.max (the hard cap on GPU time)")
        e.because(NO_CAP_SUPPORT)
    else:
        e = Unavailable(errno.ENOENT, f"the gpu controller is not enabled for {cg.name} "
                                      f"(no {name})")
        e.because(GPU_NOT_ENABLED, group=cg.name)
    return e


def _check_controller(cg: Cgroup, settings: Settings) -> bool:
    """Whether the kernel has the gpu controller; without it, only memory
    limits on dmem can be set (a kernel without the series, or booted with
    ``cgroup_disable=gpu``), and anything else is :class:`Unavailable`."""
    root = Cgroup(cg.mount)
    try:
        available = root.controllers()
    except CgroupError as e:
        raise Unavailable(e.errno or 0, f"{cg.mount} is not a cgroup2 tree: {e.strerror}") from None
    if CONTROLLER in available:
        return True
    needs_gpu = [name for name in settings.files() if not name.startswith(f"{DMEM}.")]
    if DMEM in available and not needs_gpu:
        return False
    need = "needs" if len(needs_gpu) == 1 else "need"
    why = (f"{' and '.join(needs_gpu)} {need} it; GPU memory limits work through dmem"
           if DMEM in available else "no dmem controller for GPU memory either")
    raise Unavailable(
        errno.ENOENT,
        f"no gpu controller in {cg.mount}/cgroup.controllers (a kernel without "
        f"CONFIG_CGROUP_GPU, or booted with cgroup_disable=gpu); {why}",
    ).because(NO_CONTROLLER)


def plan_set(cg: Cgroup, settings: Settings, raise_ancestors: bool = False) -> Plan:
    """Validate @settings for the existing group @cg; @raise_ancestors lifts
    the ancestors' gpu.priority to the requested priority in the same plan."""
    if cg.is_root:
        raise InvalidRequest("the root cgroup has no gpu.* files: name a child group")
    if not cg.exists():
        raise InvalidRequest(f"cgroup {cg.name} does not exist").because(NO_GROUP,
                                                                           group=cg.name)
    if settings.is_empty():
        raise InvalidRequest("nothing to set").because(NOTHING_TO_SET)
    writes = settings.writes()
    _check_controller(cg, settings)
    for name in settings.files():
        if not cg.has(name):
            raise _missing_knob(cg, name)
    plan = Plan(cg, [], writes, settings.files())
    _priority_plan(cg, settings, raise_ancestors, plan)
    return plan


def plan_create(cg: Cgroup, settings: Settings, exist_ok: bool = False,
                raise_ancestors: bool = False) -> Plan:
    """Validate creating @cg (and its missing parents, enabling gpu along the
    path, and dmem where the kernel has it) with @settings (@raise_ancestors:
    as :func:`plan_set`). On a kernel with dmem and no gpu controller, a
    group with memory limits only is created with dmem alone."""
    if cg.is_root:
        raise InvalidRequest("the root cgroup always exists: name a child group")
    if cg.exists() and not exist_ok:
        raise InvalidRequest(f"cgroup {cg.name} already exists").because(EXISTS, group=cg.name)
    writes = settings.writes()
    gpu = _check_controller(cg, settings)
    structure: list[tuple[str, Cgroup]] = []
    shapes: dict[Path, Shape] = {}
    parent_is_new = False
    # where the kernel has dmem, it is enabled along the path as gpu is, for
    # the GPU memory of the group (pycgpu.core.memory); where a parent does
    # not offer it (not delegated), the group goes without
    dmem = DMEM in Cgroup(cg.mount).controllers()
    dmem_enabled: set[Path] = set()
    for level in cg.ancestors()[1:]:
        parent = level.parent
        assert parent is not None
        controls = set() if parent_is_new else parent.subtree_control()
        if gpu and CONTROLLER not in controls:
            structure.append((ENABLE, parent))
            shapes[parent.path] = Shape.of(parent)
        # the parent offers dmem: the root does, a group whose parent has (or
        # the plan gives) dmem in its subtree_control does
        if dmem and DMEM not in controls and (
                parent.is_root or parent.path in dmem_enabled
                or (not parent_is_new and DMEM in parent.controllers())):
            structure.append((ENABLE_DMEM, parent))
            shapes.setdefault(parent.path, Shape.of(parent))
        if dmem and (DMEM in controls or (ENABLE_DMEM, parent) in structure):
            dmem_enabled.add(level.path)
        parent_is_new = not level.exists()
        if parent_is_new:
            structure.append((MKDIR, level))
    # an existing group that has gpu (without gpu: the deepest existing one)
    # but not a knob's file: the kernel lacks it (or its parent lacks dmem,
    # which the plan may enable)
    for level in reversed(cg.ancestors()[1:]):
        if level.exists() and (level.has(WEIGHT) or not gpu):
            for name in settings.files():
                if name.startswith(f"{DMEM}.") and level.path in dmem_enabled:
                    continue
                if not level.has(name):
                    raise _missing_knob(level, name)
            break
    plan = Plan(cg, structure, writes, settings.files(), shapes=shapes)
    _priority_plan(cg, settings, raise_ancestors, plan)
    return plan


def apply(plan: Plan, then: Callable[[], object] | None = None) -> None:
    """Carry out @plan, all or nothing (see the module docstring); @then, if
    given, runs last as part of it and undoes its own changes when it fails.

    Any exception undoes the steps done so far: a :class:`CgroupError` or a
    file that does not parse becomes :class:`ApplyError` (an
    :class:`Unavailable` fully undone stays itself), and so does a signal
    that would end the process (SIGINT, SIGTERM, SIGHUP, ...:
    :data:`pycgpu.core.interrupts.DEFERRED`), which stops the plan between
    two steps (the cause is :class:`Interrupted`, which names every signal
    that came); anything else (a bug) is raised again as it is once undone.
    A signal that comes after the last step, or during the undo, is
    delivered once this returns or raises, to the process's own handler
    (:func:`pycgpu.core.interrupts.deferred`: no handler is changed); a
    caller that reports it instead takes it inside its own
    :func:`~pycgpu.core.interrupts.deferred` block. Callers that may run at
    the same time as other pycgpu processes hold
    :func:`pycgpu.core.locks.tree_lock` from the plan to the end of this."""
    done_structure: list[tuple[str, Cgroup]] = []
    done_writes: list[tuple[Write, str]] = []
    with interrupts.deferred() as signals:
        try:
            for kind, cg in plan.structure:
                signals.check()
                if kind == MKDIR:
                    if cg.mkdir():
                        done_structure.append((kind, cg))
                elif _controller(kind) not in cg.subtree_control():
                    cg.write("cgroup.subtree_control", f"+{_controller(kind)}")
                    done_structure.append((kind, cg))
            for name in plan.files:
                if not plan.target.has(name):
                    raise _missing_knob(plan.target, name)
            for w in plan.writes:
                signals.check()
                group = w.group or plan.target
                if not w.needed(group):
                    continue
                undo = w.undo_value(group)
                group.write(w.file, w.value)
                done_writes.append((w, undo))
            if then is not None:
                signals.check()
                then()
        except BaseException as e:
            undone = _rollback(plan, done_structure, done_writes)
            raise _failure(e, undone) from None


@dataclass
class _Undone:
    """How a rollback went: the undo steps that failed, and the ``+gpu``
    it left on purpose (the parent's children changed since the plan)."""

    errors: list[CgroupError] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)


def _failure(e: BaseException, undone: _Undone) -> BaseException:
    """What :func:`apply` raises for @e once the plan is undone."""
    if isinstance(e, Unavailable) and not undone.errors and not undone.kept:
        return e
    if isinstance(e, CgroupError):
        return ApplyError(e, undone.errors, undone.kept)
    if isinstance(e, formats.FormatError):
        return ApplyError(CgroupError(errno.EINVAL, str(e)), undone.errors, undone.kept)
    if isinstance(e, OSError):
        where = f"{e.filename}: " if e.filename else ""
        return ApplyError(CgroupError(e.errno or 0, f"{where}{e.strerror or e}"),
                          undone.errors, undone.kept)
    for line in [str(x.strerror or x) for x in undone.errors] + undone.kept:
        e.add_note(f"pycgpu: {line}")
    return e


def _unchanged_since_plan(plan: Plan, cg: Cgroup) -> str | None:
    """Why ``+gpu`` (``+dmem``) must stay in @cg's cgroup.subtree_control
    although the plan enabled it, or None: its child groups or its other
    controllers changed since the plan (another process made a group below
    it that needs gpu; taking it back would erase that group's knobs)."""
    before = plan.shapes.get(cg.path)
    if before is None:
        return "its state at the plan is unknown"
    now = Shape.of(cg)
    if now.children != before.children:
        added = sorted(now.children - before.children)
        return ("child groups appeared since the plan (" + ", ".join(added) + ")" if added
                else "its child groups changed since the plan")
    # the controllers the plan enables there aside (a rollback takes them back one by one)
    enabled = {_controller(kind) for kind, group in plan.structure
               if kind != MKDIR and group.path == cg.path}
    if now.controls - enabled != before.controls - enabled:
        return "its cgroup.subtree_control changed since the plan"
    return None


def _rollback(plan: Plan, structure: list[tuple[str, Cgroup]],
              writes: list[tuple[Write, str]]) -> _Undone:
    undone = _Undone()
    # a group created by the plan is removed again: its values go with it
    created = {cg.path for kind, cg in structure if kind == MKDIR}
    for w, undo in reversed(writes):
        group = w.group or plan.target
        if group.path in created:
            continue
        try:
            group.write(w.file, undo)
        except CgroupError as e:
            undone.errors.append(e)
    for kind, cg in reversed(structure):
        try:
            if kind == MKDIR:
                cg.remove()
                continue
            why = _unchanged_since_plan(plan, cg)
            if why is None:
                cg.write("cgroup.subtree_control", f"-{_controller(kind)}")
            else:
                undone.kept.append(f"{_controller(kind)} stays enabled in "
                                   f"{cg.path / 'cgroup.subtree_control'}: {why}")
        except CgroupError as e:
            undone.errors.append(e)
    return undone
