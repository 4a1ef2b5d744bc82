"""``pycgpu show``'s data: the gpu.* files of a cgroup (or a subtree), read
by :func:`pycgpu.core.model.read_group` and projected into the ``cgroups``
items of the ``pycgpu.show/v1`` JSON schema (:mod:`pycgpu.core.schemas`):
numbers as numbers, ``max`` as null, a gpu.priority of ``default`` as
``priority_inherited``, device keys ``MAJ:MIN``, memory by
region key (:mod:`pycgpu.core.memory`). Files the kernel does not have (or
that the controller does not show for the group) are left out.

One ``scandir`` per group finds both its interface files and its children,
so a recursive walk costs one directory read plus one read per present file.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from . import model
from .cgroup import READ, CgroupError
from .formats import printable_name
from .memory import Interface

SCHEMA = "pycgpu.show/v1"  # = schemas.SHOW_V1


def read_group(dirpath: str, name: str, present: set[str],
               regions: Interface | None = None) -> dict[str, Any]:
    """The show/v1 item of the group at @dirpath whose interface files
    include @present, memory by the region keys of @regions; raises
    CgroupError naming a file that does not parse."""
    return _item(dirpath, model.read_group(dirpath, name, present), regions)


def _item(dirpath: str, files: model.GroupFiles, regions: Interface | None) -> dict[str, Any]:
    if files.errors:
        fname, e = files.errors[0]
        path = os.path.join(dirpath, fname)
        raise CgroupError(errno.EINVAL, f"{path}: {e}", READ, path)
    return model.show_item(files, regions)


class _Gone(Exception):
    """The group went away while the walk read it."""


def _scan(dirpath: str) -> tuple[set[str], list[str]]:
    files, dirs = set(), []
    try:
        with os.scandir(dirpath) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False):
                    dirs.append(entry.name)
                elif entry.name.startswith(("gpu.", "dmem.")):
                    files.add(entry.name)
    except (FileNotFoundError, NotADirectoryError):
        raise _Gone from None
    except OSError as e:
        raise CgroupError(e.errno or 0, f"reading {dirpath}: {e.strerror}", READ,
                          dirpath) from None
    dirs.sort()
    return files, dirs


def _group(dirpath: str, name: str, present: set[str],
           regions: Interface | None) -> dict[str, Any]:
    """:func:`read_group`, or :class:`_Gone` when files the listing showed
    are missing because the group itself went away."""
    files = model.read_group(dirpath, name, present)
    if files.present != present & model.FILE.keys() and not os.path.isdir(dirpath):
        raise _Gone
    return _item(dirpath, files, regions)


Skipped = Callable[[str], None]
"""Told why a group of a recursive walk was left out (a message naming it)."""


def walk(mount: Path, relpath: str, recursive: bool = False,
         regions: Interface | None = None,
         skipped: Skipped | None = None) -> Iterator[dict[str, Any]]:
    """show/v1 items of the group @relpath under @mount and, with
    @recursive, of all its descendants (pre-order, children by name);
    memory by the region keys of @regions.

    A tree where groups come and go: a descendant that went away during the
    walk is left out, as it is no longer there. With @skipped, a descendant
    whose files cannot be read or do not parse is left out too, and
    @skipped is told why (its children are still walked, where it could be
    listed); without, that is a :class:`CgroupError`, as it always is for
    the group @relpath itself."""
    rel = relpath.strip("/")
    top = os.path.join(str(mount), rel) if rel else str(mount)
    stack = [(top, "/" + rel)]
    while stack:
        dirpath, name = stack.pop()
        descendant = dirpath != top
        dirs: list[str] = []
        try:
            files, dirs = _scan(dirpath)
            item = _group(dirpath, name, files, regions)
        except _Gone:
            if not descendant:
                raise CgroupError(errno.ENOENT, f"reading {dirpath}: the group went away",
                                  READ, dirpath) from None
            continue
        except CgroupError as e:
            if not descendant or skipped is None:
                raise
            skipped(f"{e.strerror or e}; {name} skipped")
            item = None
        if item is not None:
            yield item
        if recursive:
            prefix = name.rstrip("/") + "/"
            stack.extend((os.path.join(dirpath, d), prefix + d) for d in reversed(dirs))


def add_capped_by(mount: Path, items: list[dict[str, Any]]) -> None:
    """``priority_capped_by``: for the items whose effective priority is
    below their own, the ancestor whose gpu.priority caps it; for those
    without a priority of their own (``priority_inherited``), the ancestor
    their effective one comes from (a top-level group's default 0 included;
    none for a top-level group): :func:`pycgpu.core.knobs.ceiling`'s, the
    outermost one that sets it."""
    from .cgroup import Cgroup
    from .knobs import ceiling

    for item in items:
        own, eff = item.get("priority"), item.get("priority_effective")
        if eff is None or not (item.get(model.INHERITED) or (own is not None and eff < own)):
            continue
        try:
            cap = ceiling(Cgroup(mount, item["path"]))
        except CgroupError:  # an ancestor went away or does not parse: no note
            continue
        if cap is not None:
            item["priority_capped_by"] = cap.group.name


def document(mount: Path, items: list[dict[str, Any]],
             regions: Interface | None = None) -> dict[str, Any]:
    """The whole pycgpu.show/v1 document; with @regions, the kernel's memory
    interface and its regions (``memory``, added in v1). Group names as
    :func:`pycgpu.core.formats.printable_name` prints them (no lone
    surrogates for bytes that are not UTF-8)."""
    doc: dict[str, Any] = {"schema": SCHEMA, "cgroup_root": printable_name(str(mount)),
                           "cgroups": [printable(item) for item in items]}
    if regions is not None:
        doc["memory"] = regions_json(regions)
    return doc


_NAMES = ("path", "priority_capped_by")


def printable(item: dict[str, Any]) -> dict[str, Any]:
    """A show/v1 item with its group names (path, priority_capped_by) as
    :func:`pycgpu.core.formats.printable_name` prints them."""
    if all(printable_name(item[k]) == item[k] for k in _NAMES if k in item):
        return item
    return {k: printable_name(v) if k in _NAMES else v for k, v in item.items()}


def regions_json(regions: Interface) -> dict[str, Any]:
    """The ``memory`` object of show/v1: the interface (``gpu.memory`` or
    ``dmem``) and each region: its key, the kernel's name, its device and
    dmem's capacity."""
    return {"interface": regions.kind,
            "regions": [{"key": r.key, "kernel_key": r.kernel_key,
                         "devt": str(r.dev) if r.dev else None, "region": r.name,
                         "capacity": r.capacity} for r in regions.regions]}
