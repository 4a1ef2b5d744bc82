"""Read every gpu.* file of a cgroup (or a subtree) into plain data, the
``cgroups`` items of the ``pycgpu.show/v1`` JSON schema
(:mod:`pycgpu.core.schemas`): numbers as numbers, ``max`` as null, device keys
``MAJ:MIN``. Files the kernel does not have (or that the controller does not
show for the group) are left out.

One ``scandir`` per group finds both its interface files and its children,
so a recursive walk costs one directory read plus one read per present file.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import formats
from .cgroup import READ, CgroupError, read_interface

SCHEMA = "pycgpu.show/v1"  # = schemas.SHOW_V1

_FLAT = ("gpu.memory.max", "gpu.memory.current", "gpu.memory.peak")
_NESTED = ("gpu.memory.events", "gpu.memory.events.local", "gpu.stat")
FILES = ("gpu.weight", "gpu.priority", "gpu.priority.effective", *_FLAT, *_NESTED)


def _keyed(d: dict[formats.DevT, Any]) -> dict[str, Any]:
    return {str(k): v for k, v in d.items()}


def read_group(dirpath: str, name: str, present: set[str]) -> dict[str, Any]:
    """The show/v1 item of the group at @dirpath whose interface files
    include @present; raises CgroupError naming a file that does not parse."""
    item: dict[str, Any] = {"path": name, "gpu_enabled": "gpu.weight" in present}
    memory: dict[str, Any] = {}
    for fname in FILES:
        if fname not in present:
            continue
        path = os.path.join(dirpath, fname)
        text = read_interface(path)
        if text is None:  # removed since the directory was listed
            continue
        try:
            if fname == "gpu.weight":
                w = formats.parse_weight(text)
                item["weight"] = {"default": w.default, "devices": _keyed(w.devices)}
            elif fname == "gpu.priority":
                item["priority"] = formats.parse_int(text, fname)
            elif fname == "gpu.priority.effective":
                item["priority_effective"] = formats.parse_int(text, fname)
            elif fname in _FLAT:
                memory[fname.rsplit(".", 1)[1]] = _keyed(formats.parse_flat_keyed(text))
            elif fname == "gpu.stat":
                item["stat"] = _keyed(formats.parse_nested_keyed(text))
            else:
                key = "events_local" if fname.endswith(".local") else "events"
                memory[key] = _keyed(formats.parse_nested_keyed(text))
        except formats.FormatError as e:
            raise CgroupError(errno.EINVAL, f"{path}: {e}", READ, path) from None
    if memory:
        item["memory"] = memory
    return item


def _scan(dirpath: str) -> tuple[set[str], list[str]]:
    files, dirs = set(), []
    try:
        with os.scandir(dirpath) as it:
            for entry in it:
                if entry.is_dir(follow_symlinks=False):
                    dirs.append(entry.name)
                elif entry.name.startswith("gpu."):
                    files.add(entry.name)
    except OSError as e:
        raise CgroupError(e.errno or 0, f"reading {dirpath}: {e.strerror}") from None
    dirs.sort()
    return files, dirs


def walk(mount: Path, relpath: str, recursive: bool = False) -> Iterator[dict[str, Any]]:
    """show/v1 items of the group @relpath under @mount and, with
    @recursive, of all its descendants (pre-order, children by name)."""
    rel = relpath.strip("/")
    stack = [(os.path.join(str(mount), rel) if rel else str(mount), "/" + rel)]
    while stack:
        dirpath, name = stack.pop()
        files, dirs = _scan(dirpath)
        yield read_group(dirpath, name, files)
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


def document(mount: Path, items: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole pycgpu.show/v1 document."""
    return {"schema": SCHEMA, "cgroup_root": str(mount), "cgroups": items}
