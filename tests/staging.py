"""Python run as another user from a checkout that user cannot read.

The VM's delegation tests run Python as uid 65534. A checkout in a
directory only root may enter (a clone in /root, mode 0700) is out of its
reach, and so may be the interpreter of the checkout's venv (pyenv's lives
in /root too): "No module named pycgpu". :func:`stage` copies the modules
that user's code imports (pycgpu, the tests' helpers, and the third-party
modules they load: click, cffi, ...) into a fresh directory that everyone
can read; :func:`interpreters` lists the interpreters of this Python's
version to try, for the caller to pick one the user can run.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

# Prints {top-level module: its file or package directory} for the modules
# that importing argv[1:] loads from outside the standard library.
_SOURCES = """
import importlib, json, os, sys
std = os.path.dirname(os.__file__)
before = set(sys.modules)
for name in sys.argv[1:]:
    importlib.import_module(name)
out = {}
for name in sorted(set(sys.modules) - before):
    top = name.partition(".")[0]
    module = sys.modules.get(top)
    origin = getattr(getattr(module, "__spec__", None), "origin", None)
    if not origin or not os.path.isabs(origin):
        continue  # built in, or a namespace package
    parts = origin.split(os.sep)
    if origin.startswith(std + os.sep) and not {"site-packages", "dist-packages"} & set(parts):
        continue  # the standard library, which the interpreter brings
    locations = getattr(module, "__path__", None)
    out[top] = list(locations)[0] if locations else origin
print(json.dumps(out))
"""


def sources(modules: Sequence[str], path: Sequence[str | Path] = ()) -> dict[str, str]:
    """What importing @modules (with @path first on the import path) loads
    from outside the standard library, @modules included: each top-level
    module's file, or its package's directory. Found by a fresh interpreter,
    so what this process happens to have imported does not count."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, path), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-c", _SOURCES, *modules], capture_output=True,
                       text=True, env=env, cwd="/", check=True, timeout=60)
    found: dict[str, str] = json.loads(r.stdout)
    return found


def stage(found: dict[str, str], parent: Path | None = None) -> Path:
    """A new directory (under @parent, else the system's temporary
    directory) holding a copy of each of @found's modules, everyone able to
    read it: directories 0755, files 0644 (0755 if executable), with no
    bytecode caches. @parent and its ancestors must be searchable by all."""
    parent = Path(parent or tempfile.gettempdir()).resolve()
    closed = [p for p in (parent, *parent.parents) if not os.stat(p).st_mode & stat.S_IXOTH]
    if closed:
        raise PermissionError(f"cannot stage modules for other users under {parent}: "
                              f"{closed[0]} is not searchable by them (set TMPDIR)")
    dest = Path(tempfile.mkdtemp(prefix="pycgpu-staged-", dir=parent))
    for name, src in found.items():
        if os.path.isdir(src):
            shutil.copytree(src, dest / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, dest / os.path.basename(src))
    for directory, _, files in os.walk(dest):
        os.chmod(directory, 0o755)
        for f in files:
            p = os.path.join(directory, f)
            os.chmod(p, 0o755 if os.stat(p).st_mode & stat.S_IXUSR else 0o644)
    return dest


def interpreters() -> list[str]:
    """Interpreters of this Python's version, to try in order: this one
    (symlinks resolved: a venv's python is a link to its base), the base
    of a venv, and the system's ``pythonX.Y``; each once."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    system = shutil.which(version, path=os.pathsep.join(("/usr/local/bin", "/usr/bin", "/bin")))
    out: list[str] = []
    for candidate in (sys.executable, getattr(sys, "_base_executable", None), system):
        if candidate:
            real = os.path.realpath(candidate)
            if real not in out:
                out.append(real)
    return out
