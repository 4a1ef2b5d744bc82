"""The benchmarks on a machine with low resource limits: bench-monitor's
spawning stops at the open-files limit and reports, instead of dying with
EMFILE ('Too many open files: /bin/sleep'); the limit is raised to the hard
limit first where allowed. Run in a subprocess with resource.setrlimit."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _run(soft: int, hard: int, body: str, out: list[str] | None = None) -> dict[str, object]:
    script = textwrap.dedent(f"""
        import json, resource, sys
        resource.setrlimit(resource.RLIMIT_NOFILE, ({soft}, {hard}))
        sys.path.insert(0, {str(BENCH)!r})
    """) + textwrap.dedent(body)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    if out is not None:
        out += proc.stdout.splitlines()
    result: dict[str, object] = json.loads(proc.stdout.splitlines()[-1])
    return result


def test_spawning_stops_at_the_open_files_limit_and_reports() -> None:
    lines: list[str] = []
    out = _run(64, 64, """
        import monitor
        sleepers = monitor.Sleepers()
        try:
            clients, spawned = monitor.spawn_sleepers(10000, None, 300.0, sleepers)
            alive = len(sleepers)
        finally:
            sleepers.reap()
        print(monitor.spawn_report(alive, spawned.seconds, spawned.stopped_by))
        print(json.dumps({"started": spawned.started, "alive": alive,
                          "stopped_by": spawned.stopped_by, "left": len(sleepers),
                          "at_10k": monitor.at_procs(10.0, 20.0, alive)}))
    """, lines)
    assert 0 < int(out["started"]) < 64  # type: ignore[call-overload]
    assert out["alive"] == out["started"]
    assert str(out["stopped_by"]).startswith("EMFILE"), out
    assert "RLIMIT_NOFILE 64" in str(out["stopped_by"])
    assert out["left"] == 0
    # the report names the limit, and the 10k figure is extrapolated from what ran
    (report,) = [line for line in lines if line.startswith("bench-monitor:")]
    assert f"spawned {out['alive']} of 10000 processes" in report
    assert "stopped by EMFILE" in report and "extrapolated" in report
    assert out["at_10k"] == 10.0 + 10.0 * 10000 / int(out["alive"])  # type: ignore[call-overload]


def test_the_benchmarks_raise_the_soft_limit_to_the_hard_limit() -> None:
    out = _run(64, 256, """
        import common
        print(json.dumps({"limits": resource.getrlimit(resource.RLIMIT_NOFILE)}))
    """)
    assert out["limits"] == [256, 256]


def test_spawning_stops_at_the_budget() -> None:
    out = _run(4096, 4096, """
        from limits import spawn_until
        n = []
        r = spawn_until(10**9, lambda: n.append(1), 0.0)
        print(json.dumps({"started": r.started, "stopped_by": r.stopped_by}))
    """)
    assert out["started"] == 100
    assert str(out["stopped_by"]).startswith("budget")


def test_other_errors_are_not_taken_for_a_limit() -> None:
    out = _run(4096, 4096, """
        import errno
        from limits import spawn_until
        def spawn():
            raise OSError(errno.ENOENT, "No such file or directory", "/bin/sleep")
        try:
            spawn_until(10, spawn, 60.0)
        except FileNotFoundError:
            print(json.dumps({"raised": True}))
    """)
    assert out == {"raised": True}
