"""deploy/kubernetes/: the manifests parse, carry the fields Kubernetes
requires, and their commands are commands of the real CLI whose paths and
ports agree with the volumes, the Service and the scrape annotations."""

from __future__ import annotations

import re
import tomllib
import warnings
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from pycgpu.cli import main
from pycgpu.cli.commands.cmd_k8s import PLUGIN_DIR
from pycgpu.k8s.shares import DEFAULT_SHARES, RESOURCE

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy" / "kubernetes"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
IMAGE = f"pycgpu:{VERSION}"


def docs() -> dict[str, dict[str, Any]]:
    out = {}
    for path in sorted(DEPLOY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            assert doc["apiVersion"] and doc["kind"] and doc["metadata"]["name"], path
            out[doc["kind"]] = doc
    return out


@pytest.fixture(scope="module")
def manifests() -> dict[str, dict[str, Any]]:
    return docs()


def parse_cli(argv: list[str]) -> list[click.Context]:
    """Parse @argv (after "pycgpu") as the CLI does, down to the command
    that would run, without running it: each level's context."""
    assert argv[0] == "pycgpu", argv
    ctx = main.make_context("pycgpu", list(argv[1:]))
    contexts = [ctx]
    cmd: click.Command = main
    while isinstance(cmd, click.Group):
        with warnings.catch_warnings():  # protected_args: deprecated in click 8.2
            warnings.simplefilter("ignore", DeprecationWarning)
            args = [*ctx.protected_args, *ctx.args]
        name, sub, rest = cmd.resolve_command(ctx, args)
        assert sub is not None and name is not None, argv
        ctx = sub.make_context(name, rest, parent=ctx)
        contexts.append(ctx)
        cmd = sub
    return contexts


def pod_spec(manifests) -> dict[str, Any]:
    return manifests["DaemonSet"]["spec"]["template"]["spec"]


def container(manifests, name: str) -> dict[str, Any]:
    spec = pod_spec(manifests)
    (found,) = [c for c in spec["containers"] + spec.get("initContainers", [])
                if c["name"] == name]
    return found


def host_path_of(manifests, ctr: dict[str, Any], path: str) -> str:
    """The host path mounted at @path (or a parent of it) in @ctr."""
    volumes = {v["name"]: v for v in pod_spec(manifests)["volumes"]}
    for m in ctr.get("volumeMounts", []):
        if path == m["mountPath"] or path.startswith(m["mountPath"].rstrip("/") + "/"):
            host = volumes[m["name"]]["hostPath"]["path"]
            return host + path[len(m["mountPath"]):]
    raise AssertionError(f"{ctr['name']}: nothing mounted at {path}")


def option(ctx: click.Context, name: str) -> Any:
    return ctx.params[name]


def test_kinds_and_required_fields(manifests):
    assert set(manifests) == {"DaemonSet", "Service", "Pod"}
    ds = manifests["DaemonSet"]
    assert ds["apiVersion"] == "apps/v1"
    labels = ds["spec"]["template"]["metadata"]["labels"]
    assert ds["spec"]["selector"]["matchLabels"].items() <= labels.items()
    spec = pod_spec(manifests)
    assert spec["automountServiceAccountToken"] is False  # RBAC-free
    assert "serviceAccountName" not in spec
    names = {v["name"] for v in spec["volumes"]}
    for c in spec["containers"] + spec.get("initContainers", []):
        assert c["image"] == IMAGE, c["name"]
        assert c["command"][0] == "pycgpu"
        for m in c.get("volumeMounts", []):
            assert m["name"] in names, (c["name"], m)
    svc = manifests["Service"]
    assert svc["spec"]["selector"].items() <= labels.items()


def test_device_plugin_command(manifests):
    ctr = container(manifests, "device-plugin")
    ctx = parse_cli(ctr["command"])[-1]
    assert ctx.command.name == "device-plugin"
    plugin_dir = str(option(ctx, "plugin_dir"))
    assert host_path_of(manifests, ctr, plugin_dir) == PLUGIN_DIR
    assert option(ctx, "watch") == "poll"  # no udev events in a pod's network namespace
    assert option(ctx, "resource_name") == RESOURCE


def test_the_device_plugin_writes_the_cdi_spec(manifests):
    """The plugin writes the spec (again when GPUs come and go) into the
    host's /etc/cdi, with the hook at the host path the docs install to."""
    ctr = container(manifests, "device-plugin")
    ctx = parse_cli(ctr["command"])[-1]
    assert host_path_of(manifests, ctr, str(option(ctx, "cdi_spec"))).startswith("/etc/cdi/")
    hook = option(ctx, "cdi_hook_path")
    assert hook == "/opt/pycgpu/bin/pycgpu-hook"
    assert f"`{hook}`" in (ROOT / "docs" / "kubernetes.md").read_text()
    assert hook in (ROOT / "README.md").read_text()
    assert "initContainers" not in pod_spec(manifests)  # one writer of the spec


def test_exporter_command_service_and_scrape(manifests):
    ctr = container(manifests, "exporter")
    contexts = parse_cli(ctr["command"])
    root, ctx = contexts[0], contexts[-1]
    assert ctx.command.name == "exporter"
    assert host_path_of(manifests, ctr, str(root.params["cgroup_root"])) == "/sys/fs/cgroup"
    port = int(option(ctx, "listen").rpartition(":")[2])
    (cport,) = ctr["ports"]
    assert cport["containerPort"] == port
    svc = manifests["Service"]
    (sport,) = svc["spec"]["ports"]
    assert sport["targetPort"] in (cport["name"], port)
    notes = svc["metadata"]["annotations"]
    assert notes["prometheus.io/scrape"] == "true"
    assert int(notes["prometheus.io/port"]) == port
    assert notes["prometheus.io/path"] == "/metrics"


def test_the_exporter_gets_the_kubelets_pod_resources(manifests):
    """The PodResources socket the exporter asks (its default path) is the
    kubelet's, mounted read-only."""
    ctr = container(manifests, "exporter")
    ctx = parse_cli(ctr["command"])[-1]
    socket = str(option(ctx, "pod_resources"))
    assert host_path_of(manifests, ctr, socket) == "/var/lib/kubelet/pod-resources/kubelet.sock"
    (mount,) = [m for m in ctr["volumeMounts"] if socket.startswith(m["mountPath"] + "/")]
    assert mount["readOnly"] is True


def test_sample_pod_asks_for_shares(manifests):
    (ctr,) = manifests["Pod"]["spec"]["containers"]
    limits = ctr["resources"]["limits"]
    assert set(limits) == {RESOURCE}
    assert 1 <= int(limits[RESOURCE]) <= DEFAULT_SHARES


def test_containerfile_builds_the_image_the_daemonset_runs():
    text = (DEPLOY / "Containerfile").read_text()
    assert f"-t {IMAGE} ." in text
    # the k8s extra (grpcio, protobuf) in a venv at /opt/pycgpu, first on PATH;
    # the stubs come from the wheel's build, nothing is generated at run time
    assert re.search(r"/opt/pycgpu/bin/pip install [^\n]*'/src\[k8s\]'", text)
    assert "ENV PATH=/opt/pycgpu/bin:" in text
    assert "PROTO" not in text


def test_the_checker_catches_drift():
    with pytest.raises(click.UsageError):
        parse_cli(["pycgpu", "k8s", "device-plugin", "--plugin-directory", "/x"])
    with pytest.raises(click.BadParameter):
        parse_cli(["pycgpu", "k8s", "device-plugin", "--watch", "inotify"])
