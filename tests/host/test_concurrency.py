"""All or none across processes and interruptions (pycgpu.core.locks,
pycgpu.core.interrupts, knobs.apply): concurrent create runs, concurrent oci
patch runs in real processes (fork: the fake
kernel goes with them), SIGTERM and SIGINT between two writes, any exception
while applying, and a rollback that must leave +gpu on a parent that others
came to need."""

from __future__ import annotations

import errno
import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from forked import FORK, finish, start

from pycgpu.cli import main
from pycgpu.core import cgroup as cgroup_mod
from pycgpu.core import knobs, locks
from pycgpu.core.cgroup import Cgroup


def invoke(env: dict[str, str], *args: str) -> tuple[int, str]:
    r = CliRunner().invoke(main, list(args), env=env)
    if r.exception and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r.exit_code, r.output


def shared_log(path: Path, who: str) -> Callable[[Path, bytes], None]:
    """The fake kernel's writer, also appending 'WHO FILE DATA' to @path
    (one line per write, in the order the writes happened across processes)."""
    real = cgroup_mod._write_file

    def write(p: Path, data: bytes) -> None:
        real(p, data)
        with open(path, "a") as f:
            f.write(f"{who} {p.parent.name}/{p.name} {data.decode()}\n")

    return write


# two creates at once -----------------------------------------------------------------------


def test_concurrent_creates_keep_each_others_knobs(cli, tmp_path):
    """B enables gpu in the shared parent x, then fails on its own group and
    rolls back; A creates a sibling meanwhile. Without a lock A's knobs were
    erased by B's '-gpu' on x while A reported success; with the lock A runs
    after B's rollback, and neither sees a half-done tree."""
    root = cli.fake.root
    cli.fake.make("x")
    # x exists, gpu is enabled for it but not in its subtree_control (a systemd slice)
    assert (root / "x" / "cgroup.subtree_control").read_text().split() == []
    log = tmp_path / "writes.log"
    enabled, a_done = FORK.Event(), FORK.Event()
    out = FORK.Queue()

    def run_b() -> None:
        write = shared_log(log, "B")

        def slow(p: Path, data: bytes) -> None:
            write(p, data)
            if p == root / "x" / "cgroup.subtree_control" and data == b"+gpu":
                enabled.set()
                a_done.wait(1.5)  # A gets its chance while B is half-way

        cgroup_mod._write_file = slow
        cli.fake.fail["x/b/gpu.priority"] = errno.ERANGE
        out.put(("B", *invoke(cli.env, "create", "x/b", "--weight", "300", "--priority", "5")))

    def run_a() -> None:
        cgroup_mod._write_file = shared_log(log, "A")
        enabled.wait(10)
        result = invoke(cli.env, "create", "x/a", "--weight", "200")
        a_done.set()
        out.put(("A", *result))

    b = start(run_b)
    a = start(run_a)
    assert finish(b, a) == [0, 0]
    results = {who: (code, output) for who, code, output in (out.get() for _ in range(2))}
    assert results["A"] == (0, "")
    assert results["B"][0] == 1 and "out of range; nothing was changed" in results["B"][1]
    # A's group has its knobs and gpu (B's rollback did not take it away)
    assert (root / "x" / "a" / "gpu.weight").read_text() == "default 200\n"
    assert (root / "x" / "cgroup.subtree_control").read_text().split() == ["gpu"]
    assert not (root / "x" / "b").exists()
    # the lock: all of B (its writes and their undo) before any write of A
    whos = [line.split()[0] for line in log.read_text().splitlines()]
    assert whos == ["B"] * 3 + ["A"] * 2, log.read_text()


def test_rollback_keeps_gpu_on_a_parent_whose_children_changed(fake, monkeypatch):
    """Another process (not pycgpu, or one without the lock) creates a group
    below the parent the plan enabled gpu in: the rollback leaves '+gpu'
    there, as removing it would erase that group's gpu.* files, and says so."""
    fake.make("x")
    real = fake.write

    def write(path: Path, data: bytes) -> None:
        real(path, data)
        if path == fake.root / "x" / "cgroup.subtree_control" and data == b"+gpu":
            fake.mkdir(fake.root / "x" / "other")  # another runtime's container
            real(fake.root / "x" / "other" / "gpu.weight", b"default 700")

    monkeypatch.setattr(cgroup_mod, "_write_file", write)
    fake.fail["x/b/gpu.priority"] = errno.ERANGE
    plan = knobs.plan_create(Cgroup(fake.root, "x/b"), knobs.Settings(weight=3, priority=5))
    with pytest.raises(knobs.ApplyError) as e:
        knobs.apply(plan)
    assert str(e.value.strerror) == (
        f"writing '5' to {fake.root}/x/b/gpu.priority: out of range; gpu stays enabled in "
        f"{fake.root}/x/cgroup.subtree_control: child groups appeared since the plan (other); "
        "nothing else was changed")
    assert fake.read("x/other/gpu.weight") == "default 700\n"
    assert fake.read("x/cgroup.subtree_control").split() == ["gpu"]
    assert not (fake.root / "x" / "b").exists()


def test_rollback_keeps_gpu_when_subtree_control_changed(fake, monkeypatch):
    fake.write(fake.root / "cgroup.subtree_control", b"+cpu")
    fake.make("x")
    real = fake.write

    def write(path: Path, data: bytes) -> None:
        real(path, data)
        if path == fake.root / "x" / "cgroup.subtree_control" and data == b"+gpu":
            real(path, b"+cpu")  # someone else enables another controller meanwhile

    monkeypatch.setattr(cgroup_mod, "_write_file", write)
    fake.fail["x/b/gpu.weight"] = errno.EINVAL
    plan = knobs.plan_create(Cgroup(fake.root, "x/b"), knobs.Settings(weight=3))
    with pytest.raises(knobs.ApplyError, match=r"its cgroup\.subtree_control changed since"):
        knobs.apply(plan)
    assert fake.read("x/cgroup.subtree_control").split() == ["cpu", "gpu"]


# signals -----------------------------------------------------------------------------------


def _signal_on_write(n: int, signum: int) -> Callable[[Path, bytes], None]:
    """The fake kernel's writer, sending @signum to this process right after
    the @n-th write (as Ctrl-C or a runtime's kill would, between two writes)."""
    real = cgroup_mod._write_file
    count = [0]

    def write(path: Path, data: bytes) -> None:
        real(path, data)
        count[0] += 1
        if count[0] == n:
            os.kill(os.getpid(), signum)

    return write


@pytest.mark.parametrize("signum, args", [
    (signal.SIGTERM, ["set", "a", "--weight", "300", "--priority", "5"]),
    (signal.SIGINT, ["set", "a", "--weight", "300", "--priority", "5"]),
    (signal.SIGTERM, ["create", "x/y", "--weight", "300", "--priority", "5"]),
])
def test_a_signal_between_two_writes_leaves_the_tree_as_before(cli, signum, args):
    cli.fake.make("a")
    before = cli.fake.snapshot()
    out = FORK.Queue()
    n = 1 if args[0] == "set" else 2  # after the first knob's write (create: +gpu in x first)

    def child() -> None:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as in a shell
        cgroup_mod._write_file = _signal_on_write(n, signum)
        out.put(invoke(cli.env, *args))

    assert finish(start(child)) == [0]
    code, output = out.get(timeout=5)
    name = signal.Signals(signum).name
    assert (code, output) == (128 + signum, f"Error: interrupted by {name}; nothing was changed\n")
    assert cli.fake.snapshot() == before


def test_a_signal_after_the_last_write_leaves_the_change_complete(cli):
    """The change is complete: the signal is not turned into a rollback; the
    CLI says so and ends as the complete change does (exit 0; the library
    alone delivers it again: test_issue39_cli_signals.py)."""
    cli.fake.make("a")

    def child() -> None:
        cgroup_mod._write_file = _signal_on_write(2, signal.SIGTERM)
        code, output = invoke(cli.env, "set", "a", "--weight", "300", "--priority", "5")
        assert (code, "the change is complete" in output) == (0, True)

    assert finish(start(child)) == [0]
    assert cli.fake.read("a/gpu.weight") == "default 300\n"
    assert cli.fake.read("a/gpu.priority") == "5\n"


def test_an_ignored_signal_stays_ignored(cli):
    """nohup, or a runtime that ignores SIGTERM for its hooks: the change
    goes on and completes."""
    cli.fake.make("a")
    out = FORK.Queue()

    def child() -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        cgroup_mod._write_file = _signal_on_write(1, signal.SIGTERM)
        out.put(invoke(cli.env, "set", "a", "--weight", "300", "--priority", "5"))

    assert finish(start(child)) == [0]
    assert out.get(timeout=5) == (0, "")
    assert cli.fake.read("a/gpu.weight") == "default 300\n"
    assert cli.fake.read("a/gpu.priority") == "5\n"


def test_after_a_sigkill_the_same_create_with_exist_ok_completes(cli):
    """SIGKILL cannot be caught: a create killed between two writes leaves
    the steps before it (docs/cli.md); running it again with --exist-ok
    finishes it, and the lock it held is gone with it."""
    cli.fake.make("a")
    args = ["create", "x/y", "--weight", "300", "--priority", "5"]

    def child() -> None:
        cgroup_mod._write_file = _signal_on_write(2, signal.SIGKILL)  # +gpu in x, the weight
        invoke(cli.env, *args)

    assert finish(start(child)) == [-signal.SIGKILL]
    assert cli.fake.read("x/y/gpu.weight") == "default 300\n"
    assert cli.fake.read("x/y/gpu.priority") == "default\n"  # not written
    r = cli(*args, code=2)
    assert "cgroup /x/y already exists" in r.output
    cli(*args, "--exist-ok")
    assert cli.fake.read("x/y/gpu.priority") == "5\n"
    assert cli.fake.read("x/y/gpu.weight") == "default 300\n"
    assert cli.fake.read("x/cgroup.subtree_control").split() == ["gpu"]


def test_the_previous_handlers_are_back_after_apply(fake):
    fake.make("a")
    handler = signal.getsignal(signal.SIGTERM)
    knobs.apply(knobs.plan_set(Cgroup(fake.root, "a"), knobs.Settings(weight=3)))
    assert signal.getsignal(signal.SIGTERM) is handler


def test_any_exception_while_applying_rolls_back(fake, monkeypatch):
    """Not only the kernel's refusals: a bug (or anything) between two
    writes undoes the first, then is raised as it is."""
    fake.make("a")
    before = fake.snapshot()
    real = fake.write

    def write(path: Path, data: bytes) -> None:
        if path.name == "gpu.priority":
            raise RuntimeError("a bug")
        real(path, data)

    monkeypatch.setattr(cgroup_mod, "_write_file", write)
    plan = knobs.plan_create(Cgroup(fake.root, "a/b"), knobs.Settings(weight=3, priority=5))
    with pytest.raises(RuntimeError, match="a bug"):
        knobs.apply(plan)
    assert fake.snapshot() == before


# oci patch -----------------------------------------------------------------------------


PATCHES = [["--weight", "300"], ["--priority", "5"], ["--memory-max", "renderD128=1G"],
           ["--device", "renderD128"], ["--cgroups-path", "/jobs/a"], ["--device", "renderD129"]]


def test_concurrent_oci_patches_lose_no_update(cli, tmp_path, monkeypatch):
    """Six patch runs of one config.json at once, each slow between reading
    and writing: every one's change is in the result (without the lock on
    the config, each wrote back what it had read, and only one survived)."""
    from pycgpu.runtime import oci

    bundle = tmp_path / "bundle"
    bundle.mkdir()
    path = bundle / "config.json"
    path.write_text(oci.generate().dumps())
    real_load = oci.load

    def slow_load(p: Path) -> oci.Config:
        config = real_load(p)
        time.sleep(0.3)
        return config

    monkeypatch.setattr(oci, "load", slow_load)
    barrier = FORK.Barrier(len(PATCHES))
    out = FORK.Queue()

    def child(args: list[str]) -> None:
        barrier.wait(10)
        out.put(invoke(cli.env, "oci", "patch", str(path), *args))

    assert finish(*[start(child, args) for args in PATCHES]) == [0] * len(PATCHES)
    assert [out.get(timeout=5) for _ in PATCHES] == [(0, "")] * len(PATCHES)
    doc = json.loads(path.read_text())
    assert doc["linux"]["resources"]["unified"] == {
        "gpu.weight": "default 300", "gpu.priority": "5", "gpu.memory.max": "226:128 1073741824"}
    assert sorted(d["path"] for d in doc["linux"]["devices"]) == [
        "/dev/dri/renderD128", "/dev/dri/renderD129"]
    assert doc["linux"]["cgroupsPath"] == "/jobs/a"
    assert sorted(p.name for p in bundle.iterdir()) == [".config.json.lock", "config.json"]


def test_the_lock_file_sits_beside_the_file_a_symlink_names(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "config.json").write_text("{}")
    (tmp_path / "link.json").symlink_to(tmp_path / "real" / "config.json")
    assert locks.lock_path(tmp_path / "link.json") == tmp_path / "real" / ".config.json.lock"


def test_a_lock_file_that_cannot_be_made_leaves_the_config_alone(cli, tmp_path):
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "config.json").write_text("{}")
    (bundle / ".config.json.lock").symlink_to(tmp_path / "elsewhere")  # never followed
    r = cli("oci", "patch", str(bundle), "--priority", "3", code=1)
    assert r.output == (f"Error: {bundle}/.config.json.lock: Too many levels of symbolic links "
                        f"({bundle}/config.json is unchanged)\n")
    assert (bundle / "config.json").read_text() == "{}"
    assert not (tmp_path / "elsewhere").exists()


# A service's stop signal (stop_event: the exporter and the device plugin).
STOP_CHILD = """
import os, signal, sys, time
from pycgpu.core.interrupts import stop_event

sig = signal.Signals[sys.argv[1]]
# as in a terminal, whatever the test's parent left (a background job of a
# non-interactive shell starts with SIGINT ignored)
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGTERM, signal.SIG_DFL)
with stop_event() as stop:
    # the moment a Python handler calling stop.set() deadlocks on: the
    # signal arrives while this thread holds the event's own lock
    with stop._cond:
        os.kill(os.getpid(), sig)
        time.sleep(0.2)
    print("stopped" if stop.wait(5) else "not stopped", flush=True)
with stop_event() as stop:  # no signal: the block still ends
    pass
print("mask", sorted(signal.pthread_sigmask(signal.SIG_BLOCK, [])), flush=True)
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_a_stop_signal_sets_the_event_while_its_lock_is_held(sig):
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", STOP_CHILD, sig], capture_output=True, text=True,
                       timeout=20)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["stopped", "mask []"]



def test_an_ignored_stop_signal_stays_ignored():
    """nohup: SIGTERM ignored before the service starts does not stop it."""
    import subprocess
    import sys

    child = """
import os, signal
from pycgpu.core.interrupts import stop_event

signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGINT, signal.default_int_handler)  # whatever the parent left
with stop_event() as stop:
    os.kill(os.getpid(), signal.SIGTERM)
    print("ignored" if not stop.wait(0.5) else "stopped", flush=True)
    os.kill(os.getpid(), signal.SIGINT)
    print("stopped" if stop.wait(5) else "not stopped", flush=True)
"""
    r = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["ignored", "stopped"]
