"""At a shared table a decision is bounded by its 15 s clock: from the deadline on, a late
bet, Deal, Pass, insurance decision or move is refused (and not shown), even though the
service's clock has not yet sent the ExpireTimers that applies the timeout; that one then
does, as if the late command had never come."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain import facts
from blackjack.domain.decisions.funds import buy_in_deposit
from blackjack.domain.evolve import fold
from blackjack.domain.legal import legal_actions
from blackjack.domain.rejections import Rejection
from blackjack.domain.rules import preset
from blackjack.table import apply
from tests.unit.stacked_table import StackedTable


class Table(StackedTable):
    """A shared table where ann and bob sit, 90.00 each."""

    def __init__(self, cards: Sequence[str]) -> None:
        super().__init__("atlantic-city-multi", cards)
        for seat, pid in enumerate(("ann", "bob")):
            self.do(cmd.SitDown(player_id=pid, seat=seat), buy_in_deposit(pid, 9000))

    def late(self, command: cmd.Command, code: str) -> None:
        before = self.state
        refused = self.send(command)
        assert isinstance(refused, Rejection) and refused.code == code, refused
        assert "ran out at" in refused.message
        # as a player reads it (a review found 2026-12-07T16:50:34.875438+00:00 on screen)
        assert self.state.deadline is not None
        assert f" ran out at {self.state.deadline:%H:%M:%S} UTC" in refused.message
        assert self.state is before

    def until_deadline(self) -> None:
        assert self.state.deadline is not None
        self.now = self.state.deadline


def test_a_bet_deal_or_pass_at_the_betting_deadline_is_refused() -> None:
    t = Table(["TS", "6S", "7S", "9S", "8H", "2C"])
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000))
    t.until_deadline()
    t.late(cmd.PlaceBet(player_id="bob", box=1, amount=1000), "not_betting_time")
    t.late(cmd.Pass(player_id="bob"), "not_betting_time")
    t.late(cmd.Deal(player_id="ann"), "not_betting_time")
    t.late(cmd.RemoveBet(player_id="ann", box=0), "not_betting_time")
    assert legal_actions(t.state, "bob", t.now).buttons() == []
    t.do(cmd.SitDown(player_id="cy", seat=3))  # not a decision on the clock: still taken
    t.do(cmd.ExpireTimers())  # ann's bet is dealt in, bob left out
    outcomes = {e.player_id: e.action for e in t.events if isinstance(e, ev.PlayerTimedOut)}
    assert outcomes == {"ann": "dealt_in", "bob": "left_out", "cy": "left_out"}
    assert t.state.phase == "playing"


def test_a_stack_under_the_minimum_at_the_deadline_goes_back_and_its_player_is_left_out() -> None:
    t = Table(["TS", "6S", "7S", "9S", "8H", "2C"])
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000))
    t.do(cmd.PlaceBet(player_id="bob", box=1, amount=60))  # a chip on the way to 1.00
    t.until_deadline()
    t.do(cmd.ExpireTimers())
    outcomes = {e.player_id: e.action for e in t.events if isinstance(e, ev.PlayerTimedOut)}
    assert outcomes == {"ann": "dealt_in", "bob": "left_out"}
    [refund] = [e for e in t.events if isinstance(e, ev.BetRefunded)]
    assert (refund.player_id, refund.box, refund.amount, refund.reason) == (
        "bob",
        1,
        60,
        "timed_out",
    )
    assert refund.balance_after == 9000 == t.state.players["bob"].balance
    started = next(e for e in t.events if isinstance(e, ev.DealStarted))
    assert started.boxes == (0,)


def test_an_insurance_decision_after_its_deadline_is_refused() -> None:
    t = Table(["TS", "AS", "7S", "9S"])  # ann T 7 against an ace
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Pass(player_id="bob"))
    t.do(cmd.Deal(player_id="ann"))
    assert t.state.phase == "insurance"
    t.until_deadline()
    t.late(cmd.TakeInsurance(player_id="ann", box=0), "insurance_not_offered")
    t.late(cmd.DeclineInsurance(player_id="ann", box=0), "insurance_not_offered")
    t.do(cmd.ExpireTimers())
    assert [e.action for e in t.events if isinstance(e, ev.PlayerTimedOut)] == [
        "declined_insurance"
    ]


def test_a_move_after_the_turns_deadline_is_refused_and_the_timeout_stands_the_hand() -> None:
    t = Table(["TS", "6S", "3S", "9S", "2S"])
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Pass(player_id="bob"))
    t.do(cmd.Deal(player_id="ann"))
    t.now += timedelta(seconds=1)
    t.do(cmd.Hit(player_id="ann", box=0))  # in time
    t.until_deadline()
    for move in (cmd.Hit, cmd.Stand):  # (a double after a hit is refused for that)
        t.late(move(player_id="ann", box=0), "not_your_turn")
    assert legal_actions(t.state, "ann", t.now).buttons() == []
    t.do(cmd.ExpireTimers())
    assert [e.action for e in t.events if isinstance(e, ev.PlayerTimedOut)] == ["stood"]
    assert not t.state.round_open


def test_a_command_refused_for_another_reason_keeps_that_reason_after_the_deadline() -> None:
    """Lateness is said only of a decision that was otherwise valid: a stranger's move or a
    bet during play keeps its own code when the clock has run out."""
    t = Table(["TS", "6S", "3S", "9S"])
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Pass(player_id="bob"))
    t.do(cmd.Deal(player_id="ann"))
    t.until_deadline()
    for command, code in (
        (cmd.Hit(player_id="zed", box=0), "not_seated"),
        (cmd.Hit(player_id="bob", box=0), "not_your_box"),
        (cmd.PlaceBet(player_id="ann", box=0, amount=1000), "not_betting_time"),
        (cmd.TakeInsurance(player_id="ann", box=0), "insurance_not_offered"),
    ):
        refused = t.send(command)
        assert isinstance(refused, Rejection) and refused.code == code, (command, refused)
        assert "ran out" not in refused.message


def test_a_decision_received_or_decided_before_the_deadline_is_in_time() -> None:
    """A click the broker took before the deadline is in time even when a backlog or a
    takeover has it decided after; one the broker stamps after the deadline but the handler
    decides before it (the two clocks differ) is in time too: the player has the benefit.
    Received and decided at or after the deadline, it is late, even before the ExpireTimers."""
    t = Table(["TS", "6S", "3S", "9S", "2S"])
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Pass(player_id="bob"))
    t.do(cmd.Deal(player_id="ann"))
    deadline = t.state.deadline
    assert deadline is not None
    second = timedelta(seconds=1)
    hit = cmd.Hit(player_id="ann", box=0)
    for decided, received in (
        (deadline + 30 * second, deadline - second),
        (deadline - second, deadline + second),
    ):
        assert not isinstance(apply(t.state, hit, decided, t.shuffler, received), Rejection)
    late = apply(t.state, hit, deadline + second, t.shuffler, deadline)
    assert isinstance(late, Rejection) and late.code == "not_your_turn"


class RefundingTable(Table):
    """The same, at a table that returns an undealt bet on a disconnection (page 003)."""

    def __init__(self, cards: Sequence[str]) -> None:
        StackedTable.__init__(
            self, "atlantic-city-multi", cards, {"refund_bets_on_disconnect": True}
        )
        for seat, pid in enumerate(("ann", "bob")):
            self.do(cmd.SitDown(player_id=pid, seat=seat), buy_in_deposit(pid, 9000))


def test_a_leave_after_the_betting_deadline_leaves_the_bets_to_it() -> None:
    """A timers review: ann's leave 20 ms after the deadline, before the clock's ExpireTimers,
    took her bet back (``BetRefunded left``) and bob was dealt alone; 600 ms after, it was
    refused and both were dealt. Which came first decided the bet, not the rule."""
    t = Table(["TS", "6S", "7S", "9S", "8H", "2C"])
    t.do(cmd.SitDown(player_id="cy", seat=2))
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000))
    t.do(cmd.PlaceBet(player_id="bob", box=1, amount=1000))
    t.until_deadline()
    t.late(cmd.LeaveTable(player_id="ann"), "round_in_progress")
    left = t.do(cmd.LeaveTable(player_id="cy"))  # no bet: nothing for the deadline to deal
    assert [type(e) for e in left] == [ev.SeatLeft]
    t.do(cmd.ExpireTimers())
    outcomes = {e.player_id: e.action for e in t.events if isinstance(e, ev.PlayerTimedOut)}
    assert outcomes == {"ann": "dealt_in", "bob": "dealt_in"}
    assert next(e for e in t.events if isinstance(e, ev.DealStarted)).boxes == (0, 1)
    assert not any(isinstance(e, ev.BetRefunded) for e in t.events)


def test_a_disconnection_after_the_betting_deadline_returns_no_bet() -> None:
    """Page 003 returns a bet whose player's connection ends "before pressing 'Deal'"; at a
    shared table the deadline deals. A disconnection that beat the clock to the handler took
    the bet back, and the recall said the clock had left the player out (a timers review)."""
    t = RefundingTable(["TS", "6S", "7S", "9S", "8H", "2C"])
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000))
    t.do(cmd.PlaceBet(player_id="bob", box=1, amount=1000))
    t.until_deadline()
    noted = t.do(cmd.Disconnect(player_id="ann"))
    assert [type(e) for e in noted] == [ev.PlayerDisconnected]
    t.do(cmd.ExpireTimers())
    outcomes = {e.player_id: e.action for e in t.events if isinstance(e, ev.PlayerTimedOut)}
    assert outcomes == {"ann": "dealt_in", "bob": "dealt_in"}
    assert not any(isinstance(e, ev.BetRefunded) for e in t.events)
    # before the deadline the page's rule stands: a bet not dealt comes back
    early = RefundingTable(["TS", "6S", "7S", "9S", "8H", "2C"])
    early.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000))
    refunded = early.do(cmd.Disconnect(player_id="ann"))
    assert [e.reason for e in refunded if isinstance(e, ev.BetRefunded)] == ["disconnected"]


def test_a_player_who_pressed_deal_cannot_leave_with_the_bet() -> None:
    """RemoveBet and Pass are refused once Deal is pressed, and a disconnection leaves such a
    bet in the round; leaving took it back (a timers review)."""
    t = Table(["TS", "6S", "7S", "9S", "8H", "2C"])
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Deal(player_id="ann"))
    t.do(cmd.PlaceBet(player_id="bob", box=1, amount=1000))
    before = t.state
    refused = t.send(cmd.LeaveTable(player_id="ann"))
    assert isinstance(refused, Rejection) and refused.code == "round_in_progress"
    assert "pressed Deal" in refused.message and t.state is before
    left = t.do(cmd.LeaveTable(player_id="bob"))  # not pressed: the bet comes back, as before
    assert [e.reason for e in left if isinstance(e, ev.BetRefunded)] == ["left"]


def test_a_leave_after_the_deadline_with_a_stack_under_the_minimum_takes_it_back() -> None:
    """The deadline returns such a stack (``BetRefunded timed_out``): the leave may have it
    (a diff review: it was refused, "your bets are dealt")."""
    t = Table(["TS", "6S", "7S", "9S", "8H", "2C"])
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000))
    t.do(cmd.PlaceBet(player_id="bob", box=1, amount=60))  # under the 1.00 minimum
    t.until_deadline()
    left = t.do(cmd.LeaveTable(player_id="bob"))
    assert [(e.amount, e.reason) for e in left if isinstance(e, ev.BetRefunded)] == [(60, "left")]


def test_at_a_shared_table_with_no_clock_a_player_who_pressed_deal_may_still_leave() -> None:
    """A table opened before OpenTable required a shared table's clock has none: refusing the
    leave would hold the player's whole balance until every other player acts (a diff
    review)."""
    rules = preset("atlantic-city-multi").with_overrides({"turn_seconds": None})
    t = Table(["TS", "6S", "7S", "9S", "8H", "2C"])
    t.state = fold([facts.table_opened(rules=rules)])
    for seat, pid in enumerate(("ann", "bob")):
        t.do(cmd.SitDown(player_id=pid, seat=seat), buy_in_deposit(pid, 9000))
    t.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Deal(player_id="ann"))
    assert t.state.deadline is None and t.state.phase == "betting"
    left = t.do(cmd.LeaveTable(player_id="ann"))
    assert [e.reason for e in left if isinstance(e, ev.BetRefunded)] == ["left"]
