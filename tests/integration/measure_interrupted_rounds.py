"""How long the operator's interrupted-rounds list takes beside many rounds that wait for
good (single-player tables whose rules let no one close them), against reading and skipping
those rounds one by one as the list did before (the baseline, kept here), in one process:

    PYTHONPATH=.:services .venv/bin/python -m tests.integration.measure_interrupted_rounds \\
        20000 sqlite+aiosqlite:////tmp/interrupted.db   # or a PostgreSQL database's URL

The database must be new (it is migrated and filled here)."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncConnection

from blackjack.domain.rules import with_later_terms
from blackjack.projections import schema
from blackjack.projections.queries import interrupted_rounds
from blackjack.projections.store import ProjectionStore
from tests.integration.test_interrupted_rounds_query import waiting
from tests.unit.test_interrupted_query import fold

Listing = Callable[[AsyncConnection, datetime, int], Awaitable[list[object]]]


async def read_and_skip(
    connection: AsyncConnection, idle_before: datetime, limit: int
) -> list[object]:
    """The baseline: every open round of an idle table read, the closable kept in Python."""
    r, t = schema.rounds, schema.table_views
    query = (
        select(r.c.stream_id, t.c.view["rules"].label("rules"))
        .join(t, t.c.stream_id == r.c.stream_id)
        .where(schema.OPEN_ROUND, t.c.updated_at <= idle_before)
        .order_by(t.c.updated_at, r.c.stream_id, r.c.round)
    )
    found: list[object] = []
    for row in (await connection.execute(query)).all():
        if with_later_terms(row.rules or {})["interrupted_round_days"] is not None:
            found.append(row.stream_id)
            if len(found) == limit:
                break
    return found


async def fill(store: ProjectionStore, waiting_for_good: int) -> datetime:
    """One mini-h17 round left waiting, copied ``waiting_for_good`` times, and 5 closable
    surrender rounds; the moment by which all of them are idle."""
    mini = waiting("mini-h17", "mini-0", ago=timedelta(days=2))
    closable = [waiting("surrender", f"surrender-{i}") for i in range(5)]
    await fold(store, mini, *closable)
    t, r = schema.table_views, schema.rounds
    async with store.engine.begin() as connection:
        view = (await connection.execute(select(t).where(t.c.stream_id == "mini-0"))).one()
        round_ = (await connection.execute(select(r).where(r.c.stream_id == "mini-0"))).one()
        for start in range(1, waiting_for_good, 2000):
            ids = [f"mini-{i}" for i in range(start, min(waiting_for_good, start + 2000))]
            await connection.execute(insert(t), [{**view._asdict(), "stream_id": s} for s in ids])
            rows = [{**round_._asdict(), "stream_id": s, "round_id": f"{s}:1"} for s in ids]
            await connection.execute(insert(r), rows)
    return closable[-1].now + timedelta(days=1)


async def best_of(listing: Listing, store: ProjectionStore, idle_before: datetime) -> float:
    async with store.reading() as connection:
        times = []
        for _ in range(5):
            start = time.perf_counter()
            assert len(await listing(connection, idle_before, 100)) == 5
            times.append(time.perf_counter() - start)
    return min(times)


async def main(waiting_for_good: int, url: str) -> None:
    store = ProjectionStore(url)
    await store.migrate()
    try:
        idle_before = await fill(store, waiting_for_good)
        baseline = await best_of(read_and_skip, store, idle_before)
        now = await best_of(interrupted_rounds, store, idle_before)  # type: ignore[arg-type]
    finally:
        await store.close()
    print(
        f"{waiting_for_good} rounds waiting for good, 5 closable, best of 5: "
        f"read and skipped {baseline * 1000:.0f} ms, left out in SQL {now * 1000:.0f} ms "
        f"({baseline / now:.1f}x)"
    )


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
