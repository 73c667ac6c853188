"""An event whose text holds a NUL character is folded on PostgreSQL as on SQLite, the NUL
kept out of what either store holds (U+FFFD in its place: the audit rebuilds in SQLite and
compares with a live PostgreSQL).

The commands refuse such text now (tests/unit/test_unprintable_text.py), but a log written
before holds what they took: a SitDown whose player id held a NUL, a SuspendTable whose reason
did. PostgreSQL's text refuses the character and its JSONB the escape, so the projection
worker retried the event for ever, and every later event of its partition stayed out of the
read model (a running service: two partitions stuck by two commands). No broker: the events
are folded in directly."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from blackjack.domain import commands as cmd
from blackjack.projections import schema
from blackjack.projections.store import ProjectionStore

pytest.register_assert_rewrite("tests.integration.conftest_projections")
from tests.integration.conftest_projections import Script, StoreFactory  # noqa: E402
from tests.unit.test_interrupted_query import fold, fold_envelopes  # noqa: E402

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration

WHO = "al\x00ice"


def played_before_the_commands_refused_it() -> Script:
    """model_construct: the commands as an older handler took them, unchecked."""
    script = Script("mini-h17", [["TH", "7S", "9H", "QD"]], players={"bob": 100})
    script.do(
        cmd.LeaveTable(player_id="bob"),
        cmd.SitDown.model_construct(player_id=WHO, seat=0),
        cmd.Deposit.model_construct(player_id=WHO, amount=10_000),
        cmd.PlaceBet.model_construct(player_id=WHO, box=0, amount=1_000),
        cmd.Deal.model_construct(player_id=WHO),
        cmd.Stand.model_construct(player_id=WHO, box=0),
        cmd.SuspendTable.model_construct(operator="ops\x00-1", reason="main\x00tenance"),
    )
    return script


async def test_an_event_with_a_nul_is_folded_on_either_store(stores: StoreFactory) -> None:
    store = await stores.store()
    script = played_before_the_commands_refused_it()
    await fold(store, script)
    kept = WHO.replace("\x00", "\ufffd")  # on either store: the audit compares them
    async with store.reading() as connection:
        accounts = (await connection.execute(select(schema.accounts))).mappings().all()
        [view] = (await connection.execute(select(schema.table_views.c.view))).scalars().all()
        positions = (await connection.execute(select(schema.positions))).mappings().all()
    mine = [(a["player_id"], a["available"]) for a in accounts if a["player_id"] != "bob"]
    assert mine == [(kept, 11_000)]  # a bet of 10.00 won, 19 against 17
    reason = view["suspended"]["reason"]
    assert reason == "main\ufffdtenance"
    assert [p["next_offset"] for p in positions] == [len(script.envelopes)]  # every event


async def test_a_nul_player_s_events_fold_across_batches(stores: StoreFactory) -> None:
    """Each batch loads the table from the store's rows, which hold U+FFFD: the projection
    folded the NUL as it came, so the player's next event in a later batch named an account it
    did not have ("al\\x00ice has no account at table-1", 12 of 22 cuts failed), and the
    worker retried that batch for ever. Folded one event per batch (as a worker may), the
    rows are those of one batch."""
    one_batch, by_event = await stores.store(), await stores.store()
    script = played_before_the_commands_refused_it()
    await fold(one_batch, script)
    for offset, envelope in enumerate(script.envelopes):
        await fold_envelopes(by_event, [envelope], first_offset=offset)
    assert await rows(by_event) == await rows(one_batch)
    accounts = (await rows(by_event))["accounts"]
    assert [(a["player_id"], a["available"]) for a in accounts if a["player_id"] != "bob"] == [
        (WHO.replace("\x00", "\ufffd"), 11_000)
    ]


async def rows(store: ProjectionStore) -> dict[str, list[dict[str, Any]]]:
    """The read model's tables, each row as a dict, in key order."""
    found: dict[str, list[dict[str, Any]]] = {}
    async with store.reading() as connection:
        for table in (schema.accounts, schema.table_views, schema.rounds, schema.round_players):
            query = select(table).order_by(*table.primary_key.columns)
            found[table.name] = [dict(r) for r in (await connection.execute(query)).mappings()]
    return found
