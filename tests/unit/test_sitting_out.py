"""A player the betting clock left out sits out (``PlayerTimedOut`` version 2, ``sits_out``);
a log written before sitting out existed folds as its handler had it then."""

from __future__ import annotations

from datetime import timedelta

from pydantic import TypeAdapter

from blackjack.audit.words import describe
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.decisions.funds import buy_in_deposit
from blackjack.domain.evolve import fold
from blackjack.domain.state import TableState
from blackjack.messages import wire
from tests.unit.stacked_table import StackedTable

EVENT: TypeAdapter[ev.TableEvent] = TypeAdapter(ev.AnyEvent)


def ben_left_out() -> StackedTable:
    """atlantic-city-multi: ann bets and deals, ben does nothing until the clock runs out."""
    t = StackedTable("atlantic-city-multi", ["TS", "7S", "9S", "8S"])
    for pid, seat in (("ann", 0), ("ben", 1)):
        t.do(cmd.SitDown(player_id=pid, seat=seat), buy_in_deposit(pid, 10_000))
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Deal(player_id="ann"))
    assert t.state.deadline is not None
    t.now = t.state.deadline
    t.do(cmd.ExpireTimers())
    return t


def test_a_player_left_out_sits_out_and_is_back_with_a_bet() -> None:
    t = ben_left_out()
    [timed_out] = [e for e in t.events if isinstance(e, ev.PlayerTimedOut)]
    assert (timed_out.action, timed_out.sits_out, timed_out.version) == ("left_out", True, 2)
    assert t.state.players["ben"].sitting_out
    recalled = describe(t.state, timed_out)
    assert recalled.endswith("the server left out; sits out until they bet or pass")
    t.do(cmd.Stand(player_id="ann", box=0))
    t.now += timedelta(seconds=1)
    t.do(cmd.PlaceBet(player_id="ben", box=1, amount=1000))
    assert not t.state.players["ben"].sitting_out


def test_a_log_written_before_sitting_out_folds_as_its_snapshot_was_taken() -> None:
    """The diff review: a left_out written by the previous version set the new flag when the
    log was folded from the start, but not in a snapshot that version took, so a handler
    rebuilt from the start and one restored from the snapshot decided ann's next Deal apart."""
    t = ben_left_out()
    old_log = []
    for event in t.events:
        data = event.model_dump(mode="json")
        if isinstance(event, ev.PlayerTimedOut):  # as the previous version wrote it
            del data["sits_out"]
            data["version"] = 1
        old_log.append(EVENT.validate_python(wire.upcast(data)))
    folded = fold(old_log)
    assert not folded.players["ben"].sitting_out
    snapshot = folded.to_doc()
    for player in snapshot["players"].values():
        del player["sitting_out"]  # a snapshot of that version had no such field
    assert TableState.from_doc(snapshot) == folded


def test_no_one_sits_out_of_a_round_the_deadline_cancels() -> None:
    """The multi-seat review: ann bet and took it back, the clock ran out with no bet on the
    table and the round was cancelled, and both sat out: the next round ann dealt at once,
    without waiting for ben, who never had the 15 s ("excluded from that particular hand":
    there was none)."""
    t = StackedTable("atlantic-city-multi", ["TS", "7S", "9S", "8S"])
    for pid, seat in (("ann", 0), ("ben", 1)):
        t.do(cmd.SitDown(player_id=pid, seat=seat), buy_in_deposit(pid, 10_000))
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.RemoveBet(player_id="ann", box=0))
    assert t.state.deadline is not None
    t.now = t.state.deadline
    t.do(cmd.ExpireTimers())
    timed_out = [e for e in t.events if isinstance(e, ev.PlayerTimedOut)]
    assert {(e.player_id, e.action, e.sits_out) for e in timed_out} == {
        ("ann", "left_out", False),
        ("ben", "left_out", False),
    }
    assert any(isinstance(e, ev.RoundCancelled) for e in t.events)
    assert not any(p.sitting_out for p in t.state.players.values())
    # the next round waits for ben: ann's Deal alone does not deal it
    t.now += timedelta(seconds=1)
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Deal(player_id="ann"))
    assert t.state.phase == "betting"
