"""An interrupted round at the surrender table, closed by the operator 30 days later on the
real broker: the wait counts from the table's last event (here the presence clock's
disconnection), it survives a restart from a snapshot (which the closing's events mark as the
service interrupted, ``RoundResumed``), and the server's decisions replay."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from tests.integration.conftest import (
    KafkaSpace,
    QueuedShuffler,
    accept,
    running_handler,
    stream_events,
    types_of,
    verify_stream,
    wait_for_events,
)

pytestmark = pytest.mark.integration

TABLE = "interrupted-1"


async def test_a_round_left_30_days_is_closed_after_a_restart_and_replays(
    kafka_space: Any,
) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)
    config = space.config(snapshot_every=1, presence_timeout_s=2.0)
    moment = [datetime.now(UTC)]

    def clock() -> datetime:
        return moment[0]

    shuffler = QueuedShuffler()
    shuffler.queue(["TS", "6H", "5S", "TD", "9C"])  # sam's 15 against 6 (hole T), then a 9
    async with (
        running_handler(config, shuffler=shuffler, clock=clock),
        space.client() as client,
    ):
        await accept(
            client,
            TABLE,
            cmd.OpenTable(variant="surrender"),
            cmd.SitDown(player_id="sam"),
            cmd.Deposit(player_id="sam", amount=5_000),
            cmd.PlaceBet(player_id="sam", box=0, amount=1_000),
            cmd.Deal(player_id="sam"),
        )
        # sam goes silent mid-hand: the presence clock disconnects him, the round waits
        moment[0] += timedelta(seconds=5)
        events = await wait_for_events(
            space, TABLE, lambda es: "PlayerDisconnected" in types_of(es)
        )
        left_at = events[-1].occurred_at
        early = await client.execute(TABLE, cmd.CloseInterruptedRound(operator="ops-7"))
        assert early.rejection is not None and early.rejection.code == "round_not_interrupted"

    # 30 days on, a new handler rebuilt from the snapshot closes it
    moment[0] = left_at + timedelta(days=30)
    async with running_handler(config, clock=clock), space.client() as client:
        closed = await client.execute(TABLE, cmd.CloseInterruptedRound(operator="ops-7"))
        assert closed.status == "accepted", closed.rejection
    events = await stream_events(space, TABLE)
    resumed, *tail = [e.data for e in events if e.causation_id == closed.command_id]
    # the restart interrupted the round: the closing's events start with the marker
    assert resumed == ev.RoundResumed(round=1, last_event_at=left_at)
    first = tail[0]
    assert isinstance(first, ev.InterruptedRoundClosed)
    assert (first.operator, first.idle_since, first.after_days) == ("ops-7", left_at, 30)
    decisions = [(e.phase, e.action) for e in tail if isinstance(e, ev.PlayerTimedOut)]
    assert decisions == [("playing", "stood")]
    [settled] = [e for e in tail if isinstance(e, ev.HandSettled)]
    assert (settled.player_id, settled.total, settled.outcome, settled.payout) == (
        "sam",
        15,
        "win",
        2_000,
    )
    check = await verify_stream(space, TABLE)
    assert not check.state.round_open
    assert check.state.players["sam"].balance == 6_000
