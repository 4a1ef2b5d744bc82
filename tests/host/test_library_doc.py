"""docs/library.md: its example program runs, against the fake kernel and
the fake sysfs, and prints what the page says it prints; the modules and
names the page lists exist."""

from __future__ import annotations

import contextlib
import importlib
import io
import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[2] / "docs" / "library.md"


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```$", PAGE.read_text(), re.S | re.M)


def root_totals(root):
    """The root's gpu.memory.current, by which the example finds gpu.memory.* (6.12)."""
    (root / "gpu.memory.current").write_text("226:128 0\n226:129 0\n")


def test_the_example_runs_and_prints_what_the_page_says(cli, tmp_path, monkeypatch):
    [program] = _blocks("python")
    [printed] = _blocks("text")
    for name, value in cli.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    root_totals(cli.fake.root)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(program, str(PAGE), "exec"), {"__name__": "__main__"})
    assert out.getvalue() == printed
    group = cli.fake.root / "ai" / "train"
    assert (group / "gpu.weight").read_text() == "default 300\n"
    assert (group / "gpu.memory.max").read_text().startswith("226:128 2147483648\n")
    import os
    assert str(os.getpid()) in (group / "cgroup.procs").read_text().split()
    import json
    doc = json.loads((tmp_path / "config.json").read_text())
    assert {"path": "/dev/dri/renderD128", "type": "c", "major": 226, "minor": 128} \
        .items() <= doc["linux"]["devices"][-1].items()


def test_a_failing_example_says_why_in_one_line(cli, tmp_path, monkeypatch):
    """The example's error path: a library error (here: the group's parent
    is a file, so it cannot be created) ends it with its message."""
    [program] = _blocks("python")
    for name, value in cli.env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)
    root_totals(cli.fake.root)
    (cli.fake.root / "ai").write_text("")
    with pytest.raises(SystemExit) as info, contextlib.redirect_stdout(io.StringIO()):
        exec(compile(program, str(PAGE), "exec"), {"__name__": "__main__"})
    assert str(info.value).startswith("cannot set up /ai/train: ")


def test_the_names_the_page_lists_exist():
    text = PAGE.read_text()
    table = text.split("## Example")[0]
    names = re.findall(r"`((?:cgroup|knobs|locks|model|devices|oci|hook)\.[A-Za-z_]+)`", table)
    assert len(names) >= 15
    for name in names:
        module, attr = name.split(".")
        package = "runtime" if module in ("oci", "hook") else "core"
        assert hasattr(importlib.import_module(f"pycgpu.{package}.{module}"), attr), name
    for field in re.findall(r"`(\w+)`", text.split("one reader of a group's files")[1]
                            .split("\n\n")[0]):
        if field not in ("GroupFiles", "None", "model"):
            assert field in {f.attr for f in importlib.import_module(
                "pycgpu.core.model").FILES}, field
