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

import pytest
from sqlalchemy import select

from blackjack.domain import commands as cmd
from blackjack.projections import schema

pytest.register_assert_rewrite("tests.integration.conftest_projections")
from tests.integration.conftest_projections import Script, StoreFactory  # noqa: E402
from tests.unit.test_interrupted_query import fold  # noqa: E402

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
