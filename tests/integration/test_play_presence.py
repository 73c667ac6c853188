"""``blackjack play`` at a table with the disconnection policy (``surrender``, page 003): a
player who is there keeps their bet however long they think; one whose process is gone is
disconnected by the service's presence clock and the bet goes back."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime

import pytest

from blackjack.client import BlackjackClient
from blackjack.command_handler.service import CommandHandler
from blackjack.domain import commands as cmd
from blackjack.messages.envelope import CommandEnvelope
from tests.integration.cli_runs import lines_until
from tests.integration.conftest import (
    WAIT_S,
    KafkaSpace,
    following,
    stream_events,
    types_of,
    wait_for_events,
)
from tests.integration.test_play import play

pytestmark = pytest.mark.integration

PRESENCE_S = 3.0
"""The presence timeout: the session beats every third of it (``heartbeat_every``), so a
stall of the play process (its beats not sent) of more than two thirds of it takes a player
who is there for gone; at 1.5 s a loaded machine's one-second stall would do"""
HANDLER = {"presence_timeout_s": PRESENCE_S}


async def reconnects_spanning(space: KafkaSpace, table: str, player: str, seconds: float) -> None:
    """Until the player's ``Reconnect`` commands at the table span ``seconds`` (their
    ``sent_at``), read from the commands topic as the handler reads them."""
    sent: list[datetime] = []
    async with following(space, space.topics.commands) as consumer, asyncio.timeout(WAIT_S):
        while not sent or (sent[-1] - sent[0]).total_seconds() < seconds:
            batch = await consumer.getmany(timeout_ms=500)
            for records in batch.values():
                for record in records:
                    if record.key != table.encode():
                        continue
                    with contextlib.suppress(ValueError):
                        envelope = CommandEnvelope.model_validate_json(record.value)
                        command = envelope.command
                        if isinstance(command, cmd.Reconnect) and command.player_id == player:
                            assert envelope.sent_at is not None  # the client stamps it
                            sent.append(envelope.sent_at)


async def test_a_player_thinking_over_a_bet_keeps_it_and_a_gone_one_has_it_returned(
    space: KafkaSpace, handler: CommandHandler, client: BlackjackClient
) -> None:
    table = "play-presence-1"
    env = {"BLACKJACK_PRESENCE_TIMEOUT_S": str(PRESENCE_S)}
    process = await play(space, table, "--player", "alice", "--open", "surrender",
                         "--deposit", "50", env=env)  # fmt: skip
    assert process.stdin is not None and process.stdout is not None
    try:
        await lines_until(process.stdout, "? help, q quit")
        process.stdin.write(b"bet 5\n")
        await lines_until(process.stdout, "PlaceBet: accepted")
        # silent at the keyboard for three presence timeouts: the session says she is here
        await reconnects_spanning(space, table, "alice", 3 * PRESENCE_S)
        seen = types_of(await stream_events(space, table))
        assert "PlayerDisconnected" not in seen and "BetRefunded" not in seen, seen
        process.kill()  # the connection is gone: the policy applies
        await process.wait()
        gone = {"PlayerDisconnected", "BetRefunded"}
        await wait_for_events(space, table, lambda events: gone <= set(types_of(events)))
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    again = await play(space, table, "--player", "alice", env=env)  # back: reconnected at once
    assert again.stdin is not None and again.stdout is not None
    try:
        shown = "".join(await lines_until(again.stdout, "? help, q quit"))
        assert "Reconnect: accepted" in shown, shown
        assert "your bet of 5.00 returned: disconnected before Deal" in shown, shown
        assert "balance 50.00 USD" in shown, shown
        again.stdin.close()
        assert await asyncio.wait_for(again.wait(), WAIT_S) == 0
    finally:
        if again.returncode is None:
            again.kill()
            await again.wait()
    assert types_of(await stream_events(space, table))[-1] == "PlayerReconnected"
