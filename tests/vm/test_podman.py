"""VM tier: podman (Debian 12's, cgroupfs manager, no registry) with
pycgpu's CDI spec, running the ``podman:`` recipes of docs/runtimes.md as
written: the render node comes from CDI, the knobs from annotations (the
spec's hook) or from ``--cgroup-conf``; an annotation outside the
allow-list stops the container; two containers with weights 100 and 300
get about 25:75 of the simulated GPU, read from gpu.stat and from
``pycgpu stat``. A missing podman fails the file: the setup installs it."""

from __future__ import annotations

import errno
import json
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from clients import assert_shares, devt, measure_shares
from test_runtimes import (
    TESTS_ON_PATH,
    TIMEOUT,
    Shell,
    host_python_mounts,
    recipe_blocks,
    recipe_vars,
)

from pycgpu.core.cgroup import Cgroup, CgroupError

PODMAN = shutil.which("podman")
GLOBAL = "podman --cgroup-manager cgroupfs --storage-driver vfs --events-backend file"
MB = 1 << 20


@pytest.fixture(scope="module", autouse=True)
def _podman_installed() -> None:
    # tools/setup-host.sh, which every VM target runs, installs podman: a
    # missing one is a broken setup, not a skip
    if PODMAN is None:
        pytest.fail("podman is not installed: tools/setup-host.sh (make setup) installs it")


@pytest.fixture(scope="module")
def podman_setup(tmp_path_factory, mount, simgpu_nodes) -> Iterator[Shell]:
    """The recipe's setup (image, parent group, CDI spec) once for the
    file, and its cleanup after the last test: the setup takes most of a
    minute under emulation, and the tests share it as a user would."""
    assert mount == Path("/sys/fs/cgroup"), "the recipes write to /sys/fs/cgroup"
    tag = uuid.uuid4().hex[:8]
    variables = recipe_vars(recipe_blocks()["podman:vars"])
    variables.update(GPU=simgpu_nodes[0].name, PARENT=f"pycgpu-test-{tag}",
                     CTR=f"pycgpu-test-{tag}", IMAGE=f"localhost/pycgpu-test-{tag}")
    sh = Shell(tmp_path_factory.mktemp("podman"), variables)
    sh.run(recipe_blocks()["podman:setup"])
    yield sh
    subprocess.run(f"{GLOBAL} rm -f -a", shell=True, capture_output=True, timeout=TIMEOUT)
    subprocess.run(sh.argv(recipe_blocks()["podman:cleanup"]), cwd=sh.workdir, env=sh.env,
                   capture_output=True, timeout=TIMEOUT)
    parent = Cgroup(mount, variables["PARENT"])
    if parent.exists():
        parent.remove(recursive=True)


@pytest.fixture
def shell(podman_setup, mount) -> Iterator[Shell]:
    """The shared setup; every container gone after each test, with its
    cgroup (podman's cleanup of an exited container may lag)."""
    yield podman_setup
    subprocess.run(f"{GLOBAL} rm -f -a", shell=True, capture_output=True, timeout=TIMEOUT)
    for cg in container_cgroups(mount, podman_setup):
        try:
            cg.remove(recursive=True)
        except CgroupError as e:
            if e.errno != errno.ENOENT:  # podman's own cleanup got there first
                raise


def container_cgroups(mount: Path, shell: Shell) -> list[Cgroup]:
    parent = Cgroup(mount, shell.env["PARENT"])
    return sorted((c for c in parent.children() if Path(c.name).name.startswith("libpod-")),
                  key=lambda c: c.name)


def test_recipe_annotations(shell, mount, simgpu_nodes):
    gpu = simgpu_nodes[0]
    ctr = shell.start(recipe_blocks()["podman:run"])
    try:
        seen = ctr.until("ready")
        assert seen[0] == gpu.name, seen  # the only DRI node
        assert f"opened /dev/dri/{gpu.name}" in seen, seen
        (cg,) = container_cgroups(mount, shell)
        assert cg.weights().default == 300  # pycgpu.io/gpu.weight=300, set by the hook
        assert cg.memory_max()[devt(gpu)] == 64 * MB
        shown = shell.run(recipe_blocks()["podman:inspect"]).stdout
        assert "weight               default 300" in shown, shown
        assert ctr.finish() == 0
    finally:
        ctr.kill()


def test_recipe_cgroup_conf(shell, mount, simgpu_nodes):
    ctr = shell.start(recipe_blocks()["podman:unified"])
    try:
        ctr.until("ready")
        (cg,) = container_cgroups(mount, shell)
        assert cg.weights().default == 300
        assert cg.priority() == 50
        assert cg.priority_effective() == 50  # the parent's 100 does not cap it
        assert ctr.finish() == 0
    finally:
        ctr.kill()


def test_annotation_outside_the_allow_list_is_refused(shell, mount):
    run = recipe_blocks()["podman:run"].replace(
        "--annotation pycgpu.io/gpu.weight=300",
        "--annotation pycgpu.io/gpu.weight=300 --annotation pycgpu.io/cgroup.procs=1")
    assert "cgroup.procs" in run
    run = run.replace('sh -c "', 'sh -c "echo started; ')
    r = subprocess.run(shell.argv(run), cwd=shell.workdir, env=shell.env,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode != 0, r.stdout
    assert "started" not in r.stdout
    assert container_cgroups(mount, shell) == []


LOAD = (f"{TESTS_ON_PATH}; from simgpu import Load; "
        "load = Load(sys.argv[1], None, 5_000_000); print('ready', flush=True); "
        "sys.stdin.readline(); load.stop()")


def test_two_containers_100_300(shell, mount, simgpu_nodes):
    """Two containers with weights 100 and 300 (annotations, the hook) each
    run a saturating load from inside: about 25:75."""
    gpu = simgpu_nodes[0]
    env = shell.env
    # an image with the host's Python: the busybox rootfs plus the mount points
    rootfs = shell.workdir / "rootfs"
    mounts = host_python_mounts(rootfs)
    image = env["IMAGE"] + "-py"
    shell.run(f"tar -C rootfs -c . | podman --storage-driver vfs import - {image}")
    volumes = " ".join(f"-v {m['source']}:{m['destination']}:ro" for m in mounts)
    running = []
    try:
        for i, weight in enumerate((100, 300)):
            running.append(shell.start(
                f"{GLOBAL} run --rm -i --name $CTR-{i} --network none --cgroup-parent /$PARENT "
                f"--device pycgpu.io/gpu=$GPU --annotation pycgpu.io/gpu.weight={weight} "
                f"-e PYTHONDONTWRITEBYTECODE=1 {volumes} {image} "
                f"{sys.executable} -c \"{LOAD}\" /dev/dri/$GPU"))
        for r in running:
            r.until("ready")
        ids = [shell.run(f"{GLOBAL} inspect --format '{{{{.Id}}}}' $CTR-{i}").stdout.strip()
               for i in range(2)]
        groups = [Cgroup(mount, f"{env['PARENT']}/libpod-{cid}") for cid in ids]
        assert [g.weights().default for g in groups] == [100, 300]
        assert_shares(measure_shares(groups, devt(gpu), seconds=3.0), [25.0, 75.0])
        stat = json.loads(shell.run(f"pycgpu stat --json --interval 2 {env['PARENT']}").stdout)
        pct = {Path(g["path"]).name: g["devices"][str(devt(gpu))]["gpu_percent"]
               for g in stat["groups"] if Path(g["path"]).name.startswith("libpod-")}
        got = [pct[f"libpod-{cid}"] for cid in ids]
        total = sum(got)
        assert_shares([100.0 * p / total for p in got], [25.0, 75.0])
        for r in running:
            assert r.finish() == 0
    finally:
        for r in running:
            r.kill()
        subprocess.run(f"{GLOBAL} rmi -f {image}", shell=True, capture_output=True,
                       timeout=TIMEOUT)
