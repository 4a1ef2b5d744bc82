"""Small things a review of issue 39's changes found: the oci commands'
help points to pycgpu devices for regions, the locks' docstring names rm,
jsontext's integer helper is named for what it does, HostRefused's
continuation lines are aligned, and the docs say the share entries assume
/bin/true."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from pycgpu.core import jsontext, locks
from pycgpu.runtime import hook

DOCS = Path(__file__).resolve().parents[2] / "docs"


@pytest.mark.parametrize("command", [["oci", "patch"], ["oci", "generate"]])
def test_the_oci_help_points_to_devices_for_regions(cli, command):
    text = " ".join(cli(*command, "--help").output.split())
    assert "see pycgpu check" not in text
    assert "one of a device's regions, see pycgpu devices)" in text
    reference = " ".join((DOCS / "commands.md").read_text().split())
    assert "one of a device's regions, see pycgpu check)" not in reference


def test_the_locks_docstring_names_rm():
    doc = " ".join((locks.__doc__ or "").split())
    assert "``pycgpu create``/``set``/``rm``" in doc


def test_jsontext_has_no_int_helper_beside_parse_number():
    assert not hasattr(jsontext, "_int")
    assert jsontext.loads("[12]", "x") == [12]


def _misaligned(source: str) -> list[int]:
    """The lines of @source that continue a call's first argument under
    another column than the argument's."""
    lines = source.splitlines()
    bad = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "HostRefused" and node.args):
            continue
        arg = node.args[0]
        if arg.lineno == arg.end_lineno:
            continue
        for line in range(arg.lineno + 1, (arg.end_lineno or arg.lineno) + 1):
            text = lines[line - 1]
            if len(text) - len(text.lstrip()) != arg.col_offset:
                bad.append(line)
    return bad


def test_host_refused_continuation_lines_are_aligned():
    assert _misaligned(inspect.getsource(hook)) == []


def test_the_docs_say_the_share_entries_need_bin_true():
    text = " ".join((DOCS / "kubernetes.md").read_text().split())
    assert "`/bin/true` must exist on the node" in text
    assert "NixOS" in text and "Talos" in text
