"""Ids and times as the read model writes them: every time in UTC, a round's game-cycle id
(``STREAM_ID:ROUND``) and the parsing of one from a request."""

from __future__ import annotations

from datetime import UTC, datetime


def utc(moment: datetime) -> datetime:
    """Every time in the read model is in UTC (a naive time is taken to be UTC already)."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def round_id(stream_id: str, number: int) -> str:
    """The game-cycle id: the table's stream id and the round number."""
    return f"{stream_id}:{number}"


MAX_ROUND = 2**31 - 1
"""The largest round number a store holds: the ``round`` columns are ``INTEGER``, 32 bits on
PostgreSQL (a larger number in a query is the driver's error, not an empty answer)."""


def parse_count(text: str, most: int) -> int | None:
    """``text`` as a whole number from 1 to ``most`` in ASCII digits (``str.isdigit`` also
    takes other scripts' digits and superscripts), leading zeros allowed; else None."""
    if not (text.isascii() and text.isdigit()):
        return None
    significant = text.lstrip("0")
    if not significant or len(significant) > len(str(most)):
        return None
    value = int(significant)
    return value if value <= most else None


def parse_round_id(text: str) -> tuple[str, int]:
    """``table-1:7`` -> ``("table-1", 7)``; stream ids may contain ``:`` themselves."""
    stream_id, sep, number = text.rpartition(":")
    value = parse_count(number, MAX_ROUND) if sep and stream_id else None
    if value is None:
        raise ValueError(
            f"a round id is STREAM_ID:ROUND with ROUND from 1 to {MAX_ROUND}, not {text[:80]!r}"
        )
    return stream_id, value
