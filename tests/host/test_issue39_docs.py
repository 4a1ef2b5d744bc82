"""Issue 39's documentation: what the allow-list, the monitoring and the
library pages say about share IDs and errors matches the code."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from pycgpu.core.errors import Error

DOCS = Path(__file__).resolve().parents[2] / "docs"
MODULES = {"errors": "core", "cgroup": "core", "knobs": "core", "formats": "core",
           "devices": "core", "memory": "core", "schemas": "core", "jsontext": "core",
           "oci": "runtime", "cdi": "runtime", "annotations": "runtime", "allowlist": "runtime",
           "hook": "runtime", "monitoring": None}


def test_the_allow_list_no_longer_accepts_share_ids():
    from pycgpu.runtime import allowlist

    doc = " ".join((allowlist.__doc__ or "").split())
    assert "always accepted" not in doc
    assert "``pycgpu.io/share-ids`` is no key at all" in doc


def test_monitoring_says_where_share_ids_come_from():
    text = " ".join((DOCS / "monitoring.md").read_text().split())
    assert "`Allocate` adds `pycgpu.io/share-ids" not in text
    for words in ("the per-share CDI devices of the shares it grants",
                  "A pod cannot write hook entries, but whatever can name a share's CDI "
                  "device gets its ID",
                  "A `pycgpu.io/share-ids` annotation, which a pod can forge where pod "
                  "annotations reach the runtime, is ignored",
                  "This needs the plugin's `--cdi-spec`"):
        assert words in text, words


def _errors_table() -> str:
    text = (DOCS / "library.md").read_text()
    return text.split("| Error | also a | raised for |")[1].split("\n\n")[0]


@pytest.mark.parametrize("name", ["errors.FileError", "errors.FileMissing",
                                  "cgroup.GroupMissing", "schemas.UnknownSchema",
                                  "monitoring.UnknownSource", "cdi.SpecError"])
def test_the_library_page_lists_the_new_error_classes(name):
    assert f"`{name}`" in _errors_table()


def test_every_error_the_library_page_lists_is_one():
    names = re.findall(r"`(\w+)\.([A-Z]\w+)`", _errors_table())
    assert len(names) >= 20
    for module, cls in names:
        package = MODULES[module]
        path = f"pycgpu.{package}.{module}" if package else f"pycgpu.{module}"
        found = getattr(importlib.import_module(path), cls)
        assert issubclass(found, Error), f"{module}.{cls}"


@pytest.mark.parametrize("page", ["kubernetes.md", "monitoring.md"])
def test_share_ids_are_documented_in_a_trusted_xattr(page):
    """Item 1 of the review: a user.* attribute can be set by whoever can
    write the cgroup's directory; the IDs live in trusted.pycgpu.share_ids."""
    text = (DOCS / page).read_text()
    assert "user.pycgpu.share_ids" not in text
    assert "trusted.pycgpu.share_ids" in text


def test_the_docs_say_who_can_claim_a_share_id():
    """Item 2 of the review: the runtime copies every hook entry of each CDI
    device a container names, so whatever can name pycgpu.io/gpu=renderD128-s0
    gets its ID; the docs no longer say a pod can never claim one."""
    from pycgpu.runtime import cdi

    texts = {p: " ".join((DOCS / p).read_text().split())
             for p in ("kubernetes.md", "monitoring.md", "commands.md")}
    texts["cdi"] = " ".join((cdi.__doc__ or "").split())
    for name, text in texts.items():
        assert "cannot claim another pod" not in text, name
        assert "a pod cannot write hook entries)" not in text.lower(), name
        assert "which a pod cannot write," not in text, name
    k8s = texts["kubernetes.md"]
    for words in ("whatever can name a share's CDI device gets its ID",
                  "`podman run --device pycgpu.io/gpu=renderD128-s0`",
                  "`cdi.k8s.io/*` annotations"):
        assert words in k8s, words
    assert "whatever can name a share's CDI device" in texts["monitoring.md"]
    assert "whatever can name a share's CDI device" in texts["cdi"]
