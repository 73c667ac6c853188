"""A decision on a table's clock is in time when the broker received it before the deadline,
however late a handler gets to decide it: here no handler runs between the click and the
deadline (a takeover), and the handler that starts afterwards still takes the click."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from tests.integration.conftest import (
    QueuedShuffler,
    accept,
    read_topic,
    running_handler,
    stream_events,
    verify_stream,
)

pytestmark = pytest.mark.integration

TABLE = "clock-table"
TURN_S = 6  # the hand's clock: long enough to stop a handler and click within it


async def test_a_click_received_before_the_deadline_is_taken_by_a_handler_that_starts_after_it(
    kafka_space: Any,
) -> None:
    space = await kafka_space(partitions=1)
    shuffler = QueuedShuffler()
    shuffler.queue(["TS", "6S", "3S", "9S", "2S"])  # ann T 3 against a 6, a 2 to draw
    async with space.client() as client:
        async with running_handler(space.config(), shuffler=shuffler):
            *_, dealt = await accept(
                client,
                TABLE,
                cmd.OpenTable(variant="mini-h17", overrides={"turn_seconds": TURN_S}),
                cmd.SitDown(player_id="ann", seat=0),
                cmd.Deposit(player_id="ann", amount=10_000),
                cmd.PlaceBet(player_id="ann", box=0, amount=1000),
                cmd.Deal(player_id="ann"),
            )
        # no handler now: the click waits in the topic while the hand's clock runs out. It is
        # sent at once (the turn's deadline is the Deal's decision time plus the clock, checked
        # below): reading the events first spent part of the 6 s on a loaded machine
        hit = await client.send(TABLE, cmd.Hit(player_id="ann", box=0))
        deadline = dealt.handled_at + timedelta(seconds=TURN_S)
        assert datetime.now(UTC) < deadline, "the click must be sent before the deadline"
        events = await stream_events(space, TABLE)
        [turn] = [e.data for e in events if isinstance(e.data, ev.TurnStarted)]
        assert turn.deadline == deadline
        await asyncio.sleep((turn.deadline - datetime.now(UTC)).total_seconds() + 0.5)

        async with running_handler(space.config(), shuffler=shuffler):
            taken = await client.result(hit, timeout=30)
            assert taken.status == "accepted", taken.rejection
            assert taken.handled_at > turn.deadline  # decided late, received in time
            late = await client.execute(TABLE, cmd.Stand(player_id="ann", box=0), timeout=30)
            assert late.status == "rejected"  # received after the deadline

    [record] = [
        r for r in await read_topic(space, space.topics.commands) if hit.encode() in r.value
    ]
    assert record.timestamp_type == 1  # the broker's time of receipt (LogAppendTime)
    # the engine, given each command's times of handling and of receipt, decides the same
    await verify_stream(space, TABLE)
