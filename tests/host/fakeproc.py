"""A fake /proc for the fdinfo source: per process ``fd/N`` symlinks (to
``/dev/dri/renderD128`` and friends, dangling), ``fdinfo/N`` files and a
``cgroup`` file, plus a stand-in for the ``stat`` of an fd that maps the
link target to a device number (tests cannot mknod)."""

from __future__ import annotations

import os
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures" / "fdinfo"

DEVNUMS = {
    "/dev/dri/card0": (226, 0),
    "/dev/dri/renderD128": (226, 128),
    "/dev/dri/card1": (226, 1),
    "/dev/dri/renderD129": (226, 129),
    "/dev/dri/renderD130": (226, 130),  # not in the fake sysfs
    "/dev/nvidia0": (195, 0),
}


def fixture(name: str) -> str:
    return (FIXTURES / f"{name}.txt").read_text()


def fake_devnum(path: str) -> tuple[int, int] | None:
    try:
        return DEVNUMS.get(os.readlink(path))
    except OSError:
        return None


def client(driver: str = "simgpu", client_id: int = 1, engines: dict[str, int] | None = None,
           pdev: str | None = None, memory: int | None = None, extra: str = "") -> str:
    """An fdinfo text with the given keys."""
    lines = ["pos:\t0", "flags:\t02100002", f"drm-driver:\t{driver}",
             f"drm-client-id:\t{client_id}"]
    if pdev:
        lines.append(f"drm-pdev:\t{pdev}")
    for name, ns in (engines or {}).items():
        lines.append(f"drm-engine-{name}:\t{ns} ns")
    if memory is not None:
        lines += [f"drm-total-memory:\t{memory}", f"drm-resident-memory:\t{memory}"]
    return "\n".join(lines) + "\n" + extra


class FakeProc:
    def __init__(self, base: Path) -> None:
        self.root = base / "proc"
        self.root.mkdir()
        (self.root / "self").symlink_to("1")  # non-numeric entries are skipped
        (self.root / "meminfo").write_text("MemTotal: 1 kB\n")

    def process(self, pid: int, cgroup: str = "/",
                fds: dict[int, tuple[str, str | None]] | None = None) -> Path:
        """Process @pid in @cgroup with fds {N: (link target, fdinfo text)}."""
        d = self.root / str(pid)
        (d / "fd").mkdir(parents=True)
        (d / "fdinfo").mkdir()
        (d / "cgroup").write_text(f"0::{cgroup}\n")
        for fd, (target, text) in (fds or {}).items():
            self.fd(pid, fd, target, text)
        return d

    def fd(self, pid: int, fd: int, target: str, text: str | None) -> None:
        d = self.root / str(pid)
        (d / "fd" / str(fd)).symlink_to(target)
        (d / "fdinfo" / str(fd)).write_text(text if text is not None else "pos:\t0\n")

    def set_info(self, pid: int, fd: int, text: str) -> None:
        (self.root / str(pid) / "fdinfo" / str(fd)).write_text(text)

    def move(self, pid: int, cgroup: str) -> None:
        (self.root / str(pid) / "cgroup").write_text(f"0::{cgroup}\n")

    def exit(self, pid: int) -> None:
        import shutil

        shutil.rmtree(self.root / str(pid))


class Clock:
    """A monotonic clock the tests advance by hand, and by @step_s at every
    reading if they set it (a read that takes time)."""

    def __init__(self, step_s: float = 0.0) -> None:
        self.ns = 1_000_000_000
        self.step_ns = int(step_s * 1e9)

    def __call__(self) -> int:
        self.ns += self.step_ns
        return self.ns

    def advance(self, seconds: float) -> None:
        self.ns += int(seconds * 1e9)
