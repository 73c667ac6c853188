"""Timers fire from the service as commands on the commands topic: the betting and turn clock
of ``atlantic-city-multi`` (``ExpireTimers``) and the disconnection policy of ``surrender``
(``Disconnect``). Their events are checked against the engine like any other command's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from blackjack.client import BlackjackClient
from blackjack.command_handler.clock import disconnect_command_id, expire_command_id
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.wallet import (
    BuyIn,
    BuyInCompleted,
    CashOutReceived,
    WalletDeposit,
    wallet_stream,
)
from blackjack.messages.envelope import EventEnvelope
from tests.integration.conftest import (
    KafkaSpace,
    QueuedShuffler,
    accept,
    accept_together,
    command_log,
    running_handler,
    stream_events,
    types_of,
    verify_stream,
    wait_for_events,
)

pytestmark = pytest.mark.integration

PARTITIONS = 2
HANDLER = {"presence_timeout_s": 1.0}


async def _ann_and_ben_bought_in(
    space: KafkaSpace,
    client: BlackjackClient,
    table: str,
    turn_seconds: int,
    **rules: object,
) -> None:
    """An atlantic-city-multi table with this clock (and these other rules), ann and ben
    seated with 1,000 each, bought in from their wallets."""
    overrides = {"turn_seconds": turn_seconds, **rules}
    await accept(client, table, cmd.OpenTable(variant="atlantic-city-multi", overrides=overrides))
    for seat, player in enumerate(("ann", "ben")):
        await accept(client, table, cmd.SitDown(player_id=player, seat=seat))
        await accept(
            client,
            wallet_stream(player),
            WalletDeposit(player_id=player, amount=1_000),
            BuyIn(player_id=player, table_id=table, amount=1_000),
        )
    await wait_for_events(space, table, lambda es: types_of(es).count("FundsDeposited") == 2)


async def test_the_multi_seat_clock_leaves_out_a_silent_player_and_stands_a_silent_hand(
    space: KafkaSpace, shuffler: QueuedShuffler, client: BlackjackClient
) -> None:
    table = "clock-multi"
    shuffler.queue(["TS", "7S", "6S", "TH"])  # ann: T 6 against the dealer's 7, T in the hole
    await _ann_and_ben_bought_in(space, client, table, turn_seconds=1)
    await accept_together(
        client, table, cmd.PlaceBet(player_id="ann", box=0, amount=500), cmd.Deal(player_id="ann")
    )
    # ben neither bets nor passes, ann does not play her hand: the clock does both.
    events = await wait_for_events(space, table, lambda es: "RoundSettled" in types_of(es))
    timeouts = [e.data for e in events if isinstance(e.data, ev.PlayerTimedOut)]
    assert [(t.player_id, t.phase, t.action) for t in timeouts] == [
        ("ben", "betting", "left_out"),
        ("ann", "playing", "stood"),
    ]
    fired = [c for c in await command_log(space, table) if isinstance(c.command, cmd.ExpireTimers)]
    assert fired and all(c.command_id.startswith("expire-") for c in fired)
    check = await verify_stream(space, table)
    [hand] = [e.data for e in check.events if isinstance(e.data, ev.HandSettled)]
    assert (hand.player_id, hand.total, hand.outcome) == ("ann", 16, "lose")


async def test_a_player_who_sits_out_is_stood_up_and_the_money_lands_in_the_wallet(
    space: KafkaSpace, shuffler: QueuedShuffler, client: BlackjackClient
) -> None:
    """seat_released_after_rounds_sat_out 2: ben never acts; the clock leaves him out of
    round 1, round 2 deals without him, and when its clock stands ann's hand and settles it
    the server stands ben up: his 1,000 go back to wallet:ben, once."""
    table = "clock-seat-freed"
    shuffler.queue(["TS", "7S", "9S", "TD", "TH", "7H", "9H", "TC"])  # ann 19 v 17, twice
    await _ann_and_ben_bought_in(
        space, client, table, turn_seconds=1, seat_released_after_rounds_sat_out=2
    )
    for played in (1, 2):
        await accept_together(
            client,
            table,
            cmd.PlaceBet(player_id="ann", box=0, amount=500),
            cmd.Deal(player_id="ann"),
        )

        def done(es: list[EventEnvelope], rounds: int = played) -> bool:
            return types_of(es).count("RoundSettled") == rounds

        await wait_for_events(space, table, done)
    events = await wait_for_events(space, table, lambda es: "SeatLeft" in types_of(es))
    [left] = [e for e in events if isinstance(e.data, ev.SeatLeft)]
    assert isinstance(left.data, ev.SeatLeft)
    assert (left.data.player_id, left.data.reason, left.data.rounds_sat_out) == (
        "ben",
        "sat_out",
        2,
    )
    assert left.data.balance_returned == 1_000
    settled = [e for e in events if isinstance(e.data, ev.RoundSettled)][-1]
    assert (left.sequence, left.causation_id) == (settled.sequence + 1, settled.causation_id)
    assert left.causation_id is not None and left.causation_id.startswith("expire-")
    wallet = wallet_stream("ben")
    received = await wait_for_events(space, wallet, lambda es: "CashOutReceived" in types_of(es))
    [cash_out] = [e.data for e in received if isinstance(e.data, CashOutReceived)]
    assert (cash_out.amount, cash_out.table_id, cash_out.table_sequence) == (
        1_000,
        table,
        left.sequence,
    )
    # Replayed through the engine: the table stood ben up, the wallet took the money once.
    check = await verify_stream(space, table)
    assert "ben" not in check.state.players and "ann" in check.state.players
    paid = await verify_stream(space, wallet)
    assert paid.state.balance == 1_000
    assert sum(isinstance(e.data, CashOutReceived) for e in paid.events) == 1
    # The seat is free: someone else sits there.
    await accept(client, table, cmd.SitDown(player_id="cy", seat=1))


async def test_an_early_copy_of_the_clocks_command_does_not_stop_the_clock(
    kafka_space: Any,
) -> None:
    """Anyone can read the betting deadline in ``RoundOpened`` and the clock's id scheme in
    the source: a copy sent before the deadline is answered with nothing done, and the
    clock's own command for that deadline still acts when it comes.

    The handler's clock stands still until the test moves it past the deadline: on a running
    3 s clock the copy had to be answered before the deadline, after the bet's answer, which
    a loaded machine does not promise (the copy then came late, a copy of the clock's own
    command, and the test failed by chance)."""
    space: KafkaSpace = await kafka_space(partitions=1)
    table = "clock-early"
    moment = [datetime.now(UTC)]
    async with (
        running_handler(space.config(), clock=lambda: moment[0]),
        space.client() as client,
    ):
        await _ann_and_ben_bought_in(space, client, table, turn_seconds=3)
        [bet] = await accept(client, table, cmd.PlaceBet(player_id="ann", box=0, amount=500))
        # The deadline is the bet's decision time (its answer's handled_at) plus the clock
        deadline = bet.handled_at + timedelta(seconds=3)
        assert bet.handled_at == moment[0]
        timer_id = expire_command_id(table, deadline)
        early = await client.execute(table, cmd.ExpireTimers(), command_id=timer_id)
        assert early.status == "accepted" and early.first_sequence is None
        assert early.handled_at < deadline
        events = await wait_for_events(space, table, lambda es: "RoundOpened" in types_of(es))
        [opened] = [e.data for e in events if isinstance(e.data, ev.RoundOpened)]
        assert opened.betting_deadline == deadline
        assert "DealStarted" not in types_of(await stream_events(space, table))
        # at the deadline the clock deals ann in (she bet but did not press Deal) and leaves
        # ben out (he neither bet nor passed)
        moment[0] = deadline
        events = await wait_for_events(space, table, lambda es: "DealStarted" in types_of(es))
    timeouts = [e.data for e in events if isinstance(e.data, ev.PlayerTimedOut)]
    assert [(t.player_id, t.action) for t in timeouts] == [("ann", "dealt_in"), ("ben", "left_out")]
    dealt_by = next(e for e in events if isinstance(e.data, ev.DealStarted)).causation_id
    assert dealt_by == timer_id
    await verify_stream(space, table)


async def test_a_silent_surrender_player_gets_an_undealt_bet_back(
    space: KafkaSpace, client: BlackjackClient
) -> None:
    table = "presence-bet"
    # pipelined: the presence clock (1 s) counts from each command, not from its answer
    await accept_together(
        client,
        table,
        cmd.OpenTable(variant="surrender"),
        cmd.SitDown(player_id="sam"),
        cmd.Deposit(player_id="sam", amount=2_000),
        cmd.PlaceBet(player_id="sam", box=2, amount=700),
    )
    events = await wait_for_events(space, table, lambda es: "RoundCancelled" in types_of(es))
    # no bet left and no betting clock at a single-player table: the game cycle ends
    assert types_of(events)[-3:] == ["PlayerDisconnected", "BetRefunded", "RoundCancelled"]
    refund = events[-2].data
    assert isinstance(refund, ev.BetRefunded)
    assert (refund.reason, refund.amount, refund.balance_after) == ("disconnected", 700, 2_000)
    await accept(client, table, cmd.Reconnect(player_id="sam"))
    check = await verify_stream(space, table)
    assert check.state.players["sam"].connected


async def test_a_started_surrender_hand_waits_for_the_player_to_reconnect(
    space: KafkaSpace, shuffler: QueuedShuffler, client: BlackjackClient
) -> None:
    table = "presence-hand"
    shuffler.queue(["TS", "9S", "8S", "7H"])  # sam: T 8 = 18 against 9 up, 7 in the hole
    await accept_together(
        client,
        table,
        cmd.OpenTable(variant="surrender"),
        cmd.SitDown(player_id="sam"),
        cmd.Deposit(player_id="sam", amount=2_000),
        cmd.PlaceBet(player_id="sam", box=0, amount=500),
        cmd.Deal(player_id="sam"),
    )
    events = await wait_for_events(space, table, lambda es: "PlayerDisconnected" in types_of(es))
    assert "BetRefunded" not in types_of(events) and "RoundSettled" not in types_of(events)
    # The round is restored for the player who comes back: the same hand, still to play.
    await accept_together(
        client, table, cmd.Reconnect(player_id="sam"), cmd.Stand(player_id="sam", box=0)
    )
    check = await verify_stream(space, table)
    [hand] = [e.data for e in check.events if isinstance(e.data, ev.HandSettled)]
    assert (hand.total, hand.outcome, hand.payout) == (18, "win", 1000)


@pytest.mark.parametrize("snapshot_every", [1, 10_000], ids=["from-snapshot", "from-results"])
async def test_a_takeover_keeps_the_presence_clock_running(
    kafka_space: Any, snapshot_every: int
) -> None:
    """A player's silence counts from their last command, not from the takeover: the new
    owner knows when they were last seen (from the snapshot, or from the results after it)
    and sends the very ``Disconnect`` the old owner would have sent."""
    space: KafkaSpace = await kafka_space(partitions=1)
    table = "presence-takeover"
    patient = space.config(presence_timeout_s=3600.0, snapshot_every=snapshot_every)
    async with running_handler(patient), space.client() as client:
        *_, bet = await accept(
            client,
            table,
            cmd.OpenTable(variant="surrender"),
            cmd.SitDown(player_id="sam"),
            cmd.Deposit(player_id="sam", amount=2_000),
            cmd.PlaceBet(player_id="sam", box=0, amount=700),
        )
    assert bet.player_id == "sam"
    async with running_handler(space.config(presence_timeout_s=1.0)):
        events = await wait_for_events(space, table, lambda es: "RoundCancelled" in types_of(es))
    assert types_of(events)[-3:] == ["PlayerDisconnected", "BetRefunded", "RoundCancelled"]
    fired = [c for c in await command_log(space, table) if isinstance(c.command, cmd.Disconnect)]
    assert [c.command_id for c in fired] == [disconnect_command_id(table, "sam", bet.handled_at)]


async def test_a_void_at_a_shared_table_counts_no_round_sat_out_and_pays_the_wallet_once(
    space: KafkaSpace, shuffler: QueuedShuffler, client: BlackjackClient
) -> None:
    """atlantic-city-multi with the operator's void term, freeing a seat after 2 rounds sat
    out: ben never acts (left out of round 1 by the clock, rounds 2 and 3 dealt without him);
    the operator voids round 2 while ann plays: her 500 comes back and, a voided round being
    no round sat out, no one is stood up; round 3, settled, stands ben up, his 1,000 back in
    wallet:ben once."""
    table = "void-multi"
    # ann 19 v 17, three times
    shuffler.queue(["TS", "7S", "9S", "TD", "TH", "7H", "9H", "TC", "TD", "7D", "9D", "TS"])
    await _ann_and_ben_bought_in(
        space,
        client,
        table,
        turn_seconds=2,
        seat_released_after_rounds_sat_out=2,
        void_on_malfunction=True,
    )
    wallet = wallet_stream("ben")  # the module's tables share the players' wallets
    # The buy-in's last step (ConfirmBuyIn) answered: the wallet read whole, not mid-saga.
    await wait_for_events(
        space,
        wallet,
        lambda es: any(isinstance(e.data, BuyInCompleted) and e.data.table_id == table for e in es),
    )
    before = (await verify_stream(space, wallet)).state.balance
    # No command races the 2 s clock: round 1 waits for ben to the betting deadline and its
    # clock stands ann's 19 (a Stand sent once her turn was read could come after that on a
    # loaded machine); in rounds 2 and 3 ben sits out and ann's Deal deals at once, so her
    # next command is sent with it, pipelined (a void or a Stand sent after the Deal's answer
    # could find her turn already stood by the clock)
    await accept_together(
        client, table, cmd.PlaceBet(player_id="ann", box=0, amount=500), cmd.Deal(player_id="ann")
    )
    events = await wait_for_events(space, table, lambda es: "RoundSettled" in types_of(es))
    timeouts = [e.data for e in events if isinstance(e.data, ev.PlayerTimedOut)]
    assert [(t.player_id, t.action) for t in timeouts] == [("ben", "left_out"), ("ann", "stood")]
    await accept_together(
        client,
        table,
        cmd.PlaceBet(player_id="ann", box=0, amount=500),
        cmd.Deal(player_id="ann"),
        cmd.VoidRound(round=2, operator="ops-1", reason="reader fault"),
    )
    events = await wait_for_events(space, table, lambda es: "RoundVoided" in types_of(es))
    assert types_of(events)[-2:] == ["DealerHoleCardRevealed", "RoundVoided"]
    [voided] = [e.data for e in events if isinstance(e.data, ev.RoundVoided)]
    [back] = voided.returns
    assert (back.player_id, back.wagered, back.returned, back.balance_after) == (
        "ann",
        500,
        500,
        1_500,  # 1,000 bought in and round 1's 500 won
    )
    assert (await verify_stream(space, table)).state.players["ben"].rounds_sat_out == 1
    await accept_together(
        client,
        table,
        cmd.PlaceBet(player_id="ann", box=0, amount=500),
        cmd.Deal(player_id="ann"),
        cmd.Stand(player_id="ann", box=0),
    )
    events = await wait_for_events(space, table, lambda es: "SeatLeft" in types_of(es))
    assert types_of(events)[-2:] == ["RoundSettled", "SeatLeft"]
    [left] = [e.data for e in events if isinstance(e.data, ev.SeatLeft)]
    assert (left.player_id, left.reason, left.rounds_sat_out, left.balance_returned) == (
        "ben",
        "sat_out",
        2,
        1_000,
    )

    def paid_here(events: list[Any]) -> list[int]:
        return [
            e.data.amount
            for e in events
            if isinstance(e.data, CashOutReceived) and e.data.table_id == table
        ]

    received = await wait_for_events(space, wallet, lambda es: bool(paid_here(es)))
    assert paid_here(received) == [1_000]
    check = await verify_stream(space, table)
    assert "ben" not in check.state.players and check.state.players["ann"].balance == 2_000
    assert (await verify_stream(space, wallet)).state.balance == before + 1_000
