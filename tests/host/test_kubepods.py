"""Pod-level weights (pycgpu.runtime.kubepods, applied by the createRuntime hook):
under kubepods, the pod and QoS slice of a container weigh the sum of the
GPU weights asked for below them, so pods share by their weights."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from forked import FORK, finish, start

from pycgpu.cli import main
from pycgpu.core.cgroup import Cgroup
from pycgpu.core.formats import DevT
from pycgpu.runtime import kubepods

D128, D129 = DevT(226, 128), DevT(226, 129)
KUBE = "kubepods.slice"
BURST = f"{KUBE}/kubepods-burstable.slice"


def pod(qos: str | None, uid: str) -> str:
    if qos is None:
        return f"{KUBE}/kubepods-pod{uid}.slice"
    return f"{KUBE}/kubepods-{qos}.slice/kubepods-{qos}-pod{uid}.slice"


def ctr_path(pod_path: str, n: int) -> str:
    return f"{pod_path}/cri-containerd-{n:064x}.scope"


@pytest.fixture
def run(cli, tmp_path):
    """Runs the hook for a new container at @path with @annotations."""
    proc = tmp_path / "proc"
    cli.env["PYCGPU_PROC_ROOT"] = str(proc)
    pids = iter(range(1000, 2000))

    def start(path: str, annotations: dict[str, str], code: int = 0):
        cli.fake.make(path)
        pid = next(pids)
        (proc / str(pid)).mkdir(parents=True)
        (proc / str(pid) / "cgroup").write_text(f"0::/{path}\n")
        bundle = tmp_path / f"bundle-{pid}"
        bundle.mkdir()
        (bundle / "config.json").write_text(json.dumps({"ociVersion": "1.0.2"}))
        doc = {"ociVersion": "1.0.2", "id": f"c{pid}", "status": "creating", "pid": pid,
               "bundle": str(bundle), "annotations": annotations}
        r = CliRunner().invoke(main, ["oci", "hook"], input=json.dumps(doc), env=cli.env)
        if r.exception and not isinstance(r.exception, SystemExit):
            raise r.exception
        assert r.exit_code == code, r.output
        return r

    return start


def weight(cli, path: str) -> str:
    return cli.fake.read(f"{path}/gpu.weight")


def shares(n: int, dev: str = "renderD128") -> dict[str, str]:
    return {"pycgpu.io/gpu.weight": f"{dev}={100 * n}"}


def test_ancestors_between_the_container_and_kubepods(fake):
    c = Cgroup(fake.root, ctr_path(pod("burstable", "ab_cd"), 1))
    assert [a.name for a in kubepods.kube_ancestors(c)] == [
        f"/{pod('burstable', 'ab_cd')}", f"/{BURST}"]
    c = Cgroup(fake.root, ctr_path(pod(None, "ef"), 1))
    assert [a.name for a in kubepods.kube_ancestors(c)] == [f"/{pod(None, 'ef')}"]
    c = Cgroup(fake.root, "kubepods/burstable/pod1234/0123abcd")  # cgroupfs driver
    assert [a.name for a in kubepods.kube_ancestors(c)] == [
        "/kubepods/burstable/pod1234", "/kubepods/burstable"]
    assert kubepods.kube_ancestors(Cgroup(fake.root, "system.slice/docker-1.scope")) == []
    assert kubepods.kube_ancestors(Cgroup(fake.root, KUBE)) == []


def test_pods_of_3_and_1_shares_weigh_300_and_100(cli, run):
    a, b = pod("burstable", "aaaa"), pod("burstable", "bbbb")
    run(ctr_path(a, 0), {})  # the pod's sandbox: no GPU, no weight, counts nothing
    run(ctr_path(a, 1), shares(3))
    run(ctr_path(b, 2), shares(1))
    assert weight(cli, ctr_path(a, 1)) == "default 100\n226:128 300\n"
    assert weight(cli, a) == "default 100\n226:128 300\n"
    assert weight(cli, b) == "default 100\n226:128 100\n"
    assert weight(cli, BURST) == "default 100\n226:128 400\n"
    assert weight(cli, KUBE) == "default 100\n"  # the kubelet's root is left alone
    assert weight(cli, ctr_path(a, 0)) == "default 100\n"
    attr = os.getxattr(cli.fake.root / a, kubepods.XATTR).decode()
    assert attr == "226:128 300\n"


def test_containers_of_one_pod_add_up_once_however_often_the_hook_runs(cli, run):
    a = pod("besteffort", "aaaa")
    run(ctr_path(a, 1), shares(2))
    run(ctr_path(a, 2), shares(3))
    run(ctr_path(a, 2), shares(3))  # the hook again (a restart in place)
    assert weight(cli, a) == "default 100\n226:128 500\n"
    # a container that went away stops counting at the next start in its pod
    for name in os.listdir(cli.fake.root / ctr_path(a, 1)):
        os.unlink(cli.fake.root / ctr_path(a, 1) / name)
    os.rmdir(cli.fake.root / ctr_path(a, 1))
    run(ctr_path(a, 3), shares(1))
    assert weight(cli, a) == "default 100\n226:128 400\n"


def test_per_device_sums_and_default_weights(cli, run):
    g = pod(None, "gggg")  # Guaranteed: only the pod is between
    run(ctr_path(g, 1), shares(2, "renderD128"))
    run(ctr_path(g, 2), shares(4, "renderD129"))
    run(ctr_path(g, 3), {"pycgpu.io/gpu.weight": "250"})  # a default weight counts everywhere
    assert weight(cli, g) == "default 250\n226:128 450\n226:129 650\n"
    assert kubepods.read_asked(Cgroup(cli.fake.root, g)) == kubepods.Asked(
        250, {D128: 450, D129: 650})


def test_sums_are_capped_at_the_largest_weight(cli, run):
    a = pod("burstable", "aaaa")
    for n in range(1, 4):
        run(ctr_path(a, n), {"pycgpu.io/gpu.weight": "renderD128=4000"})
    assert weight(cli, a) == "default 100\n226:128 10000\n"


def test_outside_kubernetes_nothing_else_changes(cli, run):
    run("system.slice/docker-1.scope", shares(3))
    assert weight(cli, "system.slice") == "default 100\n"
    assert not [f for f, _ in cli.fake.log if not f.startswith("system.slice/docker-1.scope")
                and f.endswith("gpu.weight")]


def test_a_failure_on_the_slice_undoes_the_pod_and_the_container(cli, run):
    a, b = pod("burstable", "aaaa"), pod("burstable", "bbbb")
    run(ctr_path(a, 1), shares(3))
    before = {p: weight(cli, p) for p in (a, BURST)}
    cli.fake.fail[f"{BURST}/gpu.weight"] = errno.EACCES
    r = run(ctr_path(b, 2), shares(1), code=1)
    assert f"{BURST}/gpu.weight: permission denied; nothing was changed" in r.output
    assert {p: weight(cli, p) for p in (a, BURST)} == before
    assert weight(cli, b) == "default 100\n"
    assert kubepods.read_asked(Cgroup(cli.fake.root, b)) is None
    # the container's own knobs are undone with the rest
    assert weight(cli, ctr_path(b, 2)) == "default 100\n"
    assert kubepods.read_asked(Cgroup(cli.fake.root, ctr_path(b, 2))) is None


def test_a_foreign_attribute_is_a_clear_error(cli, run):
    a = pod("burstable", "aaaa")
    cli.fake.make(ctr_path(a, 9))
    os.setxattr(cli.fake.root / ctr_path(a, 9), kubepods.XATTR, b"lots\n")
    r = run(ctr_path(a, 1), shares(3), code=1)
    assert kubepods.XATTR in r.output and "Traceback" not in r.output


def test_asked_round_trips():
    asked = kubepods.Asked(300, {D129: 20, D128: 7})
    assert asked.format() == "default 300\n226:128 7\n226:129 20\n"
    assert kubepods.Asked.parse(asked.format()) == asked
    assert kubepods.Asked().format() == "" and kubepods.Asked.parse("") == kubepods.Asked()
    with pytest.raises(ValueError):
        kubepods.Asked.parse("default 0\n")


def test_xattr_path(tmp_path: Path):
    """The attribute lives on the directory (a file system without user
    attributes is reported, not ignored)."""
    c = Cgroup(tmp_path, "x")
    (tmp_path / "x").mkdir()
    assert kubepods.read_asked(c) is None


def test_a_device_that_is_gone_drops_out_of_the_sums(cli, run):
    a = pod("burstable", "aaaa")
    cli.fake.make(ctr_path(a, 8))  # a sibling that asked for a GPU since unplugged
    os.setxattr(cli.fake.root / ctr_path(a, 8), kubepods.XATTR, b"226:200 500\n")
    run(ctr_path(a, 1), shares(3))
    assert weight(cli, a) == "default 100\n226:128 300\n"
    assert kubepods.read_asked(Cgroup(cli.fake.root, a)) == kubepods.Asked(None, {D128: 300})


def test_concurrent_pod_sums_lose_no_weight(fake, monkeypatch):
    """Two containers of one pod record their weights and sum the pod's at
    once (kubepods.apply, without the hook's tree lock around it): the
    kubelet root's lock makes the second wait, so the pod weighs both.
    Without it the first wrote back the sum it made before the second
    container counted."""
    pod = "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-podaa.slice"
    c1, c2 = f"{pod}/cri-containerd-1.scope", f"{pod}/cri-containerd-2.scope"
    fake.make(c1)
    fake.make(c2)
    summed, second_done = FORK.Event(), FORK.Event()
    real_sums = kubepods.sums

    def first() -> None:
        def slow_sums(cg: Cgroup) -> kubepods.Asked:
            total = real_sums(cg)
            if not summed.is_set():  # the pod's sum: the second starts now
                summed.set()
                second_done.wait(1.5)
            return total

        kubepods.sums = slow_sums
        kubepods.apply(Cgroup(fake.root, c1), kubepods.Asked(None, {D128: 300}))

    def second() -> None:
        summed.wait(10)
        kubepods.apply(Cgroup(fake.root, c2), kubepods.Asked(None, {D128: 100}))
        second_done.set()

    p1 = start(first)
    p2 = start(second)
    assert finish(p1, p2) == [0, 0]
    assert fake.read(f"{pod}/gpu.weight") == "default 100\n226:128 400\n"
    assert fake.read("kubepods.slice/kubepods-burstable.slice/gpu.weight") == (
        "default 100\n226:128 400\n")
