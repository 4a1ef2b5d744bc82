"""The main job of `make demo`, run as root inside the VM: the gpu controller
of the running kernel at work on the simulated GPU, step by step."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from pathlib import Path

# the simulated GPU's bindings are test code (tests/simgpu.py), not part of pycgpu
sys.path.append(str(Path(__file__).resolve().parent.parent / "tests"))

from simgpu import Load, SimGpu, render_nodes

from pycgpu.core import formats
from pycgpu.core.cgroup import Cgroup, CgroupError, find_mount

JOB_NS = 2_000_000


def step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def show(cg: Cgroup, *files: str) -> None:
    for name in files:
        text = cg.read(name).rstrip("\n").replace("\n", " | ")
        print(f"   {cg.name}/{name}: {text}")


def usage_us(cg: Cgroup, dev: formats.DevT) -> int:
    return formats.parse_nested_keyed(cg.read("gpu.stat"))[dev]["usage_usec"]


def simgpu() -> tuple[Path, formats.DevT]:
    if not Path("/sys/module/simgpu").exists():
        ko = Path(os.environ.get("PYCGPU_EXT", "")) / "simgpu.ko"
        subprocess.run(["insmod", str(ko)], check=True)
    node = render_nodes()[0]
    st = os.stat(node)
    return node, formats.DevT(os.major(st.st_rdev), os.minor(st.st_rdev))


def main() -> int:
    print(f"kernel {os.uname().release}")
    mount = find_mount()
    root = Cgroup(mount)

    step("the gpu controller is built in")
    print(f"   {mount}/cgroup.controllers: {' '.join(sorted(root.controllers()))}")
    node, dev = simgpu()
    print(f"   simulated GPU {node} -> device key {dev}")

    demo = Cgroup(mount, "pycgpu-demo")
    a, b, vip = demo.child("team-a"), demo.child("team-b"), demo.child("vip")
    try:
        for cg in (a, b, vip):
            cg.create()
        a.set_weight(100)
        b.set_weight(300)
        demo.set_priority(500)
        vip.set_priority(200)
        a.set_priority(0)  # unset, the teams would inherit pycgpu-demo's 500
        b.set_priority(0)

        step("two containers share the GPU 1:3 (gpu.weight 100 and 300)")
        loads = [Load(node, cg.path, JOB_NS) for cg in (a, b)]
        try:
            time.sleep(0.5)
            before = [usage_us(cg, dev) for cg in (a, b)]
            time.sleep(3)
            delta = [usage_us(cg, dev) - u for cg, u in zip((a, b), before, strict=True)]
            for cg, d in zip((a, b), delta, strict=True):
                share = 100 * d / sum(delta)
                print(f"   {cg.name}: {d / 1000:7.0f} ms of GPU time = {share:4.1f}%")

            step("what pycgpu top shows meanwhile")
            subprocess.run([sys.executable, "-m", "pycgpu", "top", "--once"], check=False)

            step("a high-priority container cuts in (gpu.priority 200 > 0)")
            vip.add_proc(os.getpid())
            try:
                with SimGpu(node) as gpu:
                    waits = [gpu.wait(gpu.submit(JOB_NS)).wait_ns / JOB_NS for _ in range(10)]
            finally:
                root.add_proc(os.getpid())
            print(f"   its jobs waited {min(waits):.2f}..{max(waits):.2f} job lengths to start, "
                  "while both teams kept 3 jobs each queued")
        finally:
            for load in loads:
                load.stop()
        show(vip, "gpu.priority", "gpu.priority.effective", "gpu.stat")

        step("a GPU memory limit (gpu.memory.max) refuses what does not fit")
        a.write("gpu.memory.max", f"{dev} 1M")
        a.add_proc(os.getpid())
        try:
            with SimGpu(node) as gpu:
                gpu.gem_create(512 << 10)
                try:
                    gpu.gem_create(1 << 20)
                except OSError as e:
                    print(f"   allocating 1 MiB more: {errno.errorcode[e.errno or 0]}")
                show(a, "gpu.memory.current", "gpu.memory.max", "gpu.memory.events")
        finally:
            root.add_proc(os.getpid())

        step("bad input is refused and changes nothing")
        for value in ("0", "banana", "7:7 50"):
            try:
                a.write("gpu.weight", value)
            except CgroupError as e:
                print(f"   {errno.errorcode.get(e.errno or 0, '?')}: {e}")
        show(a, "gpu.weight")
    finally:
        demo.remove(recursive=True)
    print("\ndemo finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
