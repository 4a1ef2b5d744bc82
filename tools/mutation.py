#!/usr/bin/env python3
"""The mutation score of the monitoring layer's tests (make mutation).

Runs mutmut (configured in pyproject.toml, [tool.mutmut]: pycgpu/usage/ and
pycgpu/commands/cmd_monitor.py mutated, the host tier as the tests) and
prints, per module and in all, how many mutants the tests killed. The score
is killed / (killed + survived + no tests): a mutant no test reaches counts
against it, a timeout, a segfault or a type-check catch counts as killed;
suspicious and skipped mutants are left out. A run that did not check every
mutant exits 1 and says "complete": false in the JSON. The figures go to
bench/results/mutation.json; `mutmut results` lists the survivors and
`mutmut show NAME` shows one.

mutmut forks each mutant's test run from a process that has already
imported pycgpu, so code that runs at import time (the click decorators of
cmd_monitor: option help texts, defaults, the --sort choices) keeps its
original behaviour and its mutants survive whatever the tests check
(docs/commands.md and tests/host/test_docs.py compare that help text with
the docs); likewise code that only a subprocess or the HTTP server thread
runs. Read those survivors as out of mutmut's reach, not as untested.

Usage: tools/mutation.py [--report]   (--report: only tally the last run)
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTMUT = Path(sys.executable).parent / "mutmut"
OUT = ROOT / "bench" / "results" / "mutation.json"
KILLED = ("killed", "timeout", "segfault", "caught by type check")
COUNTED = (*KILLED, "survived", "no tests")


def tally(text: str) -> dict[str, Counter[str]]:
    """Status counts per module from `mutmut results --all true`."""
    modules: dict[str, Counter[str]] = {}
    for line in text.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if not sep or "__mutmut_" not in name:
            continue
        module = name.rsplit(".", 1)[0]  # mangled function names hold no dot
        modules.setdefault(module, Counter())[status] += 1
    return modules


def score(counts: Counter[str]) -> float:
    counted = sum(counts[s] for s in COUNTED)
    return 100.0 * sum(counts[s] for s in KILLED) / counted if counted else 0.0


def main(argv: list[str]) -> int:
    if argv not in ([], ["--report"]):
        print(__doc__.rsplit("Usage: ", 1)[1].strip(), file=sys.stderr)
        return 2
    if not argv:
        run = subprocess.run([str(MUTMUT), "run", "--max-children", "2"], cwd=ROOT,
                             stdout=subprocess.DEVNULL, check=False)
        if run.returncode != 0:
            print(f"mutmut run failed with status {run.returncode}", file=sys.stderr)
            return 1
    out = subprocess.run([str(MUTMUT), "results", "--all", "true"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    modules = tally(out)
    if not modules:
        print("no mutants: run without --report first", file=sys.stderr)
        return 1
    total: Counter[str] = Counter()
    print(f"{'module':40} {'mutants':>7} {'killed':>6} {'survived':>8} {'no tests':>8} "
          f"{'score':>6}")
    for module, counts in sorted(modules.items()):
        total += counts
        print(f"{module:40} {sum(counts.values()):7} {counts['killed'] + counts['timeout']:6} "
              f"{counts['survived']:8} {counts['no tests']:8} {score(counts):5.1f}%")
    print(f"{'all':40} {sum(total.values()):7} {total['killed'] + total['timeout']:6} "
          f"{total['survived']:8} {total['no tests']:8} {score(total):5.1f}%")
    complete = not total["not checked"]
    if not complete:
        print(f"{total['not checked']} mutants not checked: the run did not finish",
              file=sys.stderr)
    OUT.write_text(json.dumps({
        "complete": complete,
        "score_percent": round(score(total), 1),
        "mutants": sum(total.values()),
        "status": dict(sorted(total.items())),
        "modules": {m: {"score_percent": round(score(c), 1), **dict(sorted(c.items()))}
                    for m, c in sorted(modules.items())},
    }, indent=2) + "\n")
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
