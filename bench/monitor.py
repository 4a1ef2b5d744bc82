"""bench-monitor: how fast the usage sources read a big host.

kernel_refresh_1000_ms: median time of one refresh of the kernel source
(pycgpu.monitoring.kernel) over 1,000 container cgroups in a Kubernetes-shaped
tree it creates (100 pods of 10 containers, gpu enabled along the path:
kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<UID>.slice/
cri-containerd-<ID>.scope), beside the same read done naively through the
Cgroup API (pathlib, one helper call per file, a sorted listing per group).

fdinfo_scan_10k_ms: median time of one scan of the fdinfo source over
10,000 extra processes (posix_spawn'd `sleep`s; a few of them hold a simgpu
render node open, two of them sharing one DRM client), beside a naive
psutil-per-process loop (process_iter, pathlib per fd, stat, read).

Spawning is slow under emulation (TCG): past BENCH_MONITOR_SPAWN_S seconds
(default 300) it stops; it stops as well at a resource limit (open files:
each sleeper is held by a pidfd; processes; memory), after raising
RLIMIT_NOFILE to its hard limit (bench/limits.py). Then the 10k figures are
extrapolated linearly from the scan with no extra processes and the scan
with those spawned ("extrapolated": true, "spawn_stopped_by" says why, the
measured figures beside them).

Every process and cgroup it makes is removed at the end. Writes
bench/results/monitor.json. BENCH_MONITOR_PROCS and BENCH_MONITOR_RUNS
change the process count (default 10000) and the runs per figure (5).
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import sys
import time
import uuid
from pathlib import Path

from common import median, save, table  # first: it puts tests/ on sys.path
from limits import Spawned, raise_nofile, spawn_until

from pycgpu.core.cgroup import Cgroup, find_mount
from pycgpu.core.formats import FormatError
from pycgpu.monitoring.fdinfo import DRM_MAJOR, FdinfoSource, parse_fdinfo
from pycgpu.monitoring.kernel import KernelSource

PROCS = int(os.environ.get("BENCH_MONITOR_PROCS", "10000"))
RUNS = int(os.environ.get("BENCH_MONITOR_RUNS", "5"))
SPAWN_BUDGET_S = float(os.environ.get("BENCH_MONITOR_SPAWN_S", "300"))
PODS, PER_POD = 100, 10
HOLDERS = 4  # sleeps with a simgpu client of their own; one more shares the first's
SLEEP = "/bin/sleep"


def timed_ms(fn, runs: int = RUNS) -> tuple[float, list[float], object]:
    samples, result = [], None
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return median(samples), samples, result


# the kernel source ----------------------------------------------------------------------


def make_tree(top: Cgroup) -> list[Cgroup]:
    """100 pods of 10 containers under @top; returns the containers."""
    qos = top.child("kubepods.slice").child("kubepods-burstable.slice")
    qos.create()
    qos.enable_controller()
    containers = []
    for p in range(PODS):
        uid = uuid.uuid4()
        pod = qos.child(f"kubepods-burstable-pod{str(uid).replace('-', '_')}.slice")
        pod.mkdir()
        pod.enable_controller()
        for _ in range(PER_POD):
            cid = (uuid.uuid4().hex + uuid.uuid4().hex)[:64]
            c = pod.child(f"cri-containerd-{cid}.scope")
            c.mkdir()
            containers.append(c)
        if p == 0:  # one container with knobs set, like a real host has a few
            containers[0].set_weight(300)
            containers[0].set_priority(10)
    return containers


def naive_kernel_refresh(mount: Path) -> int:
    """The same data through the Cgroup API, one call per file."""
    seen = 0

    def visit(cg: Cgroup) -> None:
        nonlocal seen
        for child in cg.children():
            if not child.has("gpu.stat"):
                continue
            child.stat()
            if child.has("gpu.memory.current"):
                child.memory_current()
                child.memory_max()
                child.memory_peak()
                child.memory_events()
            child.weights()
            child.priority()
            child.priority_effective()
            seen += 1
            visit(child)

    visit(Cgroup(mount))
    return seen


# the fdinfo source -------------------------------------------------------------------------


class Sleepers:
    """The sleeping processes of the fdinfo figure, each held by a pidfd:
    :meth:`reap` signals through it, so a PID reused after a sleeper died
    early is never signalled. A pidfd is a file descriptor: 10,000 of them
    need RLIMIT_NOFILE raised (bench/limits.py), and where the hard limit is
    lower, spawning stops there (EMFILE) and the figures are extrapolated."""

    def __init__(self) -> None:
        self.procs: list[tuple[int, int]] = []  # (pid, pidfd)

    def __len__(self) -> int:
        return len(self.procs)

    def spawn(self, actions: list[tuple] | None = None) -> None:
        pid = os.posix_spawn(SLEEP, ["sleep", "600"], {"PATH": "/usr/bin:/bin"},
                             file_actions=actions or [])
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise
        self.procs.append((pid, fd))

    def reap(self) -> None:
        for _, fd in self.procs:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(fd, signal.SIGKILL)
        for pid, fd in self.procs:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            os.close(fd)
        self.procs.clear()


def spawn_sleepers(n: int, node: Path | None, budget_s: float,
                   sleepers: Sleepers) -> tuple[int, Spawned]:
    """Up to @n sleeping processes (kept in @sleepers as they start, so the
    caller can reap them whatever happens), HOLDERS (+1 sharing) of them with
    @node open, stopping early when @budget_s is spent (an emulated VM spawns
    slowly) or a limit is reached (open files, processes, memory: see
    bench/limits.py). Returns the number of distinct DRM clients among them
    and what the spawning loop did."""
    clients = 0
    if node is not None:
        from simgpu import SimGpu

        for i in range(HOLDERS):
            with SimGpu(node) as gpu:  # give each client some GPU time
                gpu.wait(gpu.submit(1_000_000))
                actions = [(os.POSIX_SPAWN_DUP2, gpu.fd, 3)]
                copies = 2 if i == 0 else 1  # the first client is shared by two
                for _ in range(copies):
                    sleepers.spawn(actions)
            clients += 1
    spawned = spawn_until(n - len(sleepers), sleepers.spawn, budget_s)
    return clients, spawned


def at_procs(base_ms: float, measured_ms: float, spawned: int) -> float:
    """The figure at PROCS extra processes: measured when all were spawned,
    else linear in processes (baseline + per-process cost x PROCS)."""
    if spawned >= PROCS:
        return measured_ms
    return base_ms + (measured_ms - base_ms) * PROCS / max(spawned, 1)


def spawn_report(spawned: int, seconds: float, stopped_by: str) -> str:
    return (f"bench-monitor: spawned {spawned} of {PROCS} processes in {seconds:.0f} s, "
            f"stopped by {stopped_by}; the 10k figures are extrapolated")


def naive_fdinfo_scan() -> int:
    """What a monitor written around psutil does: one Process per pid,
    pathlib for every fd, stat, read."""
    import psutil

    found = set()
    for p in psutil.process_iter(["pid", "name"]):
        try:
            fddir = Path(f"/proc/{p.pid}/fd")
            for fd in fddir.iterdir():
                try:
                    st = fd.stat()
                except OSError:
                    continue
                if not stat.S_ISCHR(st.st_mode) or os.major(st.st_rdev) != DRM_MAJOR:
                    continue
                info = parse_fdinfo((Path(f"/proc/{p.pid}/fdinfo") / fd.name).read_text())
                if info is None:
                    continue
                cgroup = Path(f"/proc/{p.pid}/cgroup").read_text()
                found.add((info.pdev or st.st_rdev, info.client_id, cgroup))
        except (psutil.Error, OSError, FormatError):
            continue
    return len(found)


def mem_available_kib() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])
    return 0


def main() -> int:
    nofile = raise_nofile()
    mount = find_mount()
    top = Cgroup(mount, f"pycgpu-bench-{uuid.uuid4().hex[:6]}")
    try:
        containers = make_tree(top)
        src = KernelSource(mount)
        src.sample()  # warm the dentry cache, like a running exporter
        kernel_ms, kernel_runs, sample = timed_ms(src.sample)
        groups = sum(1 for p in sample.groups if p.startswith(top.name + "/"))
        naive_ms, naive_runs, naive_groups = timed_ms(lambda: naive_kernel_refresh(mount))
    finally:
        top.remove(recursive=True)
    assert groups >= len(containers), (groups, len(containers))

    try:
        from simgpu import render_nodes

        nodes = render_nodes()
    except Exception:
        nodes = []
    node = nodes[0] if nodes else None
    procs = PROCS
    if mem_available_kib() < procs * 256 + 256 * 1024:
        procs = max(1000, (mem_available_kib() - 256 * 1024) // 256)
        print(f"bench-monitor: memory for {procs} processes only")
    before = sum(1 for n in os.listdir("/proc") if n.isdigit())
    fd_src = FdinfoSource()
    base_ms, _, _ = timed_ms(fd_src.sample)
    base_psutil_ms, _, _ = timed_ms(naive_fdinfo_scan)
    sleepers = Sleepers()
    try:
        t0 = time.perf_counter()
        clients, spawn = spawn_sleepers(procs, node, SPAWN_BUDGET_S, sleepers)
        spawn_s = time.perf_counter() - t0
        spawned = len(sleepers)
        total = sum(1 for n in os.listdir("/proc") if n.isdigit())
        scan_ms, fdinfo_runs, s = timed_ms(fd_src.sample)
        found = sum(du.clients or 0 for g in s.groups.values() for du in g.devices.values())
        naive_ms_k, psutil_runs, psutil_found = timed_ms(naive_fdinfo_scan)
    finally:
        sleepers.reap()
    if node is not None:
        assert found >= clients, f"the scan found {found} DRM clients, expected {clients}"
    extrapolated = spawned < PROCS
    fdinfo_ms = at_procs(base_ms, scan_ms, spawned)
    psutil_ms = at_procs(base_psutil_ms, naive_ms_k, spawned)
    if extrapolated:
        print(spawn_report(spawned, spawn_s, spawn.stopped_by
                           or f"memory for {procs} processes only"))

    rows = [
        (f"kernel source, one refresh ({len(containers)} containers, {groups} groups)",
         f"{kernel_ms:.1f} ms"),
        ("  naive Cgroup API walk", f"{naive_ms:.1f} ms  ({naive_ms / kernel_ms:.1f}x)"),
        (f"fdinfo source, one scan ({total} processes)", f"{scan_ms:.1f} ms"),
        ("  at 10,000 extra processes" + (" (extrapolated)" if extrapolated else ""),
         f"{fdinfo_ms:.1f} ms"),
        ("  naive psutil loop", f"{psutil_ms:.1f} ms  ({psutil_ms / fdinfo_ms:.1f}x)"),
        ("DRM clients found (simgpu holders)",
         f"{found} ({clients} expected)" if node else "no simgpu: none"),
        (f"spawning {spawned} processes", f"{spawn_s:.1f} s"),
    ]
    table(f"bench-monitor: medians of {RUNS} runs", rows)
    save("monitor", {
        "kernel_refresh_1000_ms": round(kernel_ms, 1),
        "naive_kernel_refresh_1000_ms": round(naive_ms, 1),
        "kernel_naive_ratio": round(naive_ms / kernel_ms, 2),
        "fdinfo_scan_10k_ms": round(fdinfo_ms, 1),
        "psutil_scan_10k_ms": round(psutil_ms, 1),
        "fdinfo_psutil_ratio": round(psutil_ms / fdinfo_ms, 2),
        "kernel_runs_ms": [round(x, 1) for x in kernel_runs],
        "naive_kernel_runs_ms": [round(x, 1) for x in naive_runs],
        "fdinfo_runs_ms": [round(x, 1) for x in fdinfo_runs],
        "psutil_runs_ms": [round(x, 1) for x in psutil_runs],
        "containers": len(containers),
        "groups_read": groups,
        "naive_groups_read": naive_groups,
        "processes_spawned": spawned,
        "extrapolated": extrapolated,
        "spawn_stopped_by": spawn.stopped_by,
        "open_files_limit": list(nofile),
        "fdinfo_scan_measured_ms": round(scan_ms, 1),
        "psutil_scan_measured_ms": round(naive_ms_k, 1),
        "fdinfo_scan_baseline_ms": round(base_ms, 1),
        "psutil_scan_baseline_ms": round(base_psutil_ms, 1),
        "processes_scanned": total,
        "processes_before": before,
        "drm_clients_expected": clients,
        "drm_clients_found": found,
        "psutil_clients_found": psutil_found,
        "simgpu": node is not None,
        "runs": RUNS,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
