"""The game performance report: what each game took and paid over a range of days.

Read from ``game_days`` (each table's game cycles summed per UTC day as they close), so a
report over a month reads a row per table and day, never the rounds themselves. Money is in
minor units of each line's currency; the returns are exact ratios rounded half to even to
four decimals of a percent, as text (never a float).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, date, datetime, timedelta
from fractions import Fraction
from typing import Any, Final, TypeVar

from pydantic import ValidationError
from sqlalchemy import Select, distinct, func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from blackjack.domain.rules import PRESETS, fingerprint, stored_rules
from blackjack.projections import schema
from blackjack.projections.queries import folded_positions, iso
from blackjack.projections.views import GameDay

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


async def game_performance(
    connection: AsyncConnection,
    first: date,
    days: int,
    *,
    now: datetime,
    by_day: bool = False,
    rules_apart: bool = False,
) -> dict[str, Any]:
    """Per game (variant) and currency, the rounds closed on the ``days`` UTC days from
    ``first``: how many, the money wagered and paid, the house's hold, and the return (paid
    per wagered; and per initial bet, the unit of ``blackjack rtp``'s theoretical figure, as
    players' doubles, splits and insurance add to the wagers).

    ``rules_apart``: the tables opened with their own rules (overrides) on lines of their own,
    one per game, currency and rule set (``fingerprint``), apart from the preset's tables.
    ``by_day``: the same lines for each day of the range too (``days``), every day listed, a
    day with no round closed with none: a return filed per day cannot tell a day left out
    from a day with nothing to report.

    ``as_of`` (``now``) and ``ended``, for the range and each day: whether it was over (UTC)
    at ``now``: a day not over (today, a day to come) may still close rounds, so its lines are
    not final (before, a day to come read as a day with nothing to report). ``positions``:
    the read model's position in each partition, read before the sums: what a day over holds
    is final once those reach the topic's ends as of its end (the workers' lag,
    ``blackjack_projection_lag``)."""
    positions = await folded_positions(connection)
    today = now.astimezone(UTC).date()
    last = last_day(first, days)
    # the range's on its own: a table that played on two days is one of its tables
    totals = {key: sums for (_, key), sums in (await _summed(connection, first, last)).items()}
    answer: dict[str, Any] = {
        "from": first.isoformat(),
        "to": last.isoformat(),
        "as_of": iso(now),
        "ended": last < today,
        "positions": positions,
        "games": _lines(totals, rules_apart),
    }
    if by_day:
        each: dict[date, dict[_Key, _Sums]] = {}
        for (day, key), sums in (await _summed(connection, first, last, by_day=True)).items():
            assert day is not None
            _add(each.setdefault(day, {}), key, sums)
        answer["days"] = [
            {
                "day": day.isoformat(),
                "ended": day < today,
                "games": _lines(each.get(day, {}), rules_apart),
            }
            for day in (first + timedelta(days=n) for n in range((last - first).days + 1))
        ]
    return answer


SUMMED: Final = tuple(f.name for f in fields(GameDay))
"""the columns of ``game_days`` a report sums: what the fold adds up per table and day"""


RULE_SETS_A_STATEMENT = 5_000
"""rule sets read by one statement at most: a statement's parameters are bounded (32,767 with
asyncpg and SQLite), and every table of a range could have rules of its own"""

K = TypeVar("K")
_Key = tuple[str, str, str | None]
"""a game, a currency, and the fingerprint of its tables' own rules (None: the preset's)"""


@dataclass
class _Sums:
    tables: int = 0
    first_table: str | None = None
    sums: dict[str, int] = field(default_factory=lambda: dict.fromkeys(SUMMED, 0))

    def add(self, more: _Sums) -> None:
        # a table has one rule set: the groups added are of other tables, their counts add up
        self.tables += more.tables
        if more.first_table is not None:
            self.first_table = min(filter(None, (self.first_table, more.first_table)))
        for name, value in more.sums.items():
            self.sums[name] += value


def _add(into: dict[K, _Sums], key: K, sums: _Sums) -> None:
    into.setdefault(key, _Sums()).add(sums)


async def _summed(
    connection: AsyncConnection, first: date, last: date, *, by_day: bool = False
) -> dict[tuple[date | None, _Key], _Sums]:
    """The ``game_days`` rows of the range summed per game, currency, rules document and,
    ``by_day``, day.

    The database sums. Each table of the range reads its rules document once, and is named
    by its rule set: the first table by id of its game whose document is the same. The rows
    are grouped by that name, never by the document (on PostgreSQL a table's view is a TOASTed
    document, read anew for each row it is joined to: five times the time, docs/projections.md);
    the few documents are then read again by name and folded into their fingerprints (equal
    rules stored by two releases are one rule set). The statements read one snapshot
    (``ProjectionStore.reading``): a day's lines add up to the range's while workers fold."""
    rows = (await connection.execute(summing(first, last, by_day))).mappings().all()
    named = sorted({row["rule_set"] for row in rows})
    own = {  # each rule set read once, not once a day
        stream_id: _own_rules(variant or "", document)
        for stream_id, (variant, document) in (await rules_documents(connection, named)).items()
    }
    summed: dict[tuple[date | None, _Key], _Sums] = {}
    for row in rows:
        rule_set = row["rule_set"]
        # no view (none the writer leaves): counted with the preset's tables, as before
        key = (row["variant"], row["currency"], own.get(rule_set))
        # PostgreSQL sums BIGINT as NUMERIC (read as Decimal): whole numbers either way
        sums = _Sums(int(row["tables"]), row["first_table"], {n: int(row[n]) for n in SUMMED})
        _add(summed, (row["day"] if by_day else None, key), sums)
    return summed


def summing(first: date, last: date, by_day: bool) -> Select[Any]:
    """The statement that sums the range's rows per game, currency, rule set (named by its
    first table) and, ``by_day``, day."""
    g, t = schema.game_days, schema.table_views
    in_range = (g.c.day >= first, g.c.day <= last)
    streams = select(g.c.stream_id, g.c.variant).where(*in_range).distinct().subquery()
    documents = (
        select(streams, t.c.view["rules"].label("rules"))
        .select_from(streams.outerjoin(t, t.c.stream_id == streams.c.stream_id))
        .subquery()
    )
    sets = select(
        documents.c.stream_id,
        func.min(documents.c.stream_id)
        .over(partition_by=[documents.c.variant, documents.c.rules])
        .label("rule_set"),
    ).subquery()  # a window: computed once, a row per table of the range
    groups = [g.c.variant, g.c.currency, sets.c.rule_set, *([g.c.day] if by_day else [])]
    query = (
        select(
            *groups,
            # a table has one row a day: counted, not sorted to be made distinct
            (func.count() if by_day else func.count(distinct(g.c.stream_id))).label("tables"),
            func.min(g.c.stream_id).label("first_table"),
            *(func.coalesce(func.sum(g.c[name]), 0).label(name) for name in SUMMED),
        )
        # every table of the range is in sets: an inner join, which SQLite may turn around
        # to look each table's days up by the key (as an outer join it read all of sets for
        # every row: 310,000 rows by 10,000 tables ran for more than 14 minutes)
        .select_from(sets.join(g, g.c.stream_id == sets.c.stream_id))
        .where(*in_range)
        .group_by(*groups)
    )
    return query


async def rules_documents(
    connection: AsyncConnection, tables: Sequence[str]
) -> dict[str, tuple[str | None, Any]]:
    """Each of ``tables``' variant and rules document as its view holds them (a table with no
    view left out), ``RULE_SETS_A_STATEMENT`` tables a statement."""
    t = schema.table_views
    documents: dict[str, tuple[str | None, Any]] = {}
    for at in range(0, len(tables), RULE_SETS_A_STATEMENT):
        some = tables[at : at + RULE_SETS_A_STATEMENT]
        query = select(t.c.stream_id, t.c.variant, t.c.view["rules"]).where(t.c.stream_id.in_(some))
        for stream_id, variant, document in (await connection.execute(query)).all():
            documents[stream_id] = (variant, document)
    return documents


def _own_rules(variant: str, rules: Any) -> str | None:
    """The fingerprint of a table's rules when they are not its preset's, else None. A table
    with no view (none the writer leaves) is counted with its preset's, as before."""
    if rules is None:
        return None
    if not isinstance(rules, dict):
        return fingerprint({"rules": rules})
    try:  # as a snapshot or the log reads a table an earlier release opened
        read = stored_rules(rules)
    except ValidationError:
        return fingerprint(rules)
    return None if read == PRESETS.get(variant) else fingerprint(read)


def _lines(summed: dict[_Key, _Sums], rules_apart: bool) -> list[dict[str, Any]]:
    """One line per game and currency, or (``rules_apart``) per game, currency and rule set,
    the preset's first: in variant, currency order."""
    merged: dict[_Key, _Sums] = {}
    own_tables: dict[_Key, int] = {}
    for (variant, currency, own), sums in summed.items():
        key = (variant, currency, own if rules_apart else None)
        _add(merged, key, sums)
        own_tables[key] = own_tables.get(key, 0) + (0 if own is None else sums.tables)
    lines = []
    for key in sorted(merged, key=lambda k: (k[0], k[1], k[2] or "")):
        (variant, currency, own), sums = key, merged[key]
        line: dict[str, Any] = {"variant": variant, "currency": currency, "tables": sums.tables}
        line |= sums.sums
        wagered, paid, initial = line["wagered"], line["paid"], line["initial_bets"]
        line["hold"] = wagered - paid
        line["rtp_percent"] = percent(paid, wagered)
        line["return_per_initial_bet_percent"] = percent(initial + paid - wagered, initial)
        line["tables_with_own_rules"] = own_tables[key]
        if rules_apart:
            line["own_rules"] = own is not None
            line["rules"] = own if own is not None else _preset_fingerprint(variant)
            line["rules_table"] = sums.first_table
        lines.append(line)
    return lines


def _preset_fingerprint(variant: str) -> str | None:
    rules = PRESETS.get(variant)
    return None if rules is None else fingerprint(rules)
