"""A player an older release seated under an id with a NUL, on the real broker: the handler
rebuilds the table from the log, and the operator stands the player up by the id as the read
model shows it (the NUL as U+FFFD, what ``GET /v1/tables/{table}`` answers), their bet and
their money paid out under the seat's own id (docs/operations.md, "A player id with a control
character")."""

from __future__ import annotations

from typing import Any

import pytest

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.projections.store import nul_replaced
from tests.integration.conftest import running_handler, stream_events
from tests.integration.conftest_projections import EventsTopic, Script, publish, to_wire

pytestmark = pytest.mark.integration

WHO = "al\x00ice"


async def test_the_operator_stands_up_a_nul_id_as_the_read_model_shows_it(
    kafka_space: Any,
) -> None:
    space = await kafka_space(partitions=2)
    # model_construct: the commands as an older handler took them, unchecked
    older = Script("mini-h17", [["TH", "7S", "9H", "QD"]], players={"bob": 100})
    older.do(
        cmd.LeaveTable(player_id="bob"),
        cmd.SitDown.model_construct(player_id=WHO, seat=0),
        cmd.Deposit.model_construct(player_id=WHO, amount=10_000),
        cmd.PlaceBet.model_construct(player_id=WHO, box=0, amount=1_000),
    )
    written = len(older.envelopes)
    await publish(
        EventsTopic(space.bootstrap, space.prefix), to_wire(older.envelopes, space.seal())
    )
    shown = nul_replaced(WHO)
    async with running_handler(space.config()), space.client() as client:
        own_id = await client.execute("table-1", cmd.LeaveTable(player_id=shown))
        assert own_id.rejection is not None and own_id.rejection.code == "not_seated"
        stood_up = await client.execute(
            "table-1",
            cmd.StandUpPlayer(player_id=shown, operator="ops-7", reason="id from an older release"),
        )
        assert stood_up.status == "accepted", stood_up.rejection
    events = (await stream_events(space, "table-1"))[written:]
    facts = [(type(e.data).__name__, getattr(e.data, "player_id", None)) for e in events]
    assert facts[-3:] == [("BetRefunded", WHO), ("SeatLeft", WHO), ("RoundCancelled", None)], facts
    [left] = [e.data for e in events if isinstance(e.data, ev.SeatLeft)]
    assert (left.balance_returned, left.reason, left.operator) == (10_000, "operator", "ops-7")
