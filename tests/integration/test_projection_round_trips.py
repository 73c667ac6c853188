"""A batch's statements do not grow with the tables, players and rounds it touches.

The writer read each table (its view, its accounts), each wallet and each round (its record,
its players' lines) with statements of their own as the fold reached them, and wrote each row
it changed with a statement of its own: a batch of 500 events over 15 tables sent about 190
statements to the database, each a round trip on PostgreSQL (docs/operations.md, "The read
model at a casino's size"). It now reads them in a few statements for the whole batch and
writes each table's rows in one.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event

from blackjack.messages.sealing import ShoeSeal
from blackjack.projections.dump import dump
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter
from tests.integration.conftest_projections import StoreFactory, event_records, play_tables

pytest_plugins = ["tests.integration.conftest_projections"]

BATCH = 500
MOST_STATEMENTS = 25
"""per batch, whatever it holds: the schema check, the positions (a partition here), five
reads, two writes (new rows, changed rows) for each of six tables, the events"""


@contextmanager
def counted(store: ProjectionStore) -> Iterator[list[str]]:
    sent: list[str] = []

    def note(_c: Any, _cur: Any, statement: str, _p: Any, _x: Any, _many: bool) -> None:
        sent.append(statement)

    event.listen(store.engine.sync_engine, "before_cursor_execute", note)
    try:
        yield sent
    finally:
        event.remove(store.engine.sync_engine, "before_cursor_execute", note)


@pytest.mark.parametrize("tables", [2, 15])
async def test_a_batch_sends_a_few_statements_whatever_it_touches(
    stores: StoreFactory, tables: int
) -> None:
    played = [(f"t-{n}", "atlantic-city-multi" if n % 2 else "mini-h17") for n in range(tables)]
    log = event_records(
        play_tables(played, max(12, 60 // tables), seed=3).envelopes, ShoeSeal.from_hex("11" * 32)
    )
    store = await stores.store()
    writer = ProjectionWriter(store)
    per_batch = []
    for start in range(0, len(log), BATCH):
        with counted(store) as sent:
            await writer.apply(log[start : start + BATCH])
        per_batch.append(len(sent))
    assert len(per_batch) >= 3
    assert max(per_batch) <= MOST_STATEMENTS, per_batch

    # and the rows are those small batches fold (other boundaries, rows written in each)
    small = await stores.store()
    other_writer = ProjectionWriter(small)
    for start in range(0, len(log), 37):
        await other_writer.apply(log[start : start + 37])
    async with store.reading() as connection, small.reading() as other:
        assert (await dump(connection)).text() == (await dump(other)).text()
