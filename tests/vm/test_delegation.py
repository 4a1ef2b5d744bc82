"""Delegation (cgroup v2): a real unprivileged user (uid 65534) owning a
delegated subtree, that is the directory, cgroup.procs, cgroup.threads and
cgroup.subtree_control chowned to it, cannot write its own group's gpu.*
files (kernfs gives it only the delegation files), cannot raise its
effective priority or leave its subtree by any sequence of writes and
moves, cannot exceed an ancestor's memory limit by creating children, and
pycgpu tells it what it may and may not change."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import staging
from memfiles import DMEM, PREFIX, MemFiles, gem_key

from pycgpu.core.cgroup import Cgroup

NOBODY = 65534
ROOT = Path(__file__).resolve().parents[2]
DELEGATION_FILES = ("cgroup.procs", "cgroup.threads", "cgroup.subtree_control")
MEMORY_MAX = PREFIX + "max"  # gpu.memory.max (6.12) or dmem.max (7.3)
# what a delegatee enables for its children: the gpu controller, and dmem where
# the kernel's GPU memory is dmem's
ENABLE = "+gpu +dmem" if DMEM else "+gpu"

# Runs as the delegatee: each argument is PATH=VALUE to write, PATH to read,
# or mkdir:PATH; prints one JSON object, the outcome of each in order.
STEPS = """
import json, os, sys
out = []
for step in sys.argv[1:]:
    try:
        if step.startswith("mkdir:"):
            os.mkdir(step[6:])
            out.append("ok")
        elif "=" in step:
            path, value = step.split("=", 1)
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, value.replace("$PID", str(os.getpid())).encode())
            finally:
                os.close(fd)
            out.append("ok")
        else:
            out.append(open(step).read().strip())
    except OSError as e:
        out.append(os.strerror(e.errno))
print(json.dumps(out))
"""

# Runs as the delegatee: dumb buffers of 256 KiB on the card node argv[1]
# until one is refused; prints how many it got and the refusal (drmtest:
# staged by the delegatee fixture).
ALLOC = """
import os, sys
from drmtest import BufferNode
drm = BufferNode(sys.argv[1])
n = 0
try:
    while n < 64:
        drm.create_dumb(256, 256, 32)
        n += 1
    print(n, "none")
except OSError as e:
    print(n, os.strerror(e.errno))
"""


AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]


@dataclass
class Delegatee:
    """How uid 65534 runs Python: an interpreter it can execute, and
    PYTHONPATH set to a copy of the modules it imports (pycgpu, drmtest and
    the third-party modules they load) that it can read, as it may not
    read the checkout or its venv (a clone in /root, mode 0700)."""

    python: str = ""
    env: dict[str, str] = field(default_factory=dict)


DELEGATEE = Delegatee()


@pytest.fixture(scope="module", autouse=True)
def delegatee() -> Iterator[Delegatee]:
    staged = staging.stage(staging.sources(["pycgpu.cli", "drmtest"], [ROOT / "tests"]))
    env = {**os.environ, "PYTHONPATH": str(staged)}
    env.pop("VIRTUAL_ENV", None)
    tried = []
    for python in staging.interpreters():
        r = subprocess.run([*AS_NOBODY, python, "-c", "import pycgpu.cli, drmtest"],
                           capture_output=True, text=True, cwd="/", env=env, timeout=60)
        if r.returncode == 0:
            DELEGATEE.python, DELEGATEE.env = python, env
            break
        tried.append(f"{python}: {r.stderr.strip().splitlines()[-1:]}")
    else:
        shutil.rmtree(staged)
        pytest.fail(f"uid {NOBODY} can run none of these interpreters with the modules staged "
                    f"in {staged}: {'; '.join(tried)}")
    yield DELEGATEE
    shutil.rmtree(staged)


def as_delegatee(args: list[str], start_in: Cgroup) -> subprocess.CompletedProcess[str]:
    """Python with ARGS as uid and gid 65534 without supplementary groups,
    started (by root) in START_IN, as a login would place the user's session."""
    shell = f'echo $$ > {start_in.path}/cgroup.procs && exec "$@"'
    return subprocess.run(["sh", "-c", shell, "sh", *AS_NOBODY, DELEGATEE.python, *args],
                          capture_output=True, text=True, timeout=120, cwd="/",
                          env=DELEGATEE.env)


def steps(start_in: Cgroup, *args: str | Path) -> list[str]:
    r = as_delegatee(["-c", STEPS, *map(str, args)], start_in)
    assert r.returncode == 0, r.stderr
    return list(json.loads(r.stdout))


@pytest.fixture
def delegated(cgroup: Cgroup) -> Iterator[Cgroup]:
    """A fresh group delegated to uid 65534, with a leaf "session" the
    delegatee's processes start in (the no-internal-process rule)."""
    session = cgroup.child("session")
    session.mkdir()
    for path in (cgroup.path, *(cgroup.path / f for f in DELEGATION_FILES),
                 session.path, *(session.path / f for f in DELEGATION_FILES)):
        os.chown(path, NOBODY, NOBODY)
    yield cgroup


@pytest.fixture(scope="module")
def vmem(vgem) -> MemFiles:
    """vgem's buffers in the memory files."""
    return MemFiles(gem_key(Path(f"/dev/dri/renderD{vgem.minor}"), vgem))


@pytest.fixture
def open_card(vgem_card: Path) -> Iterator[Path]:
    """vgem's card node, opened to everyone for the test (devtmpfs in the VM)."""
    mode = stat.S_IMODE(os.stat(vgem_card).st_mode)
    os.chmod(vgem_card, 0o666)
    yield vgem_card
    os.chmod(vgem_card, mode)


def test_own_gpu_files_are_the_parents_owners(delegated, vgem, vmem):
    """A delegatee can change none of its own knobs: not raise its weight,
    priority or memory limit, not lift its cap (gpu.max)."""
    files = ("gpu.weight", "gpu.priority", MEMORY_MAX, "gpu.max")
    before = {f: (delegated.path / f).read_text() for f in files}
    got = steps(delegated.child("session"), f"{delegated.path}/gpu.weight=10000",
                f"{delegated.path}/gpu.weight={vgem} 10000", f"{delegated.path}/gpu.priority=1023",
                f"{delegated.path}/{MEMORY_MAX}={vmem} max", f"{delegated.path}/gpu.max=max")
    assert got == ["Permission denied"] * 5
    assert {f: (delegated.path / f).read_text() for f in files} == before


def test_no_writes_or_moves_raise_the_effective_priority(delegated, mount):
    """The parent's owner puts the group at -5; the delegatee makes children
    at 1023, moves itself between them and tries to leave: every group it
    reaches stays at -5, and it cannot leave the subtree."""
    delegated.set_priority(-5)
    d = delegated.path
    got = steps(delegated.child("session"),
                f"mkdir:{d}/a", f"mkdir:{d}/b", f"{d}/cgroup.subtree_control=+gpu",
                f"{d}/a/gpu.priority=1023", f"{d}/b/gpu.priority=1023",
                f"{d}/a/cgroup.procs=$PID", f"{d}/a/gpu.priority.effective",
                f"{d}/b/cgroup.procs=$PID", f"{d}/b/gpu.priority.effective",
                f"{d}/a/cgroup.procs=$PID", f"{d}/b/cgroup.subtree_control=+gpu",
                f"mkdir:{d}/b/c", f"{d}/b/c/gpu.priority=1023",
                f"{d}/b/c/cgroup.procs=$PID", f"{d}/b/c/gpu.priority.effective",
                f"{mount}/cgroup.procs=$PID", f"{d}/gpu.priority=1023",
                f"{d}/gpu.priority.effective")
    assert got == ["ok", "ok", "ok", "ok", "ok", "ok", "-5", "ok", "-5",
                   "ok", "ok", "ok", "ok", "ok", "-5",
                   "Permission denied", "Permission denied", "-5"]


def test_children_cannot_exceed_the_ancestors_memory_limit(delegated, vgem, vmem, open_card):
    """1 MiB set by the parent's owner holds whatever limit the delegatee
    sets below: four 256 KiB buffers, then ENOMEM, counted where the limit
    is; everything is uncharged when the delegatee's process exits."""
    delegated.set_memory_max(vgem, 1 << 20)
    d = delegated.path
    got = steps(delegated.child("session"), f"mkdir:{d}/big",
                f"{d}/cgroup.subtree_control={ENABLE}",
                f"{d}/big/{MEMORY_MAX}={vmem} max", f"{d}/{MEMORY_MAX}={vmem} max")
    assert got == ["ok", "ok", "ok", "Permission denied"]
    big = delegated.child("big")
    r = as_delegatee(["-c", ALLOC, str(open_card)], big)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["4", "Cannot", "allocate", "memory"]
    assert vmem.events(delegated, local=True) == 1
    assert vmem.events(delegated) == 1
    assert vmem.events(big) == 0  # as memory.events
    assert vmem.get(delegated, "current") == 0


def test_pycgpu_tells_the_delegatee_what_it_may_change(delegated):
    delegated.set_priority(-5)
    d = delegated.path
    steps(delegated.child("session"), f"mkdir:{d}/a", f"{d}/cgroup.subtree_control=+gpu")
    rel = "/" + str(delegated.relpath)
    own = as_delegatee(["-m", "pycgpu", "set", rel, "--weight", "500"],
                       delegated.child("session"))
    assert own.returncode == 1
    assert f"{d} is delegated to you, and a delegated group's own gpu.weight is set by the " \
           "owner of its parent; you may set it on the groups you create below it" in own.stderr
    child = as_delegatee(["-m", "pycgpu", "set", f"{rel}/a", "--priority", "100",
                          "--weight", "300"], delegated.child("session"))
    assert child.returncode == 0, child.stderr
    assert (f"{rel}/a gets priority 100 but its effective priority stays -5: ancestor {rel} has "
            f"gpu.priority -5 (only the owner of {rel}'s parent can raise it: a delegated subtree "
            "can lower its priority, never raise it)") in child.stderr
    assert delegated.child("a").weights().default == 300
