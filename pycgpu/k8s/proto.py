"""The device plugin API's Python stubs, generated from
``deviceplugin_v1beta1.proto`` by grpcio-tools when first needed.

The generated modules are never committed: :func:`load` runs ``protoc``
(``grpc_tools.protoc``, no compiler needed) into a cache directory keyed by
the hash of the .proto and the versions of grpcio-tools and protobuf, and
imports them from there. The cache is ``$PYCGPU_PROTO_CACHE``, else
``$XDG_CACHE_HOME/pycgpu/proto`` (``~/.cache/pycgpu/proto``), else a
directory under the system's temporary directory when those are not
writable (a read-only container image). ``python -m pycgpu.k8s.proto DIR``
generates into DIR ahead of time, e.g. when an image is built.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

PROTO = Path(__file__).with_name("deviceplugin_v1beta1.proto")
STEM = PROTO.stem  # the generated modules: STEM_pb2, STEM_pb2_grpc
API_VERSION = "v1beta1"


class ProtoError(RuntimeError):
    """The stubs cannot be generated or imported."""


@dataclass(frozen=True)
class Api:
    """The generated messages (``pb2``) and services (``grpc``)."""

    pb2: ModuleType
    grpc: ModuleType


_lock = threading.Lock()
_loaded: Api | None = None


def _key() -> str:
    from importlib.metadata import PackageNotFoundError, version

    h = hashlib.sha256(PROTO.read_bytes())
    for dist in ("grpcio-tools", "protobuf"):
        try:
            h.update(f"{dist}={version(dist)}".encode())
        except PackageNotFoundError:
            h.update(dist.encode())
    return h.hexdigest()[:16]


def _candidates() -> list[Path]:
    env = os.environ.get("PYCGPU_PROTO_CACHE")
    if env:
        return [Path(env)]
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return [Path(xdg) / "pycgpu" / "proto",
            Path(tempfile.gettempdir()) / f"pycgpu-proto-{os.getuid()}"]


def generate(out: Path) -> None:
    """Run protoc on the .proto, writing STEM_pb2.py and STEM_pb2_grpc.py
    into @out (atomically: into a scratch directory first)."""
    try:
        from grpc_tools import protoc
    except ImportError as e:
        raise ProtoError(f"grpcio-tools is not installed ({e}; fix: pip install "
                         "grpcio-tools)") from None
    import importlib.resources
    import shutil

    out.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".gen-", dir=out))
    try:
        include = str(importlib.resources.files("grpc_tools") / "_proto")
        status = protoc.main(["grpc_tools.protoc", f"-I{PROTO.parent}", f"-I{include}",
                              f"--python_out={scratch}", f"--grpc_python_out={scratch}",
                              str(PROTO)])
        if status != 0:
            raise ProtoError(f"protoc failed on {PROTO} (exit {status})")
        for name in (f"{STEM}_pb2.py", f"{STEM}_pb2_grpc.py"):
            os.replace(scratch / name, out / name)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _import(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ProtoError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # the _grpc module imports STEM_pb2 by this name
    spec.loader.exec_module(module)
    return module


def _ready(directory: Path) -> bool:
    return all((directory / f"{STEM}{s}.py").is_file() for s in ("_pb2", "_pb2_grpc"))


def load() -> Api:
    """The stubs, generated on first use (see the module docstring)."""
    global _loaded
    with _lock:
        if _loaded is not None:
            return _loaded
        key = _key()
        errors = []
        for base in _candidates():
            directory = base / key
            try:
                if not _ready(directory):
                    generate(directory)
                break
            except OSError as e:
                errors.append(f"{directory}: {e.strerror or e}")
        else:
            raise ProtoError("cannot write the generated device plugin stubs: "
                             + "; ".join(errors) + " (fix: set PYCGPU_PROTO_CACHE to a "
                             "writable directory)")
        try:
            pb2 = _import(f"{STEM}_pb2", directory / f"{STEM}_pb2.py")
            grpc_mod = _import(f"{STEM}_pb2_grpc", directory / f"{STEM}_pb2_grpc.py")
        except ImportError as e:
            raise ProtoError(f"cannot import the generated stubs in {directory}: {e}") from None
        _loaded = Api(pb2, grpc_mod)
        return _loaded


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else None
    if target is None:
        print(f"usage: python -m pycgpu.k8s.proto DIR  (then PYCGPU_PROTO_CACHE=DIR; "
              f"the stubs go to DIR/{_key()})", file=sys.stderr)
        sys.exit(2)
    generate(target / _key())
    print(target / _key())
