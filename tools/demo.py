"""The main job of `make demo`, run as root inside the VM: shows the gpu
controller of the running kernel at work, step by step."""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

from pycgpu.cgroup import Cgroup, CgroupError, find_mount
from pycgpu.formats import DevT


def step(title: str) -> None:
    print(f"\n== {title}")


def show(cg: Cgroup, *files: str) -> None:
    for name in files:
        text = cg.read(name).rstrip("\n").replace("\n", " | ")
        print(f"   {cg.name}/{name}: {text}")


def render_nodes() -> list[tuple[str, DevT]]:
    nodes = []
    for node in sorted(Path("/dev/dri").glob("renderD*")):
        st = os.stat(node)
        nodes.append((node.name, DevT(os.major(st.st_rdev), os.minor(st.st_rdev))))
    return nodes


def main() -> int:
    print(f"kernel {os.uname().release}")
    mount = find_mount()
    root = Cgroup(mount)

    step("the gpu controller is built in")
    print(f"   {mount}/cgroup.controllers: {' '.join(sorted(root.controllers()))}")
    nodes = render_nodes()
    for name, dev in nodes:
        print(f"   render node /dev/dri/{name} -> device key {dev}")
    if not nodes:
        print("   no render node: nothing to control")
        return 1
    dev = nodes[0][1]

    demo = Cgroup(mount, "pycgpu-demo")
    a, b = demo.child("team-a"), demo.child("team-b")
    try:
        step("two containers share the GPU 1:3, team-b first in line")
        for cg in (a, b):
            cg.create()
        a.set_weight(100)
        b.set_weight(300)
        b.set_weight(600, dev)
        demo.set_priority(100)
        b.set_priority(500)
        show(a, "gpu.weight", "gpu.priority.effective")
        show(b, "gpu.weight", "gpu.priority", "gpu.priority.effective")
        print("   team-b asked for priority 500 but its parent caps it at 100")

        step("bad input is refused and changes nothing")
        for value in ("0", "banana", "7:7 50"):
            try:
                a.write("gpu.weight", value)
            except CgroupError as e:
                name = errno.errorcode.get(e.errno or 0, "?")
                print(f"   {name}: {e}")
        show(a, "gpu.weight")
    finally:
        for cg in (a, b, demo):
            if cg.exists():
                cg.remove()
    print("\ndemo finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
