"""Strict JSON (issue 39, item 7): NaN, Infinity, -Infinity and numbers
beyond a double (1e999999) are not JSON that runc takes; Python's json
module accepts them and would write them back as NaN and Infinity. A
config.json or an OCI state that holds one is refused on one line, exit 2,
the file unchanged. The hook's state goes through the same parser
(pycgpu.core.jsontext) as config.json (item 11)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from pycgpu.cli import main
from pycgpu.core import jsontext
from pycgpu.runtime import hook

CASES = [
    ("NaN", "NaN is not a JSON number"),
    ("Infinity", "Infinity is not a JSON number"),
    ("-Infinity", "-Infinity is not a JSON number"),
    ("1e999999", "1e999999 is beyond the range of a JSON number pycgpu writes back"),
    ("-1E+400", "-1E+400 is beyond the range of a JSON number pycgpu writes back"),
    ("1" * 5000, f"{'1' * 12}... is beyond the range of a JSON number pycgpu writes back"),
]


def run(cli, args: list[str], stdin: bytes | None = None):
    r = CliRunner().invoke(main, args, input=stdin, env=cli.env)
    if r.exception and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r


@pytest.mark.parametrize("number, why", CASES)
@pytest.mark.parametrize("command", [["oci", "patch", "--priority", "5"], ["oci", "unpatch"],
                                     ["oci", "patch", "--hook", "--weight", "5"]])
def test_a_config_with_a_number_json_does_not_have_is_refused(cli, tmp_path, number, why,
                                                              command):
    path = tmp_path / "config.json"
    data = ('{"ociVersion": "1.0.2", "process": {"rlimits": [{"hard": NUMBER}]}, '
            '"annotations": {"pycgpu.io/gpu.weight": "1"}}').replace("NUMBER", number).encode()
    path.write_bytes(data)
    r = run(cli, [*command[:2], str(path), *command[2:]])
    assert (r.exit_code, r.output) == (2, f"Error: {path}: {why}\n")
    assert path.read_bytes() == data


@pytest.mark.parametrize("number, why", CASES)
def test_jsontext_refuses_them(number, why):
    with pytest.raises(jsontext.NotJSON) as info:
        jsontext.loads(f'{{"a": [{number}]}}', "x")
    assert str(info.value) == f"x: {why}"


def test_numbers_json_has_still_parse():
    doc = jsontext.loads('{"a": [1.5e300, -2, 0.1, 1e-999999, 12345678901234567890]}', "x")
    assert doc == {"a": [1.5e300, -2, 0.1, 0.0, 12345678901234567890]}


@pytest.mark.parametrize("number, why", CASES[:4])
def test_the_hooks_state_is_as_strict(cli, number, why):
    state = b'{"id": "c1", "pid": 1, "bundle": "/b", "x": %s}' % number.encode()
    r = run(cli, ["oci", "hook"], state)
    assert (r.exit_code, r.output) == (2, f"Error: pycgpu oci hook: the OCI state on stdin: "
                                          f"{why}\n")


def test_the_hooks_state_is_parsed_by_jsontext(monkeypatch):
    """One parser: hook.ContainerState.parse uses jsontext.loads."""
    seen = []
    real = jsontext.loads

    def loads(data, source, *args, **kwargs):
        seen.append(source)
        return real(data, source, *args, **kwargs)

    monkeypatch.setattr(jsontext, "loads", loads)
    state = hook.ContainerState.parse(json.dumps({"id": "c1", "bundle": "/b"}))
    assert state.id == "c1" and seen == ["the OCI state on stdin"]
