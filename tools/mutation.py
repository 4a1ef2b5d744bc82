#!/usr/bin/env python3
"""Mutation scores of pycgpu's tests (make mutation, make mutation-core).

Two sets of modules. ``monitoring`` (the default): runs mutmut (configured
in pyproject.toml, [tool.mutmut]: pycgpu/monitoring/ and
pycgpu/cli/commands/cmd_monitor.py mutated, the host tier as the tests) and
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

``core``: knobs, cgroup, oci, hook and kubepods, each against the host
test files that exercise it (:data:`CORE_TESTS`; mutmut runs, per mutant,
only the tests that called the mutated function). It runs in a copy of the
checkout, out/mutation/core/ (its own [tool.mutmut] written there, so the
monitoring run's configuration and mutants/ stay as they are); the figures
go to bench/results/mutation-core.json, and `mutmut results` run in that
directory lists the survivors.

Usage: tools/mutation.py [--set monitoring|core] [--report]
       (--report: only tally the last run)
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTMUT = Path(sys.executable).parent / "mutmut"
OUT = ROOT / "bench" / "results" / "mutation.json"
CORE_OUT = ROOT / "bench" / "results" / "mutation-core.json"
CORE_STAGE = ROOT / "out" / "mutation" / "core"
CORE_MODULES = ["pycgpu/core/knobs.py", "pycgpu/core/cgroup.py", "pycgpu/runtime/oci.py",
                "pycgpu/runtime/hook.py", "pycgpu/runtime/kubepods.py"]
# the host test files that exercise them (the CLI's tree commands drive knobs and cgroup)
CORE_TESTS = ["tests/host/" + name for name in (
    "test_knobs.py", "test_cgroup_tree.py", "test_cli_tree.py", "test_all_or_none.py",
    "test_concurrency.py", "test_oci.py", "test_bad_json.py", "test_hook.py",
    "test_kubepods.py", "test_hook_entry.py", "test_errors.py", "test_core_exact.py")]
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


def stage_core() -> Path:
    """A copy of the checkout in :data:`CORE_STAGE` whose [tool.mutmut]
    mutates :data:`CORE_MODULES` against :data:`CORE_TESTS`. The mutants/
    of an earlier run stay: mutmut re-checks only what changed."""
    skip = shutil.ignore_patterns(".git", ".venv", "out", "mutants", "__pycache__", "*.egg-info",
                                  "build", "kernel")
    for name in ("pycgpu", "tests", "tools", "docs", "deploy", "bench"):
        shutil.rmtree(CORE_STAGE / name, ignore_errors=True)  # no module left from before
        shutil.copytree(ROOT / name, CORE_STAGE / name, ignore=skip, dirs_exist_ok=True)
    for name in ("README.md", "setup.py", "Makefile"):
        shutil.copy2(ROOT / name, CORE_STAGE / name)
    pyproject = (ROOT / "pyproject.toml").read_text()
    head, sep, _ = pyproject.partition("[tool.mutmut]")
    if not sep:
        raise SystemExit("pyproject.toml has no [tool.mutmut] section")
    config = (f"[tool.mutmut]\nsource_paths = [\"pycgpu/\"]\n"
              f"only_mutate = {json.dumps(CORE_MODULES)}\n"
              f"pytest_add_cli_args_test_selection = {json.dumps(CORE_TESTS)}\n"
              f"also_copy = [\"README.md\", \"setup.py\", \"docs/\", \"deploy/\", \"tools/\", "
              f"\"bench/\"]\n")
    (CORE_STAGE / "pyproject.toml").write_text(re.sub(r"\n+$", "\n\n", head) + config)
    return CORE_STAGE


def main(argv: list[str]) -> int:
    args = list(argv)
    which = "monitoring"
    if args[:1] == ["--set"] and len(args) >= 2:
        which = args[1]
        del args[:2]
    if which not in ("monitoring", "core") or args not in ([], ["--report"]):
        print(__doc__.rsplit("Usage: ", 1)[1].strip(), file=sys.stderr)
        return 2
    where, result = (ROOT, OUT) if which == "monitoring" else (CORE_STAGE, CORE_OUT)
    if not args:
        if which == "core":
            CORE_STAGE.mkdir(parents=True, exist_ok=True)
            stage_core()
        run = subprocess.run([str(MUTMUT), "run", "--max-children", "2"], cwd=where,
                             stdout=subprocess.DEVNULL, check=False)
        if run.returncode != 0:
            print(f"mutmut run failed with status {run.returncode}", file=sys.stderr)
            return 1
    out = subprocess.run([str(MUTMUT), "results", "--all", "true"], cwd=where,
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
    result.write_text(json.dumps({
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
