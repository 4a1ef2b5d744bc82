"""The kernel log a test caused: /dev/kmsg records read from a point on,
as dmesg prints them, and the lines among them that report a kernel bug."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _vm_splat() -> re.Pattern[str]:
    """The pattern tools/vm.sh fails a whole run on (its SPLAT line): a
    warning, a bug, KASAN's, UBSAN's and lockdep's reports, a hung task,
    a leak. One list for both, so a test fails on what the run would."""
    script = Path(__file__).resolve().parents[2] / "tools" / "vm.sh"
    for line in script.read_text().splitlines():
        if line.startswith("SPLAT='"):
            return re.compile(line[len("SPLAT='"):line.rindex("'")])
    raise LookupError(f"{script} has no SPLAT= line")


SPLAT = _vm_splat()


def kernel_log_since(fd: int) -> list[str]:
    """The kernel log records written since FD (an O_NONBLOCK /dev/kmsg
    opened and moved to its end) was last read, as dmesg prints them."""
    lines: list[str] = []
    while True:
        try:
            record = os.read(fd, 8192).decode(errors="replace")
        except BlockingIOError:
            return lines
        except BrokenPipeError:  # records overwritten before they were read
            continue
        head, _, text = record.partition(";")
        usec = int(head.split(",")[2])
        lines.append(f"[{usec // 1_000_000:5d}.{usec % 1_000_000:06d}] "
                     + text.split("\n", 1)[0])


@contextmanager
def kernel_log() -> Iterator[list[str]]:
    """A list that holds, once the block ends, the kernel log records
    written while it ran."""
    lines: list[str] = []
    fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    try:
        os.lseek(fd, 0, os.SEEK_END)
        yield lines
        lines.extend(kernel_log_since(fd))
    finally:
        os.close(fd)


def splats(lines: list[str]) -> list[str]:
    """The lines of @lines that report a kernel bug."""
    return [line for line in lines if SPLAT.search(line)]
