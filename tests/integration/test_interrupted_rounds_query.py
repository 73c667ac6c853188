"""The operator's list of interrupted rounds (``/v1/interrupted-rounds``) on SQLite and
PostgreSQL: only the tables whose rules let an operator close a round are read, in SQL, so
the many rounds that wait for their player for good never push a closable one past the
limit; a view folded before the option existed reads as its preset does."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select, update

from blackjack.domain import commands as cmd
from blackjack.projections import schema
from blackjack.projections.queries import interrupted_rounds
from blackjack.projections.store import ProjectionStore
from tests.integration.conftest_projections import Script, StoreFactory
from tests.unit.test_interrupted_query import fold

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration

DEALT = [["TS", "6H", "5S", "TD", "9C"]]
ZERO = timedelta()


def waiting(variant: str, stream_id: str, ago: timedelta = ZERO, **overrides: object) -> Script:
    """A hand dealt at ``stream_id`` ``ago`` and left waiting for its player."""
    table = Script(variant, DEALT, stream_id=stream_id, overrides=overrides)
    table.now -= ago
    table.do(cmd.PlaceBet(player_id="alice", box=0, amount=1_000), cmd.Deal(player_id="alice"))
    return table


async def forget_the_option(store: ProjectionStore, stream_id: str) -> None:
    """The table's view as a worker folded it before ``interrupted_round_days`` existed."""
    t = schema.table_views
    async with store.engine.begin() as connection:
        view = (
            await connection.execute(select(t.c.view).where(t.c.stream_id == stream_id))
        ).scalar_one()
        del view["rules"]["interrupted_round_days"]
        await connection.execute(update(t).where(t.c.stream_id == stream_id).values(view=view))


async def test_only_rounds_an_operator_may_close_are_listed_up_to_the_limit(
    stores: StoreFactory,
) -> None:
    store = await stores.store()
    forever = []
    for i in range(30):  # single-player rounds older than any other: never closable
        forever.append(waiting("mini-h17", f"mini-{i:02}", ago=timedelta(days=2)))
    closable = waiting("surrender", "surrender-1")
    old_release = waiting("surrender", "surrender-2", ago=-timedelta(minutes=1))
    switched_off = waiting("surrender", "surrender-3", interrupted_round_days=None)
    old_mini = waiting("mini-h17", "mini-old")
    await fold(store, *forever, closable, old_release, switched_off, old_mini)
    await forget_the_option(store, "surrender-2")
    await forget_the_option(store, "mini-old")

    later = old_release.now + timedelta(days=1)
    async with store.reading() as connection:
        [first] = await interrupted_rounds(connection, later, 1)
        listed = await interrupted_rounds(connection, later, 100)
    assert first["table"] == "surrender-1"
    assert [(r["table"], r["closable_from"][:10]) for r in listed] == [
        ("surrender-1", (closable.now + timedelta(days=30)).date().isoformat()),
        ("surrender-2", (old_release.now + timedelta(days=30)).date().isoformat()),
    ]
    assert listed[1]["in_play"] == {"alice": 1_000}


async def test_with_every_table_the_rounds_waiting_for_their_player_are_listed_too(
    stores: StoreFactory,
) -> None:
    """GLI-19's unfinished games: the rounds at single-player tables, which wait for their
    player for good, can be listed too (a certification review: no list had them), the
    longest waiting first, with no time from which they may be closed."""
    store = await stores.store()
    forever = waiting("mini-h17", "mini-1", ago=timedelta(days=2))
    closable = waiting("surrender", "surrender-1")
    await fold(store, forever, closable)
    later = closable.now + timedelta(days=1)
    async with store.reading() as connection:
        only = await interrupted_rounds(connection, later, 100)
        every = await interrupted_rounds(connection, later, 100, every_table=True)
        [first] = await interrupted_rounds(connection, later, 1, every_table=True)
    assert [r["table"] for r in only] == ["surrender-1"]
    assert [(r["table"], r["closable_from"] is None) for r in every] == [
        ("mini-1", True),
        ("surrender-1", False),
    ]
    assert first == every[0] and first["in_play"] == {"alice": 1_000}
