"""Validators for the OCI runtime-spec and CDI JSON schemas in
../shared/schemas (beside the project root). Where they are absent (a
user's own clone), the tests that need them are skipped with that reason;
the real runtimes of the VM tier remain the ground truth."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import referencing
import referencing.jsonschema

SCHEMAS = Path(__file__).resolve().parents[2].parent / "shared" / "schemas"
OCI_DIR = SCHEMAS / "oci-runtime-spec-v1.3.0"
CDI_DIR = SCHEMAS / "cdi"


def _require(path: Path) -> None:
    if not path.is_file():
        pytest.skip(f"{path} is absent (../shared/schemas is not beside this clone): "
                    "schema validation skipped")


def _registry(directory: Path, spec: Any) -> referencing.Registry:
    return referencing.Registry().with_resources(
        (p.name, spec.create_resource(json.loads(p.read_text())))
        for p in sorted(directory.glob("*.json")))


@functools.cache
def _oci_validator() -> jsonschema.Draft4Validator:
    registry = _registry(OCI_DIR, referencing.jsonschema.DRAFT4)
    schema = json.loads((OCI_DIR / "config-schema.json").read_text())
    return jsonschema.Draft4Validator(schema, registry=registry)


@functools.cache
def _cdi_validator() -> jsonschema.Draft7Validator:
    registry = _registry(CDI_DIR, referencing.jsonschema.DRAFT7)
    schema = json.loads((CDI_DIR / "schema.json").read_text())
    return jsonschema.Draft7Validator(schema, registry=registry)


def oci_errors(doc: dict[str, Any]) -> list[str]:
    """The runtime-spec v1.3.0 schema's complaints about the config @doc."""
    _require(OCI_DIR / "config-schema.json")
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in _oci_validator().iter_errors(doc)]


def cdi_errors(doc: dict[str, Any]) -> list[str]:
    """The CDI schema's complaints about the spec @doc."""
    _require(CDI_DIR / "schema.json")
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
            for e in _cdi_validator().iter_errors(doc)]
