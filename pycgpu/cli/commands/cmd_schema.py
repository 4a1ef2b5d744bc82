"""``pycgpu schema``: the JSON Schemas of the ``--json`` documents."""

from __future__ import annotations

import click

from .common import BadValue


@click.command("schema", short_help="Print the JSON Schema of a --json document.")
@click.argument("name", required=False)
def schema(name: str | None) -> None:
    """Print the JSON Schema (draft 2020-12) of the document NAME: show,
    stat, devices or check (the latest version), or a versioned name such as
    pycgpu.stat/v1. Without NAME, list the schemas. The schemas ship with
    the package; within a version fields are only added and the lists
    marked open may gain values (see pycgpu/core/schemas.py).

    \b
    Examples:
      pycgpu schema
      pycgpu schema stat > stat.schema.json
      pycgpu stat --json | python -m jsonschema <(pycgpu schema stat)
    """
    import json

    from ...core import schemas

    if name is None:
        for key in sorted(schemas.SCHEMAS):
            click.echo(key)
        return
    try:
        doc = schemas.get(name)
    except schemas.UnknownSchema as e:
        raise BadValue(str(e)) from None
    click.echo(json.dumps(doc, indent=2))
