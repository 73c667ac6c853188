"""The game performance report: what each game took and paid over a range of days.

Read from ``game_days`` (each table's game cycles summed per UTC day as they close), so a
report over a month reads a row per table and day, never the rounds themselves. Money is in
minor units of each line's currency; the returns are exact ratios rounded half to even to
four decimals of a percent, as text (never a float).
"""

from __future__ import annotations

import re
from dataclasses import fields
from datetime import date, timedelta
from fractions import Fraction
from typing import Any, Final

from pydantic import ValidationError
from sqlalchemy import distinct, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from blackjack.domain.rules import PRESETS, stored_rules
from blackjack.projections import schema
from blackjack.projections.projector import GameDay

MAX_DAYS: Final = 366
"""the longest range one report covers (a year, leap day included)"""

PERCENT_DECIMALS: Final = 4


def percent(part: int, whole: int) -> str | None:
    """``part / whole`` as a percent with four decimals, rounded half to even; None when
    ``whole`` is 0 (no return to state)."""
    if whole == 0:
        return None
    scale = 10**PERCENT_DECIMALS
    units = round(Fraction(part * 100 * scale, whole))
    sign = "-" if units < 0 else ""
    whole_part, decimals = divmod(abs(units), scale)
    return f"{sign}{whole_part}.{decimals:0{PERCENT_DECIMALS}d}"


YEAR = r"(000[1-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-9][0-9]{3})"
DAY_PATTERN: Final = f"^{YEAR}-[0-9]{{2}}-[0-9]{{2}}$"
"""a day as YYYY-MM-DD, year 1 to 9999 (a date of RFC 3339 may have year 0; Python's not)"""
DAY: Final = re.compile(DAY_PATTERN, re.ASCII)


def parse_day(text: str) -> date | None:
    """``YYYY-MM-DD`` as a date, else None (``date.fromisoformat`` also takes ``20261201``
    and week dates, which a report's parameters do not)."""
    try:
        return date.fromisoformat(text) if DAY.fullmatch(text) else None
    except ValueError:  # 2026-02-30
        return None


def last_day(first: date, days: int) -> date:
    """The last of ``days`` days from ``first`` (the calendar's last day at most)."""
    if not 1 <= days <= MAX_DAYS:
        raise ValueError(f"days is from 1 to {MAX_DAYS}, not {days}")
    return first + timedelta(days=min(days - 1, (date.max - first).days))


async def game_performance(connection: AsyncConnection, first: date, days: int) -> dict[str, Any]:
    """Per game (variant) and currency, the rounds closed on the ``days`` UTC days from
    ``first``: how many, the money wagered and paid, the house's hold, and the return (paid
    per wagered; and per initial bet, the unit of ``blackjack rtp``'s theoretical figure, as
    players' doubles, splits and insurance add to the wagers)."""
    last = last_day(first, days)
    g = schema.game_days
    sums = [func.coalesce(func.sum(g.c[name]), 0).label(name) for name in SUMMED]
    query = (
        select(g.c.variant, g.c.currency, func.count(distinct(g.c.stream_id)).label("tables"))
        .add_columns(*sums)
        .where(g.c.day >= first, g.c.day <= last)
        .group_by(g.c.variant, g.c.currency)
    )
    own = await _tables_with_own_rules(connection, first, last)
    lines = [_line(row._asdict()) for row in (await connection.execute(query)).all()]
    for line in lines:
        line["tables_with_own_rules"] = own.get((line["variant"], line["currency"]), 0)
    lines.sort(key=lambda line: (line["variant"], line["currency"]))
    return {"from": first.isoformat(), "to": last.isoformat(), "games": lines}


async def _tables_with_own_rules(
    connection: AsyncConnection, first: date, last: date
) -> dict[tuple[str, str], int]:
    """Per game and currency, the tables of the range opened with rules other than their
    preset's (overrides at ``OpenTable``): their return is not the preset's theoretical one."""
    g, t = schema.game_days, schema.table_views
    streams = (
        select(g.c.stream_id, g.c.variant, g.c.currency)
        .where(g.c.day >= first, g.c.day <= last)
        .distinct()
        .subquery()
    )
    query = select(streams.c.variant, streams.c.currency, t.c.view["rules"].label("rules")).join(
        t, t.c.stream_id == streams.c.stream_id
    )
    counted: dict[tuple[str, str], int] = {}
    for variant, currency, rules in (await connection.execute(query)).all():
        if _own_rules(variant, rules):
            counted[(variant, currency)] = counted.get((variant, currency), 0) + 1
    return counted


def _own_rules(variant: str, rules: Any) -> bool:
    preset = PRESETS.get(variant)
    if preset is None or not isinstance(rules, dict):
        return True
    try:  # as a snapshot or the log reads a table an earlier release opened
        return stored_rules(rules) != preset
    except ValidationError:
        return True


SUMMED: Final = tuple(f.name for f in fields(GameDay))
"""the columns of ``game_days`` a report sums: what the fold adds up per table and day"""


def _line(row: dict[str, Any]) -> dict[str, Any]:
    # PostgreSQL sums BIGINT as NUMERIC (read as Decimal): whole numbers either way
    line: dict[str, Any] = {
        "variant": row["variant"],
        "currency": row["currency"],
        "tables": int(row["tables"]),
        **{name: int(row[name]) for name in SUMMED},
    }
    wagered, paid, initial = line["wagered"], line["paid"], line["initial_bets"]
    line["hold"] = wagered - paid
    line["rtp_percent"] = percent(paid, wagered)
    line["return_per_initial_bet_percent"] = percent(initial + paid - wagered, initial)
    return line
