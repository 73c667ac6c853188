"""What a projection batch costs on a SQLite store that holds a long history of other
tables' rounds: a batch reads the rounds its events continue by (table, round) pairs, and
SQLite scanned the whole of ``rounds`` for ``(stream_id, round) IN`` of two pairs or more,
until those pairs went through ``json_each`` (``projections/pairs.py``; docs/projections.md).

    PYTHONPATH=.:services .venv/bin/python -m tests.unit.measure_history_reads [--rounds 100000]

Two SQLite stores, in this process, each folding the same three tables' events in batches of
20: one holding only those, one holding ``--rounds`` more settled rounds of other tables
(copies of these tables' rounds and their players' lines, made in SQL). The line printed: the
median batch on each store and their ratio (the history's cost).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from sqlalchemy import text

from blackjack.messages.sealing import ShoeSeal
from blackjack.projections import schema
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter
from tests.integration.conftest_projections import event_records, play_tables

TOPIC = "blackjack.events"
BATCH = 20
LOG = play_tables(
    [("t-1", "mini-h17"), ("t-2", "atlantic-city-multi"), ("t-3", "surrender")], rounds=8, seed=6
)
RECORDS = event_records(LOG.envelopes, ShoeSeal(bytes(range(32))), TOPIC)


async def _copy_rounds(store: ProjectionStore, rounds: int) -> None:
    """``rounds`` settled rounds of other tables: the stored rounds copied under new ids."""
    async with store.writing() as connection:
        stored = (await connection.execute(text("SELECT count(*) FROM rounds"))).scalar_one()
        copies = -(-rounds // stored)
        for table in (schema.rounds, schema.round_players):
            names = [c.name for c in table.columns]
            values = ["'copy-' || n || '-' || stream_id" if n == "stream_id" else n for n in names]
            await connection.execute(
                text(
                    f"WITH RECURSIVE copy(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM copy "
                    f"WHERE n < {copies}) INSERT INTO {table.name} ({', '.join(names)}) "
                    f"SELECT {', '.join(values)} FROM {table.name} CROSS JOIN copy"
                )
            )


async def _median(path: Path, history: int) -> float:
    """The median seconds of folding a batch of ``BATCH`` of the log's later events."""
    store = ProjectionStore(f"sqlite+aiosqlite:///{path}")
    await store.migrate()
    try:
        writer = ProjectionWriter(store)
        half = len(RECORDS) // 2
        await writer.apply(RECORDS[:half])
        if history:
            await _copy_rounds(store, history)
        times = []
        for start in range(half, len(RECORDS), BATCH):
            started = time.perf_counter()
            await writer.apply(RECORDS[start : start + BATCH])
            times.append(time.perf_counter() - started)
        return statistics.median(times)
    finally:
        await store.close()


async def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        alone = await _median(Path(scratch) / "alone.db", 0)
        after = await _median(Path(scratch) / "history.db", rounds)
    print(
        f"a batch of {BATCH} events: {alone * 1e3:.1f} ms on a store of 3 tables, "
        f"{after * 1e3:.1f} ms with {rounds:,} more rounds of other tables: {after / alone:.2f}x"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=100_000)
    asyncio.run(main(parser.parse_args().rounds))
