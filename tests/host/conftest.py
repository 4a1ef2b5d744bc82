"""Host-tier fixtures: a fake cgroup2 tree whose writes follow the gpu
controller's rules (../shared/DESIGN.md section 2), and fake sysfs and /dev
trees with two GPUs (an i915 PCI device and vgem).

The fake kernel replaces pycgpu.core.cgroup's three file-system seams (_mkdir,
_rmdir, _write_file): mkdir populates interface files like cgroupfs does,
rmdir removes them. Writes to the knobs are answered by the reference model
of tests/kernel_model.py, not by pycgpu's parsers (which would judge
themselves): its errno (EINVAL, ERANGE, E2BIG, ...) or the canonical text
the kernel would print; the model is checked against a table recorded from
the real kernel. Tests make a step fail with
``fake.fail["a/gpu.priority"] = errno.ERANGE``.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from kernel_model import Model, Refused, effective, parse_back

from pycgpu.core import cgroup as cgroup_mod
from pycgpu.core.formats import DevT

I915 = DevT(226, 128)
VGEM = DevT(226, 129)

GPU_FILES = ("gpu.weight", "gpu.priority", "gpu.priority.effective", "gpu.max")
MEMORY_FILES = ("gpu.memory.max", "gpu.memory.current", "gpu.memory.peak",
                "gpu.memory.events", "gpu.memory.events.local", "gpu.stat")


def _err(code: int) -> OSError:
    return OSError(code, os.strerror(code))


class FakeKernel:
    def __init__(self, base: Path, controllers: str = "cpu memory gpu", memory: bool = True,
                 devices: tuple[DevT, ...] = (I915, VGEM),
                 dmem: dict[str, int] | None = None, unset: bool = True) -> None:
        """@memory: gpu.memory.* (6.12 series); @dmem: the dmem controller
        with these regions and capacities (7.3 series: no gpu.memory.*);
        @unset: gpu.priority's ``default`` (a new group's priority is unset
        and inherits); False: a kernel before it (a new group's is 0)."""
        self.root = base / "cgroup"
        self.root.mkdir()
        if dmem is not None:
            controllers += " dmem"
            (self.root / "dmem.capacity").write_text(
                "".join(f"{r} {size}\n" for r, size in dmem.items()))
            (self.root / "dmem.current").write_text("".join(f"{r} 0\n" for r in dmem))
        (self.root / "cgroup.controllers").write_text(controllers + "\n")
        (self.root / "cgroup.subtree_control").write_text("\n")
        (self.root / "cgroup.procs").write_text("")
        self.memory = memory
        self.unset = unset
        self.dmem = dmem or {}
        self.devices = set(devices)
        self.log: list[tuple[str, str]] = []
        self.fail: dict[str, int] = {}

    def install(self, monkeypatch: pytest.MonkeyPatch) -> FakeKernel:
        monkeypatch.setattr(cgroup_mod, "_mkdir", self.mkdir)
        monkeypatch.setattr(cgroup_mod, "_rmdir", self.rmdir)
        monkeypatch.setattr(cgroup_mod, "_write_file", self.write)
        return self

    # helpers for tests ----------------------------------------------------------

    def rel(self, path: Path) -> str:
        return str(path.relative_to(self.root))

    def read(self, rel: str) -> str:
        return (self.root / rel).read_text()

    def make(self, rel: str) -> Path:
        """Create a group and enable gpu along its path, without logging."""
        log = list(self.log)
        path = self.root
        for part in Path(rel).parts:
            if "gpu" not in self._words(path / "cgroup.subtree_control"):
                self.write(path / "cgroup.subtree_control", b"+gpu")
            path = path / part
            if not path.exists():
                self.mkdir(path)
        self.log = log
        return path

    def snapshot(self) -> dict[str, bytes]:
        """Every file's content and every directory, to check that nothing changed."""
        return {str(p.relative_to(self.root)): p.read_bytes() if p.is_file() else b"<dir>"
                for p in sorted(self.root.rglob("*"))}

    # cgroupfs -------------------------------------------------------------------

    @staticmethod
    def _words(path: Path) -> set[str]:
        return set(path.read_text().split()) if path.exists() else set()

    def _gpu_files(self, path: Path, on: bool) -> None:
        names = GPU_FILES + (MEMORY_FILES if self.memory else ())
        for name in names:
            f = path / name
            if on and not f.exists():
                content = {"gpu.weight": "default 100\n", "gpu.max": "default max 100000\n",
                           "gpu.priority": "default\n" if self.unset else "0\n"}.get(name, "")
                f.write_text(content)
            elif not on and f.exists():
                f.unlink()
        if on:
            self._effective(path)

    def _effective(self, path: Path) -> None:
        """gpu.priority.effective of @path and its descendants, by the model."""
        if (path / "gpu.priority").exists():
            chain = []
            for group in [path, *path.parents]:
                if group == self.root:
                    break
                f = group / "gpu.priority"
                chain.append(parse_back(f.name, f.read_text()) if f.exists() else None)
            (path / "gpu.priority.effective").write_text(f"{effective(chain[::-1])}\n")
        for child in path.iterdir():
            if child.is_dir():
                self._effective(child)

    def _dmem_files(self, path: Path, on: bool) -> None:
        """dmem's files of a non-root group, as kernel/cgroup/dmem.c shows them."""
        texts = {"dmem.max": "max", "dmem.min": "0", "dmem.low": "0", "dmem.current": "0",
                 "dmem.peak": "0", "dmem.events": "max=0", "dmem.events.local": "max=0"}
        for name, value in texts.items():
            f = path / name
            if on and not f.exists():
                f.write_text("".join(f"{r} {value}\n" for r in self.dmem))
            elif not on and f.exists():
                f.unlink()

    def mkdir(self, path: Path) -> None:
        if self.fail.get(self.rel(path)):
            raise _err(self.fail[self.rel(path)])
        os.mkdir(path)
        controllers = self._words(path.parent / "cgroup.subtree_control")
        (path / "cgroup.controllers").write_text(" ".join(sorted(controllers)) + "\n")
        (path / "cgroup.subtree_control").write_text("\n")
        (path / "cgroup.procs").write_text("")
        if "gpu" in controllers:
            self._gpu_files(path, True)
        if "dmem" in controllers:
            self._dmem_files(path, True)

    def rmdir(self, path: Path) -> None:
        if any(p.is_dir() for p in path.iterdir()):
            raise _err(errno.ENOTEMPTY)
        # a process that exited has left the group, as the kernel drops it
        if any(os.path.exists(f"/proc/{pid}")
               for pid in (path / "cgroup.procs").read_text().split()):
            raise _err(errno.EBUSY)
        for p in path.iterdir():
            p.unlink()
        os.rmdir(path)

    def write(self, path: Path, data: bytes) -> None:
        if not path.exists():
            raise _err(errno.ENOENT)
        code = self.fail.get(self.rel(path))
        if code:
            raise _err(code)
        text = data.decode()
        if path.name in ("gpu.weight", "gpu.priority", "gpu.max", "gpu.memory.max"):
            self._knob(path, data)
        elif path.name in ("dmem.max", "dmem.min", "dmem.low"):
            self._dmem_knob(path, text)
        elif path.name == "cgroup.subtree_control":
            self._subtree_control(path, text)
        elif path.name == "cgroup.procs":
            self._procs(path, text)
        else:
            raise _err(errno.EACCES)
        self.log.append((self.rel(path), text))

    def _subtree_control(self, path: Path, text: str) -> None:
        enabled = self._words(path)
        available = self._words(path.parent / "cgroup.controllers")
        for token in text.split():
            op, name = token[0], token[1:]
            if op not in "+-" or name not in available:
                raise _err(errno.EINVAL if op not in "+-" else errno.ENOENT)
            if op == "+":
                enabled.add(name)
            else:
                enabled.discard(name)
        path.write_text(" ".join(sorted(enabled)) + "\n")
        for child in path.parent.iterdir():
            if child.is_dir():
                (child / "cgroup.controllers").write_text(" ".join(sorted(enabled)) + "\n")
                self._gpu_files(child, "gpu" in enabled)
                self._dmem_files(child, "dmem" in enabled)

    def _procs(self, path: Path, text: str) -> None:
        pid = int(text)
        pids = path.read_text().split()
        path.write_text("".join(f"{p}\n" for p in [*pids, str(pid)]))

    def _dmem_knob(self, path: Path, text: str) -> None:
        """A write to dmem.max (min, low), as kernel/cgroup/dmem.c answers it."""
        words = text.split()
        if len(words) != 2 or words[0] not in self.dmem:
            raise _err(errno.EINVAL)
        if words[1] != "max" and not words[1].isdigit():
            raise _err(errno.EINVAL)
        lines = dict(line.split() for line in path.read_text().splitlines())
        lines[words[0]] = words[1]
        path.write_text("".join(f"{r} {v}\n" for r, v in lines.items()))

    def _knob(self, path: Path, data: bytes) -> None:
        """A write to a knob, as the model of kernel/cgroup/gpu.c answers it."""
        model = Model({(d.major, d.minor): True for d in sorted(self.devices)}, self.unset)
        model.load(path.name, path.read_text())
        try:
            model.write(path.name, data)
        except Refused as e:
            raise _err(e.code) from None
        path.write_text(model.render(path.name))
        if path.name == "gpu.priority":
            self._effective(path.parent)


@pytest.fixture
def fake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeKernel:
    return FakeKernel(tmp_path).install(monkeypatch)


# sysfs and /dev -----------------------------------------------------------------


def _node(sysfs: Path, parent: Path, name: str, devt: str) -> None:
    node = parent / "drm" / name
    node.mkdir(parents=True)
    (node / "dev").write_text(devt + "\n")
    (node / "device").symlink_to(os.path.relpath(parent, node))
    link = sysfs / "class" / "drm" / name
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(os.path.relpath(node, link.parent))


@pytest.fixture
def fake_sysfs(tmp_path: Path) -> tuple[Path, Path]:
    """(sysfs root, /dev root) with renderD128/card0 of an i915 PCI GPU at
    0000:00:02.0 and renderD129/card1 of vgem (a platform device without a
    driver link)."""
    sysfs, dev = tmp_path / "sys", tmp_path / "dev"
    pci = sysfs / "devices" / "pci0000:00" / "0000:00:02.0"
    pci.mkdir(parents=True)
    (pci / "vendor").write_text("0x8086\n")
    (pci / "device").write_text("0x46a6\n")
    drivers = sysfs / "bus" / "pci" / "drivers" / "i915"
    drivers.mkdir(parents=True)
    (pci / "driver").symlink_to(os.path.relpath(drivers, pci))
    _node(sysfs, pci, "card0", "226:0")
    _node(sysfs, pci, "renderD128", "226:128")
    vgem = sysfs / "devices" / "platform" / "vgem"
    vgem.mkdir(parents=True)
    _node(sysfs, vgem, "card1", "226:1")
    _node(sysfs, vgem, "renderD129", "226:129")
    dri = dev / "dri"
    dri.mkdir(parents=True)
    for name in ("card0", "card1", "renderD128", "renderD129"):
        (dri / name).write_text("")
    (dri / "by-path").mkdir()
    (dri / "by-path" / "pci-0000:00:02.0-render").symlink_to("../renderD128")
    return sysfs, dev


class Cli:
    """Runs the CLI in-process against the fake kernel and fake sysfs."""

    def __init__(self, fake: FakeKernel, sysfs: Path, dev: Path) -> None:
        self.fake = fake
        self.env = {"PYCGPU_CGROUP_ROOT": str(fake.root), "PYCGPU_SYSFS_ROOT": str(sysfs),
                    "PYCGPU_DEV_ROOT": str(dev)}

    def __call__(self, *args: str, code: int = 0):
        from pycgpu.cli import main

        result = CliRunner().invoke(main, list(args), env=self.env)
        if result.exception and not isinstance(result.exception, SystemExit):
            raise result.exception
        assert result.exit_code == code, (result.exit_code, result.output)
        return result


@pytest.fixture
def cli(fake: FakeKernel, fake_sysfs: tuple[Path, Path]) -> Cli:
    return Cli(fake, *fake_sysfs)
