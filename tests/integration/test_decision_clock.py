"""A decision on a table's clock is in time when the broker received it before the deadline,
however late a handler gets to decide it: here no handler runs between the click and the
deadline (a takeover), and the handler that starts afterwards still takes the click, at a shared
table, whose deadline stands. At a table of one seat the round resumes as it was: the handler
that takes it over starts its clock again (``RoundResumed.deadline``) and a move sent after the
old deadline is taken too."""

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
    types_of,
    verify_stream,
    wait_for_events,
)
from tests.integration.test_handler_timers import _ann_and_ben_bought_in

pytestmark = pytest.mark.integration

TABLE = "clock-table"
SOLO = "clock-solo"
TURN_S = 6  # the hand's clock: long enough to stop a handler and click within it


async def test_a_click_received_before_the_deadline_is_taken_by_a_handler_that_starts_after_it(
    kafka_space: Any,
) -> None:
    space = await kafka_space(partitions=1)
    shuffler = QueuedShuffler()
    shuffler.queue(["TS", "6S", "3S", "9S", "2S"])  # ann T 3 against a 6, a 2 to draw
    async with space.client() as client:
        async with running_handler(space.config(), shuffler=shuffler):
            # a shared table, whose deadline stands across a takeover: ann deals, ben passes
            await _ann_and_ben_bought_in(space, client, TABLE, turn_seconds=TURN_S)
            await accept(client, TABLE, cmd.PlaceBet(player_id="ann", box=0, amount=100))
            await accept(client, TABLE, cmd.Pass(player_id="ben"))
            [dealt] = await accept(client, TABLE, cmd.Deal(player_id="ann"))
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


async def test_a_single_seat_round_taken_over_after_its_deadline_resumes_with_a_fresh_clock(
    kafka_space: Any,
) -> None:
    space = await kafka_space(partitions=1)
    shuffler = QueuedShuffler()
    shuffler.queue(["TS", "6S", "3S", "9S", "2S"])  # ann T 3 against a 6
    async with space.client() as client:
        async with running_handler(space.config(), shuffler=shuffler):
            *_, dealt = await accept(
                client,
                SOLO,
                cmd.OpenTable(variant="mini-h17", overrides={"turn_seconds": TURN_S}),
                cmd.SitDown(player_id="ann", seat=0),
                cmd.Deposit(player_id="ann", amount=10_000),
                cmd.PlaceBet(player_id="ann", box=0, amount=1000),
                cmd.Deal(player_id="ann"),
            )
        # no handler while the hand's clock runs out: the time itself is what is waited for
        old_deadline = dealt.handled_at + timedelta(seconds=TURN_S)
        await asyncio.sleep((old_deadline - datetime.now(UTC)).total_seconds() + 0.5)

        async with running_handler(space.config(), shuffler=shuffler):
            # the new owner's clock writes the marker at once, with the clock started again
            events = await wait_for_events(space, SOLO, lambda es: "RoundResumed" in types_of(es))
            [(marker, at)] = [
                (e.data, e.occurred_at) for e in events if isinstance(e.data, ev.RoundResumed)
            ]
            assert marker.deadline == at + timedelta(seconds=TURN_S)
            assert marker.deadline > old_deadline
            stood = await client.execute(SOLO, cmd.Stand(player_id="ann", box=0), timeout=30)
            assert stood.status == "accepted", stood.rejection  # after the old deadline

    events = await stream_events(space, SOLO)
    assert "PlayerTimedOut" not in types_of(events)  # the server decided nothing for her
    assert "HandSettled" in types_of(events)
    check = await verify_stream(space, SOLO)
    assert check.resumed == 1
