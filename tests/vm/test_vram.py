"""simgpu's simulated VRAM (module parameter vram, 7.3): a TTM region
registered with the dmem controller as xe's and amdgpu's VRAM are, so that
dmem.max, TTM's eviction to system memory, the reclaim that lowering
dmem.max starts, and dmem.min/dmem.low protection run on upstream's code.
Buffers are created with SIMGPU_GEM_VRAM (and SIMGPU_GEM_FALLBACK: to system
memory when VRAM has no room); DRM_IOCTL_SIMGPU_GEM_INFO says where each is.
The VRAM holds no bytes (simgpu_vram.c): what is tested is placement,
accounting and eviction."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from memfiles import DMEM, MemFiles
from simgpu import GEM_FALLBACK, GEM_VRAM, PLACEMENT_SYSTEM, PLACEMENT_VRAM
from workers import Worker

from pycgpu.core.cgroup import Cgroup

pytestmark = pytest.mark.skipif(not DMEM, reason="6.12 has no dmem controller: no VRAM region")

MB = 1 << 20
VRAM_MB = 64
BUF = 4 * MB
EVERYWHERE = GEM_VRAM | GEM_FALLBACK


@pytest.fixture
def vram(reload_simgpu) -> Iterator[tuple[Path, MemFiles]]:
    """One simgpu device with 64 MiB of VRAM: its render node and region."""
    (node,) = reload_simgpu("devices=1", f"vram={VRAM_MB}")
    unique = Path(f"/sys/class/drm/{node.name}/device").resolve().name
    yield node, MemFiles(f"drm/{unique}/vram")


def child(parent: Cgroup, name: str) -> Cgroup:
    cg = parent.child(name)
    cg.create()
    return cg


def placements(w: Worker, handles: list[int]) -> list[int]:
    return [w.placement(h) for h in handles]


def fill(w: Worker, n: int, flags: int = EVERYWHERE) -> list[int]:
    return [w.alloc(BUF, flags) for _ in range(n)]


def test_the_region_is_registered_and_only_vram_is_charged(cgroup, mount, vram):
    node, region = vram
    capacity = (mount / "dmem.capacity").read_text().splitlines()
    assert f"{region} {VRAM_MB * MB}" in capacity
    # a device with a region of its own gets no core "system" region
    assert f"{region}".replace("/vram", "/system") not in " ".join(capacity)
    with Worker(cgroup.path, node) as w:
        w.alloc(BUF)  # a shmem buffer in system memory: not counted
        assert region.get(cgroup, "current") == 0
        h = w.alloc(BUF, GEM_VRAM)
        assert w.placement(h) == PLACEMENT_VRAM
        assert region.get(cgroup, "current") == BUF
        w.free(h)
        assert region.get(cgroup, "current") == 0
        assert region.get(cgroup, "peak") == BUF


def test_a_limit_evicts_the_groups_own_buffers_to_system_memory(cgroup, vram):
    """dmem.max 16 MiB: the fifth 4 MiB buffer goes to VRAM and TTM evicts
    the group's oldest; the charge stays at the limit, the refusal counted."""
    node, region = vram
    region.set_max(cgroup, str(16 * MB))
    with Worker(cgroup.path, node) as w:
        handles = fill(w, 4)
        assert placements(w, handles) == [PLACEMENT_VRAM] * 4
        handles += fill(w, 2)
        got = placements(w, handles)
        assert got[4:] == [PLACEMENT_VRAM] * 2
        assert got.count(PLACEMENT_SYSTEM) == 2, got
        assert region.get(cgroup, "current") == 16 * MB
        assert region.events(cgroup) >= 1
        assert region.events(cgroup, local=True) >= 1


def test_without_fallback_a_buffer_over_the_limit_is_refused(cgroup, vram):
    node, region = vram
    region.set_max(cgroup, str(16 * MB))
    with Worker(cgroup.path, node) as w:
        with pytest.raises(OSError) as e:
            w.alloc(32 * MB, GEM_VRAM)
        assert e.value.errno == errno.ENOMEM  # TTM's, as the GEM core's limits give
        assert region.get(cgroup, "current") == 0
        h = w.alloc(32 * MB, EVERYWHERE)  # with fallback: in system memory
        assert w.placement(h) == PLACEMENT_SYSTEM


def test_lowering_the_limit_evicts_down_to_it(cgroup, vram):
    """dmem's reclaim (TTM's callback) when dmem.max goes below usage."""
    node, region = vram
    with Worker(cgroup.path, node) as w:
        handles = fill(w, 8)
        assert region.get(cgroup, "current") == 32 * MB
        region.set_max(cgroup, str(16 * MB))
        assert region.get(cgroup, "current") <= 16 * MB
        assert placements(w, handles).count(PLACEMENT_SYSTEM) >= 4


def test_vram_pressure_evicts_an_unprotected_group(cgroup, vram):
    node, region = vram
    p, q = child(cgroup, "p"), child(cgroup, "q")
    with Worker(p.path, node) as wp, Worker(q.path, node) as wq:
        mine = fill(wp, VRAM_MB * MB // BUF)  # VRAM is full
        theirs = fill(wq, 4)
        assert placements(wq, theirs) == [PLACEMENT_VRAM] * 4
        assert placements(wp, mine).count(PLACEMENT_SYSTEM) == 4
        assert region.get(p, "current") == (VRAM_MB - 16) * MB


def test_min_protection_is_never_evicted(cgroup, vram):
    """p's dmem.min covers its VRAM: q's buffers go to system memory."""
    node, region = vram
    p, q = child(cgroup, "p"), child(cgroup, "q")
    p.write("dmem.min", f"{region} {VRAM_MB * MB}")
    with Worker(p.path, node) as wp, Worker(q.path, node) as wq:
        mine = fill(wp, VRAM_MB * MB // BUF)
        theirs = fill(wq, 4)
        assert placements(wp, mine) == [PLACEMENT_VRAM] * len(mine)
        assert placements(wq, theirs) == [PLACEMENT_SYSTEM] * 4
        assert region.get(q, "current") == 0


def test_low_protection_is_evicted_after_the_unprotected(cgroup, vram):
    """p's dmem.low: an unprotected group's buffers are evicted first."""
    node, region = vram
    p, r, q = child(cgroup, "p"), child(cgroup, "r"), child(cgroup, "q")
    p.write("dmem.low", f"{region} {VRAM_MB * MB}")
    half = VRAM_MB * MB // BUF // 2
    with Worker(p.path, node) as wp, Worker(r.path, node) as wr, \
            Worker(q.path, node) as wq:
        mine = fill(wp, half)
        other = fill(wr, half)  # VRAM is full
        theirs = fill(wq, 4)
        assert placements(wq, theirs) == [PLACEMENT_VRAM] * 4
        assert placements(wp, mine) == [PLACEMENT_VRAM] * half
        assert placements(wr, other).count(PLACEMENT_SYSTEM) == 4


def test_low_protection_gives_way_when_nothing_else_can(cgroup, vram):
    """Only p's buffers fill VRAM, p at its dmem.low: unlike dmem.min, one of
    them is evicted for q's first buffer (TTM's second pass, with low
    ignored); p is then below its low and q's next buffers evict q's own."""
    node, region = vram
    p, q = child(cgroup, "p"), child(cgroup, "q")
    p.write("dmem.low", f"{region} {VRAM_MB * MB}")
    with Worker(p.path, node) as wp, Worker(q.path, node) as wq:
        mine = fill(wp, VRAM_MB * MB // BUF)
        first = wq.alloc(BUF, EVERYWHERE)
        assert wq.placement(first) == PLACEMENT_VRAM
        assert placements(wp, mine).count(PLACEMENT_SYSTEM) == 1
        theirs = [first, *fill(wq, 3)]
        assert placements(wq, theirs) == [PLACEMENT_SYSTEM] * 3 + [PLACEMENT_VRAM]
        assert placements(wp, mine).count(PLACEMENT_SYSTEM) == 1
        assert region.get(p, "current") == (VRAM_MB - 4) * MB
        assert region.get(q, "current") == BUF


def test_pycgpu_names_the_region_by_its_device(mount, vram):
    """The device's only region, as on any device: --memory-max renderDN=16M
    writes dmem.max of its VRAM, and the device plugin divides the VRAM's
    capacity into shares."""
    import json
    import uuid

    from click.testing import CliRunner

    from pycgpu.cli import main

    node, region = vram
    name = f"pycgpu-vram-{uuid.uuid4().hex[:8]}"

    def run(*args: str) -> str:
        r = CliRunner().invoke(main, ["--cgroup-root", str(mount), *args])
        assert r.exit_code == 0, r.output
        return r.output

    try:
        run("create", name, "--memory-max", f"{node.name}=16M")
        cg = Cgroup(mount, name)
        assert region.get(cg, "max") == 16 * MB
        with Worker(cg.path, node) as w:
            fill(w, 6)
            doc = json.loads(run("show", "--json", name))
            devt = f"{os.major(os.stat(node).st_rdev)}:{os.minor(os.stat(node).st_rdev)}"
            assert doc["cgroups"][0]["memory"]["current"][devt] == 16 * MB
    finally:
        Cgroup(mount, name).remove(recursive=True)
    inv = json.loads(run("k8s", "inventory", "--shares", "4", "--json"))
    (gpu,) = [g for g in inv["gpus"] if g["device"] == node.name]
    assert (gpu["memory_from"], gpu["memory_per_share_bytes"]) == ("dmem", VRAM_MB * MB // 4)


def test_requests_the_vram_cannot_serve(cgroup, mount, vram, reload_simgpu):
    """Bad flags; a buffer larger than VRAM fails (or goes to system memory
    with fallback) without evicting anyone; without vram=N the device has no
    VRAM and its region leaves dmem.capacity."""
    node, region = vram
    with Worker(cgroup.path, node) as w:
        mine = fill(w, 4)
        for flags in (GEM_FALLBACK, 1 << 7, GEM_VRAM | 1 << 7):
            with pytest.raises(OSError) as e:
                w.alloc(BUF, flags)
            assert e.value.errno == errno.EINVAL, flags
        with pytest.raises(OSError) as e:
            w.alloc(2 * VRAM_MB * MB, GEM_VRAM)
        assert e.value.errno == errno.ENOMEM
        h = w.alloc(2 * VRAM_MB * MB, EVERYWHERE)
        assert w.placement(h) == PLACEMENT_SYSTEM
        assert placements(w, mine) == [PLACEMENT_VRAM] * 4  # none evicted
    (plain,) = reload_simgpu("devices=1")
    assert str(region) not in (mount / "dmem.capacity").read_text()
    with Worker(cgroup.path, plain) as w:
        with pytest.raises(OSError) as e:
            w.alloc(BUF, GEM_VRAM)
        assert e.value.errno == errno.ENODEV
