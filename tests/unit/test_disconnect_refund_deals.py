"""A shared table whose rules return a bet on a disconnection before Deal
(``refund_bets_on_disconnect``, page 003's policy, here on atlantic-city-multi's five seats):
the player whose bet went back is out of the round, so once every other seated player has
pressed Deal or Pass the round is dealt by the ``Disconnect`` itself, not 15 s later at the
betting deadline. Given / when / then on the decider."""

from __future__ import annotations

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.state import TableState
from tests.unit.test_rejections import given, given_more, shared_seated
from tests.unit.test_remove_bet import when

REFUNDING = {"refund_bets_on_disconnect": True}


def three_players(**overrides: object) -> TableState:
    """ann, bob and cy at atlantic-city-multi, each with a bet of 10.00 on their box."""
    return given(
        "atlantic-city-multi",
        *shared_seated("ann", 0),
        *shared_seated("bob", 1),
        *shared_seated("cy", 2),
        cmd.PlaceBet(player_id="ann", box=0, amount=1000),
        cmd.PlaceBet(player_id="bob", box=1, amount=1000),
        cmd.PlaceBet(player_id="cy", box=2, amount=1000),
        overrides={**REFUNDING, **overrides},
    )


def test_the_others_all_decided_a_disconnection_that_returns_the_bet_deals_at_once() -> None:
    # given: ann dealt, bob passed, cy's bet waits for his Deal
    state = given_more(three_players(), cmd.Deal(player_id="ann"), cmd.Pass(player_id="bob"))
    assert state.round_open and state.phase == "betting"
    # when: cy's connection drops before he pressed Deal
    events, after = when(state, cmd.Disconnect(player_id="cy"))
    # then: his bet comes back and ann's box is dealt there and then
    refunded = [(e.player_id, e.amount, e.reason) for e in events if isinstance(e, ev.BetRefunded)]
    assert refunded == [("cy", 1000, "disconnected")]
    assert [e.boxes for e in events if isinstance(e, ev.DealStarted)] == [(0,)]
    assert after.phase != "betting" and after.players["cy"].balance == 10_000
    assert not [e for e in events if isinstance(e, ev.PlayerTimedOut)]


def test_no_one_else_has_a_bet_the_round_ends_without_a_deal() -> None:
    # given: ann and bob passed
    state = given_more(three_players(), cmd.Pass(player_id="ann"), cmd.Pass(player_id="bob"))
    # when: cy, the only one with a bet, is disconnected
    events, after = when(state, cmd.Disconnect(player_id="cy"))
    # then: the round ends there, cancelled, every bet back
    assert isinstance(events[-1], ev.RoundCancelled) and not after.round_open
    assert {p.player_id: p.balance for p in after.players.values()} == {
        "ann": 10_000,
        "bob": 10_000,
        "cy": 10_000,
    }


def test_another_still_to_decide_is_still_waited_for() -> None:
    # given: ann dealt, bob has not decided
    state = given_more(three_players(), cmd.Deal(player_id="ann"))
    # when: cy is disconnected
    events, after = when(state, cmd.Disconnect(player_id="cy"))
    # then: his bet comes back, and the round still waits for bob
    assert [type(e) for e in events] == [ev.PlayerDisconnected, ev.BetRefunded]
    assert after.round_open and after.phase == "betting"
    # and bob's Deal deals ann and bob, without cy (disconnected, no bet)
    dealt, _ = when(after, cmd.Deal(player_id="bob"))
    assert [e.boxes for e in dealt if isinstance(e, ev.DealStarted)] == [(0, 1)]


def test_a_disconnected_player_who_comes_back_and_bets_is_waited_for_again() -> None:
    # given: cy was disconnected (his bet returned) and came back, and bets again
    state = given_more(
        three_players(),
        cmd.Disconnect(player_id="cy"),
        cmd.Reconnect(player_id="cy"),
        cmd.PlaceBet(player_id="cy", box=2, amount=500),
        cmd.Pass(player_id="bob"),
    )
    # when: ann deals
    events, after = when(state, cmd.Deal(player_id="ann"))
    # then: the round waits for cy's decision like anyone's
    assert not [e for e in events if isinstance(e, ev.DealStarted)]
    assert after.phase == "betting"


def test_without_the_rule_a_disconnected_player_s_bet_stays_and_is_waited_for() -> None:
    # given: the table's own rules (page 002: no disconnection policy), ann dealt, bob passed
    state = given_more(
        three_players(refund_bets_on_disconnect=False),
        cmd.Deal(player_id="ann"),
        cmd.Pass(player_id="bob"),
    )
    # when: cy is disconnected
    events, after = when(state, cmd.Disconnect(player_id="cy"))
    # then: nothing goes back, and the clock deals his bet in at the deadline
    assert [type(e) for e in events] == [ev.PlayerDisconnected]
    assert after.boxes[2].bet == 1000 and after.phase == "betting"


def test_a_player_who_pressed_deal_keeps_the_bet_when_disconnected() -> None:
    """Page 003 returns the bet only "after placing a bet but before pressing 'Deal'": at a
    shared table a player who pressed Deal and waits for the others has a bet in play."""
    # given: ann pressed Deal, cy passed, bob has not decided
    state = given_more(three_players(), cmd.Deal(player_id="ann"), cmd.Pass(player_id="cy"))
    # when: ann's connection drops while the table waits for bob
    events, after = when(state, cmd.Disconnect(player_id="ann"))
    # then: her bet stays on her box, and bob's Deal deals both boxes
    assert [type(e) for e in events] == [ev.PlayerDisconnected]
    assert after.players["ann"].balance == 9_000 and after.players["ann"].ready
    dealt, _ = when(after, cmd.Deal(player_id="bob"))
    assert [e.boxes for e in dealt if isinstance(e, ev.DealStarted)] == [(0, 1)]
