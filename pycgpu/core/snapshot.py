"""``pycgpu show``'s data: the gpu.* files of a cgroup (or a subtree), read
by :func:`pycgpu.core.model.read_group` and projected into the ``cgroups``
items of the ``pycgpu.show/v1`` JSON schema (:mod:`pycgpu.core.schemas`):
numbers as numbers, ``max`` as null, device keys ``MAJ:MIN``, memory by
region key (:mod:`pycgpu.core.memory`). Files the kernel does not have (or
that the controller does not show for the group) are left out.

One ``scandir`` per group finds both its interface files and its children,
so a recursive walk costs one directory read plus one read per present file.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import model
from .cgroup import READ, CgroupError
from .memory import Interface

SCHEMA = "pycgpu.show/v1"  # = schemas.SHOW_V1


def read_group(dirpath: str, name: str, present: set[str],
               regions: Interface | None = None) -> dict[str, Any]:
    """The show/v1 item of the group at @dirpath whose interface files
    include @present, memory by the region keys of @regions; raises
    CgroupError naming a file that does not parse."""
    files = model.read_group(dirpath, name, present)
    if files.errors:
        fname, e = files.errors[0]
        path = os.path.join(dirpath, fname)
        raise CgroupError(errno.EINVAL, f"{path}: {e}", READ, path)
    return model.show_item(files, regions)


def _scan(dirpath: str) -> tuple[set[str], list[str]]:
    files, dirs = set(), []
    try:
        with os.scandir(dirpath) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False):
                    dirs.append(entry.name)
                elif entry.name.startswith(("gpu.", "dmem.")):
                    files.add(entry.name)
    except OSError as e:
        raise CgroupError(e.errno or 0, f"reading {dirpath}: {e.strerror}") from None
    dirs.sort()
    return files, dirs


def walk(mount: Path, relpath: str, recursive: bool = False,
         regions: Interface | None = None) -> Iterator[dict[str, Any]]:
    """show/v1 items of the group @relpath under @mount and, with
    @recursive, of all its descendants (pre-order, children by name);
    memory by the region keys of @regions."""
    rel = relpath.strip("/")
    stack = [(os.path.join(str(mount), rel) if rel else str(mount), "/" + rel)]
    while stack:
        dirpath, name = stack.pop()
        files, dirs = _scan(dirpath)
        yield read_group(dirpath, name, files, regions)
        if recursive:
            prefix = name.rstrip("/") + "/"
            stack.extend((os.path.join(dirpath, d), prefix + d) for d in reversed(dirs))


def add_capped_by(mount: Path, items: list[dict[str, Any]]) -> None:
    """``priority_capped_by``: for the items whose effective priority is
    below their own, the ancestor whose gpu.priority caps it."""
    from .cgroup import Cgroup
    from .knobs import ceiling

    for item in items:
        own, eff = item.get("priority"), item.get("priority_effective")
        if own is None or eff is None or eff >= own:
            continue
        cap = ceiling(Cgroup(mount, item["path"]))
        if cap is not None:
            item["priority_capped_by"] = cap[1].name


def document(mount: Path, items: list[dict[str, Any]],
             regions: Interface | None = None) -> dict[str, Any]:
    """The whole pycgpu.show/v1 document; with @regions, the kernel's memory
    interface and its regions (``memory``, added in v1)."""
    doc: dict[str, Any] = {"schema": SCHEMA, "cgroup_root": str(mount), "cgroups": items}
    if regions is not None:
        doc["memory"] = regions_json(regions)
    return doc


def regions_json(regions: Interface) -> dict[str, Any]:
    """The ``memory`` object of show/v1: the interface (``gpu.memory`` or
    ``dmem``) and each region: its key, the kernel's name, its device and
    dmem's capacity."""
    return {"interface": regions.kind,
            "regions": [{"key": r.key, "kernel_key": r.kernel_key,
                         "devt": str(r.dev) if r.dev else None, "region": r.name,
                         "capacity": r.capacity} for r in regions.regions]}
