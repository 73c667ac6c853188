"""Migration 0011 adds ``ix_accounts_seated`` (the seated players' accounts of a table) and
``ix_accounts_player_tables`` (player, currency, table) in place of ``ix_accounts_player``
(the player alone), on SQLite and PostgreSQL over a store that has folded rounds: the rows
stay as they were, its downgrade puts the indexes back as they were, and folding goes on
after it as if they had always been there."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect
from sqlalchemy.engine import Connection

from blackjack.messages.sealing import ShoeSeal
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter
from tests.integration.conftest_projections import StoreFactory, event_records, play_tables
from tests.unit.migrations import migrated
from tests.unit.test_schema_guard import text_of

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration

TOPIC = "blackjack.events"
LOG = play_tables([("t-1", "atlantic-city-multi"), ("t-2", "mini-s17")], rounds=6, seed=8)
RECORDS = event_records(LOG.envelopes, ShoeSeal(bytes(range(32))), TOPIC)


def accounts_indexes(connection: Connection) -> set[tuple[str, ...]]:
    """Each index of ``accounts`` (the primary key's aside): its name, then its columns."""
    return {
        (str(index["name"]), *(str(c) for c in index["column_names"]))
        for index in inspect(connection).get_indexes("accounts")
    }


async def at(store: ProjectionStore, revision: str, down: bool) -> set[tuple[str, ...]]:
    return await migrated(store, revision, down, accounts_indexes)


async def test_0011_makes_the_accounts_indexes_and_its_downgrade_restores_them(
    stores: StoreFactory,
) -> None:
    store = await stores.store()
    await ProjectionWriter(store).apply(RECORDS[:250])
    folded = await text_of(store)
    assert await at(store, "0010", down=True) == {("ix_accounts_player", "player_id")}
    assert await at(store, "0011", down=False) == {
        ("ix_accounts_player_tables", "player_id", "currency", "stream_id"),
        ("ix_accounts_seated", "stream_id"),
    }
    await store.migrate()  # the head's columns (0012), which the dump reads
    assert await text_of(store) == folded
    await ProjectionWriter(store).apply(RECORDS[250:])

    whole = await stores.store()
    await ProjectionWriter(whole).apply(RECORDS)
    assert await text_of(store) == await text_of(whole)
