"""The README and docs/*.md against the real CLI (tools/docs_help.py): the
--help blocks are the CLI's output, the example commands exist with the
options they use."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))

import docs_help


def test_docs_match_the_cli():
    assert docs_help.problems() == []


def test_example_checker_catches_drift():
    assert docs_help.check_example("pycgpu set a --weight 5") is None
    assert docs_help.check_example("pycgpu exec a --dry-run -- ls -l") is None
    assert docs_help.check_example("pycgpu oci unpatch c.json --keep-devices") is None
    assert "no command 'frobnicate'" in docs_help.check_example("pycgpu frobnicate")
    assert "set has no option --wieght" in docs_help.check_example("pycgpu set a --wieght 5")


def test_a_stale_help_block_is_rewritten():
    stale = "```\n$ pycgpu schema --help\nUsage: old\n```\n"
    new = docs_help.rewrite(stale)
    assert new != stale and "pycgpu schema [OPTIONS] [NAME]" in new
    assert docs_help.rewrite(new) == new


def test_monitoring_doc_lists_every_metric():
    from pycgpu.usage.exporter import FAMILIES

    text = (docs_help.ROOT / "docs" / "monitoring.md").read_text()
    for name, family in FAMILIES.items():
        assert f"| `{name}` | {family.type} |" in text, name
