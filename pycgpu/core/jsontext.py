"""JSON documents pycgpu reads (a bundle's config.json, the OCI state on a
hook's stdin): one line for any input that is not a document pycgpu can
work with, never a traceback.

``json.loads`` alone raises UnicodeDecodeError for bytes that are not UTF-8
and RecursionError for deep nesting, and a document it does parse can still
be too deep for the encoder that writes it back (the indenting encoder
recurses in Python). :func:`loads` turns the first two into
:class:`NotJSON` and refuses nesting deeper than :data:`MAX_DEPTH`, far
beyond any runtime-spec document (a config.json nests about 6 levels).

It also refuses what ``json.loads`` takes but JSON has not: ``NaN``,
``Infinity`` and ``-Infinity``, and numbers that would come back as
something else (``1e999999``, which Python reads as infinity and writes as
``Infinity``; integers longer than Python converts, 4300 digits): written
back they would make a file that runc and crun refuse.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from .errors import Error
from .formats import FormatError, decode

MAX_DEPTH = 100


class NotJSON(Error, ValueError):
    """Input that is not a JSON document pycgpu takes; the message is one
    line that names the source and where it went wrong. @reason is
    :data:`SYNTAX` for text that does not parse as JSON at all."""


SYNTAX = "syntax"


def _shown(text: str) -> str:
    return text if len(text) <= 24 else text[:12] + "..."


def _constant(source: str) -> Callable[[str], Any]:
    def refuse(name: str) -> Any:
        raise NotJSON(f"{source}: {name} is not a JSON number")
    return refuse


def _out_of_range(source: str, text: str) -> NotJSON:
    return NotJSON(f"{source}: {_shown(text)} is beyond the range of a JSON number pycgpu "
                   "writes back")


def _float(source: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        value = float(text)
        if math.isinf(value):
            raise _out_of_range(source, text)
        return value
    return parse


def _int_python_converts(source: str) -> Callable[[str], int]:
    """json's parse_int: any number of digits is JSON, but int() converts
    at most sys.get_int_max_str_digits() (4300) of them, and the document is
    written back: a longer one is out of range (not
    :func:`pycgpu.core.formats.parse_number`, whose 64-bit bound is the
    kernel's, not config.json's)."""
    def parse(text: str) -> int:
        try:
            return int(text)
        except ValueError:  # more digits than Python converts (and writes back)
            raise _out_of_range(source, text) from None
    return parse


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
    errors. Raises :class:`NotJSON` (also for NaN, infinities and numbers
    out of range); errors raised by @object_pairs_hook pass through."""
    try:
        text = decode(data, source) if isinstance(data, bytes) else data
    except FormatError as e:
        raise NotJSON(str(e)) from None
    try:
        doc = json.loads(text, object_pairs_hook=object_pairs_hook,
                         parse_constant=_constant(source), parse_float=_float(source),
                         parse_int=_int_python_converts(source))
    except json.JSONDecodeError as e:
        raise NotJSON(f"{source}:{e.lineno}:{e.colno}: not valid JSON: "
                      f"{e.msg}").because(SYNTAX) from None
    except RecursionError:
        raise NotJSON(f"{source}: nested deeper than {MAX_DEPTH} levels") from None
    if depth(doc) > MAX_DEPTH:
        raise NotJSON(f"{source}: nested deeper than {MAX_DEPTH} levels")
    return doc
