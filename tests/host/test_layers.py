"""The packages are layers: each imports only from the layers below it.

core (the cgroup tree, knobs, devices, formats) < runtime (OCI configs,
the hook, CDI, annotations) < k8s (kubepods, the device plugin, the
kubelet's APIs) < monitoring (stat, top, the exporter) < cli. Read from the
source with ast, every import (at module level or in a function) counts."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "pycgpu"
LAYERS = ("core", "runtime", "k8s", "monitoring", "cli")


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every pycgpu module @path imports."""
    module = _module(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("pycgpu")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("pycgpu"):
                # `from pycgpu.x import y` may name module y: count it as its own import
                out += [(node.lineno, f"{target}.{a.name}") for a in node.names]
    return out


def layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def violations() -> list[str]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "_pb2" in path.name:
            continue
        own = layer(_module(path))
        for line, target in imports(path):
            other = layer(target)
            if own is None or other is None or other == own:
                continue
            if LAYERS.index(other) > LAYERS.index(own):
                out.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {own} imports {target}")
    return out


def test_every_module_is_in_a_layer():
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert top == ["__init__.py", "__main__.py"]
    # a directory without Python files (the __pycache__ a checkout keeps of
    # a package that moved) is no package
    assert sorted(p.name for p in PACKAGE.iterdir() if p.is_dir() and any(p.glob("*.py"))
                  ) == sorted(LAYERS)


def test_each_layer_imports_only_from_the_layers_below():
    assert violations() == []


@pytest.mark.parametrize("source, found", [
    ("from ..runtime import oci\n", "core imports pycgpu.runtime.oci"),
    ("def f():\n    from ..monitoring.kernel import KernelSource\n",
     "core imports pycgpu.monitoring.kernel.KernelSource"),
    ("import pycgpu.cli\n", "core imports pycgpu.cli"),
])
def test_an_upward_import_is_found(tmp_path, monkeypatch, source, found):
    """The check itself: an import from a higher layer, at module level or
    in a function, relative or absolute, is reported."""
    module = PACKAGE / "core" / "_layer_probe.py"
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: source
                        if self == module else Path.read_bytes(self).decode())
    monkeypatch.setattr(Path, "rglob", lambda self, pattern: iter([module]))
    assert [v.split(": ", 1)[1] for v in violations()] == [found]
