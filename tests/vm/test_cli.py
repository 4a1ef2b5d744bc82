"""VM tier: the pycgpu CLI, pycgpu.core.devices and pycgpu.core.drm (with the buffer
ioctls of tests/drmtest.py) against the real gpu controller and vgem (runs
as root inside the VM).

Most commands run in-process through click's CliRunner (a Python start-up
costs seconds under TCG); ``exec`` runs as a real process since it replaces
itself with the command. Kernel refusals that the CLI's own validation
would catch first (EINVAL, ERANGE) are provoked by switching that
validation off for one test, so the kernel's answer and its translation are
what is tested.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner
from drmtest import BufferNode
from memfiles import PREFIX

from pycgpu.cli import main
from pycgpu.core import devices as devices_mod
from pycgpu.core import drm, formats
from pycgpu.core.cgroup import Cgroup, CgroupError
from pycgpu.core.devices import Device, discover, resolve
from pycgpu.core.formats import DevT
from pycgpu.core.schemas import CHECK_SCHEMA, DEVICES_SCHEMA, SHOW_SCHEMA

MEMORY_MAX = PREFIX + "max"  # gpu.memory.max (6.12) or dmem.max (7.3)


def run(mount: Path, *args: str, code: int = 0):
    result = CliRunner().invoke(main, ["--cgroup-root", str(mount), *args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == code, (result.exit_code, result.output)
    return result


def run_process(mount: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pycgpu", "--cgroup-root", str(mount), *args],
                          capture_output=True, text=True, timeout=120, **kw)


@pytest.fixture(scope="module")
def vgem_dev() -> Device:
    found = [d for d in discover(query_driver=True) if d.driver == "vgem"]
    assert found, f"no vgem render node among {discover()} (vgem not loaded?)"
    return found[0]


@pytest.fixture(scope="session")
def sim_dev(simgpu_nodes) -> Device:
    """A device whose scheduler follows the gpu controller: per-device
    weights act on it (vgem has no engine and refuses them)."""
    found = [d for d in discover(query_driver=True) if d.render_node == simgpu_nodes[0]]
    assert found, f"no simgpu device among {discover()}"
    return found[0]


def rel(cg: Cgroup, *parts: str) -> str:
    return "/".join([str(cg.relpath), *parts])


def require_memory(cg: Cgroup) -> None:
    # the VM tier runs on the series' kernel, which has gpu.memory.* (6.12)
    # or charges GEM buffers to dmem (7.3): its absence is a regression, not
    # a reason to skip (a kernel without it is the host tier's fake kernel:
    # tests/host/test_cli_tree.py)
    assert cg.has(MEMORY_MAX), f"the test kernel lacks {MEMORY_MAX}"


# devices and DRM ioctls ------------------------------------------------------------


def test_discovery_agrees_with_conftest(vgem_dev, vgem):
    assert vgem_dev.devt == vgem
    assert vgem_dev.render_node == Path(f"/dev/dri/renderD{vgem.minor}")
    st = os.stat(vgem_dev.render_node)
    assert DevT(os.major(st.st_rdev), os.minor(st.st_rdev)) == vgem
    assert vgem_dev.card_node is not None and vgem_dev.card_node.exists()
    assert vgem_dev.pci_address is None  # a platform device
    assert vgem_dev.driver_version is not None


def test_udev_and_sysfs_enumeration_agree():
    udev = devices_mod._udev_nodes()
    assert udev is not None, "pyudev/libudev unavailable in the VM"
    sysfs = devices_mod._sysfs_nodes(Path("/sys"), Path("/dev"))
    assert sorted(str(node) for _, node in udev) == sorted(str(node) for _, node in sysfs)
    assert udev, "no render nodes at all"


def test_resolve_real_names(vgem_dev):
    devs = discover()
    card = vgem_dev.card_node
    assert card is not None
    for text in (vgem_dev.name, str(vgem_dev.render_node), card.name, str(card),
                 str(vgem_dev.devt)):
        assert resolve(text, devs).devt == vgem_dev.devt, text


def test_drm_version(vgem_dev):
    with drm.DrmNode(vgem_dev.render_node) as node:
        v = node.version()
    assert v.name == "vgem"
    assert v.version == vgem_dev.driver_version
    assert v.desc


def test_dumb_buffer_prime_roundtrip(vgem_dev):
    assert vgem_dev.card_node is not None
    with BufferNode(vgem_dev.card_node) as card, BufferNode(vgem_dev.render_node) as render:
        buf = card.create_dumb(256, 64, 32)
        assert buf.handle > 0
        assert buf.pitch >= 256 * 4
        assert buf.size >= buf.pitch * 64
        fd = card.prime_handle_to_fd(buf.handle)
        try:
            imported = render.prime_fd_to_handle(fd)
            assert imported > 0
            assert os.fstat(fd).st_size in (0, buf.size)
            render.gem_close(imported)
        finally:
            os.close(fd)
        card.destroy_dumb(buf.handle)
        with pytest.raises(drm.DrmError) as e:
            card.gem_close(buf.handle)  # already gone
        assert e.value.errno == errno.EINVAL
        assert e.value.ioctl == "DRM_IOCTL_GEM_CLOSE"
        assert str(vgem_dev.card_node) in str(e.value)


def test_dumb_on_render_node_is_refused_with_a_named_error(vgem_dev):
    with BufferNode(vgem_dev.render_node) as render, pytest.raises(drm.DrmError) as e:
        render.create_dumb(64, 64)
    assert e.value.ioctl == "DRM_IOCTL_MODE_CREATE_DUMB"
    assert e.value.node == str(vgem_dev.render_node)


def test_cli_devices(mount, vgem_dev):
    doc = json.loads(run(mount, "devices", "--json").output)
    jsonschema.validate(doc, DEVICES_SCHEMA)
    (item,) = [d for d in doc["devices"] if d["devt"] == str(vgem_dev.devt)]
    assert item["driver"] == "vgem"
    assert item["driver_version"] == vgem_dev.driver_version
    assert item["card_node"] == str(vgem_dev.card_node)
    assert (item["major"], item["minor"]) == (vgem_dev.devt.major, vgem_dev.devt.minor)
    text = run(mount, "devices").output
    assert str(vgem_dev.render_node) in text and "vgem" in text


# create / set / show / rm ------------------------------------------------------------


def test_create_with_knobs(mount, cgroup, sim_dev):
    path = rel(cgroup, "a", "b")
    run(mount, "create", path, "--weight", "300", "--weight", f"{sim_dev.name}=50",
        "--priority", "-5")
    cg = Cgroup(mount, path)
    assert cg.read("gpu.weight") == f"default 300\n{sim_dev.devt} 50\n"
    assert cg.priority() == -5
    assert cg.priority_effective() == -5
    assert "gpu" in cgroup.subtree_control()
    assert "gpu" in cgroup.child("a").subtree_control()


def test_create_resolves_every_device_form(mount, cgroup, sim_dev):
    assert sim_dev.card_node is not None
    forms = [sim_dev.name, str(sim_dev.render_node), sim_dev.card_node.name,
             str(sim_dev.devt)]
    for i, form in enumerate(forms):
        path = rel(cgroup, f"d{i}")
        run(mount, "create", path, "--weight", f"{form}={10 + i}")
        assert Cgroup(mount, path).weights().devices == {sim_dev.devt: 10 + i}


def test_set_and_show_json(mount, cgroup, sim_dev):
    path = rel(cgroup, "s")
    cgroup.set_priority(100)  # the test's parent would cap the priority at its own 0
    run(mount, "create", path)
    run(mount, "set", path, "--weight", "42", "--weight", f"{sim_dev.devt}=7", "--priority", "9")
    run(mount, "set", path, "--weight", f"{sim_dev.name}=default")
    doc = json.loads(run(mount, "show", "--json", "-r", str(cgroup.relpath)).output)
    jsonschema.validate(doc, SHOW_SCHEMA)
    assert doc["cgroup_root"] == str(mount)
    by_path = {item["path"]: item for item in doc["cgroups"]}
    item = by_path["/" + path]
    assert item["gpu_enabled"] is True
    assert item["weight"] == {"default": 42, "devices": {}}
    assert item["priority"] == 9
    assert item["priority_effective"] == 9
    assert by_path[cgroup.name]["gpu_enabled"] is True
    text = run(mount, "show", path).output
    assert "default 42" in text and "9 (effective 9)" in text


def test_show_omits_files_the_kernel_lacks(mount, cgroup):
    item = json.loads(run(mount, "show", "--json", str(cgroup.relpath)).output)["cgroups"][0]
    present = {p.name for p in cgroup.path.glob("gpu.*")} | {
        p.name for p in cgroup.path.glob("dmem.*")}
    assert ("memory" in item) == any(n.startswith(PREFIX) for n in present)
    assert ("stat" in item) == ("gpu.stat" in present)


def test_show_root(mount):
    """The root has no knob, only the devices' totals (gpu.stat,
    gpu.memory.current or dmem.current), which show prints as it does for
    any group."""
    doc = json.loads(run(mount, "show", "--json", "/").output)
    (item,) = doc["cgroups"]
    assert (item["path"], item["gpu_enabled"]) == ("/", False)
    assert set(item) == {"path", "gpu_enabled", "stat", "memory"}
    assert set(item["memory"]) == {"current"}
    # every device has its one region here (dmem: the DRM core's system region)
    assert set(item["stat"]) == set(item["memory"]["current"])
    assert all(v["sched"] in (0, 1) for v in item["stat"].values())
    jsonschema.validate(doc, SHOW_SCHEMA)


def test_dry_run_changes_nothing(mount, cgroup):
    before = cgroup.read("gpu.weight"), cgroup.read("gpu.priority")
    run(mount, "set", str(cgroup.relpath), "--weight", "999", "--priority", "3", "--dry-run")
    assert (cgroup.read("gpu.weight"), cgroup.read("gpu.priority")) == before
    r = run(mount, "create", rel(cgroup, "new"), "--weight", "5", "--dry-run")
    assert "would mkdir" in r.output
    assert not cgroup.child("new").exists()


def test_rm(mount, cgroup):
    run(mount, "create", rel(cgroup, "r", "x"))
    r = run(mount, "rm", rel(cgroup, "r"), code=2)
    assert "has child groups" in r.output
    run(mount, "rm", "-r", rel(cgroup, "r"))
    assert not cgroup.child("r").exists()


def test_rm_busy_group(mount, cgroup):
    path = rel(cgroup, "busy")
    run(mount, "create", path)
    proc = subprocess.Popen(["sleep", "300"])
    try:
        Cgroup(mount, path).add_proc(proc.pid)
        r = run(mount, "rm", path, code=1)
        assert f"still has processes ({proc.pid})" in r.output
        assert Cgroup(mount, path).exists()
    finally:
        proc.kill()
        proc.wait()
    wait_empty(Cgroup(mount, path))
    run(mount, "rm", path)


def wait_empty(cg: Cgroup, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while cg.procs() and time.monotonic() < deadline:
        time.sleep(0.05)


# validation and kernel refusals ----------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--weight", "0"], "weight 0 is out of range [1, 10000]"),
     (["--priority", "1024"], "priority 1024 is out of range"),
     (["--weight", "renderD999=5"], "unknown device 'renderD999'"),
     (["--memory-max", "{vgem}=lots"], "'lots' is not a size")],
)
def test_python_validation_writes_nothing(mount, cgroup, vgem_dev, args, message):
    before = {p.name: p.read_text() for p in cgroup.path.glob("gpu.*")}
    args = [a.format(vgem=vgem_dev.name) for a in args]
    r = run(mount, "set", str(cgroup.relpath), "--weight", "77", *args, code=2)
    assert message in r.output
    assert {p.name: p.read_text() for p in cgroup.path.glob("gpu.*")} == before


def test_kernel_einval_is_translated_and_rolled_back(mount, cgroup, vgem_dev, monkeypatch):
    # a render node the kernel does not know: passes pycgpu's device check only
    ghost = Device(render_node=Path("/dev/dri/renderD250"), card_node=None,
                   devt=DevT(226, 250))
    real = devices_mod.discover
    monkeypatch.setattr(devices_mod, "discover", lambda *a, **k: [*real(*a, **k), ghost])
    cgroup.set_weight(33)
    r = run(mount, "set", str(cgroup.relpath), "--weight", "300", "--weight", "226:250=5",
            code=1)
    assert f"writing '226:250 5' to {cgroup.path}/gpu.weight: invalid value" in r.output
    assert "nothing was changed" in r.output
    assert cgroup.read("gpu.weight") == "default 33\n"


def test_kernel_erange_is_translated_and_rolled_back(mount, cgroup, monkeypatch):
    monkeypatch.setattr(formats, "check_priority", lambda v: v)
    cgroup.set_weight(33)
    cgroup.set_priority(-9)
    r = run(mount, "set", str(cgroup.relpath), "--weight", "300", "--priority", "5000", code=1)
    assert f"writing '5000' to {cgroup.path}/gpu.priority: out of range" in r.output
    assert (cgroup.read("gpu.weight"), cgroup.priority()) == ("default 33\n", -9)


def test_kernel_refusal_in_create_removes_the_group(mount, cgroup, monkeypatch):
    monkeypatch.setattr(formats, "check_weight", lambda v: v)
    path = rel(cgroup, "doomed", "leaf")
    r = run(mount, "create", path, "--priority", "3", "--weight", "0", code=1)
    assert "out of range" in r.output
    assert not cgroup.child("doomed").exists()
    assert "gpu" not in cgroup.subtree_control()  # enabled by the create, taken back


def test_enoent_gpu_not_enabled(mount, cgroup):
    plain = cgroup.child("plain")
    plain.path.mkdir()  # cgroup's own subtree_control does not have gpu
    r = run(mount, "set", str(plain.relpath), "--weight", "5", code=1)
    assert f"the gpu controller is not enabled for {plain.name}" in r.output
    with pytest.raises(CgroupError, match="the gpu controller is not enabled for") as e:
        plain.write("gpu.weight", "5")
    assert e.value.errno == errno.ENOENT


# memory: gpu.memory.* (6.12) or dmem.* (7.3) ---------------


def test_memory_max_set_show_reset(mount, cgroup, vgem_dev):
    require_memory(cgroup)
    path = rel(cgroup, "m")
    run(mount, "create", path, "--memory-max", f"{vgem_dev.name}=1M")
    cg = Cgroup(mount, path)
    assert cg.memory_max().get(vgem_dev.devt) == 1 << 20
    item = json.loads(run(mount, "show", "--json", path).output)["cgroups"][0]
    assert item["memory"]["max"][str(vgem_dev.devt)] == 1 << 20
    run(mount, "set", path, "--memory-max", f"{vgem_dev.devt}=max")
    assert cg.memory_max().get(vgem_dev.devt) is None
    item = json.loads(run(mount, "show", "--json", path).output)["cgroups"][0]
    assert item["memory"]["max"][str(vgem_dev.devt)] is None


TESTS = Path(__file__).resolve().parents[1]  # drmtest, for the processes the tests start
ALLOC = f"""
import errno, sys
sys.path.insert(0, {str(TESTS)!r})
from drmtest import BufferNode
from pycgpu.core import drm
with BufferNode(sys.argv[1]) as card:
    card.create_dumb(64, 64, 32)            # 16 KiB: fits
    try:
        card.create_dumb(1024, 1024, 32)    # 4 MiB: over the 1 MiB limit
    except drm.DrmError as e:
        print(errno.errorcode[e.errno])
"""


def test_exec_charges_buffers_to_the_group(mount, cgroup, vgem_dev):
    require_memory(cgroup)
    path = rel(cgroup, "charged")
    run(mount, "create", path, "--memory-max", f"{vgem_dev.name}=1M")
    r = run_process(mount, "exec", path, "--", sys.executable, "-c", ALLOC,
                    str(vgem_dev.card_node))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ENOMEM"
    events = Cgroup(mount, path).memory_events()
    assert events[vgem_dev.devt]["max"] >= 1


# exec ---------------------------------------------------------------------------------


def test_exec_runs_inside_the_group(mount, cgroup):
    path = rel(cgroup, "e")
    run(mount, "create", path)
    r = run_process(mount, "exec", path, "--", "sh", "-c", "cat /proc/self/cgroup; exit 3")
    assert r.returncode == 3, r.stderr
    assert r.stdout.strip() == f"0::/{path}"


def test_exec_pid_is_listed_while_running(mount, cgroup):
    path = rel(cgroup, "e2")
    run(mount, "create", path)
    proc = subprocess.Popen([sys.executable, "-m", "pycgpu", "--cgroup-root", str(mount),
                             "exec", path, "--", "sleep", "300"])
    cg = Cgroup(mount, path)
    try:
        deadline = time.monotonic() + 60
        while proc.pid not in cg.procs() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert cg.procs() == [proc.pid]  # the same pid: pycgpu became sleep
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait()
    assert proc.returncode == -signal.SIGTERM
    wait_empty(cg)


def test_exec_into_inner_node_is_refused(mount, cgroup):
    path = rel(cgroup, "inner")
    run(mount, "create", rel(cgroup, "inner", "leaf"))  # inner has +gpu for its children
    r = run_process(mount, "exec", path, "--", "true")
    assert r.returncode == 1
    assert "busy (the group has controllers enabled for its children: use a leaf group)" in (
        r.stderr)


def test_exec_missing_command(mount, cgroup):
    r = run_process(mount, "exec", str(cgroup.relpath), "--", "no-such-command-pycgpu")
    assert r.returncode == 127
    assert "command not found" in r.stderr


# run ----------------------------------------------------------------------------------


def test_run_runs_in_a_capped_group_and_removes_it(mount, cgroup, sim_dev):
    """run as a real process: COMMAND is in the new group from its start,
    the knobs are in the kernel's files while it runs, the group is gone
    once it ends and the status is COMMAND's."""
    path = rel(cgroup, "r", "job")
    r = run_process(mount, "run", "--max", f"{sim_dev.name}=30%", "--weight", "300", path,
                    "--", "sh", "-c", f"cat /proc/self/cgroup {mount}/{path}/gpu.max; exit 5")
    assert r.returncode == 5, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == f"0::/{path}"
    assert f"{sim_dev.devt} 30000 100000" in lines[1:]
    assert not Cgroup(mount, path).exists()
    assert not Cgroup(mount, rel(cgroup, "r")).exists()  # made by run: removed too


def test_run_dies_of_the_sigint_its_command_died_of(mount, cgroup):
    """Ctrl-C ends COMMAND; pycgpu, which ignored it while waiting, then
    dies of it after the clean-up, so that a script around it stops."""
    path = rel(cgroup, "r3")
    r = run_process(mount, "run", path, "--", "sh", "-c", "kill -INT $$")
    assert r.returncode == -signal.SIGINT, r.stderr
    assert not Cgroup(mount, path).exists()


def test_run_passes_sigterm_on_and_leaves_a_group_with_processes(mount, cgroup, tmp_path):
    """SIGTERM to pycgpu ends COMMAND (exit 128+15); a child COMMAND left
    running keeps the group, which run says and leaves."""
    path = rel(cgroup, "r2")
    pidfile = tmp_path / "pid"
    proc = subprocess.Popen([sys.executable, "-m", "pycgpu", "--cgroup-root", str(mount),
                             "run", path, "--", "sh", "-c",
                             # the sleep keeps no pipe of the test's open
                             f"sleep 300 </dev/null >/dev/null 2>&1 & echo $! > {pidfile}; wait"],
                            stderr=subprocess.PIPE, text=True)
    cg = Cgroup(mount, path)
    try:
        deadline = time.monotonic() + 60
        while not (pidfile.exists() and pidfile.read_text().strip()) and (
                time.monotonic() < deadline):
            time.sleep(0.05)
        left = int(pidfile.read_text())
        assert left in cg.procs()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 128 + signal.SIGTERM, err
        assert f"warning: cgroup /{path} left in place: processes remain ({left})" in err
        assert cg.exists()
    finally:
        if proc.poll() is None:
            proc.kill()
        if pidfile.exists() and pidfile.read_text().strip():
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
    wait_empty(cg)


# check --------------------------------------------------------------------------------


def test_check(mount, cgroup):
    r = CliRunner().invoke(main, ["check", "--json", "--path", str(cgroup.relpath)])
    doc = json.loads(r.output)
    jsonschema.validate(doc, CHECK_SCHEMA)
    findings = {f["id"]: f for f in doc["findings"]}
    assert findings["gpu"]["status"] == "ok"
    assert findings["path"]["status"] == "ok"
    assert doc["cgroup_root"] == str(mount)
    assert r.exit_code == (0 if doc["ok"] else 3), doc


def test_check_path_not_enabled(mount, cgroup):
    cgroup.child("p").path.mkdir()
    cgroup.child("p").child("q").path.mkdir()
    r = run(mount, "check", "--json", "--path", rel(cgroup, "p", "q"), code=3)
    (path,) = [f for f in json.loads(r.output)["findings"] if f["id"] == "path"]
    assert path["status"] == "problem"
    # the printed fix works on the real kernel
    subprocess.run(path["fix"].removeprefix("sudo "), shell=True, check=True)
    assert Cgroup(mount, rel(cgroup, "p", "q")).has("gpu.weight")
