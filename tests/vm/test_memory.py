"""GPU buffer memory charged at the DRM GEM core: limits, usage, peak and
events, exercised through vgem's dumb buffers (../shared/DESIGN.md section 2),
in gpu.memory.* (6.12 series) or in dmem.* for the device's GEM region (7.3
series, memfiles.py)."""

from __future__ import annotations

import errno
import multiprocessing
import os
import random
import select
import time
from pathlib import Path

import pytest
from memfiles import DMEM, PREFIX, ROOT_FILES, MemFiles, gem_key
from workers import PAGE, Worker

from pycgpu.core.cgroup import Cgroup

MB = 1 << 20
# where gpu.memory.max's parser (6.12) is stricter than dmem.max's (7.3)
GPU_ONLY = pytest.mark.skipif(DMEM, reason="dmem.max parses with memparse(): upstream's rules")


@pytest.fixture(scope="session")
def vmem(vgem) -> MemFiles:
    """vgem's buffers in the memory files."""
    return MemFiles(gem_key(Path(f"/dev/dri/renderD{vgem.minor}"), vgem))


def mem(cg: Cgroup, name: str, dev: MemFiles) -> int | None:
    return dev.get(cg, name)


def events(cg: Cgroup, dev: MemFiles, local: bool = False) -> int:
    return dev.events(cg, local)


def set_max(cg: Cgroup, dev: MemFiles, value: str) -> None:
    dev.set_max(cg, value)


def refused(fn, *args) -> int:
    with pytest.raises(OSError) as e:
        fn(*args)
    return e.value.errno


def test_files_and_defaults(cgroup, vmem):
    for name in ("max", "current", "peak", "events", "events.local"):
        assert (cgroup.path / f"{PREFIX}{name}").exists()
    assert f"{vmem} max\n" in cgroup.read(PREFIX + "max")
    assert mem(cgroup, "current", vmem) == 0
    assert mem(cgroup, "peak", vmem) == 0
    assert f"{vmem} max=0\n" in cgroup.read(PREFIX + "events")
    assert f"{vmem} max=0\n" in cgroup.read(PREFIX + "events.local")


def test_charge_and_uncharge(cgroup, vmem, vgem_card):
    with Worker(cgroup.path, vgem_card) as w:
        h = w.alloc(4 * PAGE)
        assert mem(cgroup, "current", vmem) == 4 * PAGE
        w.free(h)
        assert mem(cgroup, "current", vmem) == 0
        assert mem(cgroup, "peak", vmem) == 4 * PAGE


@pytest.mark.parametrize("slack", [0, 100, PAGE - 1])
def test_limit_holds_at_the_exact_byte_boundary(cgroup, vmem, vgem_card, slack):
    set_max(cgroup, vmem, str(16 * PAGE + slack))
    assert mem(cgroup, "max", vmem) == 16 * PAGE + slack
    with Worker(cgroup.path, vgem_card) as w:
        w.alloc(15 * PAGE)
        assert refused(w.alloc, 2 * PAGE) == errno.ENOMEM
        w.alloc(PAGE)
        assert mem(cgroup, "current", vmem) == 16 * PAGE
        assert refused(w.alloc, PAGE) == errno.ENOMEM
        assert events(cgroup, vmem) == 2
        assert events(cgroup, vmem, local=True) == 2
    assert mem(cgroup, "current", vmem) == 0


def test_max_removes_the_limit(cgroup, vmem, vgem_card):
    set_max(cgroup, vmem, str(PAGE))
    with Worker(cgroup.path, vgem_card) as w:
        assert refused(w.alloc, 2 * PAGE) == errno.ENOMEM
        set_max(cgroup, vmem, "max")
        assert mem(cgroup, "max", vmem) is None
        w.alloc(64 * PAGE)


@pytest.mark.parametrize(
    ("text", "value"),
    [("1K", 1 << 10), ("3k", 3 << 10), ("512M", 512 * MB), ("2G", 2 << 30), ("1T", 1 << 40),
     ("4096", 4096), pytest.param("+8192", 8192, marks=GPU_ONLY), ("0", 0)],
)
def test_size_suffixes(cgroup, vmem, text, value):
    set_max(cgroup, vmem, text)
    assert mem(cgroup, "max", vmem) == value


def test_parent_limit_caps_the_sum_of_its_children(cgroup, vmem, vgem_card):
    a, b = cgroup.child("a"), cgroup.child("b")
    a.create()
    b.create()
    set_max(cgroup, vmem, str(10 * PAGE))
    with Worker(a.path, vgem_card) as wa, Worker(b.path, vgem_card) as wb:
        wa.alloc(6 * PAGE)
        assert refused(wb.alloc, 5 * PAGE) == errno.ENOMEM
        wb.alloc(4 * PAGE)
        assert mem(cgroup, "current", vmem) == 10 * PAGE
        assert (mem(a, "current", vmem), mem(b, "current", vmem)) == (6 * PAGE, 4 * PAGE)
        # as memory.events: the refusal counts where the limit was hit and
        # in its ancestors, not in the allocating child below it
        assert events(cgroup, vmem, local=True) == 1
        assert events(cgroup, vmem) == 1
        assert events(b, vmem) == 0
        assert events(b, vmem, local=True) == 0
        assert events(a, vmem) == 0
        # a child's own limit: counted there, locally and not, and in every
        # ancestor's events (a monitor of the parent sees it), not its local
        set_max(a, vmem, str(6 * PAGE))
        assert refused(wa.alloc, PAGE) == errno.ENOMEM
        assert events(a, vmem, local=True) == 1
        assert events(a, vmem) == 1
        assert events(cgroup, vmem) == 2
        assert events(cgroup, vmem, local=True) == 1
        assert events(b, vmem) == 0
    assert mem(cgroup, "current", vmem) == 0


def test_a_limit_hit_deep_down_counts_in_every_ancestor(cgroup, vmem, vgem_card):
    """A slice's monitor sees its containers' limit hits: a refusal by
    a/b/c's own limit counts in the events of c, b, a and the test group,
    in events.local of c only, and not in a sibling's."""
    a = cgroup.child("a")
    a.create()
    b = a.child("b")
    b.create()
    c, sib = b.child("c"), b.child("sib")
    c.create()
    sib.create()
    set_max(c, vmem, str(2 * PAGE))
    with Worker(c.path, vgem_card) as w:
        assert refused(w.alloc, 3 * PAGE) == errno.ENOMEM
        assert refused(w.alloc, 4 * PAGE) == errno.ENOMEM
    assert [events(g, vmem) for g in (cgroup, a, b, c, sib)] == [2, 2, 2, 2, 0]
    assert [events(g, vmem, local=True) for g in (cgroup, a, b, c, sib)] == [0, 0, 0, 2, 0]


def test_root_totals_count_every_cgroup_and_the_root_itself(mount, cgroup, vmem, vgem_card):
    """The root cgroup's current is the device's total, as misc.current
    is: a child's buffers and the root cgroup's own (charged against no
    limit, in no child) both count; the root has no other memory file
    (dmem's capacity aside)."""
    root = Cgroup(mount)
    assert sorted(p.name for p in mount.glob(PREFIX + "*")) == ROOT_FILES
    base = mem(root, "current", vmem)
    assert base is not None
    with Worker(cgroup.path, vgem_card) as w, Worker(mount, vgem_card) as r:
        w.alloc(4 * PAGE)
        assert mem(root, "current", vmem) == base + 4 * PAGE
        h = r.alloc(3 * PAGE)
        assert mem(root, "current", vmem) == base + 7 * PAGE
        assert mem(cgroup, "current", vmem) == 4 * PAGE
        r.free(h)
        assert mem(root, "current", vmem) == base + 4 * PAGE
    assert mem(root, "current", vmem) == base


def test_events_wake_a_poll_waiter(cgroup, vmem, vgem_card):
    set_max(cgroup, vmem, "0")
    fd = os.open(cgroup.path / (PREFIX + "events"), os.O_RDONLY)
    try:
        os.read(fd, 4096)
        poller = select.poll()
        poller.register(fd, select.POLLPRI)
        assert poller.poll(0) == []
        with Worker(cgroup.path, vgem_card) as w:
            assert refused(w.alloc, PAGE) == errno.ENOMEM
        assert poller.poll(2000), f"no notification on {PREFIX}events"
        os.lseek(fd, 0, os.SEEK_SET)
        assert f"{vmem} max=1" in os.read(fd, 4096).decode()
    finally:
        os.close(fd)


def test_limit_below_usage_succeeds_and_blocks_growth(cgroup, vmem, vgem_card):
    with Worker(cgroup.path, vgem_card) as w:
        handles = [w.alloc(PAGE) for _ in range(8)]
        set_max(cgroup, vmem, str(4 * PAGE))
        assert mem(cgroup, "max", vmem) == 4 * PAGE
        assert mem(cgroup, "current", vmem) == 8 * PAGE
        assert refused(w.alloc, PAGE) == errno.ENOMEM
        for h in handles[:5]:
            w.free(h)
        assert mem(cgroup, "current", vmem) == 3 * PAGE
        w.alloc(PAGE)
        assert refused(w.alloc, PAGE) == errno.ENOMEM
    assert mem(cgroup, "current", vmem) == 0
    assert mem(cgroup, "peak", vmem) == 8 * PAGE


def test_migration_leaves_charges_and_rmdir_lingers(cgroup, vmem, vgem_card):
    a, b = cgroup.child("a"), cgroup.child("b")
    a.create()
    b.create()
    with Worker(a.path, vgem_card) as w:
        h = w.alloc(3 * PAGE)
        w.move(b.path)
        assert mem(a, "current", vmem) == 3 * PAGE
        assert mem(b, "current", vmem) == 0
        h2 = w.alloc(PAGE)  # new buffers go to the new cgroup
        assert mem(b, "current", vmem) == PAGE
        a.remove()  # no tasks left: rmdir works, the charge lingers
        assert not a.exists()
        assert mem(cgroup, "current", vmem) == 4 * PAGE
        w.free(h)
        assert mem(cgroup, "current", vmem) == PAGE
        w.free(h2)
    assert mem(cgroup, "current", vmem) == 0


def test_shared_buffer_is_charged_once_to_its_creator(cgroup, vmem, vgem_card):
    a, b = cgroup.child("a"), cgroup.child("b")
    a.create()
    b.create()
    set_max(b, vmem, "0")  # b could not pay for anything
    with Worker(a.path, vgem_card) as wa, Worker(b.path, vgem_card) as wb:
        h = wa.alloc(5 * PAGE)
        hb = wa.give(h, wb)
        assert hb > 0
        assert mem(a, "current", vmem) == 5 * PAGE
        assert mem(b, "current", vmem) == 0
        wa.free(h)  # b's handle keeps the buffer, and the charge stays with a
        assert mem(a, "current", vmem) == 5 * PAGE
        wb.free(hb)
        assert mem(a, "current", vmem) == 0
    assert events(b, vmem) == 0


def _churn(path, node, seconds, seed):
    rng = random.Random(seed)
    held = []
    w = Worker(path, node)
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            if held and (len(held) > 16 or rng.random() < 0.5):
                w.free(held.pop(rng.randrange(len(held))))
            else:
                try:
                    held.append(w.alloc(rng.randint(1, 8) * PAGE))
                except OSError as e:
                    assert e.errno == errno.ENOMEM
        for h in held:
            w.free(h)
    finally:
        w.close()


def test_concurrent_alloc_and_free_balance_to_zero(cgroup, vmem, vgem_card):
    groups = [cgroup.child(f"g{i}") for i in range(4)]
    for g in groups:
        g.create()
        set_max(g, vmem, str(48 * PAGE))  # tight: some allocations fail
    set_max(cgroup, vmem, str(150 * PAGE))
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_churn, args=(groups[i % 4].path, str(vgem_card), 10, i))
             for i in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    for g in [cgroup, *groups]:
        assert mem(g, "current", vmem) == 0, g
    assert mem(cgroup, "peak", vmem) <= 150 * PAGE


# refused by gpu.memory.max's parser (6.12) and by dmem.max's (7.3) alike
MAX_EINVAL = ["abc", "100", "max", "{dev}", "{dev} abc", "{dev} -1", "{dev} 1.5G", "{dev} 10X",
              "{dev} 100 200", "7:7 100", "226:9999 100", "drm/none/system 100",
              "{dev} max max", "\n"]
# refused by gpu.memory.max only: dmem.max parses with the kernel's memparse(),
# which takes hexadecimal and octal, a bare suffix as 0 and wraps what
# overflows (pycgpu checks its values before it writes them)
MAX_EINVAL_GPU = ["{dev} 0x10", "{dev} K"]
MAX_ERANGE_GPU = ["{dev} 99999999999999999999", "{dev} 99999999999G",
                  "{dev} 18446744073709551615", "{dev} 16777216T"]


@pytest.mark.parametrize(
    ("write", "err"),
    [(w, errno.EINVAL) for w in MAX_EINVAL]
    + [pytest.param(w, errno.EINVAL, marks=GPU_ONLY) for w in MAX_EINVAL_GPU]
    + [pytest.param(w, errno.ERANGE, marks=GPU_ONLY) for w in MAX_ERANGE_GPU],
)
def test_bad_max_writes_fail_and_change_nothing(cgroup, vmem, write, err):
    set_max(cgroup, vmem, "12345")
    before = cgroup.read(PREFIX + "max")
    with pytest.raises(OSError) as e:
        cgroup.write(PREFIX + "max", write.format(dev=vmem))
    assert e.value.errno == err
    assert cgroup.read(PREFIX + "max") == before


@pytest.mark.parametrize("name", ["current", "peak", "events", "events.local"])
def test_read_only_files_refuse_writes(cgroup, vmem, name):
    before = cgroup.read(PREFIX + name)
    with pytest.raises(OSError) as e:
        cgroup.write(PREFIX + name, f"{vmem} 0")
    assert e.value.errno == errno.EINVAL  # as root: see test_controller.py
    assert cgroup.read(PREFIX + name) == before
