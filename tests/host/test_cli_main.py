"""The pycgpu group: help texts, exit codes, global options, completion,
and a cheap import."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from pycgpu.cli import main

COMMANDS = ["devices", "create", "set", "show", "rm", "exec", "check"]


def test_help_lists_commands_exit_codes_and_completion():
    out = CliRunner().invoke(main, ["--help"]).output
    for name in COMMANDS:
        assert f"  {name} " in out
    for line in ["0  success", "1  the kernel or the system refused", "2  usage error",
                 "3  pycgpu check found problems", "126: cannot execute, 127: not found",
                 "_PYCGPU_COMPLETE=bash_source pycgpu", "PYCGPU_CGROUP_ROOT"]:
        assert line in out


@pytest.mark.parametrize("name", COMMANDS)
def test_every_command_has_help_with_examples(name):
    r = CliRunner().invoke(main, [name, "--help"])
    assert r.exit_code == 0
    assert "Examples:" in r.output
    assert f"pycgpu {name}" in r.output.split("Examples:")[1]


def test_version():
    r = CliRunner().invoke(main, ["--version"])
    assert r.output.startswith("pycgpu, version ")


def test_cgroup_root_that_is_not_cgroup2(tmp_path):
    r = CliRunner().invoke(main, ["--cgroup-root", str(tmp_path), "show"])
    assert r.exit_code == 1
    assert r.output.strip() == (f"Error: --cgroup-root {tmp_path} is not a cgroup2 mount (no "
                                "cgroup.controllers; fix: give the cgroup2 mount point, e.g. "
                                "/sys/fs/cgroup)")


def test_cgroup_root_from_environment(cli):
    cli.fake.make("envgroup")
    assert "/envgroup" in cli("show", "-r").output  # cli passes PYCGPU_CGROUP_ROOT only


def test_import_is_lazy():
    code = ("import sys, pycgpu.cli; "
            "print(sorted(m for m in ('cffi', 'pyudev', 'json', 'pycgpu.core.drm', "
            "'pycgpu.core.devices', 'pycgpu.core.knobs', 'pycgpu.core.snapshot', "
            "'pycgpu.core.capabilities') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def complete(root, words, cword):
    env = dict(os.environ, _PYCGPU_COMPLETE="bash_complete", COMP_WORDS=words,
               COMP_CWORD=str(cword), PYCGPU_CGROUP_ROOT=str(root))
    r = subprocess.run([sys.executable, "-m", "pycgpu"], env=env, capture_output=True,
                       text=True, check=True)
    return r.stdout.split()


def test_shell_completion(tmp_path):
    for rel in ("ai/train", "ai/infer", "batch"):
        (tmp_path / rel).mkdir(parents=True)
    assert complete(tmp_path, "pycgpu sh", 1) == ["plain,show"]
    assert complete(tmp_path, "pycgpu show a", 2) == ["plain,ai"]
    assert complete(tmp_path, "pycgpu set ai/", 2) == ["plain,ai/infer", "plain,ai/train"]
    assert complete(tmp_path, "pycgpu exec /b", 2) == ["plain,/batch"]


def test_shell_completion_of_devices(tmp_path, fake_sysfs):
    env = dict(os.environ, _PYCGPU_COMPLETE="bash_complete",
               COMP_WORDS="pycgpu set a --weight rend", COMP_CWORD="4",
               PYCGPU_CGROUP_ROOT=str(tmp_path), PYCGPU_SYSFS_ROOT=str(fake_sysfs[0]))
    r = subprocess.run([sys.executable, "-m", "pycgpu"], env=env, capture_output=True,
                       text=True, check=True)
    assert r.stdout.split() == ["plain,renderD128=", "plain,renderD129="]


def test_schema_command(cli):
    import json

    from pycgpu.core.schemas import SCHEMAS, STAT_SCHEMA

    assert cli("schema").output.split() == sorted(SCHEMAS)
    assert json.loads(cli("schema", "stat").output) == STAT_SCHEMA
    assert json.loads(cli("schema", "pycgpu.show/v1").output)["$id"] == "pycgpu.show/v1"
    assert "no schema 'nope'; known: pycgpu.check/v1" in cli("schema", "nope", code=2).output


def test_schemas_have_open_lists():
    import jsonschema

    from pycgpu.core.schemas import CHECK_SCHEMA, STAT_SCHEMA

    doc = {"schema": "pycgpu.check/v1", "ok": True, "cgroup_root": None,
           "findings": [{"id": "a-new-check", "status": "ok", "message": "", "fix": None}]}
    jsonschema.validate(doc, CHECK_SCHEMA)
    group = {"path": "/x", "leaf": True, "devices": {},
             "container": {"runtime": "a-new-runtime", "id": "1", "name": None, "pod": None,
                           "pod_uid": None, "namespace": None, "qos": None}}
    doc = {"schema": "pycgpu.stat/v1", "source": "kernel", "cgroup_root": None, "time": 0,
           "interval_s": None, "devices": {}, "groups": [group], "errors": []}
    jsonschema.validate(doc, STAT_SCHEMA)
