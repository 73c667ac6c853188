"""What a fold pays for one of its safeguards, as a ratio against the same fold without it,
measured in one script on SQLite and PostgreSQL: the schema-revision check
(``projections/revision.py``) or the hook that replaces a NUL in every statement's text
parameters (``projections/store.py``).

    python -m tests.integration.schema_check_cost [--without schema-check|nul-hook] [--pg URL]
        [--batches 1,50,500] [--repeats 3]

Two fresh stores per dialect and batch size fold the same log in the same batches, one
``ProjectionWriter`` as the service runs it, one with the safeguard taken out; the two folds
alternate batch by batch (which goes first alternates too), so the machine's drift falls on
both. Printed: seconds of each, per batch, and their ratio (median of the repeats). A figure
for the docs, not an assertion: the machine is shared.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncConnection

from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import encode, to_wire
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter, Record
from tests.integration.conftest_projections import on_server, play_tables

TOPIC = "blackjack.events"


class Unchecked(ProjectionWriter):
    """The fold without the schema-revision check (what it cost before that release)."""

    async def check_schema(self, connection: AsyncConnection) -> None:
        return None


def without_nul_hook(store: ProjectionStore) -> ProjectionWriter:
    """The fold with statements sent as given (the store's only before_cursor_execute
    listener is the NUL hook)."""
    store.engine.sync_engine.dispatch.before_cursor_execute.clear()
    return ProjectionWriter(store)


WITHOUT: dict[str, Callable[[ProjectionStore], ProjectionWriter]] = {
    "schema-check": Unchecked,
    "nul-hook": without_nul_hook,
}


def records() -> list[Record]:
    log = play_tables(
        [("c-1", "mini-h17"), ("c-2", "atlantic-city-multi"), ("c-3", "surrender")],
        rounds=20,
        seed=7,
    )
    seal = ShoeSeal(bytes(range(32)))
    return [
        Record(TOPIC, 0, offset, encode(to_wire(envelope, seal)))
        for offset, envelope in enumerate(log.envelopes)
    ]


class Stores:
    def __init__(self, pg: str | None, tmp: Path) -> None:
        self.pg = pg
        self.tmp = tmp
        self.made: list[str] = []

    async def new(self, kind: str) -> ProjectionStore:
        name = f"bjc_{uuid.uuid4().hex[:10]}"
        if kind == "sqlite":
            url = f"sqlite+aiosqlite:///{self.tmp / (name + '.db')}"
        else:
            assert self.pg is not None
            await self._on_server(f'CREATE DATABASE "{name}"')
            self.made.append(name)
            url = make_url(self.pg).set(database=name).render_as_string(hide_password=False)
        store = ProjectionStore(url, bounded=True)  # the worker's store
        await store.migrate()
        return store

    async def drop(self) -> None:
        for name in self.made:
            await self._on_server(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    async def _on_server(self, statement: str) -> None:
        assert self.pg is not None
        await on_server(self.pg, statement)


async def one_run(
    stores: Stores, kind: str, batch: int, log: list[Record], without: str
) -> tuple[float, float]:
    """Seconds of the fold as the service runs it and of the one without, over the whole log."""
    checked, unchecked = await stores.new(kind), await stores.new(kind)
    writers = [ProjectionWriter(checked), WITHOUT[without](unchecked)]
    spent = [0.0, 0.0]
    try:
        for number, start in enumerate(range(0, len(log), batch)):
            part = log[start : start + batch]
            for index in (0, 1) if number % 2 == 0 else (1, 0):
                began = time.perf_counter()
                await writers[index].apply(part)
                spent[index] += time.perf_counter() - began
    finally:
        await checked.close()
        await unchecked.close()
    return spent[0], spent[1]


async def main(pg: str | None, batches: list[int], repeats: int, without: str) -> None:
    log = records()
    kinds = ["sqlite"] + (["postgresql"] if pg else [])
    print(f"{len(log)} events, {repeats} repeats, without the {without}; seconds for the log")
    print(f"{'store':<11} {'batch':>5} {'folds':>6} {'as run':>9} {'without':>9} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        stores = Stores(pg, Path(tmp))
        try:
            for kind in kinds:
                for batch in batches:
                    runs = [
                        await one_run(stores, kind, batch, log, without) for _ in range(repeats)
                    ]
                    ratios = [c / u for c, u in runs]
                    folds = -(-len(log) // batch)
                    print(
                        f"{kind:<11} {batch:>5} {folds:>6} "
                        f"{statistics.median(c for c, _ in runs):>9.3f} "
                        f"{statistics.median(u for _, u in runs):>9.3f} "
                        f"{statistics.median(ratios):>6.3f}  "
                        f"(ratios {min(ratios):.3f}-{max(ratios):.3f})"
                    )
        finally:
            await stores.drop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pg", help="a PostgreSQL server URL (postgresql+asyncpg://...)")
    parser.add_argument("--batches", default="1,50,500")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--without", choices=sorted(WITHOUT), default="schema-check")
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    asyncio.run(main(args.pg, batches, args.repeats, args.without))
