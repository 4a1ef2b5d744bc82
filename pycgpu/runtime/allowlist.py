"""Which ``pycgpu.io/`` annotation knobs the OCI hook applies on this node:
the node administrator's allow-list.

A container's annotations may come from whoever wrote its pod (containerd's
``pod_annotations``, CRI-O, ``podman --annotation``), and the hook cannot
tell who wrote them. So the knobs it applies are those on the allow-list:

1. the node's file, :data:`NODE_FILE` (``/etc/pycgpu/runtime/annotations.allow``):
   one key per line (``pycgpu.io/gpu.weight`` or ``gpu.weight``), ``#``
   comments; it must be a regular file owned by root (or by the user the
   hook runs as) and writable by its owner only, else the hook refuses every
   container that asks for a knob; without the file, :data:`DEFAULT`:
   ``gpu.weight``, ``gpu.memory.max`` and ``image-check``. ``gpu.priority``
   is off by default: a strict priority lets one container take a GPU from
   every other, so a node allows it on purpose; so is ``gpu.max``: a
   container that may write its own cap may lift the cap an operator sold
   it (within what its pod's group allows: caps nest);
2. plus the keys of the hook's own arguments, ``pycgpu oci hook --allow
   KEY``: the hook entry is written by whoever controls the runtime's
   configuration (the CDI spec in /etc/cdi, a bundle's config.json), who can
   run any command as root anyway; pods cannot add hook entries.

An annotation outside the allow-list refuses the container (fail closed):
nothing is applied. ``pycgpu.io/share-ids`` is no key at all: share IDs
come from the hook entries of the device plugin's per-share CDI devices
(:func:`pycgpu.runtime.oci.share_id_of`; a pod cannot write them, though
whatever can name a share's CDI device gets its entry), and the
hook ignores the annotation with a warning (:mod:`pycgpu.runtime.annotations`).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from ..core.errors import Error
from . import annotations as ann

NODE_FILE = Path("/etc/pycgpu/runtime/annotations.allow")
DEFAULT: frozenset[str] = frozenset({ann.WEIGHT, ann.MEMORY_MAX, ann.IMAGE_CHECK})


class AllowListError(Error, ValueError):
    """The allow-list cannot be read or trusted, or names an unknown key."""


def key(text: str) -> str:
    """``gpu.priority`` or ``pycgpu.io/gpu.priority`` -> the annotation key
    (AllowListError for a key the hook does not know)."""
    name = text.strip()
    full = name if name.startswith(ann.PREFIX) else ann.PREFIX + name
    if full not in ann.ALLOWED:
        raise AllowListError(f"{name!r} is not a pycgpu.io/ annotation the hook knows (known: "
                             + ", ".join(ann.ALLOWED) + ")")
    return full


def keys(texts: Iterable[str]) -> frozenset[str]:
    return frozenset(key(t) for t in texts)


def load(path: Path) -> frozenset[str] | None:
    """The keys in the allow-list file @path; None when there is no such
    file. Raises :class:`AllowListError` for a file that is not a regular
    file (a symbolic link included: never followed), is owned by another
    user than root or the current one, is writable by its group or others,
    cannot be read, or names an unknown key."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as e:
        # O_NOFOLLOW on a symlink: ELOOP ("Too many levels of symbolic links")
        why = ("it is a symbolic link, not trusted (name the file itself)"
               if e.errno == errno.ELOOP else e.strerror)
        raise AllowListError(f"cannot open the allow-list {path}: {why}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise AllowListError(f"the allow-list {path} is not a regular file")
        if st.st_uid not in (0, os.geteuid()):
            raise AllowListError(f"the allow-list {path} is owned by uid {st.st_uid}, not "
                                 "root: not trusted")
        if st.st_mode & 0o022:
            raise AllowListError(f"the allow-list {path} is writable by its group or others "
                                 f"(mode {stat.S_IMODE(st.st_mode):o}): not trusted")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(65536)
    except OSError as e:
        raise AllowListError(f"cannot read the allow-list {path}: {e.strerror}") from None
    finally:
        os.close(fd)
    try:
        text = data.decode()
    except UnicodeDecodeError:
        raise AllowListError(f"the allow-list {path} is not UTF-8 text") from None
    out = set()
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if line:
            try:
                out.add(key(line))
            except AllowListError as e:
                raise AllowListError(f"{path}, line {n}: {e}") from None
    return frozenset(out)


def for_hook(flags: Iterable[str], path: Path = NODE_FILE) -> frozenset[str]:
    """The allow-list in force: the file @path (else :data:`DEFAULT`) plus
    @flags (the hook's --allow)."""
    extra = keys(flags)
    found = load(path)
    return (DEFAULT if found is None else found) | extra
