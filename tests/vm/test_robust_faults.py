"""Fault injection on the controller's allocation paths (make test-debug):
every allocation of an operation is made to fail in turn, with
/proc/thread-self/fail-nth and failslab/fail_page_alloc, and each must give
the caller a clean error and leave nothing behind: no charge, no cgroup
that cannot be removed, no dying cgroup once everything is closed, no
half-linked entity (the kernel's own WARN_ON_ONCE()s and KASAN fail the
run), no leak (kmemleak, scanned by tools/vm-guest.sh at the end)."""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from clients import JOB_NS, devt, usage_us
from memfiles import MemFiles, gem_key
from simgpu import SimGpu

from pycgpu.core import formats
from pycgpu.core.cgroup import Cgroup

pytestmark = pytest.mark.debug

FAIL_NTH = Path("/proc/thread-self/fail-nth")
# allocations failed, and clean errors seen, per operation (for the README's table)
INJECTED: dict[str, dict[str, int]] = {}
DEBUGFS = Path("/sys/kernel/debug")
MAX_NTH = 200  # more allocations than any of these operations makes


@pytest.fixture(scope="module", autouse=True)
def fault_injection(robustness) -> Iterator[None]:
    if not FAIL_NTH.exists() or not (DEBUGFS / "failslab").exists():
        pytest.skip("needs the debug kernel (make test-debug): no fail-nth/failslab")
    saved = {}
    for attr in ("failslab", "fail_page_alloc"):
        for knob, value in (("ignore-gfp-wait", "N"), ("verbose", "0")):
            f = DEBUGFS / attr / knob
            saved[f] = f.read_text().strip()
            f.write_text(value)
    yield
    for f, value in saved.items():
        f.write_text(value)
    robustness["faults"] = dict(INJECTED)


def dying(mount: Path) -> int:
    stat = (mount / "cgroup.stat").read_text()
    return int(stat.split("nr_dying_descendants")[1].split()[0])


def inject(op: Callable[[], object], what: str) -> Iterator[tuple[int, BaseException | None]]:
    """Runs @op with its n-th allocation failing, n = 1, 2, ... until a run
    makes no allocation fail: yields (n, the exception or None); counts
    them under @what in :data:`INJECTED`."""
    count = INJECTED.setdefault(what, {"allocations_failed": 0, "errors_returned": 0})
    for n in range(1, MAX_NTH):
        # opened before: an open() after the write would count
        fd = os.open(FAIL_NTH, os.O_RDWR)
        err: BaseException | None = None
        try:
            os.write(fd, str(n).encode())
            try:
                op()
            except OSError as e:
                err = e
        finally:
            left = int(os.pread(fd, 32, 0) or b"0")
            os.write(fd, b"0")
            os.close(fd)
        if left:  # the call made fewer than n allocations: all were tried
            yield n, err
            return
        count["allocations_failed"] += 1
        count["errors_returned"] += err is not None
        yield n, err
    raise AssertionError(f"still failing allocations after {MAX_NTH}")


def mem_value(cg: Cgroup, mem: MemFiles, what: str) -> int | None:
    """@mem's line of the memory file @what (max, current), None where it
    has none or reads "max"."""
    return formats.parse_region_keyed(cg.read(mem.name(what))).get(mem.key)


def assert_clean_error(n: int, err: BaseException | None) -> None:
    if err is not None:
        assert isinstance(err, OSError) and err.errno in (errno.ENOMEM, errno.ENOSPC), \
            f"allocation {n} failed into {err!r}, not a clean ENOMEM"


def test_cgroup_creation(cgroup, mount):
    base = dying(mount)
    for n, err in inject(lambda: os.mkdir(cgroup.path / "x"), "cgroup mkdir"):
        assert_clean_error(n, err)
        if err is None:
            os.rmdir(cgroup.path / "x")
        assert not (cgroup.path / "x").exists()
    wait_dying(mount, base)


def write_knob(cgroup, name: str, value: str) -> Callable[[], object]:
    """One write(2) on a file opened before: only the kernel's write path
    sees the injected failures."""
    fd = os.open(cgroup.path / name, os.O_WRONLY)

    def op() -> None:
        try:
            os.write(fd, value.encode())
        finally:
            os.lseek(fd, 0, os.SEEK_SET)

    op.fd = fd  # type: ignore[attr-defined]
    return op


def test_knob_writes_leave_the_value_or_set_it(cgroup, gpu_dev, simgpu_nodes):
    """gpu.weight, and the device's memory limit (gpu.memory.max on 6.12,
    dmem.max of its GEM region on 7.3), each written with every allocation
    failing in turn: the value is set or left as it was."""
    op = write_knob(cgroup, "gpu.weight", f"{gpu_dev} 333")
    try:
        for n, err in inject(op, "gpu.weight write (pool)"):
            assert_clean_error(n, err)
            want = {gpu_dev: 333} if err is None else {}
            assert cgroup.weights().devices == want, f"after failing allocation {n}"
            cgroup.set_weight(None, gpu_dev)
    finally:
        os.close(op.fd)  # type: ignore[attr-defined]
    mem = MemFiles(gem_key(simgpu_nodes[0], gpu_dev))
    op = write_knob(cgroup, mem.name("max"), f"{mem} 1M")
    try:
        for n, err in inject(op, f"{mem.name('max')} write (pool)"):
            assert_clean_error(n, err)
            got = mem_value(cgroup, mem, "max")
            assert got == (1 << 20 if err is None else None), f"after failing allocation {n}"
            mem.set_max(cgroup, "max")
    finally:
        os.close(op.fd)  # type: ignore[attr-defined]


def wait_dying(mount: Path, base: int) -> None:
    deadline = time.monotonic() + 20
    while dying(mount) > base and time.monotonic() < deadline:
        time.sleep(0.2)
    assert dying(mount) <= base, "dying cgroups left behind"


def test_clients_buffers_and_jobs(cgroup, mount, simgpu_nodes):
    """Opening a client, creating a buffer and submitting a job in a fresh
    cgroup, each with every allocation failing in turn; then nothing is
    charged, the time of what ran is counted, and the cgroup goes away."""
    node = simgpu_nodes[0]
    dev = devt(node)
    base = dying(mount)
    for i, what in enumerate(("open", "buffer", "job")):
        g = cgroup.child(f"{what}{i}")
        g.create()
        g.add_proc(os.getpid())
        ran = 0
        try:
            if what == "open":
                for n, err in inject(lambda: SimGpu(node).close(), "client open"):
                    assert_clean_error(n, err)
            else:
                with SimGpu(node) as gpu:
                    if what == "buffer":
                        for n, err in inject(lambda gpu=gpu: gpu.gem_create(1 << 16),
                                             "buffer create (charge)"):
                            assert_clean_error(n, err)
                    else:
                        seqnos: list[int] = []

                        def submit(gpu: SimGpu = gpu, out: list[int] = seqnos) -> None:
                            out.append(gpu.submit(JOB_NS))

                        for n, err in inject(submit, "job submit (entity, queue)"):
                            assert_clean_error(n, err)
                        ran = len(seqnos)
                        if seqnos:
                            gpu.wait(max(seqnos))
                        # the client still works
                        gpu.wait(gpu.submit(JOB_NS))
                        ran += 1
        finally:
            Cgroup(cgroup.mount).add_proc(os.getpid())
        current = mem_value(g, MemFiles(gem_key(node, dev)), "current") or 0
        assert current == 0, f"{what}: {current} bytes still charged"
        assert usage_us(g, dev) == ran * JOB_NS // 1000
        g.remove()
    wait_dying(mount, base)
