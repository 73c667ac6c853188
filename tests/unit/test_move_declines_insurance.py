"""Page 002 (atlantic-city, atlantic-city-multi): "If you do not wish to take insurance, you may
simply click on one of the other buttons (hit, double down, stand, etc.) to proceed with the
rest of the hand." (``move_declines_insurance``).

A move on a box whose insurance is undecided is that box's DeclineInsurance followed by the
move, in one command, with the events the two commands would have had; a dealer blackjack
found by the peek makes the move moot. A move that could not follow at once is refused whole
and changes nothing. Pages 000, 001 and 003 ask Yes or No: there a move during the offer is
refused as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

import pytest
from pydantic import TypeAdapter

from blackjack.audit.replay import replay_stream
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.decisions.funds import buy_in_deposit
from blackjack.domain.evolve import fold
from blackjack.domain.legal import legal_actions
from blackjack.domain.rejections import Rejection
from blackjack.domain.rules import PRESETS, Rules, fingerprint
from blackjack.domain.state import TableState
from blackjack.messages import wire
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import to_wire
from blackjack.table import apply
from tests.integration.conftest_projections import Script
from tests.unit.stacked_table import StackedTable

Move = Callable[..., cmd.HandCommand]
EVENT: TypeAdapter[ev.TableEvent] = TypeAdapter(ev.AnyEvent)

# Each box's first card, the upcard, each box's second card, the hole card, then the draws.
T6_ACE_NINE = ["TS", "AS", "6S", "9S", "5S", "4S"]  # 16 against A/9: no dealer blackjack
T6_ACE_KING = ["TS", "AS", "6S", "KS", "5S"]  # 16 against A/K: the dealer's blackjack
EIGHTS_ACE_NINE = ["8S", "AS", "8H", "9S", "3S", "2S", "4S"]


class Alone(StackedTable):
    """A single-seat table: ann with 100.00, a 10.00 bet dealt against an ace."""

    def __init__(self, variant: str, cards: Sequence[str], **overrides: Any) -> None:
        super().__init__(variant, cards, overrides)
        self.do(cmd.SitDown(player_id="ann", seat=0), cmd.Deposit(player_id="ann", amount=10_000))
        self.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Deal(player_id="ann"))
        assert self.state.phase == "insurance"

    def refused(self, command: cmd.Command, code: str) -> Rejection:
        before = self.state
        refusal = self.send(command)
        assert isinstance(refusal, Rejection) and refusal.code == code, refusal
        assert self.state is before  # nothing changed
        return refusal


def _kinds(events: Sequence[ev.Event]) -> list[str]:
    return [type(e).__name__ for e in events]


# ---- a single seat: each move declines, then is played -------------------------------------


@pytest.mark.parametrize(
    ("move", "cards", "played"),
    [
        (cmd.Hit, T6_ACE_NINE, "PlayerHit"),
        (cmd.Stand, T6_ACE_NINE, "PlayerStood"),
        (cmd.Double, T6_ACE_NINE, "HandDoubled"),
        (cmd.Split, EIGHTS_ACE_NINE, "HandSplit"),
    ],
)
def test_at_atlantic_city_a_move_during_the_offer_declines_and_is_played(
    move: Move, cards: list[str], played: str
) -> None:
    # given ann's insurance offered on her 16 (or 8-8) against the dealer's ace, no blackjack
    by_move = Alone("atlantic-city", cards)
    answered = Alone("atlantic-city", cards)
    # when she presses the move instead of answering
    events = by_move.do(move(player_id="ann", box=0))
    # then it is her DeclineInsurance, the peek, and the move: the events of the two commands
    answered.do(cmd.DeclineInsurance(player_id="ann", box=0))
    answered.do(move(player_id="ann", box=0))
    assert by_move.events == answered.events
    assert by_move.state.to_doc() == answered.state.to_doc()
    kinds = _kinds(events)
    assert kinds[:3] == ["InsuranceDeclined", "DealerPeeked", "TurnStarted"]
    assert played in kinds
    declined = events[0]
    assert isinstance(declined, ev.InsuranceDeclined)
    assert (declined.player_id, declined.box) == ("ann", 0)


def test_a_move_the_hand_cannot_take_is_refused_and_declines_nothing() -> None:
    # atlantic-city has no surrender ("etc." covers only the buttons the table has), and 16
    # cannot split: refused as the move would be, before any decline, and whatever the hole
    # card is (the refusal never tells her whether the dealer has a blackjack)
    for cards in (T6_ACE_NINE, T6_ACE_KING):
        t = Alone("atlantic-city", cards)
        t.refused(cmd.Surrender(player_id="ann", box=0), "cannot_surrender")
        t.refused(cmd.Split(player_id="ann", box=0), "cannot_split")
        t.refused(cmd.Hit(player_id="ann", box=0, hand=1), "not_your_turn")
        assert t.state.boxes[0].insurance == "offered"


def test_a_surrender_declines_where_the_table_has_late_surrender() -> None:
    by_move = Alone("atlantic-city", T6_ACE_NINE, late_surrender=True)
    answered = Alone("atlantic-city", T6_ACE_NINE, late_surrender=True)
    by_move.do(cmd.Surrender(player_id="ann", box=0))
    answered.do(cmd.DeclineInsurance(player_id="ann", box=0), cmd.Surrender(player_id="ann", box=0))
    assert by_move.events == answered.events
    assert "HandSurrendered" in _kinds(by_move.events)


@pytest.mark.parametrize("move", [cmd.Hit, cmd.Stand, cmd.Double])
def test_a_dealer_blackjack_after_the_decline_settles_the_round_and_the_move_is_moot(
    move: Move,
) -> None:
    # given the dealer's A up and K in the hole
    by_move = Alone("atlantic-city", T6_ACE_KING)
    answered = Alone("atlantic-city", T6_ACE_KING)
    # when ann presses the move: accepted, and exactly what her DeclineInsurance would do
    events = by_move.do(move(player_id="ann", box=0))
    assert events == answered.do(cmd.DeclineInsurance(player_id="ann", box=0))
    # then the peek found the blackjack, the round is settled, the move was not played
    peeked = [e for e in events if isinstance(e, ev.DealerPeeked)]
    assert [p.has_blackjack for p in peeked] == [True]
    kinds = _kinds(events)
    assert "RoundSettled" in kinds
    assert not {"TurnStarted", "PlayerHit", "PlayerStood", "HandDoubled"} & set(kinds)
    assert not by_move.state.round_open
    assert by_move.state.players["ann"].balance == 9000  # the bet lost, no double taken


def test_the_moves_are_offered_with_the_insurance_answers() -> None:
    t = Alone("atlantic-city", T6_ACE_NINE)
    buttons = legal_actions(t.state, "ann", t.now).buttons()
    assert buttons == ["insurance:0", "no_insurance:0", "hit", "stand", "double"]


def test_a_move_declines_only_its_own_box() -> None:
    """Several boxes of one seat (a table with the option and ``boxes_per_seat``): a move
    says nothing of another box's insurance, so it is refused while that one is open."""
    t = _two_boxes()
    refusal = t.refused(cmd.Hit(player_id="ann", box=0), "not_your_turn")
    assert "box 1" in refusal.message and "DeclineInsurance" in refusal.message
    t.do(cmd.TakeInsurance(player_id="ann", box=1))
    kinds = _kinds(t.do(cmd.Hit(player_id="ann", box=0)))
    assert kinds[:3] == ["InsuranceDeclined", "DealerPeeked", "InsuranceSettled"]
    assert "PlayerHit" in kinds
    assert [b.insurance for b in t.state.boxes[:2]] == ["declined", "settled"]


def _two_boxes() -> Alone:
    t = Alone.__new__(Alone)
    StackedTable.__init__(
        t,
        "surrender",
        ["TS", "TH", "AS", "6S", "7H", "9S", "5S"],
        {"move_declines_insurance": True},
    )
    t.do(cmd.SitDown(player_id="ann", seat=0), cmd.Deposit(player_id="ann", amount=10_000))
    for box in (0, 1):
        t.do(cmd.PlaceBet(player_id="ann", box=box, amount=1000))
    t.do(cmd.Deal(player_id="ann"))
    assert [b.insurance for b in t.state.boxes[:2]] == ["offered", "offered"]
    return t


def test_a_box_that_does_not_play_first_is_refused_until_its_turn() -> None:
    t = _two_boxes()
    t.do(cmd.DeclineInsurance(player_id="ann", box=0))
    refusal = t.refused(cmd.Hit(player_id="ann", box=1), "not_your_turn")
    assert "box 0 hand 0 plays first" in refusal.message
    t.do(cmd.DeclineInsurance(player_id="ann", box=1))
    assert t.state.active == (0, 0)


# ---- the option off: the pages with Yes and No ---------------------------------------------


@pytest.mark.parametrize(
    ("variant", "overrides"),
    [("mini-h17", {}), ("surrender", {}), ("atlantic-city", {"move_declines_insurance": False})],
)
@pytest.mark.parametrize("move", [cmd.Hit, cmd.Stand, cmd.Double])
def test_without_the_option_a_move_during_the_offer_is_refused(
    variant: str, overrides: dict[str, Any], move: Move
) -> None:
    t = Alone(variant, T6_ACE_NINE, **overrides)
    t.refused(move(player_id="ann", box=0), "not_your_turn")
    assert t.state.boxes[0].insurance == "offered"
    assert legal_actions(t.state, "ann", t.now).buttons() == ["insurance:0", "no_insurance:0"]


def test_only_the_002_presets_have_the_option() -> None:
    on = {name for name, rules in PRESETS.items() if rules.move_declines_insurance}
    assert on == {"atlantic-city", "atlantic-city-multi"}


# ---- the shared table: others still deciding ------------------------------------------------

# ann (box 0) T-6 and bob (box 1) T-7 against the dealer's A / 9
SHARED = ["TS", "TH", "AS", "6S", "7H", "9S", "2S", "4S"]


class Shared(StackedTable):
    def __init__(self, cards: Sequence[str] = SHARED) -> None:
        super().__init__("atlantic-city-multi", cards)
        for seat, pid in enumerate(("ann", "bob")):
            self.do(cmd.SitDown(player_id=pid, seat=seat), buy_in_deposit(pid, 9000))
            self.do(cmd.PlaceBet(player_id=pid, box=seat, amount=1000))
        self.do(cmd.Deal(player_id="ann"), cmd.Deal(player_id="bob"))
        assert self.state.phase == "insurance"

    def refused(self, command: cmd.Command, code: str) -> Rejection:
        before = self.state
        refusal = self.send(command)
        assert isinstance(refusal, Rejection) and refusal.code == code, refusal
        assert self.state is before
        return refusal


def test_a_move_while_others_still_decide_is_refused_whole() -> None:
    t = Shared()
    refusal = t.refused(cmd.Hit(player_id="ann", box=0), "not_your_turn")
    assert "box 1" in refusal.message and "DeclineInsurance" in refusal.message
    assert "hit" not in legal_actions(t.state, "ann", t.now).buttons()
    assert t.state.boxes[0].insurance == "offered"


def test_the_last_deciders_move_ends_the_offer_and_is_played_when_their_box_plays_first() -> None:
    t = Shared()
    t.do(cmd.DeclineInsurance(player_id="bob", box=1))
    assert "hit" in legal_actions(t.state, "ann", t.now).buttons()
    kinds = _kinds(t.do(cmd.Hit(player_id="ann", box=0)))
    assert kinds[:3] == ["InsuranceDeclined", "DealerPeeked", "TurnStarted"]
    assert "PlayerHit" in kinds
    assert t.state.active == (0, 0) and t.state.phase == "playing"
    assert fold(t.events).to_doc() == t.state.to_doc()


def test_the_last_decider_whose_box_does_not_play_first_is_refused() -> None:
    t = Shared()
    t.do(cmd.DeclineInsurance(player_id="ann", box=0))
    assert legal_actions(t.state, "bob", t.now).buttons() == ["insurance:1", "no_insurance:1"]
    refusal = t.refused(cmd.Stand(player_id="bob", box=1), "not_your_turn")
    assert "box 0 hand 0 plays first" in refusal.message
    t.do(cmd.DeclineInsurance(player_id="bob", box=1))
    assert t.state.active == (0, 0)


def test_a_move_received_before_the_insurance_deadline_is_in_time_and_after_it_is_late() -> None:
    t = Shared()
    t.do(cmd.DeclineInsurance(player_id="bob", box=1))
    deadline = t.state.deadline
    assert deadline is not None
    hit = cmd.Hit(player_id="ann", box=0)
    second = timedelta(seconds=1)
    in_time = apply(t.state, hit, deadline + 30 * second, t.shuffler, deadline - second)
    assert not isinstance(in_time, Rejection)
    assert "PlayerHit" in _kinds(in_time.events)
    late = apply(t.state, hit, deadline + second, t.shuffler, deadline)
    assert isinstance(late, Rejection) and late.code == "insurance_not_offered"
    assert "ran out at" in late.message
    t.now = deadline
    t.do(cmd.ExpireTimers())  # the server declines ann's insurance, as before
    timed_out = [e for e in t.events if isinstance(e, ev.PlayerTimedOut)]
    assert [(e.player_id, e.action) for e in timed_out] == [("ann", "declined_insurance")]


# ---- replay and tables opened before the option --------------------------------------------


def test_the_events_of_a_move_that_declined_replay_to_the_same_state() -> None:
    t = Alone("atlantic-city", T6_ACE_NINE)
    t.do(cmd.Double(player_id="ann", box=0))
    assert fold(t.events).to_doc() == t.state.to_doc()
    moot = Alone("atlantic-city", T6_ACE_KING)
    moot.do(cmd.Hit(player_id="ann", box=0))
    assert fold(moot.events).to_doc() == moot.state.to_doc()


@pytest.mark.parametrize(
    ("name", "term"),
    [("atlantic-city", True), ("atlantic-city-multi", True), ("mini-h17", False), ("x", False)],
)
def test_a_document_without_the_term_reads_with_its_presets(name: str, term: bool) -> None:
    """Page 002's sentence was there from the start: an atlantic-city table an earlier
    release opened (its rules without the option) plays on with it, as an event and as a
    snapshot; the presets' documents do not name it (their fingerprints are unchanged,
    ``test_void_round`` pins them)."""
    rules = PRESETS["atlantic-city"].model_dump(mode="json")
    assert "move_declines_insurance" not in rules
    rules["name"] = name
    opened = EVENT.validate_python(
        wire.upcast({"type": "TableOpened", "version": 2, "rules": rules})
    )
    assert isinstance(opened, ev.TableOpened)
    assert opened.rules.move_declines_insurance is term
    snapshot = fold([opened]).to_doc()
    assert "move_declines_insurance" not in snapshot["rules"]
    assert TableState.from_doc(snapshot).rules.move_declines_insurance is term


def test_a_term_other_than_the_presets_is_written_and_kept() -> None:
    for variant, term in (("atlantic-city", False), ("mini-h17", True)):
        rules = PRESETS[variant].with_overrides({"move_declines_insurance": term})
        doc = rules.model_dump(mode="json")
        assert doc["move_declines_insurance"] is term
        assert Rules.model_validate(doc) == rules and rules.with_overrides({}) == rules
        assert fingerprint(rules) != fingerprint(PRESETS[variant])


def test_an_old_atlantic_city_log_replays_to_the_state_it_had() -> None:
    """A round an earlier release played (DeclineInsurance, then the move) folds to the same
    state whether its TableOpened names the option or not, and plays on with it."""
    t = Alone("atlantic-city", T6_ACE_NINE)
    t.do(cmd.DeclineInsurance(player_id="ann", box=0), cmd.Hit(player_id="ann", box=0))
    opened = t.events[0]
    assert isinstance(opened, ev.TableOpened)
    old_doc = opened.rules.model_dump(mode="json")
    assert "move_declines_insurance" not in old_doc  # as the earlier release wrote it
    old = EVENT.validate_python(
        wire.upcast({"type": "TableOpened", "version": 2, "rules": old_doc})
    )
    replayed = fold([old, *t.events[1:]])
    assert replayed.to_doc() == t.state.to_doc()
    assert replayed.rules.move_declines_insurance is True


@pytest.mark.parametrize("cards", [T6_ACE_NINE, T6_ACE_KING])
def test_the_audit_finds_nothing_in_a_round_whose_insurance_a_move_declined(
    cards: list[str],
) -> None:
    """The log holds what DeclineInsurance and the move would have written: the replay and
    the audit's checks of every move, peek and turn accept it as they are."""
    seal = ShoeSeal.from_hex(ShoeSeal.new_key_hex())
    script = Script("atlantic-city", [cards])
    script.do(
        cmd.PlaceBet(player_id="alice", box=0, amount=1000),
        cmd.Deal(player_id="alice"),
        cmd.Hit(player_id="alice", box=0),
    )
    log = [to_wire(e, seal) for e in script.envelopes if e.stream_id == script.stream_id]
    assert any(isinstance(w.data, ev.InsuranceDeclined) for w in log)
    assert [f.message for f in replay_stream(log, seal).findings] == []
