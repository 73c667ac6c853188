"""Which of the dealer's two cards is the hole card, as given / when / then.

Page 001 (mini-s17): "The first of the dealer's cards is placed face down (the 'hole' card), the
second is placed face up (the 'upcard')", "If the dealer's second card or upcard is an ace, you
are given the option to accept Insurance before the dealer views the hole card (the dealer's
first card, dealt face down)". The other presets deal the upcard first and the hole card second
(``Rules.hole_card_first``). Whichever it is, the hole card leaves the shoe face down, with no
card in its event, until ``DealerHoleCardRevealed``; insurance and the peek look at the upcard.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TypeVar

import pytest

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.errors import CorruptLog
from blackjack.domain.evolve import fold
from blackjack.domain.legal import legal_actions
from blackjack.domain.rejections import Rejection
from blackjack.domain.rules import PRESETS, Rules, preset
from blackjack.domain.state import INITIAL_STATE, TableState
from blackjack.scenario import build_shoe
from blackjack.simulation.player import Action, play
from blackjack.table import Applied, Shuffler, apply

NOW = datetime(2026, 1, 1, tzinfo=UTC)
P = "ann"
E = TypeVar("E", bound=ev.Event)


def shoe_starting(*cards: str) -> Shuffler:
    def shuffler(rules: Rules) -> cmd.ShuffleShoe:
        order = build_shoe(rules.decks, list(cards))
        return cmd.ShuffleShoe(order=order, salt="hole-card-salt-00")

    return shuffler


class Table:
    """A one-player table played by real commands, keeping every event it produced."""

    def __init__(self, variant: str, cards: Sequence[str]) -> None:
        self.state: TableState = INITIAL_STATE
        self.events: list[ev.Event] = []
        self.shuffler = shoe_starting(*cards)
        self.do(
            cmd.OpenTable(variant=variant),
            cmd.SitDown(player_id=P, seat=0),
            cmd.Deposit(player_id=P, amount=10_000),
        )

    def do(self, *commands: cmd.Command) -> list[ev.Event]:
        produced: list[ev.Event] = []
        for command in commands:
            result = apply(self.state, command, NOW, self.shuffler)
            assert not isinstance(result, Rejection), f"{command!r}: {result}"
            self.state = result.state
            produced += result.events
        self.events += produced
        return produced

    def of(self, kind: type[E]) -> list[E]:
        return [e for e in self.events if isinstance(e, kind)]


def given_dealt(variant: str, *cards: str) -> Table:
    table = Table(variant, cards)
    table.do(cmd.PlaceBet(player_id=P, box=0, amount=1000), cmd.Deal(player_id=P))
    return table


def dealer_cards(events: Sequence[ev.Event]) -> list[tuple[bool, str | None]]:
    """(face up, card) of each card dealt to the dealer, in order."""
    return [(e.face_up, e.card) for e in events if isinstance(e, ev.CardDealt) and e.to == "dealer"]


def the_deal(events: Sequence[ev.Event]) -> list[str]:
    """Who got each card of the deal: ``box`` or ``up`` / ``down`` for the dealer."""
    return [
        "box" if e.to == "box" else ("up" if e.face_up else "down")
        for e in events
        if isinstance(e, ev.CardDealt)
    ]


# ---- the rule, per preset -----------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_only_mini_s17_deals_the_hole_card_first(name: str) -> None:
    # "The first of the dealer's cards is placed face down (the 'hole' card)" is page 001's
    assert preset(name).hole_card_first == (name == "mini-s17")


# ---- mini-s17: the first card face down, the second the upcard ----------------------------


def test_mini_s17_deals_the_dealers_first_card_face_down_and_the_second_face_up() -> None:
    # given mini-s17 and a shoe of T (player), K (dealer), 8 (player), A (dealer)
    # when the player bets and deals
    table = given_dealt("mini-s17", "TS", "KS", "8S", "AS")
    # then the player's first card, the hole card face down, the player's second, the upcard
    assert the_deal(table.events) == ["box", "down", "box", "up"]
    assert dealer_cards(table.events) == [(False, None), (True, "AS")]
    assert table.state.dealer == ("KS", "AS")
    assert (table.state.upcard, table.state.hole_card) == ("AS", "KS")
    assert table.state.boxes[0].hands[0].cards == ("TS", "8S")


def test_mini_s17_offers_insurance_on_an_ace_dealt_second_and_reveals_the_first_card() -> None:
    # given mini-s17 with the dealer's second card (the upcard) an ace and a king in the hole
    table = given_dealt("mini-s17", "TS", "KS", "8S", "AS")
    # then insurance is offered: "If the dealer's second card or upcard is an ace"
    assert [e.boxes for e in table.of(ev.InsuranceOffered)] == [(0,)]
    assert legal_actions(table.state, P, NOW).buttons() == ["insurance:0", "no_insurance:0"]
    # when the player takes it
    table.do(cmd.TakeInsurance(player_id=P, box=0))
    # then the dealer peeks, finds the blackjack, and turns the first card: the king
    assert [e.has_blackjack for e in table.of(ev.DealerPeeked)] == [True]
    assert [e.card for e in table.of(ev.DealerHoleCardRevealed)] == ["KS"]
    settled = table.of(ev.InsuranceSettled)
    assert [(e.won, e.payout) for e in settled] == [(True, 1500)]
    assert table.state.players[P].balance == 10_000  # an insured loss to a blackjack breaks even


def test_mini_s17_an_ace_dealt_first_is_the_hole_card_no_insurance_no_peek() -> None:
    # given mini-s17 with an ace as the dealer's first card and a 6 as the second
    table = given_dealt("mini-s17", "TS", "AS", "7S", "6S")
    # then the 6 is the upcard: no insurance, no peek (a 6 is neither an ace nor a ten), play
    assert (table.state.upcard, table.state.hole_card) == ("6S", "AS")
    assert table.of(ev.InsuranceOffered) == [] and table.of(ev.DealerPeeked) == []
    assert table.state.active == (0, 0)
    assert legal_actions(table.state, P, NOW).buttons() == ["hit", "stand"]
    # when the player stands, then the ace is turned: soft 17, the dealer stands (S17)
    table.do(cmd.Stand(player_id=P, box=0))
    assert [e.card for e in table.of(ev.DealerHoleCardRevealed)] == ["AS"]
    assert [(e.dealer_total, e.dealer_blackjack) for e in table.of(ev.RoundSettled)] == [
        (17, False)
    ]


def test_mini_s17_does_not_check_a_ten_upcard_and_the_hole_ace_makes_blackjack() -> None:
    # given mini-s17 with a ten as the upcard (second) and an ace in the hole (first)
    table = given_dealt("mini-s17", "9S", "AS", "7S", "TS")
    # then no insurance (the upcard is not an ace) and no peek (page 001 checks only an ace):
    # the player plays
    assert table.of(ev.InsuranceOffered) == [] and table.of(ev.DealerPeeked) == []
    assert (table.state.upcard, table.state.hole_card) == ("TS", "AS")
    assert table.state.active == (0, 0)
    # when the player stands on 16, then the ace is turned: blackjack, the bet is lost
    table.do(cmd.Stand(player_id=P, box=0))
    assert [e.card for e in table.of(ev.DealerHoleCardRevealed)] == ["AS"]
    assert [(e.outcome, e.payout) for e in table.of(ev.HandSettled)] == [("lose", 0)]
    assert [e.dealer_blackjack for e in table.of(ev.RoundSettled)] == [True]


# ---- mini-h17: unchanged, the first card is the upcard ------------------------------------


def test_mini_h17_still_deals_the_upcard_first_and_the_hole_card_second() -> None:
    # given mini-h17 and a shoe of T (player), A (dealer), 8 (player), K (dealer)
    table = given_dealt("mini-h17", "TS", "AS", "8S", "KS")
    # then the first dealer card is the face-up ace, the second the face-down king
    assert the_deal(table.events) == ["box", "up", "box", "down"]
    assert dealer_cards(table.events) == [(True, "AS"), (False, None)]
    assert (table.state.upcard, table.state.hole_card) == ("AS", "KS")
    assert [e.boxes for e in table.of(ev.InsuranceOffered)] == [(0,)]
    # when the player declines insurance, then the peek finds the blackjack and shows the king
    table.do(cmd.DeclineInsurance(player_id=P, box=0))
    assert [e.has_blackjack for e in table.of(ev.DealerPeeked)] == [True]
    assert [e.card for e in table.of(ev.DealerHoleCardRevealed)] == ["KS"]


def test_mini_h17_an_ace_dealt_second_is_the_hole_card() -> None:
    # given mini-h17 with a 6 first and an ace second: the 6 is the upcard
    table = given_dealt("mini-h17", "TS", "6S", "7S", "AS")
    assert (table.state.upcard, table.state.hole_card) == ("6S", "AS")
    assert table.of(ev.InsuranceOffered) == [] and table.of(ev.DealerPeeked) == []


# ---- the log: the hole card never shows, and only the hole card is face down -------------


@pytest.mark.parametrize(
    ("variant", "cards", "hole"),
    [("mini-s17", ("TS", "QD", "9S", "7S"), "QD"), ("mini-h17", ("TS", "7S", "9S", "QD"), "QD")],
)
def test_no_event_before_the_reveal_names_the_hole_card(
    variant: str, cards: tuple[str, ...], hole: str
) -> None:
    # given a round dealt and still in play
    table = given_dealt(variant, *cards)
    # then no public event so far carries the hole card (the shoe itself is sealed)
    public = [e for e in table.events if not isinstance(e, ev.ShoeShuffled)]
    assert all(hole not in e.model_dump_json() for e in public)
    # when the player stands, then the reveal is the first event to name it
    revealed = table.do(cmd.Stand(player_id=P, box=0))
    first = next(i for i, e in enumerate(revealed) if hole in e.model_dump_json())
    assert isinstance(revealed[first], ev.DealerHoleCardRevealed)


@pytest.mark.parametrize("variant", ["mini-s17", "mini-h17"])
@pytest.mark.parametrize("which", [0, 1])
def test_a_dealer_card_face_up_or_down_out_of_place_does_not_fold(variant: str, which: int) -> None:
    # given the log of a dealt round
    table = given_dealt(variant, "TS", "7S", "9S", "QD")
    dealer_events = [
        i for i, e in enumerate(table.events) if isinstance(e, ev.CardDealt) and e.to == "dealer"
    ]
    index = dealer_events[which]
    original = table.events[index]
    assert isinstance(original, ev.CardDealt)
    order = table.state.dealer
    # when one of the dealer's two cards is turned the other way
    flipped = original.model_copy(
        update={"face_up": not original.face_up, "card": None if original.face_up else order[which]}
    )
    forged = [*table.events[:index], flipped, *table.events[index + 1 :]]
    # then the log no longer folds
    with pytest.raises(CorruptLog, match="dealt face"):
        fold(forged)
    assert fold(table.events) == table.state


def test_a_face_down_card_that_shows_its_card_does_not_fold() -> None:
    table = given_dealt("mini-s17", "TS", "7S", "9S", "QD")
    index = next(
        i for i, e in enumerate(table.events) if isinstance(e, ev.CardDealt) and not e.face_up
    )
    leaked = table.events[index].model_copy(update={"card": "7S"})
    with pytest.raises(CorruptLog):
        fold([*table.events[:index], leaked, *table.events[index + 1 :]])


# ---- the simulator's strategy sees the upcard ---------------------------------------------


class _Recorder:
    """A strategy that stands and remembers what it was shown."""

    def __init__(self) -> None:
        self.asked: set[tuple[str, str]] = set()

    def decide(
        self,
        player_cards: Sequence[str],
        upcard: str,
        can_double: bool,
        can_split: bool,
        can_surrender: bool,
    ) -> Action:
        self.asked.add(("".join(sorted(c[0] for c in player_cards)), upcard[0]))
        return "stand"


@pytest.mark.parametrize("variant", ["mini-s17", "mini-h17"])
def test_the_simulated_player_decides_against_the_face_up_card(variant: str) -> None:
    # given the simulator's player and a log of what the table showed at each turn
    shown: set[tuple[str, str]] = set()
    upcard: list[str] = []

    def watch(applied: Applied) -> None:
        for e in applied.events:
            if isinstance(e, ev.DealStarted):
                upcard.clear()
            elif isinstance(e, ev.CardDealt) and e.to == "dealer" and e.face_up and not upcard:
                assert e.card is not None
                upcard.append(e.card)
        state = applied.state
        if state.active is not None and state.phase == "playing":
            box, hand = state.active
            cards = state.boxes[box].hands[hand].cards
            shown.add(("".join(sorted(c[0] for c in cards)), upcard[0][0]))

    # when it plays rounds of the variant
    recorder = _Recorder()
    play(preset(variant), recorder, rounds=300, bet=100, seed=7, watch=watch)
    # then every decision was asked with the card dealt face up, never the hole card
    assert recorder.asked and recorder.asked <= shown
