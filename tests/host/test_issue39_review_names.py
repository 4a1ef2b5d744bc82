"""Review of issue 39, item 4: formats.printable_name applies wherever a
cgroup name or path is printed, not only in show, stat's rows and the
exporter: stat's warnings and --json errors and cgroup_root, the dry-run
steps of create and set, the errors that name a group (does not exist, rm's
refusals), exec's steps. Text and JSON are then valid UTF-8 on one line,
with no lone surrogates."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner
from conftest import Cli, FakeKernel

from pycgpu.cli import main

BAD = os.fsdecode(b"bad\xffname")  # "bad\udcffname", as os.scandir gives it
SHOWN = "bad\\xffname"


def run(cli: Cli, *args: str, code: int = 0) -> tuple[str, str]:
    r = CliRunner().invoke(main, list(args), env=cli.env)
    assert r.exit_code == code, (r.exit_code, r.output, r.exception)
    return r.stdout, r.stderr


def clean(text: str) -> None:
    assert "\udcff" not in text and "\\udc" not in text.lower(), text
    text.encode("utf-8")


@pytest.fixture
def bad_root(tmp_path, monkeypatch, fake_sysfs) -> Cli:
    """A fake tree whose mount point has a byte that is not UTF-8."""
    base = tmp_path / BAD
    base.mkdir()
    return Cli(FakeKernel(base).install(monkeypatch), *fake_sysfs)


def test_stat_warnings_and_json_errors_and_root_are_escaped(bad_root):
    group = bad_root.fake.make(BAD)
    (group / "gpu.stat").write_text("226:128 usage_usec=lots\n")
    out, err = run(bad_root, "stat", "-i", "0")
    clean(err)
    assert "warning: " in err and SHOWN in err
    out, _ = run(bad_root, "stat", "--json", "-i", "0")
    clean(out)
    doc = json.loads(out)
    assert doc["errors"] and all(SHOWN in e for e in doc["errors"]), doc["errors"]
    assert doc["cgroup_root"].endswith(f"/{SHOWN}/cgroup")


@pytest.mark.parametrize("command", [["create", "--weight", "5", "--dry-run"],
                                     ["set", "--weight", "5", "--dry-run"]])
def test_dry_run_steps_are_escaped(cli, command):
    if command[0] == "set":
        cli.fake.make(BAD)
    out, _ = run(cli, command[0], BAD, *command[1:])
    clean(out)
    assert f"/{SHOWN}" in out


@pytest.mark.parametrize("args", [["show", BAD], ["set", BAD, "--weight", "5"],
                                  ["rm", BAD], ["exec", BAD, "--", "true"],
                                  ["stat", BAD, "-i", "0"]])
def test_a_missing_group_is_named_escaped(cli, args):
    _, err = run(cli, *args, code=2)
    clean(err)
    assert f"/{SHOWN}" in err and "does not exist" in err


def test_rm_refusals_are_escaped(cli):
    cli.fake.make(f"{BAD}/child")
    _, err = run(cli, "rm", BAD, code=2)
    clean(err)
    assert f"/{SHOWN}/child" in err


def test_exec_dry_run_steps_are_escaped(bad_root):
    bad_root.fake.make(BAD)
    out, _ = run(bad_root, "exec", BAD, "--dry-run", "--", "true")
    clean(out)
    assert f"/{SHOWN}/cgroup/{SHOWN}/cgroup.procs" in out


def test_rm_dry_run_is_escaped(cli):
    cli.fake.make(f"{BAD}/child")
    out, _ = run(cli, "rm", "-r", BAD, "--dry-run")
    clean(out)
    assert f"/{SHOWN}/child" in out
