"""bench-cli: how fast the CLI starts and how fast `show` walks a big tree.

import_ms: time to import pycgpu.cli, as the median wall time of
`python -c "import pycgpu.cli"` minus that of `python -c pass`, interleaved.
show_json_1000_ms: median wall time of `pycgpu show --recursive --json`
over 1,000 cgroups with the gpu controller enabled, beside `pycgpu
--version` (the fixed cost of starting the CLI). Writes
bench/results/cli.json.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

from common import median, save, table

from pycgpu.core.cgroup import Cgroup, find_mount

RUNS = int(os.environ.get("BENCH_CLI_RUNS", "9"))
GROUPS = 1000
PYCGPU = [sys.executable, "-m", "pycgpu"]


def wall_ms(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return (time.perf_counter() - t0) * 1000


def interleaved(cmds: dict[str, list[str]], runs: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {name: [] for name in cmds}
    for _ in range(runs):
        for name, cmd in cmds.items():
            samples[name].append(wall_ms(cmd))
    return {name: median(values) for name, values in samples.items()}


def main() -> int:
    start = interleaved({
        "python": [sys.executable, "-c", "pass"],
        "import": [sys.executable, "-c", "import pycgpu.cli"],
    }, RUNS)
    import_ms = start["import"] - start["python"]

    mount = find_mount()
    top = Cgroup(mount, f"pycgpu-bench-{uuid.uuid4().hex[:6]}")
    top.create()
    top.enable_controller()
    try:
        for i in range(GROUPS - 1):
            top.child(f"g{i:04d}").path.mkdir()
        show = interleaved({
            "version": [*PYCGPU, "--version"],
            "show": [*PYCGPU, "show", "--recursive", "--json", top.name],
        }, RUNS)
    finally:
        top.remove(recursive=True)

    table(f"bench-cli: medians of {RUNS} runs each, interleaved", [
        ("python -c pass", f"{start['python']:.1f} ms"),
        ("python -c 'import pycgpu.cli'", f"{start['import']:.1f} ms"),
        ("import_ms (difference)", f"{import_ms:.1f} ms"),
        ("pycgpu --version", f"{show['version']:.1f} ms"),
        (f"pycgpu show -r --json ({GROUPS} cgroups)", f"{show['show']:.1f} ms"),
    ])
    save("cli", {
        "import_ms": round(import_ms, 1),
        "python_start_ms": round(start["python"], 1),
        "show_json_1000_ms": round(show["show"], 1),
        "cli_start_ms": round(show["version"], 1),
        "runs": RUNS,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
