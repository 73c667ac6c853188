"""A copy of a bet replayed after its answer left the idempotency window, on the real broker.

The handler keeps the answers of the last ``BLACKJACK_DEDUP_WINDOW`` commands of a stream (4
here): a copy of a command whose answer has left them is decided again. A ``PlaceBet`` names
no box's round by itself, so the copy of round 1's bet, replayed from a platform's outbox after
round 1 was settled, put a second chip on the box in round 2. ``BlackjackClient`` now sends
every command that acts in a round naming it (``round``), and the copy of the record it wrote is
refused ``stale_command``: no event, no money moved."""

from __future__ import annotations

import argparse

import pytest
from prometheus_client import REGISTRY

from blackjack import client_cli
from blackjack.client import BlackjackClient
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.messages.envelope import CommandResult
from tests.integration.conftest import (
    KafkaSpace,
    QueuedShuffler,
    command_log,
    stream_events,
)

pytestmark = pytest.mark.integration

WINDOW = 4
HANDLER = {"dedup_window": WINDOW}
TABLE = "stale-bet-1"


def duplicates(told_by: str) -> float:
    """``blackjack_duplicate_commands_total{told_by=...}`` of this process's handler."""
    found = REGISTRY.get_sample_value("blackjack_duplicate_commands_total", {"told_by": told_by})
    return found or 0.0


async def played(
    client: BlackjackClient, command: cmd.TableCommand, command_id: str | None = None
) -> CommandResult:
    """Sent as a platform sends it, accepted, and its events read (as a client shows them)."""
    result = await client.execute(TABLE, command, command_id=command_id)
    assert result.status == "accepted", (command, result.rejection)
    await client.events(result)
    return result


async def test_a_bet_replayed_after_the_window_bets_nothing_in_the_next_round(
    space: KafkaSpace, shuffler: QueuedShuffler, client: BlackjackClient
) -> None:
    # ann's 10 and 10 against the dealer's 7 and 9: she stands, round 1 is settled
    shuffler.queue(["TS", "7S", "TH", "9S"])
    for command in (
        cmd.OpenTable(variant="mini-h17"),
        cmd.SitDown(player_id="ann"),
        cmd.Deposit(player_id="ann", amount=10_000),
    ):
        await played(client, command)
    await played(client, cmd.PlaceBet(player_id="ann", box=0, amount=1000), "outbox-bet-1")
    await played(client, cmd.Deal(player_id="ann"))
    await played(client, cmd.Stand(player_id="ann", box=0))
    for _ in range(WINDOW // 2 + 1):  # other answers push the bet's out of the window
        await played(client, cmd.Withdraw(player_id="ann", amount=1))  # (a refusal, kept
        await played(client, cmd.Deposit(player_id="ann", amount=1))  # apart, would not)
    events = await stream_events(space, TABLE)
    assert any(isinstance(e.data, ev.RoundSettled) and e.data.round == 1 for e in events)

    # the platform's outbox sends the bet's record once more, as it was first written
    told_by_round = duplicates("round")
    [original] = [e for e in await command_log(space, TABLE) if e.command_id == "outbox-bet-1"]
    earlier = len(client.results_for("outbox-bet-1", TABLE))
    await client.send_envelope(original)
    copy = await client.result("outbox-bet-1", skip=earlier, stream_id=TABLE)

    after = await stream_events(space, TABLE)
    bets = [e.data for e in after if isinstance(e.data, ev.BetPlaced)]
    assert [(b.round, b.amount) for b in bets] == [(1, 1000)], "a second chip in round 2"
    assert copy.rejection is not None and copy.rejection.code == "stale_command", copy
    assert after == events, "the copy wrote nothing"
    # the player's next bet, from the same client, is round 2's
    await played(client, cmd.PlaceBet(player_id="ann", box=0, amount=500))
    bets = [e.data for e in await stream_events(space, TABLE) if isinstance(e.data, ev.BetPlaced)]
    assert [(b.round, b.amount) for b in bets] == [(1, 1000), (2, 500)]
    # counted as a copy (the next bet answered: the copy's batch was reported before it)
    assert duplicates("round") == told_by_round + 1


async def test_blackjack_send_reads_the_table_s_round_from_its_events(
    space: KafkaSpace, client: BlackjackClient
) -> None:
    """What ``blackjack send`` names a bet's round by, without ``--round``: the table's, read
    from its partition (the test above left round 2 open)."""
    args = argparse.Namespace(stream_id=TABLE, api=None, timeout=30.0)
    assert await client_cli._table_round(args, client) == (2, True)
    args = argparse.Namespace(stream_id="never-opened", api=None, timeout=30.0)
    assert await client_cli._table_round(args, client) == (0, False)
