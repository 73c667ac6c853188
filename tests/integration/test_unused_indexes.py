"""Migration 0009 drops three indexes no statement reads (``ix_events_stream_round`` and the
unique indexes on ``events.event_id`` and ``rounds.round_id``), on SQLite and PostgreSQL: the
rows stay as they were, its downgrade brings the indexes back, and an event is still folded
once without them (the position, the fold's sequence check and the primary key)."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection

from blackjack.messages.sealing import ShoeSeal
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter, Record
from tests.integration.conftest_projections import StoreFactory, event_records, play_tables
from tests.unit.migrations import migrated
from tests.unit.test_schema_guard import rows_of, text_of

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration

TOPIC = "blackjack.events"
LOG = play_tables([("t-1", "mini-h17"), ("t-2", "atlantic-city-multi")], rounds=6, seed=3)
RECORDS = event_records(LOG.envelopes, ShoeSeal(bytes(range(32))), TOPIC)
DROPPED = {("events", "event_id"), ("events", "stream_id,round"), ("rounds", "round_id")}


def indexed(connection: Connection) -> set[tuple[str, str]]:
    """Every index and unique constraint of ``events`` and ``rounds`` but the primary keys,
    as (table, columns)."""
    found = set()
    catalog = inspect(connection)
    for table in ("events", "rounds"):
        for index in catalog.get_indexes(table):
            found.add((table, ",".join(str(c) for c in index["column_names"])))
        for unique in catalog.get_unique_constraints(table):
            found.add((table, ",".join(unique["column_names"])))
    return found


async def at(store: ProjectionStore, revision: str, down: bool) -> set[tuple[str, str]]:
    return await migrated(store, revision, down, indexed)


async def test_0009_drops_the_three_indexes_keeps_the_rows_and_its_downgrade_restores_them(
    stores: StoreFactory,
) -> None:
    store = await stores.store()
    await ProjectionWriter(store).apply(RECORDS[:200])
    folded = await text_of(store)
    assert await at(store, "0008", down=True) >= DROPPED
    assert await at(store, "0009", down=False) == {("rounds", "stream_id")}  # ix_rounds_open
    await at(store, "head", down=False)
    assert await text_of(store) == folded  # (the dump reads the head's columns, 0012's)
    await ProjectionWriter(store).apply(RECORDS[200:])

    whole = await stores.store()
    await ProjectionWriter(whole).apply(RECORDS)
    assert await text_of(store) == await text_of(whole)


async def test_without_the_unique_event_id_an_event_is_still_folded_once(
    stores: StoreFactory,
) -> None:
    store = await stores.store()
    writer = ProjectionWriter(store)
    await writer.apply(RECORDS[:100])
    before = await rows_of(store)
    again = await writer.apply(RECORDS[:100])  # redelivered: below the stored position
    assert (again.folded, again.skipped) == (0, 100)
    later = [Record(TOPIC, 0, 100 + n, r.value) for n, r in enumerate(RECORDS[40:100])]
    result = await writer.apply(later)  # the same events at later offsets: duplicates
    assert (result.folded, result.duplicates) == (0, 60)
    async with store.reading() as connection:
        count = "SELECT count(*), count(DISTINCT event_id) FROM events"
        assert tuple((await connection.execute(text(count))).one()) == (100, 100)
    assert await rows_of(store) == before  # the dump's positions moved past the duplicates
