"""A 7.3 kernel booted with the gpu controller disabled (``cgroup_disable=gpu``,
`make test-nogpu`): what a kernel with dmem and without the series' gpu
controller offers. GPU memory is limited through dmem with the same pycgpu
commands and the same results as with the controller; the time knobs are
refused with a message that says why; the drivers still run their jobs, in
drm_sched's own order; `pycgpu check` says what is missing and why."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import devt_of, drm_node
from memfiles import MemFiles, gem_key
from workers import PAGE, Worker

from pycgpu.cli import main
from pycgpu.core.cgroup import Cgroup

pytestmark = pytest.mark.nogpu


@pytest.fixture(scope="module", autouse=True)
def _no_gpu_controller(mount: Path) -> None:
    controllers = (mount / "cgroup.controllers").read_text().split()
    if "gpu" in controllers:
        why = "the gpu controller is enabled: boot with cgroup_disable=gpu"
        if os.environ.get("PYCGPU_NOGPU"):  # make test-nogpu: the boot it asked for
            pytest.fail(why)
        pytest.skip(f"{why} (make test-nogpu PYCGPU_BASE=7.3)")
    assert "dmem" in controllers, controllers


def pycgpu(mount: Path, *args: str, code: int = 0) -> str:
    """The command's output (in this process: each interpreter start costs
    seconds under emulation)."""
    r = CliRunner().invoke(main, ["--cgroup-root", str(mount), *args])
    if r.exception and not isinstance(r.exception, SystemExit):
        raise r.exception
    assert r.exit_code == code, (args, r.exit_code, r.output)
    return r.output


@pytest.fixture
def group(mount: Path) -> Iterator[str]:
    name = f"pycgpu-nogpu-{uuid.uuid4().hex[:8]}"
    yield name
    cg = Cgroup(mount, name)
    if cg.exists():
        cg.remove(recursive=True)


@pytest.fixture(scope="module")
def vgem_node() -> Path:
    return drm_node("vgem", "renderD")


def test_the_kernel_offers_dmem_and_no_gpu_controller(mount: Path, vgem_node: Path):
    # compiled in (7.3 lists no v2-only controller in /proc/cgroups), disabled at boot
    assert "cgroup_disable=gpu" in Path("/proc/cmdline").read_text().split()
    assert not (mount / "gpu.stat").exists()
    capacity = (mount / "dmem.capacity").read_text()
    assert gem_key(vgem_node, devt_of(vgem_node)) + " " in capacity


def test_memory_limits_through_pycgpu(mount: Path, group: str, vgem_node: Path,
                                      vgem_card: Path):
    """Create with a limit, fill it to the byte, be refused past it, lift
    it: the same commands as with the gpu controller."""
    key = MemFiles(gem_key(vgem_node, devt_of(vgem_node)))
    pycgpu(mount, "create", f"{group}/job", "--memory-max", f"{vgem_node.name}=64K")
    cg = Cgroup(mount, f"{group}/job")
    # the root's may hold others (tools/vm-guest.sh keeps +memory there)
    assert "dmem" in (mount / "cgroup.subtree_control").read_text().split()
    assert (mount / group / "cgroup.subtree_control").read_text().split() == ["dmem"]
    assert key.get(cg, "max") == 64 << 10
    with Worker(cg.path, vgem_card) as w:
        w.alloc(16 * PAGE)
        with pytest.raises(OSError) as e:
            w.alloc(PAGE)
        assert e.value.errno == errno.ENOMEM
        doc = json.loads(pycgpu(mount, "show", "--json", f"{group}/job"))
        item = doc["cgroups"][0]
        assert item["gpu_enabled"] is False
        memory = item["memory"]
        only = [k for k in memory["current"] if memory["current"][k]]
        assert [memory["current"][k] for k in only] == [16 * PAGE], memory
        assert memory["max"][only[0]] == 64 << 10
        assert memory["events"][only[0]]["max"] == 1
        assert doc["memory"]["interface"] == "dmem"
        pycgpu(mount, "set", f"{group}/job", "--memory-max", f"{vgem_node.name}=max")
        w.alloc(PAGE)
    text = pycgpu(mount, "show", f"{group}/job")
    assert text.splitlines()[0] == f"/{group}/job  (gpu not enabled)"
    assert f"{vgem_node.name} (" in text


@pytest.mark.parametrize("knob", [["--weight", "300"], ["--priority", "5"]])
def test_the_time_knobs_are_refused(mount: Path, group: str, knob: list[str]):
    out = pycgpu(mount, "create", group, *knob, code=1)
    assert "no gpu controller" in out and "cgroup_disable=gpu" in out, out
    assert "GPU memory limits work through dmem" in out
    assert not (mount / group).exists()


def test_check_says_the_controller_is_disabled_and_memory_works(mount: Path):
    doc = json.loads(pycgpu(mount, "check", "--json", code=3))
    findings = {f["id"]: f for f in doc["findings"]}
    assert findings["gpu"]["status"] == "problem"
    assert "disabled on the kernel command line" in findings["gpu"]["message"]
    assert "GPU memory limits work without it, through dmem" in findings["gpu"]["message"]
    assert findings["memory"]["status"] in ("ok", "info")
    assert "dmem" in findings["memory"]["message"]


CLIENT = """
import sys
from simgpu import SimGpu
with SimGpu(sys.argv[1]) as gpu:
    seqno = 0
    for _ in range(5):
        seqno = gpu.submit(1_000_000)
    times = gpu.wait(seqno)
print(open("/proc/self/cgroup").read().strip(), times.end_ns > times.start_ns)
"""


def test_the_simulated_gpu_runs_jobs_without_the_controller(simgpu_nodes, group: str,
                                                            mount: Path):
    """drm_sched's own policy orders the jobs; a client in a group runs them."""
    pycgpu(mount, "create", group)
    tests = str(Path(__file__).resolve().parents[1])  # simgpu.py
    r = subprocess.run([sys.executable, "-m", "pycgpu", "--cgroup-root", str(mount), "exec",
                        group, "--", sys.executable, "-c", CLIENT, str(simgpu_nodes[0])],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": tests})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [f"0::/{group}", "True"], r.stdout
