"""Shared helpers for the benchmarks: result files and tables; and tests/ on
sys.path."""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

from limits import raise_nofile

RESULTS = Path(__file__).resolve().parent / "results"
# the kernel base the VM runs (tools/vm.sh exports it): results are kept per base
BASE = os.environ.get("PYCGPU_BASE", "6.12")

# The simulated GPU's bindings and the buffer ioctls (tests/simgpu.py,
# tests/drmtest.py) are test code, not part of pycgpu: every benchmark
# imports this module first, and then imports those as `simgpu`, `drmtest`.
TESTS = Path(__file__).resolve().parent.parent / "tests"
if str(TESTS) not in sys.path:
    sys.path.append(str(TESTS))

# a fresh machine's soft limit of open files (1024) is far below what the
# benchmarks hold: every benchmark imports this module first, and the limit
# is raised to the hard limit here (bench/limits.py)
raise_nofile()


def median(values: list[float]) -> float:
    return statistics.median(values)


def machine() -> dict[str, str | int]:
    return {
        "kernel": platform.release(),
        "cpus": os.cpu_count() or 0,
        "in_vm": bool(os.environ.get("PYCGPU_IN_VM")),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def save(name: str, result: dict) -> Path:
    """Writes bench/results/NAME.json (atomically) and returns its path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({**result, "machine": machine()}, indent=2) + "\n")
    os.replace(tmp, path)
    return path


def table(title: str, rows: list[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in rows)
    print(f"\n{title}")
    for key, value in rows:
        print(f"  {key:<{width}}  {value}")
