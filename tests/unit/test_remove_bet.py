"""Taking chips back before the deal (``RemoveBet``), as given / when / then.

The surrender page (003): "To remove a bet completely or decrease its value, you should remove
the chip or chips placed ... The chips will be removed one by one. - Click on Clear to remove
all chips currently placed on the table." ``ClearBets`` is Clear; ``RemoveBet`` takes back one
box's whole bet, or ``amount`` of it; what stays may be under the table minimum until the deal.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from pydantic import TypeAdapter

from blackjack.audit.words import describe
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.decide import decide
from blackjack.domain.evolve import fold
from blackjack.domain.legal import legal_actions
from blackjack.domain.rejections import Rejection
from blackjack.domain.rules import PRESETS
from blackjack.domain.state import INITIAL_STATE, TableState
from blackjack.messages import wire
from blackjack.table import apply
from tests.unit.test_rejections import (
    NOW,
    dealt,
    given,
    seated,
    shared_seated,
    shoe_starting,
    then_rejected,
)

EVENT = TypeAdapter(ev.AnyEvent)

# ---- when / then --------------------------------------------------------------------------


def when(state: TableState, command: cmd.Command) -> tuple[list[ev.Event], TableState]:
    result = apply(state, command, NOW, shoe_starting())
    assert not isinstance(result, Rejection), result
    return result.events, result.state


def three_bets(balance: int = 10_000) -> TableState:
    """Ann at the surrender table (3 boxes, min 1.00) with 10.00, 5.00 and 2.50 out."""
    return given(
        "surrender",
        *seated(balance=balance),
        cmd.PlaceBet(player_id="ann", box=0, amount=1000),
        cmd.PlaceBet(player_id="ann", box=1, amount=500),
        cmd.PlaceBet(player_id="ann", box=2, amount=250),
    )


# ---- accepted -----------------------------------------------------------------------------


def test_removing_a_whole_box_bet_frees_that_box_only() -> None:
    state = three_bets()
    assert state.players["ann"].balance == 8250
    events, after = when(state, cmd.RemoveBet(player_id="ann", box=1))
    assert events == [
        ev.BetRefunded(
            round=1,
            player_id="ann",
            box=1,
            amount=500,
            box_total=0,
            reason="removed",
            balance_after=8750,
        )
    ]
    assert after.boxes[1].player_id is None and after.boxes[1].bet == 0
    assert [b.bet for b in after.boxes] == [1000, 0, 250]
    assert after.players["ann"].balance == 8750
    # the freed box takes a new bet
    _, again = when(after, cmd.PlaceBet(player_id="ann", box=1, amount=300))
    assert again.boxes[1].bet == 300


def test_reducing_a_bet_leaves_the_rest_on_the_box() -> None:
    state = three_bets()
    events, after = when(state, cmd.RemoveBet(player_id="ann", box=0, amount=250))
    assert events == [
        ev.BetRefunded(
            round=1,
            player_id="ann",
            box=0,
            amount=250,
            box_total=750,
            reason="removed",
            balance_after=8500,
        )
    ]
    assert after.boxes[0].player_id == "ann" and after.boxes[0].bet == 750
    # "The chips will be removed one by one": down to exactly the minimum, then all of it
    _, after = when(after, cmd.RemoveBet(player_id="ann", box=0, amount=650))
    assert after.boxes[0].bet == 100
    _, after = when(after, cmd.RemoveBet(player_id="ann", box=0, amount=100))
    assert after.boxes[0].player_id is None
    assert after.players["ann"].balance == 9250


def test_the_reduced_bet_is_the_one_dealt_and_repeated() -> None:
    """SAME BET / Repeat remembers the bet as it was when dealt, not as first placed."""
    state = given(
        "surrender",
        *seated(),
        cmd.PlaceBet(player_id="ann", box=0, amount=1000),
        cmd.RemoveBet(player_id="ann", box=0, amount=400),
        cmd.Deal(player_id="ann"),
        cmd.Stand(player_id="ann", box=0),
        cards=["TS", "7S", "9S", "TH"],
    )
    assert state.players["ann"].last_bets == ((0, 600),)
    # a bet placed and taken back before the next deal does not change that memory
    placed = given(
        "surrender",
        *seated(),
        cmd.PlaceBet(player_id="ann", box=0, amount=1000),
        cmd.RemoveBet(player_id="ann", box=0, amount=400),
        cmd.Deal(player_id="ann"),
        cmd.Stand(player_id="ann", box=0),
        cmd.PlaceBet(player_id="ann", box=2, amount=5000),
        cmd.RemoveBet(player_id="ann", box=2),
        cards=["TS", "7S", "9S", "TH"],
    )
    assert placed.players["ann"].last_bets == ((0, 600),)
    events, after = when(placed, cmd.Rebet(player_id="ann", multiplier=1))
    assert [(e.box, e.amount) for e in events if isinstance(e, ev.BetPlaced)] == [(0, 600)]
    assert after.boxes[0].bet == 600


def test_money_is_conserved_balance_after_is_before_plus_the_refund() -> None:
    state = three_bets(balance=2000)
    before = state.players["ann"].balance
    on_table = sum(b.bet for b in state.boxes)
    for command in (
        cmd.RemoveBet(player_id="ann", box=0, amount=1),
        cmd.RemoveBet(player_id="ann", box=0, amount=899),
        cmd.RemoveBet(player_id="ann", box=2),
        cmd.RemoveBet(player_id="ann", box=1, amount=400),
    ):
        events, after = when(state, command)
        (refund,) = events
        assert isinstance(refund, ev.BetRefunded)
        assert refund.balance_after == before + refund.amount
        assert after.players["ann"].balance == refund.balance_after
        assert after.boxes[refund.box].bet == refund.box_total
        assert refund.box_total == state.boxes[refund.box].bet - refund.amount
        now_on_table = sum(b.bet for b in after.boxes)
        assert before + on_table == after.players["ann"].balance + now_on_table == 2000
        state, before, on_table = after, after.players["ann"].balance, now_on_table
    assert [b.bet for b in state.boxes] == [100, 100, 0]


@pytest.mark.parametrize("variant", sorted(PRESETS))
def test_every_preset_lets_a_player_take_a_bet_back_before_the_deal(variant: str) -> None:
    sit = shared_seated() if PRESETS[variant].funded_by_wallet else seated()
    state = given(variant, *sit, cmd.PlaceBet(player_id="ann", box=0, amount=1000))
    events, after = when(state, cmd.RemoveBet(player_id="ann", box=0, amount=500))
    assert [type(e) for e in events] == [ev.BetRefunded]
    assert after.boxes[0].bet == 500
    assert "remove:0" in legal_actions(after, "ann", NOW).buttons()


def test_a_shared_table_taking_back_every_bet_leaves_the_player_out_at_the_deadline() -> None:
    """atlantic-city-multi: the betting clock keeps running; a player whose bets were all taken
    back did not bet, so is left out when it runs out, while the others are dealt."""
    state = given(
        "atlantic-city-multi",
        *shared_seated("ann", 0),
        *shared_seated("bob", 1),
        cmd.PlaceBet(player_id="ann", box=0, amount=1000),
        cmd.PlaceBet(player_id="bob", box=1, amount=1000),
        cmd.Deal(player_id="bob"),
    )
    deadline = state.deadline
    assert deadline is not None
    _, state = when(state, cmd.RemoveBet(player_id="ann", box=0))
    assert state.deadline == deadline and state.round_open
    # and Pass still works for a player without a bet
    assert not isinstance(decide(state, cmd.Pass(player_id="ann"), NOW), Rejection)
    result = apply(state, cmd.ExpireTimers(), deadline + timedelta(seconds=1), shoe_starting())
    assert not isinstance(result, Rejection)
    timed_out = [e for e in result.events if isinstance(e, ev.PlayerTimedOut)]
    assert [(e.player_id, e.action) for e in timed_out] == [("ann", "left_out")]
    started = next(e for e in result.events if isinstance(e, ev.DealStarted))
    assert started.boxes == (1,)


def test_taking_back_the_last_bet_where_no_clock_runs_ends_the_game_cycle() -> None:
    """A single-player table has no betting clock to close a round left without a bet: the
    last bet taken back (Clear, RemoveBet of the last box, a disconnection before Deal,
    leaving) cancels it, so the next bet opens the next cycle (its own id and start time)
    rather than one opened by a bet since taken back. A bet left on another box keeps it."""
    state = three_bets()
    events, state = when(state, cmd.RemoveBet(player_id="ann", box=1))
    assert [type(e) for e in events] == [ev.BetRefunded] and state.round_open
    events, state = when(state, cmd.RemoveBet(player_id="ann", box=0, amount=1000))
    assert [type(e) for e in events] == [ev.BetRefunded] and state.round_open
    events, state = when(state, cmd.RemoveBet(player_id="ann", box=2))
    assert [type(e) for e in events] == [ev.BetRefunded, ev.RoundCancelled]
    assert events[1] == ev.RoundCancelled(round=1) and not state.round_open
    assert state.players["ann"].balance == 10_000
    events, state = when(state, cmd.PlaceBet(player_id="ann", box=0, amount=100))
    assert [type(e) for e in events] == [ev.RoundOpened, ev.BetPlaced] and state.round == 2


@pytest.mark.parametrize(
    "command",
    [
        cmd.ClearBets(player_id="ann"),
        cmd.Disconnect(player_id="ann"),  # the surrender page returns the bet
        cmd.LeaveTable(player_id="ann"),
        cmd.StandUpPlayer(player_id="ann", operator="ops", reason="self-excluded"),
    ],
    ids=lambda c: c.type,
)
def test_every_way_the_last_bets_go_back_ends_a_single_player_cycle(command: cmd.Command) -> None:
    events, state = when(three_bets(), command)
    refunds = [e for e in events if isinstance(e, ev.BetRefunded)]
    assert sum(e.amount for e in refunds) == 1750
    assert isinstance(events[-1], ev.RoundCancelled) and not state.round_open
    assert not any(box.bet for box in state.boxes)


def test_a_partial_refund_replays_from_json_and_an_old_refund_is_upcast() -> None:
    state = three_bets()
    events, after = when(state, cmd.RemoveBet(player_id="ann", box=0, amount=300))
    (refund,) = events
    assert refund.version == 2
    replayed = fold(EVENT.validate_json(e.model_dump_json()) for e in [*_events_of(state), refund])
    assert replayed == after and after.boxes[0].bet == 700
    line = describe(state, refund)
    assert "takes back 3.00" in line and "box 7.00" in line
    # a version 1 BetRefunded (before box_total existed) always emptied the box
    old = refund.model_dump(mode="json")
    old.pop("box_total")
    old.update(version=1, amount=1000, balance_after=9250, reason="cleared")
    envelope = {
        "event_id": "e-1",
        "type": "BetRefunded",
        "schema_version": 1,
        "stream_id": "t",
        "sequence": 9,
        "occurred_at": NOW.isoformat(),
        "data": old,
    }
    upcast = wire.decode(json.dumps(envelope).encode()).data
    assert isinstance(upcast, ev.BetRefunded)
    assert (upcast.version, upcast.box_total, upcast.amount) == (2, 0, 1000)
    folded = fold([*_events_of(state), upcast])
    assert folded.boxes[0].player_id is None and folded.players["ann"].balance == 9250


def _events_of(state: TableState) -> list[ev.Event]:
    """The events that built ``three_bets`` again, to fold an upcast event after them."""
    built: list[ev.Event] = []
    replay = INITIAL_STATE
    for command in (
        cmd.OpenTable(variant="surrender"),
        *seated(),
        cmd.PlaceBet(player_id="ann", box=0, amount=1000),
        cmd.PlaceBet(player_id="ann", box=1, amount=500),
        cmd.PlaceBet(player_id="ann", box=2, amount=250),
    ):
        result = apply(replay, command, NOW, shoe_starting())
        assert not isinstance(result, Rejection)
        built += result.events
        replay = result.state
    assert replay == state
    return built


# ---- refused ------------------------------------------------------------------------------


def test_refuse_taking_back_more_than_the_box_holds() -> None:
    state = three_bets()
    rejection = then_rejected(
        state, cmd.RemoveBet(player_id="ann", box=1, amount=501), "invalid_amount"
    )
    assert "500" in rejection.message
    then_rejected(state, cmd.RemoveBet(player_id="ann", box=1, amount=0), "invalid_amount")
    then_rejected(state, cmd.RemoveBet(player_id="ann", box=1, amount=-100), "invalid_amount")


def test_a_remainder_under_the_table_minimum_waits_for_more_chips_before_the_deal() -> None:
    # chips come off one by one (003), so a stack may pass under the minimum on its way down;
    # the minimum binds when the player deals
    [refund], state = when(three_bets(), cmd.RemoveBet(player_id="ann", box=0, amount=901))
    assert isinstance(refund, ev.BetRefunded)
    assert (refund.amount, refund.box_total, refund.reason) == (901, 99, "removed")
    assert state.boxes[0].bet == 99
    rejection = then_rejected(state, cmd.Deal(player_id="ann"), "bet_below_minimum")
    assert "box 0 holds 99, under the minimum bet of 100" in rejection.message
    _, state = when(state, cmd.PlaceBet(player_id="ann", box=0, amount=1))
    assert not isinstance(decide(state, cmd.Deal(player_id="ann"), NOW), Rejection)


def test_refuse_after_the_deal() -> None:
    state = given("surrender", *seated(), *dealt(), cards=["TS", "7S", "9S", "TH"])
    assert state.phase == "playing"
    then_rejected(state, cmd.RemoveBet(player_id="ann", box=0), "not_betting_time")
    then_rejected(state, cmd.RemoveBet(player_id="ann", box=0, amount=100), "not_betting_time")
    assert "remove:0" not in legal_actions(state, "ann", NOW).buttons()


def test_refuse_after_pressing_deal_at_a_shared_table() -> None:
    state = given(
        "atlantic-city-multi", *shared_seated("ann", 0), *shared_seated("bob", 1), *dealt(pid="ann")
    )
    assert state.phase == "betting"
    then_rejected(state, cmd.RemoveBet(player_id="ann", box=0), "already_dealt_in")


def test_refuse_another_players_box() -> None:
    state = given(
        "atlantic-city-multi",
        *shared_seated("ann", 0),
        *shared_seated("bob", 1),
        cmd.PlaceBet(player_id="bob", box=1, amount=1000),
    )
    then_rejected(state, cmd.RemoveBet(player_id="ann", box=1), "not_your_box")
    then_rejected(state, cmd.RemoveBet(player_id="cy", box=1), "not_seated")
    assert "remove:1" not in legal_actions(state, "ann", NOW).buttons()


def test_refuse_a_box_without_a_bet_or_out_of_range() -> None:
    state = three_bets()
    _, state = when(state, cmd.RemoveBet(player_id="ann", box=2))
    then_rejected(state, cmd.RemoveBet(player_id="ann", box=2), "no_bets")
    then_rejected(state, cmd.RemoveBet(player_id="ann", box=3), "box_out_of_range")
    fresh = given("surrender", *seated())
    then_rejected(fresh, cmd.RemoveBet(player_id="ann", box=0), "no_bets")
