"""The kubelet APIs' gRPC stubs: generated at build time into the package
(setup.py), from the .proto files as they are now, and never generated,
written or looked up anywhere at run time."""

from __future__ import annotations

import ast
import importlib.resources
import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf import descriptor_pb2

import pycgpu.k8s.api as api

ROOT = Path(__file__).resolve().parents[2]
API_DIR = ROOT / "pycgpu" / "k8s" / "api"
PROTOS = sorted(API_DIR.glob("*.proto"))


def _protoc_descriptor(proto: Path, tmp_path: Path) -> descriptor_pb2.FileDescriptorProto:
    from grpc_tools import protoc

    out = tmp_path / f"{proto.stem}.pb"
    include = str(importlib.resources.files("grpc_tools") / "_proto")
    status = protoc.main(["grpc_tools.protoc", f"-I{ROOT}", f"-I{include}",
                          f"--descriptor_set_out={out}", str(proto.relative_to(ROOT))])
    assert status == 0
    fds = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    return _without_json_names(fds.file[0])


def _without_json_names(
        fd: descriptor_pb2.FileDescriptorProto) -> descriptor_pb2.FileDescriptorProto:
    """protoc's descriptor set carries each field's json_name, the Python
    gencode does not: the rest must be equal."""
    def strip(messages: object) -> None:
        for m in messages:  # type: ignore[attr-defined]
            for f in m.field:
                f.ClearField("json_name")
            strip(m.nested_type)

    strip(fd.message_type)
    return fd


def test_there_are_two_apis() -> None:
    assert [p.stem for p in PROTOS] == [api.DEVICE_PLUGIN, api.POD_RESOURCES]


@pytest.mark.parametrize("proto", PROTOS, ids=lambda p: p.stem)
def test_the_installed_stubs_describe_the_proto_as_it_is(proto: Path, tmp_path: Path) -> None:
    """A .proto edited without a rebuild (make venv) fails here."""
    stubs = api.load(proto.stem)
    installed = _without_json_names(descriptor_pb2.FileDescriptorProto.FromString(
        stubs.pb2.DESCRIPTOR.serialized_pb))
    assert installed == _protoc_descriptor(proto, tmp_path)
    assert stubs.pb2.__name__ == f"pycgpu.k8s.api.{proto.stem}_pb2"


def test_the_services_are_the_kubelets() -> None:
    dp = api.load(api.DEVICE_PLUGIN)
    assert dp.pb2.DESCRIPTOR.services_by_name["Registration"].full_name == "v1beta1.Registration"
    assert hasattr(dp.grpc, "DevicePluginServicer") and hasattr(dp.grpc, "RegistrationStub")
    pr = api.load(api.POD_RESOURCES)
    svc = pr.pb2.DESCRIPTOR.services_by_name["PodResourcesLister"]
    assert svc.full_name == "v1.PodResourcesLister"
    assert svc.methods_by_name["List"].full_name == "v1.PodResourcesLister.List"


def test_setup_generates_the_stubs_into_the_package(tmp_path: Path) -> None:
    """The build step (setup.py's generate_stubs) writes importable stubs
    under the output tree's pycgpu/k8s/api, importing each other by the
    package's name."""
    import runpy

    ns = runpy.run_path(str(ROOT / "setup.py"), run_name="pycgpu_setup")
    written = ns["generate_stubs"](ROOT, tmp_path)
    names = sorted(p.name for p in written)
    assert names == sorted(f"{p.stem}{s}.py" for p in PROTOS for s in ("_pb2", "_pb2_grpc"))
    for path in written:
        assert path.parent == tmp_path / "pycgpu" / "k8s" / "api"
        ast.parse(path.read_text())
    grpc_text = (tmp_path / "pycgpu/k8s/api/deviceplugin_v1beta1_pb2_grpc.py").read_text()
    assert "from pycgpu.k8s.api import deviceplugin_v1beta1_pb2" in grpc_text


def test_no_runtime_generation_and_no_shared_directory() -> None:
    """No module of the package runs protoc, and nothing is imported from a
    path computed at run time (a planted module in $TMPDIR was imported)."""
    for path in (ROOT / "pycgpu").rglob("*.py"):
        if path.name.endswith(("_pb2.py", "_pb2_grpc.py")):
            continue
        text = path.read_text()
        assert "grpc_tools" not in text, path
        assert "spec_from_file_location" not in text, path


def test_a_planted_module_in_tmp_is_not_imported(tmp_path: Path) -> None:
    planted = tmp_path / "deviceplugin_v1beta1_pb2.py"
    planted.write_text("raise SystemExit('planted module imported')\n")
    code = ("from pycgpu.k8s.api import load, DEVICE_PLUGIN; "
            "print(load(DEVICE_PLUGIN).pb2.__file__)")
    env = {"TMPDIR": str(tmp_path), "PYCGPU_PROTO_CACHE": str(tmp_path),
           "XDG_CACHE_HOME": str(tmp_path), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, cwd=ROOT, check=True)
    assert Path(out.stdout.strip()).parent == API_DIR
    assert sorted(p.name for p in tmp_path.iterdir()) == [planted.name]


def test_without_grpc_the_device_plugin_names_the_extra(tmp_path: Path) -> None:
    """grpcio is an extra: a missing one is one line naming it, exit 1."""
    blocker = tmp_path / "grpc"
    blocker.mkdir()
    (blocker / "__init__.py").write_text("raise ImportError('No module named grpc')\n")
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-m", "pycgpu", "k8s", "device-plugin",
                          "--plugin-dir", str(tmp_path)], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=60)
    assert out.returncode == 1, out.stderr
    assert "pip install 'pycgpu[k8s]'" in out.stderr
    assert "Traceback" not in out.stderr


def test_runtime_dependencies_leave_grpc_and_prometheus_client_to_extras() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = " ".join(project["dependencies"])
    for name in ("grpcio", "grpcio-tools", "protobuf", "prometheus_client"):
        assert name not in deps
    assert any(d.startswith("grpcio") for d in project["optional-dependencies"]["k8s"])
    assert any(d.startswith("protobuf") for d in project["optional-dependencies"]["k8s"])
    assert "grpcio-tools" not in " ".join(project["optional-dependencies"]["k8s"])
    for path in (ROOT / "pycgpu").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                assert not any(n.startswith("prometheus_client") for n in names), path
