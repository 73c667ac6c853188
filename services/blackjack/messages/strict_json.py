"""JSON as the commands are read from the platform: an object that names a key twice is
refused. Python's reader keeps the last value, other readers the first or neither, so a
platform's gateway could check another command than the one decided (RFC 8259: such an
object's behaviour is unpredictable)."""

from __future__ import annotations

import json
import math
from collections import Counter
from typing import Any


class KeyNamedTwice(ValueError):
    """A JSON object that names a key twice."""

    def __init__(self, name: str) -> None:
        super().__init__(f"the key {name!r} is named twice")
        self.name = name


def object_once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object (``json.loads``'s ``object_pairs_hook``), refused when a key is twice."""
    document = dict(pairs)
    if len(document) != len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise KeyNamedTwice(name)
            seen.add(name)
    return document


class NotFinite(ValueError):
    """A number no JSON reader agrees on: ``NaN`` and ``Infinity`` (not JSON, which Python's
    reader takes), or one past a double's range (``1e400``, read as infinity)."""

    def __init__(self, text: str) -> None:
        super().__init__(f"{text} is not a finite number")
        self.text = text


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise NotFinite(text)
    return number


def _no_constant(name: str) -> float:
    raise NotFinite(name)


def finite_loads(text: str | bytes) -> Any:
    """``loads``, raising ``NotFinite`` for a number that is not finite: a model read from it
    writes such a number back as ``null`` (pydantic's JSON), so a command sent again from
    what was read would not be the one given."""
    return loads(text, parse_float=_finite, parse_constant=_no_constant)


def utf8(text: str | bytes) -> str:
    """The text of a message, read as UTF-8 only (RFC 8259 8.1). ``json.loads`` takes bytes in
    UTF-16 or UTF-32 too, and drops a byte-order mark: the handler would decide a command that
    a platform's gateway reading UTF-8 cannot read, let alone check. A ``UnicodeDecodeError``
    for bytes that are not UTF-8; a byte-order mark stays, and ``json.loads`` refuses it."""
    return text.decode("utf-8") if isinstance(text, bytes) else text


def loads(text: str | bytes, **options: Any) -> Any:
    """``json.loads`` of UTF-8, raising ``KeyNamedTwice`` for an object that names a key twice."""
    return json.loads(utf8(text), object_pairs_hook=object_once, **options)


def with_keys_named_twice(text: str | bytes, **options: Any) -> tuple[Any, set[str]]:
    """The document as ``json.loads`` reads it (the last value of a key kept), and the keys
    its outermost object names twice: what an answer to it may quote is what that object
    names once (a key named twice inside another object, say a rule override, leaves the
    envelope's own ids as unambiguous as they were)."""
    named_twice: list[set[str]] = []

    def collecting(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        document = dict(pairs)
        twice: set[str] = set()
        if len(document) != len(pairs):
            # counted in one pass: a count per key was quadratic, and a record of 100,000
            # keys, one named twice, held the handler's loop for six minutes
            counts = Counter(name for name, _ in pairs)
            twice = {name for name, count in counts.items() if count > 1}
        named_twice[:] = [twice]  # the outermost object is read last
        return document

    document = json.loads(utf8(text), object_pairs_hook=collecting, **options)
    return document, named_twice[0] if isinstance(document, dict) else set()
