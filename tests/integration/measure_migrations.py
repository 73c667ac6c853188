"""How long the migrations that fill what they add from a store's folded rows take (0005:
``game_days`` from the rounds; 0006: who sits out, from the events; 0012: the players' last
payouts at the shared tables, from the events), against the fold of
the same log (docs/projections.md, *Upgrading the read model*):

    PYTHONPATH=.:services .venv/bin/python -m tests.integration.measure_migrations \\
        [--tables 4] [--rounds 1000] [--pg URL]

``--tables`` atlantic-city-multi tables of the tests' random play (``play_tables``: three
seats, time-outs that leave players out) with ``--rounds`` settled rounds each are folded
into a fresh store in batches of 500; then, for each migration, the store is taken down to
the revision before it and timed going up to it, and, back at the head, checked equal to
the fold. Printed: the events and rounds, the seconds of the fold and of each migration.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from blackjack.loadtest.cli import quiet_logs
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import encode, to_wire
from blackjack.projections.dump import dump
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter, Record
from tests.integration.conftest_projections import play_tables
from tests.integration.schema_check_cost import TOPIC, Stores
from tests.unit.migrations import migrate

BATCH = 500
MIGRATIONS = {"0005": "0004", "0006": "0005", "0012": "0011"}  # each, and the revision before it


async def timed_upgrade(store: ProjectionStore, revision: str) -> float:
    async with store.writing() as connection:
        await connection.run_sync(migrate, MIGRATIONS[revision], True)
    async with store.writing() as connection:
        began = time.perf_counter()
        await connection.run_sync(migrate, revision, False)
        spent = time.perf_counter() - began
    await store.migrate()  # back to the head
    return spent


async def main(pg: str | None, tables: int, rounds: int) -> None:
    quiet_logs(sys.stderr)  # the fold's logs ("lag not measured", ...) off the figures' stdout
    log = play_tables([(f"m-{n}", "atlantic-city-multi") for n in range(tables)], rounds, seed=7)
    seal = ShoeSeal(bytes(range(32)))
    records = [
        Record(TOPIC, 0, offset, encode(to_wire(envelope, seal)))
        for offset, envelope in enumerate(log.envelopes)
    ]
    print(f"{tables} tables x {rounds} rounds: {len(records):,} events; seconds")
    with tempfile.TemporaryDirectory() as tmp:
        stores = Stores(pg, Path(tmp))
        try:
            for kind in ["sqlite"] + (["postgresql"] if pg else []):
                store = await stores.new(kind)
                try:
                    writer = ProjectionWriter(store)
                    began = time.perf_counter()
                    for at in range(0, len(records), BATCH):
                        await writer.apply(records[at : at + BATCH])
                    line = f"{kind:<11} fold {time.perf_counter() - began:7.2f}"
                    async with store.reading() as connection:
                        folded = await dump(connection)
                    for revision in MIGRATIONS:
                        spent = await timed_upgrade(store, revision)
                        async with store.reading() as connection:
                            assert await dump(connection) == folded, f"{revision} differs"
                        line += f"  {revision} {spent:6.2f}"
                    print(line, flush=True)
                finally:
                    await store.close()
        finally:
            await stores.drop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg", help="a PostgreSQL server URL (postgresql+asyncpg://...)")
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=1000)
    args = parser.parse_args()
    asyncio.run(main(args.pg, args.tables, args.rounds))
