"""Pod-level GPU weights under Kubernetes: each cgroup between a container
and ``kubepods`` weighs the sum of the GPU weights below it.

The kubelet puts each container's cgroup in its pod's, and Burstable and
BestEffort pods in a slice per QoS class (Guaranteed pods sit in
``kubepods`` itself)::

    kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<UID>.slice/
        cri-containerd-<ID>.scope                     (systemd cgroup driver)
    kubepods/burstable/pod<UID>/<ID>                  (cgroupfs cgroup driver)

``gpu.weight`` divides time among siblings at every level, so the weight the
createRuntime hook sets on a container only divides its pod's time among the
pod's containers, and pods compete at their own ``gpu.weight``, 100 by
default: two pods given 3 and 1 GPU shares would get 50:50. The hook
therefore also sets every cgroup between the container and ``kubepods`` (its
pod, its QoS class's slice) to the sum of the GPU weights below it, so the
pods get 300:100, per device as the device plugin asks.

Which cgroups asked for a GPU weight, and which, is kept in an extended
attribute of the cgroup's directory, ``trusted.pycgpu.weight``, in
``gpu.weight``'s own text form (``default 300``, ``226:128 300``); an
ancestor's holds its sums. ``trusted.*`` attributes take CAP_SYS_ADMIN to
set, so a container that can write its own cgroup (a delegated subtree, a
privileged pod) cannot inflate its pod's sum. Sums are computed again from
the children's attributes at every container start: a sibling counts once
however often the hook runs, a container that does not use the GPU (the
pod's sandbox) counts nothing, and a removed container stops counting at the
next start in its pod. A device the kernel no longer takes a weight for
(unplugged, or not scheduling) drops out of the sums. Hooks of one node take
an exclusive lock (flock) on the kubelet's root cgroup while they sum and
write, so that two pods starting at once do not lose each other's weights.

Across QoS classes the split is exact only while every pod of a class is
busy: weights divide time among *active* siblings, and a class's slice
carries the sum of all its pods' weights.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..core import formats
from ..core.cgroup import Cgroup, CgroupError
from ..core.errors import file_error
from ..core.formats import DevT
from ..core.knobs import PartialUndo

XATTR = "trusted.pycgpu.weight"
# the share IDs of a container's GPU shares (the device plugin's), recorded by
# the hook for the exporter's pod labels (pycgpu.k8s.podresources reads them);
# trusted.* as XATTR: whoever can write a cgroup's directory (a delegated
# subtree, a writable cgroupfs) can set its user.* attributes, and nothing is
# read from those
SHARE_IDS_XATTR = "trusted.pycgpu.share_ids"
# a share ID as the device plugin names it (pycgpu.k8s.shares)
SHARE_ID = re.compile(r"renderD[0-9]{1,6}-s[0-9]{1,3}")
# the kubelet's root cgroup: kubepods (cgroupfs), kubepods.slice (systemd), or
# kubelet-kubepods.slice under kubelet.slice
_ROOTS = ("kubepods", "kubepods.slice", "kubelet-kubepods.slice")


@dataclass
class Asked:
    """The GPU weights a cgroup asked for (or, for an ancestor, their sums):
    a default weight and per-device weights, each optional."""

    default: int | None = None
    devices: dict[DevT, int] = field(default_factory=dict)

    def is_empty(self) -> bool:
        return self.default is None and not self.devices

    def format(self) -> str:
        lines = [] if self.default is None else [f"{formats.DEFAULT} {self.default}"]
        lines += [f"{d} {w}" for d, w in sorted(self.devices.items())]
        return "".join(f"{line}\n" for line in lines)

    @classmethod
    def parse(cls, text: str) -> Asked:
        """The attribute's text; :class:`formats.FormatError` if it is not ours."""
        asked = cls()
        for line in text.splitlines():
            words = line.split()
            if len(words) != 2:
                raise formats.FormatError(f"{XATTR}: {line!r} is not 'KEY WEIGHT'")
            weight = formats.check_weight(formats.parse_int(words[1], XATTR))
            if words[0] == formats.DEFAULT:
                asked.default = weight
            else:
                asked.devices[DevT.parse(words[0])] = weight
        return asked

    def for_device(self, dev: DevT) -> int | None:
        return self.devices.get(dev, self.default)


def asked_of(weight: int | None, device_weights: dict[DevT, int | None]) -> Asked:
    """What a container asks for with these knob settings (a device weight of
    None resets that device to the default: it asks nothing there)."""
    return Asked(weight, {d: w for d, w in device_weights.items() if w is not None})


def _kube_root(cg: Cgroup) -> int | None:
    """How many components of @cg's path lead to the kubelet's root, or None."""
    roots = [i for i, p in enumerate(cg.relpath.parts) if p in _ROOTS]
    return roots[-1] + 1 if roots else None


def kube_ancestors(cg: Cgroup) -> list[Cgroup]:
    """The cgroups between @cg and the kubelet's root, innermost first (its
    pod, then its QoS class's slice); empty outside ``kubepods``."""
    parts = cg.relpath.parts
    top = _kube_root(cg)
    if top is None:
        return []
    return [Cgroup(cg.mount, os.path.join(*parts[:n])) for n in range(len(parts) - 1, top, -1)]


def _get_raw(cg: Cgroup) -> bytes | None:
    try:
        return os.getxattr(cg.path, XATTR)
    except OSError as e:
        if e.errno in (errno.ENODATA, errno.ENOENT):
            return None
        raise CgroupError(e.errno or 0, f"{cg.path}: reading {XATTR}: {e.strerror}") from None


def _set_raw(cg: Cgroup, raw: bytes | None) -> None:
    try:
        if raw is None:
            try:
                os.removexattr(cg.path, XATTR)
            except OSError as e:
                if e.errno != errno.ENODATA:
                    raise
        else:
            os.setxattr(cg.path, XATTR, raw)
    except OSError as e:
        raise CgroupError(e.errno or 0, f"{cg.path}: setting {XATTR}: {e.strerror}") from None


def read_asked(cg: Cgroup) -> Asked | None:
    """What @cg's attribute says, or None without one."""
    raw = _get_raw(cg)
    if raw is None:
        return None
    try:
        return Asked.parse(formats.decode(raw, XATTR))
    except formats.FormatError as e:
        raise CgroupError(errno.EINVAL, f"{cg.path}: {e}") from None


def _set_asked(cg: Cgroup, asked: Asked) -> None:
    _set_raw(cg, None if asked.is_empty() else asked.format().encode())


def sums(cg: Cgroup) -> Asked:
    """The sums of what @cg's children asked for: of their default weights,
    and per device of each child's weight there (its own for the device,
    else its default), capped at the weight's maximum."""
    try:
        children = list(cg.children())
    except OSError as e:
        raise CgroupError(e.errno or 0, f"{cg.path}: {e.strerror}") from None
    kids = [a for a in (read_asked(c) for c in children) if a is not None]
    total = Asked()
    defaults = [a.default for a in kids if a.default is not None]
    if defaults:
        total.default = min(sum(defaults), formats.WEIGHT_MAX)
    for dev in sorted({d for a in kids for d in a.devices}):
        per = [w for a in kids if (w := a.for_device(dev)) is not None]
        total.devices[dev] = min(sum(per), formats.WEIGHT_MAX)
    return total


def _set_weights(cg: Cgroup, asked: Asked) -> None:
    """@cg's gpu.weight as @asked says: its default (100 when it asks none)
    and exactly its per-device weights. A device the kernel refuses a weight
    for (gone: EINVAL; not scheduling: EOPNOTSUPP) is dropped from @asked."""
    cg.set_weight(formats.WEIGHT_DEFAULT if asked.default is None else asked.default)
    for dev in cg.weights().devices:
        if dev not in asked.devices:
            cg.set_weight(None, dev)
    for dev, w in sorted(asked.devices.items()):
        try:
            cg.set_weight(w, dev)
        except CgroupError as e:
            if e.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
                raise
            del asked.devices[dev]


def _locked(cg: Cgroup) -> contextlib.AbstractContextManager[None]:
    """An exclusive flock on the kubelet's root cgroup above @cg (the lock
    :func:`pycgpu.core.locks.tree_lock` takes on a directory)."""
    from ..core import locks

    top = _kube_root(cg)
    assert top is not None
    return locks.tree_lock(Cgroup(cg.mount, os.path.join(*cg.relpath.parts[:top])).path)


def apply(cg: Cgroup, asked: Asked) -> list[tuple[Cgroup, Asked]]:
    """Record that the container cgroup @cg (under ``kubepods``) asked for
    @asked, then give its pod and QoS slice the sums; all or none (a failure
    restores every attribute and weight it changed, then raises
    :class:`CgroupError`, naming what it could not restore; any other
    exception is raised again once restored). Returns each
    ancestor set, with its weights."""
    done: list[tuple[Cgroup, bytes | None, formats.Weights | None]] = []
    changed: list[tuple[Cgroup, Asked]] = []
    with _locked(cg):
        try:
            done.append((cg, _get_raw(cg), None))
            _set_asked(cg, asked)
            for anc in kube_ancestors(cg):
                total = sums(anc)
                done.append((anc, _get_raw(anc), anc.weights()))
                _set_weights(anc, total)
                _set_asked(anc, total)
                changed.append((anc, total))
        except BaseException as e:  # any failure: restore, then raise it again
            left = []
            for group, old_raw, old_weights in reversed(done):
                try:
                    if old_weights is not None and group.weights() != old_weights:
                        _set_weights(group, Asked(old_weights.default,
                                                  dict(old_weights.devices)))
                    _set_raw(group, old_raw)
                except CgroupError:
                    left.append(group.name)
            if left and isinstance(e, CgroupError):
                raise PartialUndo(e.errno or 0, f"{e.strerror or e}; could not restore the "
                                  f"GPU weights of {', '.join(left)}") from None
            if left:
                e.add_note(f"pycgpu: could not restore the GPU weights of {', '.join(left)}")
            raise
    return changed


def share_ids_of(cgroup_dir: str | Path) -> tuple[str, ...]:
    """The share IDs the hook recorded on a cgroup directory
    (:data:`SHARE_IDS_XATTR`, a ``trusted.*`` attribute; none when it
    recorded none, or the file system keeps no such attribute)."""
    try:
        raw = os.getxattr(cgroup_dir, SHARE_IDS_XATTR)
    except OSError:
        return ()
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        return ()
    return tuple(s for s in (p.strip() for p in text.split(",")) if s)


def record_share_ids(cgroup_dir: str | Path, share_ids: tuple[str, ...]) -> None:
    """Record @share_ids on the cgroup directory
    (:class:`pycgpu.core.errors.FileError`, an OSError, when it is gone or
    it cannot be set: ``trusted.*`` attributes take CAP_SYS_ADMIN)."""
    try:
        os.setxattr(cgroup_dir, SHARE_IDS_XATTR, ",".join(share_ids).encode())
    except OSError as e:
        raise file_error(e) from None
