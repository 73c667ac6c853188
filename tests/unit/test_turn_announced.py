"""TurnStarted tells a client which decisions the table waits for and accepts: at each decision
of a hand (its first, after every hit, after a split), again when money moved during the turn
changes them; at a timed table each keeps the hand's deadline."""

from __future__ import annotations

from datetime import timedelta

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.decisions.funds import buy_in_deposit
from blackjack.messages import wire
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import to_wire
from blackjack.projections.projector import StreamProjection
from tests.integration.conftest_projections import Script
from tests.unit.stacked_table import StackedTable

SEAL = ShoeSeal.from_hex(ShoeSeal.new_key_hex())


def turns(events: list[ev.Event]) -> list[tuple[int, int, tuple[str, ...] | None]]:
    return [(e.box, e.hand, e.actions) for e in events if isinstance(e, ev.TurnStarted)]


def test_every_decision_of_a_hand_is_announced_with_its_actions() -> None:
    # ann 8 8 against a 6 (hole 7): the split gives 8 3 and 8 2, a hit gives the first a ten
    t = StackedTable("mini-h17", ["8S", "6D", "8H", "7C", "3S", "2H", "TD"])
    t.do(cmd.SitDown(player_id="ann", seat=0), cmd.Deposit(player_id="ann", amount=10_000))
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000))
    dealt = t.do(cmd.Deal(player_id="ann"))
    assert turns(dealt) == [(0, 0, ("hit", "stand", "double", "split", "surrender"))]
    # after the split hand 0 (8 3) is open again: no surrender, no second split at mini-h17
    assert turns(t.do(cmd.Split(player_id="ann", box=0))) == [(0, 0, ("hit", "stand", "double"))]
    # 8 3 T = 21 ends hand 0; hand 1 (8 2) gets its turn
    assert turns(t.do(cmd.Hit(player_id="ann", box=0))) == [(0, 1, ("hit", "stand", "double"))]


def test_a_hit_that_leaves_the_hand_open_asks_again_with_hit_and_stand() -> None:
    t = StackedTable("mini-h17", ["TS", "6S", "3S", "9S", "2S"])
    t.do(cmd.SitDown(player_id="ann", seat=0), cmd.Deposit(player_id="ann", amount=10_000))
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Deal(player_id="ann"))
    hit = t.do(cmd.Hit(player_id="ann", box=0))  # T 3 2 = 15
    assert [type(e).__name__ for e in hit] == ["PlayerHit", "CardDealt", "TurnStarted"]
    assert turns(hit) == [(0, 0, ("hit", "stand"))]


def test_money_moved_during_the_turn_announces_the_changed_actions() -> None:
    t = StackedTable("mini-h17", ["TS", "6S", "7S", "9S"])
    t.do(cmd.SitDown(player_id="ann", seat=0), cmd.Deposit(player_id="ann", amount=1000))
    dealt = t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Deal(player_id="ann"))
    assert turns(dealt) == [(0, 0, ("hit", "stand", "surrender"))]  # a double cannot be paid
    deposited = t.do(cmd.Deposit(player_id="ann", amount=1000))
    assert turns(deposited) == [(0, 0, ("hit", "stand", "double", "surrender"))]
    assert turns(t.do(cmd.Deposit(player_id="ann", amount=500))) == []  # nothing changed
    withdrawn = t.do(cmd.Withdraw(player_id="ann", amount=1000))
    assert turns(withdrawn) == [(0, 0, ("hit", "stand", "surrender"))]


def test_a_hands_decisions_at_a_timed_table_share_its_clock() -> None:
    t = StackedTable("atlantic-city-multi", ["TS", "6S", "3S", "9S", "2S"])
    seconds = t.state.rules.turn_seconds
    assert seconds is not None
    t.do(cmd.SitDown(player_id="ann", seat=0), buy_in_deposit("ann", 10_000))
    dealt = t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Deal(player_id="ann"))
    (first,) = [e for e in dealt if isinstance(e, ev.TurnStarted)]
    assert first.deadline == t.now + timedelta(seconds=seconds)
    t.now += timedelta(seconds=seconds - 1)
    hit = t.do(cmd.Hit(player_id="ann", box=0))
    (again,) = [e for e in hit if isinstance(e, ev.TurnStarted)]
    assert again.deadline == first.deadline == t.state.deadline  # 15 s per hand, not per card


def test_each_hand_of_a_split_gets_a_whole_turn() -> None:
    """The multi-seat review: split 13 s into the turn, the first hand kept the 2 s left and
    stood on 14; each of the two new hands now has the table's whole turn."""
    # ann 8 8 against a 7 (hole T): the split gives 8 6 and 8 9
    t = StackedTable("atlantic-city-multi", ["8S", "7D", "8H", "TC", "6S", "9H"])
    seconds = t.state.rules.turn_seconds
    assert seconds is not None
    t.do(cmd.SitDown(player_id="ann", seat=0), buy_in_deposit("ann", 10_000))
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Deal(player_id="ann"))
    t.now += timedelta(seconds=seconds - 2)
    split = t.do(cmd.Split(player_id="ann", box=0))
    (first,) = [e for e in split if isinstance(e, ev.TurnStarted)]
    assert (first.hand, first.deadline) == (0, t.now + timedelta(seconds=seconds))
    t.now += timedelta(seconds=seconds - 1)  # past the pair's old deadline: still in time
    stood = t.do(cmd.Stand(player_id="ann", box=0))
    (second,) = [e for e in stood if isinstance(e, ev.TurnStarted)]
    assert (second.hand, second.deadline) == (1, t.now + timedelta(seconds=seconds))


def test_a_version_1_turn_reads_as_actions_not_recorded_and_the_view_shows_them() -> None:
    old = {"type": "TurnStarted", "round": 3, "player_id": "ann", "box": 0, "hand": 1}
    upcast = wire.upcast(old)
    assert upcast["version"] == 2 and upcast["actions"] is None
    assert ev.TurnStarted.model_validate(upcast).actions is None

    script = Script("mini-h17", [["TS", "6S", "7S", "9S"]])
    script.do(cmd.PlaceBet(player_id="alice", box=0, amount=1000), cmd.Deal(player_id="alice"))
    projection = StreamProjection.new(script.stream_id)
    for envelope in script.envelopes:
        projection.apply(to_wire(envelope, SEAL))
    active = projection.view.active
    assert active is not None and active.player_id == "alice"
    assert active.actions == ["hit", "stand", "double", "surrender"]
