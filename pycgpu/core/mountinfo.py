"""The one parser of /proc/PID/mountinfo (proc(5)), shared by
:func:`pycgpu.core.cgroup.find_mount` and ``pycgpu check``.

A line is ``ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE
SOURCE SUPER_OPTIONS``; the kernel escapes space, tab, newline and backslash
in paths as ``\\040``, ``\\011``, ``\\012`` and ``\\134``. Malformed lines are
skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ESCAPE = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True)
class Mount:
    mount_point: str
    root: str
    fstype: str
    source: str
    super_options: str


def unescape(text: str) -> str:
    """A path as mountinfo writes it, with its octal escapes decoded."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), text)


def parse(text: str) -> list[Mount]:
    out = []
    for line in text.splitlines():
        pre, sep, post = line.partition(" - ")
        pre_f, post_f = pre.split(" "), post.split(" ")
        if not sep or len(pre_f) < 5 or len(post_f) < 3:
            continue
        out.append(Mount(unescape(pre_f[4]), unescape(pre_f[3]), post_f[0], unescape(post_f[1]),
                         post_f[2]))
    return out
