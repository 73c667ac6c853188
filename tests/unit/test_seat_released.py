"""A shared table whose rules say so (``seat_released_after_rounds_sat_out``) stands up a
player who has sat out that many rounds in a row, at the end of the last of them, as
``LeaveTable`` would: ``SeatLeft`` version 2 with ``reason: sat_out`` and the count, the
money paid out to the cent, the seat free. Rounds dealt while the table is suspended are not
counted (no one could bet in them)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import TypeAdapter

from blackjack.audit.words import describe
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.decisions.funds import buy_in_deposit
from blackjack.domain.evolve import fold
from blackjack.domain.rejections import Rejection
from blackjack.domain.rules import MAX_ROUNDS_SAT_OUT, PRESETS
from blackjack.domain.state import TableState
from blackjack.messages import wire
from tests.unit.stacked_table import StackedTable

EVENT: TypeAdapter[ev.TableEvent] = TypeAdapter(ev.AnyEvent)
OPTION = "seat_released_after_rounds_sat_out"


def table(rounds: int | None = 3) -> StackedTable:
    """atlantic-city-multi, ann and ben seated with 100.00 each, bought in from their
    wallets (the buy-ins' ``Deposit``s)."""
    overrides: dict[str, object] = {} if rounds is None else {OPTION: rounds}
    t = StackedTable("atlantic-city-multi", ["TS", "7S", "9S", "8S"], overrides)
    for pid, seat in (("ann", 0), ("ben", 1)):
        t.do(cmd.SitDown(player_id=pid, seat=seat), buy_in_deposit(pid, 10_000))
    return t


def finish_round(t: StackedTable) -> list[ev.Event]:
    """Plays the dealt round to its end for whoever's turn it is (insurance declined, every
    hand stood); the events of the command that settled it."""
    last: list[ev.Event] = []
    while t.state.round_open or t.state.hands_in_play:
        state = t.state
        if state.phase == "betting":
            assert state.deadline is not None
            t.now = state.deadline
            last = t.do(cmd.ExpireTimers())
        elif state.phase == "insurance":
            index = next(i for i, b in enumerate(state.boxes) if b.insurance == "offered")
            player = state.boxes[index].player_id
            assert player is not None
            last = t.do(cmd.DeclineInsurance(player_id=player, box=index))
        else:
            assert state.active is not None
            box = state.active[0]
            player = state.boxes[box].player_id
            assert player is not None
            last = t.do(cmd.Stand(player_id=player, box=box))
    t.now += timedelta(seconds=1)
    return last


def ann_plays_a_round(t: StackedTable) -> list[ev.Event]:
    """ann bets 10.00 and deals; ben does nothing (the clock leaves him out when it is the
    first time, else the round deals without waiting for him)."""
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Deal(player_id="ann"))
    return finish_round(t)


def test_the_player_is_stood_up_at_the_end_of_the_round_that_makes_the_count() -> None:
    t = table(3)
    ann_plays_a_round(t)
    assert (t.state.players["ben"].sitting_out, t.state.players["ben"].rounds_sat_out) == (True, 1)
    ann_plays_a_round(t)
    assert t.state.players["ben"].rounds_sat_out == 2
    last = ann_plays_a_round(t)
    # The command that settled the third round stood ben up right after its RoundSettled.
    types = [type(e).__name__ for e in last]
    assert types[-2:] == ["RoundSettled", "SeatLeft"]
    left = last[-1]
    assert isinstance(left, ev.SeatLeft)
    assert (left.player_id, left.seat, left.version) == ("ben", 1, 2)
    assert (left.reason, left.rounds_sat_out, left.balance_returned) == ("sat_out", 3, 10_000)
    assert "ben" not in t.state.players
    assert t.state.player_at(1) is None
    assert "ann" in t.state.players
    assert describe(t.state, left) == (
        "ben stood up by the server after 3 rounds sat out, 100.00 paid out"
    )
    # The seat is free for someone else, and ann's rounds go on.
    t.do(cmd.SitDown(player_id="cy", seat=1))
    ann_plays_a_round(t)


def test_the_count_is_not_reached_mid_round_the_release_waits_for_the_settlement() -> None:
    t = table(2)
    ann_plays_a_round(t)
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Deal(player_id="ann"))
    assert t.state.hands_in_play
    # ben's count is 2 from this round's deal on, but the round is not over: still seated.
    assert t.state.players["ben"].rounds_sat_out == 2
    finished = finish_round(t)
    assert [e.reason for e in finished if isinstance(e, ev.SeatLeft)] == ["sat_out"]


def test_a_bet_or_a_pass_starts_the_count_again_and_a_player_who_bets_is_not_stood_up() -> None:
    t = table(3)
    ann_plays_a_round(t)
    ann_plays_a_round(t)
    assert t.state.players["ben"].rounds_sat_out == 2
    # ben is back: bets 5.00 in the third round, which deals him in and settles.
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000))
    t.do(cmd.PlaceBet(player_id="ben", box=1, amount=500))
    assert t.state.players["ben"].rounds_sat_out == 0
    t.do(cmd.Deal(player_id="ben"), cmd.Deal(player_id="ann"))
    finished = finish_round(t)
    assert not [e for e in t.events if isinstance(e, ev.SeatLeft)]
    assert "ben" in t.state.players and not t.state.players["ben"].sitting_out
    assert isinstance(finished[-1], ev.RoundSettled)
    # Left out again, he starts from one; a Pass starts the count again as a bet does.
    ann_plays_a_round(t)
    ann_plays_a_round(t)
    assert t.state.players["ben"].rounds_sat_out == 2
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000))
    t.do(cmd.Pass(player_id="ben"))
    assert t.state.players["ben"].rounds_sat_out == 0
    t.do(cmd.Deal(player_id="ann"))
    finish_round(t)
    assert "ben" in t.state.players


def test_the_money_returned_is_the_balance_to_the_cent_after_rounds_he_played() -> None:
    """ben plays and settles one round (his balance moves by its result), then sits out: what
    is paid out is his balance at the table, to the cent."""
    t = table(1)
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Deal(player_id="ann"))
    t.do(cmd.PlaceBet(player_id="ben", box=1, amount=1001), cmd.Deal(player_id="ben"))
    finish_round(t)
    [settled] = [e for e in t.events if isinstance(e, ev.HandSettled) and e.player_id == "ben"]
    balance = t.state.players["ben"].balance
    assert balance == 10_000 - 1001 + settled.payout
    finished = ann_plays_a_round(t)
    [left] = [e for e in finished if isinstance(e, ev.SeatLeft)]
    assert (left.balance_returned, left.rounds_sat_out) == (balance, 1)


def test_rounds_dealt_while_the_table_is_suspended_are_not_counted() -> None:
    t = table(2)
    ann_plays_a_round(t)
    assert t.state.players["ben"].rounds_sat_out == 1
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000))
    t.do(cmd.SuspendTable(operator="op", reason="maintenance"))
    # The round under way is dealt and settled; ben could not have bet in it.
    t.do(cmd.Deal(player_id="ann"))
    finish_round(t)
    assert t.state.players["ben"].rounds_sat_out == 1
    assert "ben" in t.state.players
    t.do(cmd.ResumeTable(operator="op"))
    finished = ann_plays_a_round(t)
    assert [e.rounds_sat_out for e in finished if isinstance(e, ev.SeatLeft)] == [2]


def test_without_the_option_nobody_is_counted_or_stood_up() -> None:
    t = table(None)
    for _ in range(5):
        ann_plays_a_round(t)
    assert t.state.players["ben"].sitting_out
    assert t.state.players["ben"].rounds_sat_out == 0
    assert not [e for e in t.events if isinstance(e, ev.SeatLeft)]
    # Its snapshot and its rules read as before the option existed.
    doc = t.state.to_doc()
    assert "rounds_sat_out" not in doc["players"]["ben"]
    assert OPTION not in doc["rules"]


def test_every_preset_leaves_the_option_off() -> None:
    assert {name: r.seat_released_after_rounds_sat_out for name, r in PRESETS.items()} == {
        name: None for name in PRESETS
    }


@pytest.mark.parametrize(
    ("variant", "rounds", "says"),
    [
        ("atlantic-city", 3, "only a table of several seats"),
        ("surrender", 3, "only a table of several seats"),
        ("atlantic-city-multi", 0, OPTION),
        ("atlantic-city-multi", MAX_ROUNDS_SAT_OUT + 1, OPTION),
        ("atlantic-city-multi", 2.5, OPTION),
    ],
)
def test_the_option_is_refused_where_it_cannot_apply_or_out_of_bounds(
    variant: str, rounds: object, says: str
) -> None:
    from blackjack.domain.decide import decide
    from tests.unit.stacked_table import START

    refused = decide(
        TableState(), cmd.OpenTable(variant=variant, overrides={OPTION: rounds}), START
    )
    assert isinstance(refused, Rejection)
    assert refused.code == "invalid_rules"
    assert says in refused.message


def test_the_count_travels_in_snapshots_and_an_older_snapshot_reads_as_zero() -> None:
    t = table(3)
    ann_plays_a_round(t)
    ann_plays_a_round(t)
    doc = t.state.to_doc()
    assert doc["players"]["ben"]["rounds_sat_out"] == 2
    assert doc["rules"][OPTION] == 3
    assert TableState.from_doc(doc) == t.state
    assert TableState.from_doc(doc).players["ben"].rounds_sat_out == 2
    del doc["players"]["ben"]["rounds_sat_out"]  # as an older handler wrote it
    assert TableState.from_doc(doc).players["ben"].rounds_sat_out == 0
    # The table restored from its snapshot stands ben up on the same round.
    restored = table(3)
    restored.state = TableState.from_doc(t.state.to_doc())
    restored.now = t.now
    finished = ann_plays_a_round(restored)
    assert [e.player_id for e in finished if isinstance(e, ev.SeatLeft)] == ["ben"]


def test_the_log_folds_to_the_same_state_and_a_version_1_seat_left_reads_as_left() -> None:
    t = table(1)
    ann_plays_a_round(t)
    assert fold(t.events) == t.state
    through_the_wire = [
        EVENT.validate_python(wire.upcast(e.model_dump(mode="json"))) for e in t.events
    ]
    assert through_the_wire == t.events
    old = {"type": "SeatLeft", "version": 1, "player_id": "ben", "seat": 1, "balance_returned": 5}
    read = EVENT.validate_python(wire.upcast(old))
    assert isinstance(read, ev.SeatLeft)
    assert (read.version, read.reason, read.rounds_sat_out) == (2, "left", None)


def test_players_due_together_are_stood_up_together_in_seat_order() -> None:
    t = StackedTable("atlantic-city-multi", ["TS", "7S", "9S", "8S"], {OPTION: 1})
    for pid, seat, balance in (("ann", 0, 10_000), ("ben", 3, 2_550), ("cy", 1, 0)):
        t.do(cmd.SitDown(player_id=pid, seat=seat))
        if balance:
            t.do(buy_in_deposit(pid, balance))
    t.do(cmd.Disconnect(player_id="ben"))  # a disconnected player sits out like any other
    finished = ann_plays_a_round(t)
    left = [
        (e.player_id, e.seat, e.balance_returned) for e in finished if isinstance(e, ev.SeatLeft)
    ]
    assert left == [("cy", 1, 0), ("ben", 3, 2_550)]
    assert sorted(t.state.players) == ["ann"]


def test_a_player_who_sits_down_after_the_clock_started_is_left_out_but_not_sitting_out() -> None:
    """Page 002 gives each player 15 s to bet or pass, and "if you join a table in the middle
    of a hand, you must wait until the round is over". cy sits down a second before the
    betting deadline: left out of that hand, but not sitting out, so the round dealt without
    him is no round sat out: with the seat freed after one round sat out, he keeps his seat
    (until this fix he was stood up when that round was settled, never having had the 15 s).
    The state says so in its snapshot, and a log folds to the same state."""
    t = table(1)
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000))
    assert t.state.deadline is not None
    t.now = t.state.deadline - timedelta(seconds=1)
    t.do(cmd.SitDown(player_id="cy", seat=2), buy_in_deposit("cy", 5_000))
    assert TableState.from_doc(t.state.to_doc()) == t.state
    # ben bets and presses nothing: the round waits for him to the deadline
    t.do(cmd.Deal(player_id="ann"), cmd.PlaceBet(player_id="ben", box=1, amount=1000))
    t.now = t.state.deadline
    expired = t.do(cmd.ExpireTimers())
    timed_out = [
        (e.player_id, e.action, e.sits_out) for e in expired if isinstance(e, ev.PlayerTimedOut)
    ]
    assert timed_out == [("ben", "dealt_in", False), ("cy", "left_out", False)]
    last = finish_round(t)
    assert not [e for e in last if isinstance(e, ev.SeatLeft)]
    cy = t.state.players["cy"]
    assert (cy.sitting_out, cy.rounds_sat_out, cy.balance) == (False, 0, 5_000)
    assert fold(t.events) == t.state
    # the next round is his like anyone's: the clock's 15 s, then left out and sitting out
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Deal(player_id="ann"))
    assert t.state.deadline is not None
    t.now = t.state.deadline
    expired = t.do(cmd.ExpireTimers())
    assert [(e.player_id, e.sits_out) for e in expired if isinstance(e, ev.PlayerTimedOut)][-1] == (
        "cy",
        True,
    )


def test_a_player_who_sits_down_after_the_clock_started_does_not_hold_the_deal_up() -> None:
    """ "If you join a table in the middle of a hand, you must wait until the round is over"
    (page 002): the others do not wait for the one who sat down once the round was open. ann
    deals and ben passes: the round is dealt at once, not at the deadline, and cy, who had no
    part in it, is neither timed out nor sitting out. A bet of his, while betting is open, is
    waited for like anyone's."""
    t = table(1)
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000))
    t.do(cmd.SitDown(player_id="cy", seat=2), buy_in_deposit("cy", 5_000))
    dealt = t.do(cmd.Deal(player_id="ann"), cmd.Pass(player_id="ben"))
    started = [e for e in dealt if isinstance(e, ev.DealStarted)]
    assert [e.boxes for e in started] == [(0,)]
    assert not [e for e in dealt if isinstance(e, ev.PlayerTimedOut)]
    finish_round(t)
    assert t.state.players["cy"].sitting_out is False
    # next round: he sits down again after the clock started, and bets: the deal waits for him
    t.do(cmd.LeaveTable(player_id="cy"), cmd.PlaceBet(player_id="ann", box=0, amount=1000))
    # (his second buy-in here)
    t.do(cmd.SitDown(player_id="cy", seat=2), buy_in_deposit("cy", 5_000, 2))
    t.do(cmd.PlaceBet(player_id="cy", box=2, amount=1000), cmd.Pass(player_id="ben"))
    assert not [e for e in t.do(cmd.Deal(player_id="ann")) if isinstance(e, ev.DealStarted)]
    dealt = t.do(cmd.Deal(player_id="cy"))
    assert [e.boxes for e in dealt if isinstance(e, ev.DealStarted)] == [(0, 2)]


@pytest.mark.parametrize("take_back", ["ClearBets", "RemoveBet"])
def test_a_late_joiner_who_takes_the_bet_back_holds_the_deal_up_no_longer(take_back: str) -> None:
    """cy sits down once the round is open and bets: the deal waits for him. He takes the bet
    back (all of it) after ann dealt and ben passed: he is again one who joined in the middle
    of the hand with no bet on it, not waited for, so the round is dealt there and then, by
    his command, not 15 s later at the deadline (before: nothing was dealt until then)."""
    t = table(1)
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000))
    t.do(cmd.SitDown(player_id="cy", seat=2), buy_in_deposit("cy", 5_000))
    t.do(cmd.PlaceBet(player_id="cy", box=2, amount=1000))
    waiting = t.do(cmd.Deal(player_id="ann"), cmd.Pass(player_id="ben"))
    assert not [e for e in waiting if isinstance(e, ev.DealStarted)]
    back: cmd.Command = (
        cmd.ClearBets(player_id="cy")
        if take_back == "ClearBets"
        else cmd.RemoveBet(player_id="cy", box=2)
    )
    dealt = t.do(back)
    assert [e.boxes for e in dealt if isinstance(e, ev.DealStarted)] == [(0,)]
    assert t.state.players["cy"].balance == 5_000 and not t.state.players["cy"].sitting_out
