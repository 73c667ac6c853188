"""The projection fold: given a table's events (from the real engine, in their public wire
form), then its read model: the accounts' money, the rounds with their cards and payouts,
the public table view. No I/O."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from blackjack.domain import commands as cmd
from blackjack.domain.wallet import BuyIn, RefundBuyIn, is_wallet_stream
from blackjack.messages.envelope import EventEnvelope
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import WIRE_EVENT_TYPES, WireEnvelope, to_wire
from blackjack.projections.ids import parse_round_id, round_id
from blackjack.projections.projector import TABLE_EVENTS_PROJECTED, StreamProjection
from blackjack.projections.views import Account, ProjectionError
from blackjack.projections.wallets import (
    WALLET_EVENTS_PROJECTED,
    WalletProjection,
    WalletView,
)
from tests.integration.conftest_projections import Script, play_tables

SEAL = ShoeSeal.from_hex(ShoeSeal.new_key_hex())
A = "alice"


def fold(envelopes: list[EventEnvelope]) -> dict[str, StreamProjection | WalletProjection]:
    folded: dict[str, StreamProjection | WalletProjection] = {}
    for envelope in envelopes:
        wire = to_wire(envelope, SEAL)
        kind = WalletProjection if is_wallet_stream(wire.stream_id) else StreamProjection
        folded.setdefault(wire.stream_id, kind.new(wire.stream_id)).apply(wire)
    return folded


def table(script: Script) -> StreamProjection:
    projection = fold(script.envelopes)[script.stream_id]
    assert isinstance(projection, StreamProjection)
    return projection


def conserved(account: Account) -> bool:
    paid_in = account.deposited - account.withdrawn - account.cashed_out
    return paid_in == account.available + account.in_play + account.lost - account.won


def test_a_won_hand_moves_the_stake_into_play_and_back_with_the_win() -> None:
    script = Script("atlantic-city", [["TH", "7S", "9H", "QD"]])
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    playing = table(script)
    assert playing.accounts[A].available == 9000
    assert playing.accounts[A].in_play == 1000

    script.do(cmd.Stand(player_id=A, box=0))
    done = table(script)
    account = done.accounts[A]
    assert (account.available, account.in_play) == (11_000, 0)
    assert (account.wagered, account.won, account.lost, account.rounds) == (1000, 1000, 0, 1)
    assert conserved(account)
    record = done.rounds[1]
    assert record.round_id == "table-1:1" and record.variant == "atlantic-city"
    assert record.status == "settled" and record.shoe == 1
    hand = record.boxes[0].hands[0]
    assert (hand.cards, hand.total, hand.stood, hand.outcome, hand.payout) == (
        ["TH", "9H"],
        19,
        True,
        "win",
        2000,
    )
    assert record.dealer.cards == ["7S", "QD"] and record.dealer.total == 17
    player = done.players[(1, A)]
    assert (player.balance_before, player.balance_after) == (10_000, 11_000)
    assert (player.wagered, player.paid, player.net) == (1000, 2000, 1000)
    assert [entry.event for entry in record.log][:3] == [
        "RoundOpened",
        "BetPlaced",
        "DealRequested",
    ]
    assert [entry.sequence for entry in record.log] == list(
        range(record.first_sequence, record.last_sequence + 1)
    )


def test_the_hole_card_stays_face_down_until_it_is_revealed() -> None:
    script = Script("atlantic-city", [["TH", "7S", "9H", "QD"]])
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    playing = table(script)
    record = playing.rounds[1]
    assert record.dealer.cards == ["7S", None]
    assert record.dealer.total == 7
    shown = json.dumps([record.model_dump(mode="json"), playing.view.model_dump(mode="json")])
    assert "QD" not in shown
    assert playing.view.phase == "playing" and playing.view.active is not None

    script.do(cmd.Stand(player_id=A, box=0))
    assert table(script).rounds[1].dealer.cards == ["7S", "QD"]


def test_at_mini_s17_the_first_dealer_card_is_the_face_down_one() -> None:
    # "The first of the dealer's cards is placed face down (the 'hole' card), the second is
    # placed face up (the 'upcard')": the read model shows [hole, upcard] as [None, upcard]
    script = Script("mini-s17", [["TH", "QD", "9H", "7S"]])
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    playing = table(script)
    record = playing.rounds[1]
    assert record.dealer.cards == [None, "7S"]
    assert record.dealer.upcard == "7S"
    assert record.dealer.total == 7
    shown = json.dumps([record.model_dump(mode="json"), playing.view.model_dump(mode="json")])
    assert "QD" not in shown

    script.do(cmd.Stand(player_id=A, box=0))
    done = table(script).rounds[1]
    assert done.dealer.cards == ["QD", "7S"] and done.dealer.total == 17
    assert done.dealer.upcard == "7S"
    assert done.boxes[0].hands[0].outcome == "win"


def test_split_and_double_put_each_stake_into_play() -> None:
    # mini-h17: split 8s against a 6, double the first hand to 21, stand on 18, dealer busts
    script = Script("mini-h17", [["8H", "6S", "8D", "TC", "3S", "TD", "TH", "9C"]])
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.Deal(player_id=A),
        cmd.Split(player_id=A, box=0),
        cmd.Double(player_id=A, box=0),
    )
    assert table(script).accounts[A].in_play == 3000
    assert table(script).rounds[1].dealer.upcard == "6S"  # the first card, face up
    script.do(cmd.Stand(player_id=A, box=0))
    done = table(script)
    hands = done.rounds[1].boxes[0].hands
    assert [(h.cards, h.stake, h.doubled, h.split, h.payout) for h in hands] == [
        (["8H", "3S", "TH"], 2000, True, True, 4000),
        (["8D", "TD"], 1000, False, True, 2000),
    ]
    account = done.accounts[A]
    assert (account.in_play, account.wagered, account.won, account.available) == (
        0,
        3000,
        3000,
        13_000,
    )
    assert conserved(account)


def test_insurance_taken_then_lost_after_the_peek() -> None:
    script = Script("mini-h17", [["TH", "AS", "9H", "7C"]])
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.Deal(player_id=A),
        cmd.TakeInsurance(player_id=A, box=0),
        cmd.Stand(player_id=A, box=0),
    )
    done = table(script)
    box = done.rounds[1].boxes[0]
    assert box.insurance is not None
    assert (box.insurance.status, box.insurance.stake, box.insurance.won) == ("settled", 500, False)
    assert done.rounds[1].dealer.peeked and done.rounds[1].dealer.blackjack is False
    account = done.accounts[A]
    # 19 beats the dealer's soft 18: +1000 on the hand, -500 on the insurance
    assert (account.wagered, account.won, account.lost, account.available) == (
        1500,
        1000,
        500,
        10_500,
    )
    assert conserved(account)


def test_late_surrender_returns_half_the_bet() -> None:
    script = Script("mini-h17", [["TH", "TS", "6H", "7C"]])
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.Deal(player_id=A),
        cmd.Surrender(player_id=A, box=0),
    )
    done = table(script)
    hand = done.rounds[1].boxes[0].hands[0]
    assert (hand.surrendered, hand.outcome, hand.payout) == (True, "surrender", 500)
    assert (done.accounts[A].lost, done.accounts[A].available) == (500, 9500)


def test_a_cleared_bet_comes_back_and_stays_in_the_log() -> None:
    """Every bet taken back at a table with no betting clock ends the game cycle (cancelled:
    nothing was dealt); the next bet opens the next one, with its own start."""
    script = Script("atlantic-city", [[]])
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=700), cmd.ClearBets(player_id=A))
    script.tick(3600)
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=500))
    projection = table(script)
    record = projection.rounds[1]
    assert record.status == "cancelled" and record.boxes == []
    assert [entry.event for entry in record.log] == [
        "RoundOpened",
        "BetPlaced",
        "BetRefunded",
        "RoundCancelled",
    ]
    assert record.log[2].data["reason"] == "cleared"
    player = projection.players[(1, A)]
    assert (player.balance_before, player.balance_after) == (10_000, 10_000)
    later = projection.rounds[2]
    assert later.status == "betting" and later.opened_at - record.opened_at >= timedelta(hours=1)
    assert (projection.accounts[A].available, projection.accounts[A].in_play) == (9_500, 500)


def test_a_bet_taken_back_at_a_shared_table_leaves_the_round_open_to_its_clock() -> None:
    """Where a betting clock runs, the others may still bet until its deadline: the round
    stays open (the clock cancels it if nobody deals)."""
    script = Script("atlantic-city-multi", [[]])
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=700), cmd.ClearBets(player_id=A))
    record = table(script).rounds[1]
    assert record.status == "betting" and record.boxes == []
    assert [entry.event for entry in record.log] == ["RoundOpened", "BetPlaced", "BetRefunded"]


def test_chips_taken_back_leave_the_rest_on_the_box_and_in_play() -> None:
    script = Script("atlantic-city", [["TH", "7S", "9H", "QD"]])
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.RemoveBet(player_id=A, box=0, amount=300),
    )
    projection = table(script)
    record = projection.rounds[1]
    assert [(b.box, b.bet) for b in record.boxes] == [(0, 700)]
    assert record.log[-1].event == "BetRefunded"
    assert (record.log[-1].data["reason"], record.log[-1].data["box_total"]) == ("removed", 700)
    assert (projection.accounts[A].available, projection.accounts[A].in_play) == (9300, 700)
    assert conserved(projection.accounts[A])

    script.do(cmd.Deal(player_id=A), cmd.Stand(player_id=A, box=0))  # 19 beats 17
    done = table(script)
    assert (done.accounts[A].in_play, done.accounts[A].available) == (0, 10_700)
    assert conserved(done.accounts[A])


def test_leaving_the_table_pays_the_balance_out() -> None:
    script = Script("atlantic-city", [[]])
    script.do(cmd.Withdraw(player_id=A, amount=2500), cmd.LeaveTable(player_id=A))
    account = table(script).accounts[A]
    assert (account.withdrawn, account.cashed_out, account.available) == (2500, 7500, 0)
    assert not account.seated and account.seat is None
    assert conserved(account)


def test_a_shared_table_is_funded_through_the_wallet() -> None:
    script = Script("atlantic-city-multi", [[]], players={A: 5000})
    script.do(cmd.LeaveTable(player_id=A))
    folded = fold(script.envelopes)
    view = folded["wallet:alice"].view
    assert isinstance(view, WalletView)
    assert (view.deposited, view.bought_in, view.cashed_in, view.balance) == (
        5000,
        5000,
        5000,
        5000,
    )
    assert view.pending == [] and view.currency == "USD"  # the first deposit's
    projection = folded[script.stream_id]
    assert isinstance(projection, StreamProjection)
    account = projection.accounts[A]
    assert account.funded_by_wallet and account.cashed_out == 5000


def test_a_refused_buy_in_comes_back_to_the_wallet() -> None:
    script = Script("atlantic-city-multi", [[]], players={A: 5000})
    script.do(cmd.LeaveTable(player_id=A))
    script.wallet(BuyIn(player_id=A, table_id=script.stream_id, amount=1000))
    in_transit = fold(script.envelopes)["wallet:alice"].view
    assert isinstance(in_transit, WalletView)
    assert (in_transit.balance, in_transit.in_transit) == (4000, 1000)

    transfer = script.wallets["wallet:alice"].transfers
    script.wallet(RefundBuyIn(player_id=A, transfer=transfer, reason="not_seated"))
    view = fold(script.envelopes)["wallet:alice"].view
    assert isinstance(view, WalletView)
    assert (view.bought_in, view.refunded, view.in_transit, view.balance) == (6000, 1000, 0, 5000)


def test_money_paid_in_during_a_round_is_in_its_recall_and_its_line_adds_up() -> None:
    # GLI-19 game recall: 10.00 bet from 15.00, 5.00 paid in during the turn pays the double
    script = Script("mini-h17", [["5H", "6S", "6H", "TS", "TD", "8C"]], players={A: 1500})
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    script.do(cmd.Deposit(player_id=A, amount=500), cmd.Double(player_id=A, box=0))
    projection = table(script)
    record = projection.rounds[1]
    events = [entry.event for entry in record.log]
    assert events.index("FundsDeposited") < events.index("HandDoubled")
    assert [entry.sequence for entry in record.log] == list(
        range(record.first_sequence, record.last_sequence + 1)
    )
    line = projection.players[(1, A)]
    assert (line.balance_before, line.net, line.deposited, line.withdrawn) == (1500, 2000, 500, 0)
    assert line.balance_after == 4000 == line.balance_before + line.net + line.deposited


def test_a_disconnection_during_a_round_is_in_its_recall() -> None:
    script = Script("surrender", [["TH", "7S", "9H", "QD"]])
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    script.do(
        cmd.Disconnect(player_id=A), cmd.Reconnect(player_id=A), cmd.Stand(player_id=A, box=0)
    )
    script.do(cmd.Disconnect(player_id=A))  # between rounds: no round's
    projection = table(script)
    events = [entry.event for entry in projection.rounds[1].log]
    assert events.count("PlayerDisconnected") == 1 and "PlayerReconnected" in events
    assert events.index("PlayerReconnected") < events.index("PlayerStood")


def test_a_suspended_table_shows_why_and_since_when_and_the_round_s_recall_has_it() -> None:
    script = Script("atlantic-city", [["TH", "7S", "9H", "QD"]])
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    script.do(cmd.SuspendTable(operator="ops-1", reason="maintenance at 03:00"))
    suspended = table(script)
    assert suspended.view.suspended is not None
    assert suspended.view.suspended.reason == "maintenance at 03:00"
    assert suspended.view.suspended.since == script.envelopes[-1].occurred_at
    script.do(cmd.Stand(player_id=A, box=0))  # the round under way completes
    done = table(script)
    assert done.rounds[1].status == "settled" and done.accounts[A].available == 11_000
    assert "TableSuspended" in [entry.event for entry in done.rounds[1].log]
    script.do(cmd.ResumeTable(operator="ops-2"))
    assert table(script).view.suspended is None


def test_over_a_long_random_log_money_is_conserved_and_matches_the_engine() -> None:
    variants = ["mini-h17", "mini-s17", "atlantic-city", "atlantic-city-multi", "surrender"]
    log = play_tables([(f"t-{v}", v) for v in variants], rounds=60, seed=11)
    folded = fold(log.envelopes)
    checked = moved_lines = 0
    for stream_id, state in log.states.items():
        projection = folded[stream_id]
        assert isinstance(projection, StreamProjection)
        for player_id, player in state.players.items():
            assert projection.accounts[player_id].available == player.balance
            checked += 1
        for account in projection.accounts.values():
            assert conserved(account), account
            assert account.in_play == 0 or projection.view.round_open
        settled = [r for r in projection.rounds.values() if r.status == "settled"]
        assert len(settled) == 60
        for line in projection.players.values():  # each history line adds up
            moved = line.deposited - line.withdrawn
            assert line.balance_before + line.net + moved == line.balance_after, line
            moved_lines += bool(moved)
    for stream_id, wallet in log.wallets.items():
        view = folded[stream_id].view
        assert isinstance(view, WalletView) and view.balance == wallet.balance
    assert checked >= 7 and moved_lines
    assert log.count("HandSplit") and log.count("InsuranceTaken") and log.count("HandSurrendered")


def test_an_event_out_of_sequence_is_refused() -> None:
    script = Script("atlantic-city", [[]])
    wires: list[WireEnvelope] = [to_wire(e, SEAL) for e in script.envelopes]
    projection = StreamProjection.new(script.stream_id)
    projection.apply(wires[0])
    with pytest.raises(ProjectionError, match="follows"):
        projection.apply(wires[2])


def test_a_round_id_is_the_stream_and_the_round_number() -> None:
    assert round_id("table-1", 7) == "table-1:7"
    assert parse_round_id("table-1:7") == ("table-1", 7)
    assert parse_round_id("casino:eu:table:12") == ("casino:eu:table", 12)
    for bad in ("table-1", "table-1:", ":3", "table-1:0", "table-1:x"):
        with pytest.raises(ValueError, match="STREAM_ID:ROUND"):
            parse_round_id(bad)


def test_every_event_on_the_wire_has_a_projection_rule() -> None:
    # a new event type must be taught to the projections before it reaches the topic:
    # a worker refuses (and retries) an event it has no rule for rather than skip it
    assert set(WIRE_EVENT_TYPES) == TABLE_EVENTS_PROJECTED | WALLET_EVENTS_PROJECTED
