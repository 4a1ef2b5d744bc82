"""JSON documents pycgpu reads (a bundle's config.json, the OCI state on a
hook's stdin): one line for any input that is not a document pycgpu can
work with, never a traceback.

``json.loads`` alone raises UnicodeDecodeError for bytes that are not UTF-8
and RecursionError for deep nesting, and a document it does parse can still
be too deep for the encoder that writes it back (the indenting encoder
recurses in Python). :func:`loads` turns the first two into
:class:`NotJSON` and refuses nesting deeper than :data:`MAX_DEPTH`, far
beyond any runtime-spec document (a config.json nests about 6 levels).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .errors import Error
from .formats import FormatError, decode

MAX_DEPTH = 100


class NotJSON(Error, ValueError):
    """Input that is not a JSON document pycgpu takes; the message is one
    line that names the source and where it went wrong."""


def depth(doc: Any) -> int:
    """How deep @doc nests objects and arrays (a scalar: 0), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(doc, 0)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, dict | list):
            level += 1
            deepest = max(deepest, level)
            if level <= MAX_DEPTH:
                items = value.values() if isinstance(value, dict) else value
                stack.extend((v, level) for v in items)
    return deepest


def loads(data: bytes | str, source: str,
          object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None) -> Any:
    """The document in @data (bytes must be UTF-8); @source names it in
    errors. Raises :class:`NotJSON`; errors raised by @object_pairs_hook
    pass through."""
    try:
        text = decode(data, source) if isinstance(data, bytes) else data
    except FormatError as e:
        raise NotJSON(str(e)) from None
    try:
        doc = json.loads(text, object_pairs_hook=object_pairs_hook)
    except json.JSONDecodeError as e:
        raise NotJSON(f"{source}:{e.lineno}:{e.colno}: not valid JSON: {e.msg}") from None
    except RecursionError:
        raise NotJSON(f"{source}: nested deeper than {MAX_DEPTH} levels") from None
    if depth(doc) > MAX_DEPTH:
        raise NotJSON(f"{source}: nested deeper than {MAX_DEPTH} levels")
    return doc
