"""One line, never a traceback, for any config.json and any OCI state:
bytes that are not UTF-8, nesting deeper than the JSON parser's recursion
limit or than pycgpu writes back, lone surrogates (pycgpu.core.jsontext), from
oci patch, oci unpatch and the hook; the file is left as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pycgpu.cli import main
from pycgpu.core import jsontext

DEEP = b'{"a": ' + b"[" * 5000 + b"]" * 5000 + b"}"  # RecursionError in json.loads
DEEPISH = b'{"a": ' + b"[" * 500 + b"]" * 500 + b"}"  # parses; the writer would recurse
NOT_UTF8 = b'{"annotations": {"x": "caf\xe9"}}'


def run(cli, args: list[str], stdin: bytes | None = None):
    r = CliRunner().invoke(main, args, input=stdin, env=cli.env)
    if r.exception and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r


@pytest.mark.parametrize("data, why", [
    (NOT_UTF8, "not UTF-8 text (byte 0xe9 at offset 26)"),
    (DEEP, "nested deeper than 100 levels"),
    (DEEPISH, "nested deeper than 100 levels"),
])
@pytest.mark.parametrize("command", [["oci", "patch", "--priority", "5"], ["oci", "unpatch"]])
def test_a_config_pycgpu_cannot_take_is_one_line(cli, tmp_path, data, why, command):
    path = tmp_path / "config.json"
    path.write_bytes(data)
    r = run(cli, [*command[:2], str(path), *command[2:]])
    assert (r.exit_code, r.output) == (2, f"Error: {path}: {why}\n")
    assert path.read_bytes() == data


def test_a_lone_surrogate_is_written_back_escaped(cli, tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"annotations": {"x": "\\ud800"}}')
    r = run(cli, ["oci", "patch", str(path), "--priority", "5"])
    assert (r.exit_code, r.output) == (0, "")
    doc = json.loads(path.read_text())
    assert doc["annotations"] == {"x": "\ud800"}
    assert doc["linux"]["resources"]["unified"] == {"gpu.priority": "5"}


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    (tmp_path / "b").mkdir()
    return tmp_path / "b"


def hook_state(bundle: Path) -> bytes:
    return json.dumps({"ociVersion": "1.0.2", "id": "c1", "pid": 1,
                       "bundle": str(bundle)}).encode()


@pytest.mark.parametrize("data, why", [
    (NOT_UTF8, "not UTF-8 text (byte 0xe9 at offset 26)"),
    (DEEP, "nested deeper than 100 levels"),
])
def test_the_hook_on_a_config_it_cannot_take(cli, bundle, data, why):
    (bundle / "config.json").write_bytes(data)
    r = run(cli, ["oci", "hook"], hook_state(bundle))  # no annotations in the state: read config
    assert (r.exit_code, r.output) == (
        2, f"Error: pycgpu oci hook: container c1: {bundle}/config.json: {why}\n")


@pytest.mark.parametrize("data, why", [
    (b'{"id": "caf\xe9"}', "the OCI state on stdin: not UTF-8 text (byte 0xe9 at offset 11)"),
    (b"[" * 5000 + b"]" * 5000, "the OCI state on stdin: nested deeper than 100 levels"),
    (b'{"id": "c1", "x": ' + b"[" * 500 + b"]" * 500 + b"}",
     "the OCI state on stdin: nested deeper than 100 levels"),
])
def test_the_hook_on_a_state_it_cannot_take(cli, data, why):
    r = run(cli, ["oci", "hook"], data)
    assert (r.exit_code, r.output) == (2, f"Error: pycgpu oci hook: {why}\n")


def test_a_cgroup_name_that_is_not_utf8(cli, bundle, tmp_path):
    """/proc/PID/cgroup names a group whose name is not UTF-8: the hook
    works on it as it is."""
    cli.fake.make("caf\udce9")
    (tmp_path / "proc" / "7").mkdir(parents=True)
    (tmp_path / "proc" / "7" / "cgroup").write_bytes(b"0::/caf\xe9\n")
    cli.env["PYCGPU_PROC_ROOT"] = str(tmp_path / "proc")
    (bundle / "config.json").write_text("{}")
    state = {"ociVersion": "1.0.2", "id": "c1", "pid": 7, "bundle": str(bundle),
             "annotations": {"pycgpu.io/gpu.weight": "30"}}
    r = run(cli, ["oci", "hook"], json.dumps(state).encode())
    assert (r.exit_code, r.output) == (0, "")
    assert cli.fake.read("caf\udce9/gpu.weight") == "default 30\n"


def test_depth():
    assert jsontext.depth(1) == 0
    assert jsontext.depth({"a": [1, {"b": []}]}) == 4
    assert jsontext.depth([[]] * 3) == 2
    with pytest.raises(jsontext.NotJSON, match=r"^x: nested deeper than 100 levels$"):
        jsontext.loads("[" * 101 + "]" * 101, "x")
    assert jsontext.loads("[" * 100 + "]" * 100, "x") is not None
