"""bench-exporter: what one Prometheus scrape of ``pycgpu exporter`` costs on
a big host. Runs natively on the host (``make bench-exporter``, no VM: times
inside the emulated VM mean nothing) against a generated fake cgroup tree.

The tree is a Kubernetes-shaped cgroup2 tree of plain files in a temporary
directory (/dev/shm when there is one): 2,000 containers (200 pods of 10,
``kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<UID>.slice/
cri-containerd-<ID>.scope``) and 2 GPUs, every gpu.* file written as the
controller writes it (every device listed in every group, as the kernel
does). Like a real node, most containers use one GPU and some none: 60% of
the (container, GPU) pairs have GPU time or memory, 40% are all zero; one
container in ten has a memory limit.

Figures (bench/results/exporter.json):

- exporter_scrape_2000_ms: median wall time of one scrape (reading the
  tree and writing the text exposition), after one warm-up scrape, with no
  file changed between scrapes (idle containers: the parse cache hits);
  target 200 ms;
- exporter_scrape_2000_changing_ms: the same with every container that
  uses a GPU doing work between two scrapes (its gpu.stat counters and
  memory charge rewritten, outside the timing): the realistic case, where
  no group's texts repeat; target 200 ms; the rewrite is a simulation
  artifact (cgroupfs formats the counters when read, nothing is written),
  so its page-cache work is given 0.2 s to settle before the scrape;
- exporter_scrape_2000_cpu_ms, exporter_scrape_2000_changing_cpu_ms: the
  scrape's CPU time (process time), less disturbed on a shared machine;
- exporter_series_2000: the samples of that scrape (lines that are not
  comments), and exporter_series_bound: containers x used devices x
  per-device families + containers x per-group families + devices +
  exporter metrics (at most one series per container, used device and
  metric family);
- exporter_bytes_2000: the size of the exposition.

BENCH_EXPORTER_CONTAINERS and BENCH_EXPORTER_RUNS change the container
count (default 2000) and the scrapes measured (default 7).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

from common import median, save, table

from pycgpu.core.devices import Device
from pycgpu.core.formats import DevT
from pycgpu.monitoring.containers import Resolver
from pycgpu.monitoring.exporter import (
    DEVICE_FAMILIES,
    DEVICE_LEVEL_FAMILIES,
    EXPORTER_FAMILIES,
    GROUP_FAMILIES,
    Exporter,
)
from pycgpu.monitoring.kernel import KernelSource
from pycgpu.monitoring.view import Monitor

CONTAINERS = int(os.environ.get("BENCH_EXPORTER_CONTAINERS", "2000"))
RUNS = int(os.environ.get("BENCH_EXPORTER_RUNS", "7"))
SETTLE_S = 0.2
PER_POD = 10
DEVS = (DevT(226, 128), DevT(226, 129))
GIB = 1 << 30


def _group(path: Path, usage: dict[DevT, tuple[int, int, int | None]], cg_files: bool) -> None:
    """The gpu.* files of one group; @usage: device -> (usage_usec, memory bytes, max)."""
    path.mkdir()
    (path / "cgroup.controllers").write_text("cpu memory gpu\n")
    (path / "cgroup.subtree_control").write_text("gpu\n" if cg_files else "\n")
    files = {
        "gpu.weight": "default 100\n",
        "gpu.priority": "0\n",
        "gpu.priority.effective": "0\n",
        # the series' own lines: sched=, and gpu.max's counters
        "gpu.stat": "".join(f"{d} usage_usec={u} wait_usec={u // 10} sched=1 nr_periods=0 "
                            f"nr_throttled=0 throttled_usec=0\n"
                            for d, (u, _, _) in usage.items()),
        "gpu.max": "default max 100000\n",
        "gpu.memory.current": "".join(f"{d} {m}\n" for d, (_, m, _) in usage.items()),
        "gpu.memory.peak": "".join(f"{d} {m}\n" for d, (_, m, _) in usage.items()),
        "gpu.memory.max": "".join(f"{d} {'max' if x is None else x}\n"
                                  for d, (_, _, x) in usage.items()),
        "gpu.memory.events": "".join(f"{d} max=0\n" for d in usage),
        "gpu.memory.events.local": "".join(f"{d} max=0\n" for d in usage),
    }
    for name, text in files.items():
        (path / name).write_text(text)


Usage = dict[DevT, tuple[int, int, int | None]]


def make_tree(root: Path, containers: int,
              leaves: list[tuple[Path, Usage]] | None = None) -> int:
    """The tree under @root; returns the number of used (container, device)
    pairs; the containers' directories and usage go to @leaves."""
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpu memory gpu\n")
    (root / "cgroup.subtree_control").write_text("gpu\n")
    inner = {d: (0, 0, None) for d in DEVS}
    kube = root / "kubepods.slice"
    _group(kube, inner, True)
    qos = kube / "kubepods-burstable.slice"
    _group(qos, inner, True)
    used = 0
    pod = qos
    for i in range(containers):
        if i % PER_POD == 0:
            uid = str(uuid.UUID(int=i + 1)).replace("-", "_")
            pod = qos / f"kubepods-burstable-pod{uid}.slice"
            _group(pod, inner, True)
        usage: dict[DevT, tuple[int, int, int | None]] = {}
        for j, d in enumerate(DEVS):
            # 60% of the pairs used: device 0 by 4 containers in 5, device 1 by 2 in 5
            on = (i % 5 < 4) if j == 0 else (i % 5 >= 3)
            limit = 2 * GIB if i % 10 == 0 else None
            usage[d] = (1000 * (i + 1), (i % 7 + 1) << 20, limit) if on else (0, 0, None)
            used += on
        leaf = pod / f"cri-containerd-{uuid.UUID(int=i + 1).hex * 2}.scope"
        _group(leaf, usage, False)
        if leaves is not None:
            leaves.append((leaf, usage))
    return used


def advance(leaves: list[tuple[Path, Usage]], step: int) -> None:
    """Every container that uses a GPU did work since the last scrape: its
    gpu.stat counters and its memory charge move (the realistic case: no
    text repeats between scrapes, so nothing can be served from a cache)."""
    for path, usage in leaves:
        if not any(u for u, _, _ in usage.values()):
            continue
        stat, current = [], []
        for d, (u, m, _) in usage.items():
            u2 = u + 997 * step if u else 0
            m2 = m + 4096 * (step % 5) if m else 0
            stat.append(f"{d} usage_usec={u2} wait_usec={u2 // 10} sched=1 nr_periods=0 "
                        f"nr_throttled=0 throttled_usec=0\n")
            current.append(f"{d} {m2}\n")
        (path / "gpu.stat").write_text("".join(stat))
        (path / "gpu.memory.current").write_text("".join(current))


def devices() -> list[Device]:
    return [Device(Path(f"/dev/dri/renderD{d.minor}"), Path(f"/dev/dri/card{d.minor - 128}"),
                   d, "i915", None, f"0000:0{i + 3}:00.0", "0x8086", "0x56a0")
            for i, d in enumerate(DEVS)]


def scrape_ms(exporter: Exporter, cpu: list[float] | None = None) -> tuple[float, bytes]:
    """Wall time of one scrape (and its CPU time, appended to @cpu)."""
    c0, t0 = time.process_time(), time.perf_counter()
    out = exporter.scrape()
    ms = (time.perf_counter() - t0) * 1000
    if cpu is not None:
        cpu.append(round((time.process_time() - c0) * 1000, 1))
    return ms, out


def main() -> int:
    base = Path("/dev/shm") if os.access("/dev/shm", os.W_OK) else None
    tmp = Path(tempfile.mkdtemp(prefix="pycgpu-bench-exporter-", dir=base))
    try:
        root = tmp / "cgroup"
        leaves: list[tuple[Path, Usage]] = []
        used = make_tree(root, CONTAINERS, leaves)
        monitor = Monitor(KernelSource(root), Resolver(tmp / "runtime"))
        reg = Exporter(monitor, devices())
        scrape_ms(reg)  # warm-up: the parse cache and the container names
        runs, out, cpu = [], b"", []
        for _ in range(RUNS):
            ms, out = scrape_ms(reg, cpu)
            runs.append(round(ms, 1))
        changing, changed_out, changing_cpu = [], b"", []
        for step in range(1, RUNS + 1):
            advance(leaves, step)  # not timed: the containers' work between two scrapes
            # on cgroupfs nothing is written (the kernel formats the counters
            # when they are read): the rewrite's page-cache work settles first
            time.sleep(SETTLE_S)
            ms, changed_out = scrape_ms(reg, changing_cpu)
            changing.append(round(ms, 1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    lines = out.decode().splitlines()
    series = sum(1 for line in lines if line and not line.startswith("#"))
    bound = (used * len(DEVICE_FAMILIES) + CONTAINERS * len(GROUP_FAMILIES)
             + len(DEVS) * len(DEVICE_LEVEL_FAMILIES) + len(EXPORTER_FAMILIES))
    changed_series = sum(1 for line in changed_out.decode().splitlines()
                         if line and not line.startswith("#"))
    result = {
        "exporter_scrape_2000_ms": median(runs),
        "exporter_scrape_2000_changing_ms": median(changing),
        "exporter_series_2000": series,
        "exporter_series_bound": bound,
        "exporter_bytes_2000": len(out),
        "containers": CONTAINERS,
        "devices": len(DEVS),
        "used_pairs": used,
        "exporter_scrape_2000_cpu_ms": median(cpu),
        "exporter_scrape_2000_changing_cpu_ms": median(changing_cpu),
        "runs_ms": runs,
        "changing_runs_ms": changing,
        "changing_series": changed_series,
        "target_ms": 200,
    }
    path = save("exporter", result)
    table(f"exporter scrape, {CONTAINERS} containers x {len(DEVS)} GPUs ({used} pairs used)", [
        ("scrape, counters unchanged (median)",
         f"{result['exporter_scrape_2000_ms']:.1f} ms (target 200)"),
        ("scrape, every container's counters moving (median)",
         f"{result['exporter_scrape_2000_changing_ms']:.1f} ms (target 200)"),
        ("series", f"{series} (bound {bound})"),
        ("exposition", f"{len(out) / 1e6:.2f} MB"),
        ("CPU time (median), unchanged / moving",
         f"{result['exporter_scrape_2000_cpu_ms']:.1f} / "
         f"{result['exporter_scrape_2000_changing_cpu_ms']:.1f} ms"),
        ("runs, unchanged", " ".join(f"{r:.0f}" for r in runs)),
        ("runs, moving", " ".join(f"{r:.0f}" for r in changing)),
    ])
    print(f"\nwrote {path}")
    ok = (result["exporter_scrape_2000_ms"] <= 200
          and result["exporter_scrape_2000_changing_ms"] <= 200
          and series <= bound and changed_series == series)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
