"""A big read model on PostgreSQL, built quickly, for measuring the queries at a casino's size
(``measure_read_model``).

The events come from the tests' random play (``play_tables``: the real engine, legal moves)
and are folded by the projection's own writer, in batches of 500, without Kafka. The fold is
the slow part (a few thousand events a second), so ``tables`` x ``rounds`` are folded once and
the folded rows are then copied ``copies`` times in SQL (``INSERT ... SELECT``), each copy's
streams, players, event ids and round ids renamed (``~1``, ``~2``...) and its times moved a
month on per copy: as many tables and players again, playing the same games a month later.
The JSON documents (envelopes, records, views) are copied as they are (they name the
original's ids): what is measured is the size and shape of the tables and their indexes, not
what a document says.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import encode, to_wire
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter, Record
from tests.integration.conftest_projections import play_tables

TOPIC = "blackjack.events"
BATCH = 500
VARIANTS = ("atlantic-city-multi", "mini-h17", "atlantic-city", "surrender", "mini-s17")

COPIED = {
    # table: the columns renamed in a copy (``|| '~k'``); every other column as it is
    "events": ("stream_id", "event_id"),
    "table_views": ("stream_id",),
    "accounts": ("stream_id", "player_id"),
    "wallets": ("stream_id", "player_id"),
    "rounds": ("stream_id", "round_id"),
    "round_players": ("stream_id", "player_id"),
    "game_days": ("stream_id",),
}
MOVED = {  # the times moved on by a month a copy
    "events": ("occurred_at",),
    "table_views": ("updated_at",),
    "wallets": ("updated_at",),
    "rounds": ("opened_at", "closed_at"),
    "round_players": ("started_at",),
    "game_days": ("day",),
}


@dataclass
class Built:
    events_folded: int
    fold_seconds: float
    copy_seconds: float


def records(tables: int, rounds: int, seed: int = 7) -> list[Record]:
    """``tables`` tables (the variants in turn) of ``rounds`` settled rounds, as the events
    topic's records (one partition)."""
    played = [(f"big-{n}", VARIANTS[n % len(VARIANTS)]) for n in range(tables)]
    log = play_tables(played, rounds, seed=seed)
    seal = ShoeSeal(bytes(range(32)))
    return [
        Record(TOPIC, 0, offset, encode(to_wire(envelope, seal)))
        for offset, envelope in enumerate(log.envelopes)
    ]


async def build(store: ProjectionStore, log: list[Record], copies: int) -> Built:
    """Fold ``log`` into the (migrated, empty) PostgreSQL ``store``, then copy it."""
    writer = ProjectionWriter(store)
    began = time.perf_counter()
    for start in range(0, len(log), BATCH):
        await writer.apply(log[start : start + BATCH])
    folded = time.perf_counter() - began
    began = time.perf_counter()
    async with store.writing() as connection:
        await connection.execute(text("SET LOCAL statement_timeout = 0"))
        for copy in range(1, copies + 1):
            for table in COPIED:
                await connection.execute(
                    text(copy_statement(table, copy, await _columns(connection, table)))
                )
    async with store.engine.connect() as connection:
        autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
        await autocommit.execute(text("VACUUM ANALYZE"))
    return Built(len(log), folded, time.perf_counter() - began)


async def _columns(connection: AsyncConnection, table: str) -> list[str]:
    found = await connection.execute(
        text(
            "SELECT column_name FROM information_schema.columns WHERE table_name = :t "
            "ORDER BY ordinal_position"
        ),
        {"t": table},
    )
    return list(found.scalars())


def copy_statement(table: str, copy: int, columns: list[str]) -> str:
    values = []
    for column in columns:
        if column in COPIED[table]:
            values.append(f"{column} || '~{copy}'")
        elif column in MOVED.get(table, ()):
            values.append(f"{column} + interval '{copy} month'")
        else:
            values.append(column)
    if table == "game_days":  # a day column: the date a month on
        values = [f"({v})::date" if v.startswith("day ") else v for v in values]
    names = ", ".join(columns)
    return (
        f"INSERT INTO {table} ({names}) SELECT {', '.join(values)} FROM {table} "
        f"WHERE stream_id NOT LIKE '%~%'"
    )


SIZES = """
SELECT c.relname AS name, c.reltuples::bigint AS rows, pg_table_size(c.oid) AS table_bytes,
       pg_indexes_size(c.oid) AS index_bytes
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname <> 'alembic_version'
ORDER BY pg_total_relation_size(c.oid) DESC
"""

INDEX_SIZES = """
SELECT i.relname AS name, t.relname AS on_table, pg_relation_size(i.oid) AS bytes
FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = 'public' ORDER BY pg_relation_size(i.oid) DESC
"""


async def sizes(
    store: ProjectionStore,
) -> tuple[list[tuple[str, int, int, int]], list[tuple[str, str, int]]]:
    """Each table's rows (the planner's count), table bytes (TOAST included) and index bytes;
    each index's bytes."""
    async with store.reading() as connection:
        tables = [tuple(row) for row in (await connection.execute(text(SIZES))).all()]
        indexes = [tuple(row) for row in (await connection.execute(text(INDEX_SIZES))).all()]
    return tables, indexes
