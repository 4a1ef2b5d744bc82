"""`make bench`: every benchmark in turn (each writes bench/results/NAME.json).

Usage: bench/run.py [NAME...]   (default: all of BENCHMARKS)
"""

from __future__ import annotations

import runpy
import sys
from pathlib import Path

# sched last: it reloads simgpu with its own parameters (a FIFO device beside)
BENCHMARKS = ["memory", "cli", "monitor", "sched"]
# parts of one of them that also run alone (make bench-sched_caps: sched's gpu.max figures)
PARTS = ["sched_caps"]
HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    names = argv or BENCHMARKS
    unknown = sorted(set(names) - set(BENCHMARKS) - set(PARTS))
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; known: "
              f"{', '.join(BENCHMARKS + PARTS)}")
        return 2
    sys.path.insert(0, str(HERE))
    failed = 0
    for name in names:
        try:
            runpy.run_path(str(HERE / f"{name}.py"), run_name="__main__")
        except SystemExit as e:
            if e.code:
                print(f"bench {name}: exit {e.code}")
                failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
