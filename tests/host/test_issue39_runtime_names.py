"""Duplicates folded (issue 39, item 11): one name, one meaning (the hook's
container state is not the CLI's State, the hook's refusal not the CLI's
Refused, the device plugin's setting names not the knobs' Names), and one
implementation of a lock on a directory (kubepods holds its lock through
pycgpu.core.locks)."""

from __future__ import annotations

import ast
import contextlib
from pathlib import Path

import pycgpu
from pycgpu.core import locks
from pycgpu.core.cgroup import Cgroup
from pycgpu.core.formats import DevT
from pycgpu.runtime import kubepods

PACKAGE = Path(pycgpu.__file__).parent
FOLDED = {"State", "Refused", "Names"}


def _classes() -> dict[str, list[str]]:
    """Public class name -> the modules that define one (generated stubs left out)."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name.endswith(("_pb2.py", "_pb2_grpc.py")):
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                found.setdefault(node.name, []).append(str(path.relative_to(PACKAGE)))
    return found


def test_state_refused_and_names_each_have_one_meaning():
    dups = {name: where for name, where in _classes().items()
            if name in FOLDED and len(where) > 1}
    assert dups == {}


def test_the_renamed_classes():
    from pycgpu.k8s import shares
    from pycgpu.runtime import hook

    assert hook.ContainerState.parse('{"id": "c", "bundle": "/b"}').id == "c"
    assert issubclass(hook.HostRefused, hook.HookError)
    assert shares.ConfigNames().shares == "shares"


def test_kubepods_locks_its_root_through_locks(fake, monkeypatch):
    """kubepods.apply holds pycgpu.core.locks' lock on the kubelet's root
    cgroup (its own copy of the flock is folded)."""
    held: list[Path] = []
    real = locks.tree_lock

    @contextlib.contextmanager
    def tree_lock(path: Path):
        with real(path):
            held.append(Path(path))
            yield

    monkeypatch.setattr(locks, "tree_lock", tree_lock)
    container = "kubepods/burstable/pod1/ctr"
    fake.make(container)
    kubepods.apply(Cgroup(fake.root, container), kubepods.Asked(None, {DevT(226, 128): 300}))
    assert held == [fake.root / "kubepods"]
