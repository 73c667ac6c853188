"""How long the game performance report (``projections/reports.py``) takes over many tables'
days (docs/operations.md, *Game performance*), on SQLite and PostgreSQL:

    PYTHONPATH=.:services .venv/bin/python -m tests.integration.measure_game_report \\
        [--tables 10000] [--days 40] [--report-days 31] [--repeats 5] [--pg URL]

A fresh store (migrated) gets ``--tables`` tables (a 2 kB view each, one in ten with rules
of its own: 3 rule sets) with a ``game_days`` row each for ``--days`` days; the report of the
last ``--report-days`` of them is then timed ``--repeats`` times with each option. Printed:
the rows read and the median and range of the seconds. A figure for the docs, not an
assertion: the machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from blackjack.domain.rules import preset
from blackjack.projections import schema
from blackjack.projections.reports import game_performance
from blackjack.projections.store import ProjectionStore
from tests.integration.schema_check_cost import Stores

FIRST_DAY = date(2026, 1, 1)
OPTIONS: dict[str, dict[str, bool]] = {
    "none": {},
    "rules=apart": {"rules_apart": True},
    "by=day": {"by_day": True},
    "both": {"by_day": True, "rules_apart": True},
}
ROWS_A_STATEMENT = 5_000


def rules_documents() -> list[dict[str, Any]]:
    """The preset's rules, then three rule sets of their own (other maximum bets)."""
    rules = preset("atlantic-city-multi")
    own = [rules.model_copy(update={"max_bet": 100_000 * n}) for n in (1, 2, 3)]
    return [r.model_dump(mode="json") for r in (rules, *own)]


async def fill(store: ProjectionStore, tables: int, days: int) -> None:
    documents = rules_documents()
    padding = "x" * 2_000  # a view of about 2 kB beside its rules
    views = [
        {
            "stream_id": f"t-{n:06d}",
            "variant": "atlantic-city-multi",
            "currency": "USD",
            "last_sequence": 1,
            "updated_at": datetime(2026, 1, 1, tzinfo=UTC),
            "view": {
                "rules": documents[0 if n % 10 else 1 + n // 10 % 3],
                "padding": padding,
            },
        }
        for n in range(tables)
    ]
    rows = [
        {
            "stream_id": f"t-{n:06d}",
            "day": FIRST_DAY + timedelta(days=d),
            "variant": "atlantic-city-multi",
            "currency": "USD",
            "rounds": 100,
            "cancelled": 1,
            "voided": 0,
            "player_rounds": 250,
            "initial_bets": 250_000,
            "wagered": 280_000,
            "paid": 275_000,
        }
        for d in range(days)
        for n in range(tables)
    ]
    async with store.writing() as connection:
        for table, values in ((schema.table_views, views), (schema.game_days, rows)):
            for at in range(0, len(values), ROWS_A_STATEMENT):
                await connection.execute(table.insert(), values[at : at + ROWS_A_STATEMENT])


async def timed(store: ProjectionStore, first: date, days: int, options: dict[str, bool]) -> float:
    async with store.reading() as connection:
        began = time.perf_counter()
        by_day, rules_apart = options.get("by_day", False), options.get("rules_apart", False)
        now = datetime.now(UTC)
        await game_performance(
            connection, first, days, now=now, by_day=by_day, rules_apart=rules_apart
        )
        return time.perf_counter() - began


async def main(pg: str | None, tables: int, days: int, report_days: int, repeats: int) -> None:
    first = FIRST_DAY + timedelta(days=days - report_days)
    print(
        f"{tables:,} tables x {days} days = {tables * days:,} game_days rows; "
        f"a {report_days}-day report reads {tables * report_days:,}; {repeats} runs, seconds"
    )
    with tempfile.TemporaryDirectory() as tmp:
        stores = Stores(pg, Path(tmp))
        try:
            for kind in ["sqlite"] + (["postgresql"] if pg else []):
                store = await stores.new(kind)
                try:
                    await fill(store, tables, days)
                    for name, options in OPTIONS.items():
                        runs = [
                            await timed(store, first, report_days, options) for _ in range(repeats)
                        ]
                        print(
                            f"{kind:<11} {name:<12} {statistics.median(runs):6.2f} "
                            f"({min(runs):.2f}-{max(runs):.2f})",
                            flush=True,
                        )
                finally:
                    await store.close()
        finally:
            await stores.drop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg", help="a PostgreSQL server URL (postgresql+asyncpg://...)")
    parser.add_argument("--tables", type=int, default=10_000)
    parser.add_argument("--days", type=int, default=40)
    parser.add_argument("--report-days", type=int, default=31)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(main(args.pg, args.tables, args.days, args.report_days, args.repeats))
