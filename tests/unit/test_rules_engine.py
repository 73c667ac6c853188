"""The rules as data: each preset against its seed page, the money arithmetic of every rounding
rule, hand totals, and exactly when a shoe is due for a new shuffle."""

from __future__ import annotations

from fractions import Fraction

import pytest
from pydantic import ValidationError

from blackjack.domain.cards import fresh_shoe
from blackjack.domain.hand import is_bust, is_natural, total
from blackjack.domain.payouts import (
    blackjack_winnings,
    insurance_return,
    insurance_stake,
    surrender_refund,
)
from blackjack.domain.rules import PRESETS, ReshuffleAtPenetration, ReshuffleEveryRound, preset
from blackjack.domain.shoe import commitment, needs_shuffle
from blackjack.domain.state import Shoe, TableState

# ---- the presets against their seed pages -------------------------------------------------


def test_mini_h17_is_seed_000() -> None:
    rules = preset("mini-h17")
    assert rules.decks == 8  # "Eight decks are used"
    assert rules.reshuffle == ReshuffleAtPenetration(used=Fraction(1, 5))  # "after 20%"
    assert rules.dealer_hits_soft_17  # "draws a card on soft 17"
    assert rules.max_splits == 1  # "One split is allowed."
    assert rules.double_on == "any_two" and rules.double_after_split
    assert rules.late_surrender and rules.peek_on_ace and rules.peek_on_ten
    assert (rules.min_bet, rules.max_bet) == (100, 50_000)  # "$1 USD" .. "$500 USD"
    assert rules.rebet_multipliers == {1, 2} and rules.rebet_deals  # SAME BET / DOUBLE BET
    assert rules.break_even_message
    assert rules.split_by == "value"  # "a King and a Jack"
    assert (rules.seats, rules.boxes_per_seat) == (1, 1)
    assert not rules.hole_card_first  # the upcard is the dealer's first card


def test_mini_s17_is_seed_001() -> None:
    rules = preset("mini-s17")
    assert not rules.dealer_hits_soft_17  # "The dealer must stand a soft 17"
    assert rules.double_on == "totals" and rules.double_totals == {9, 10, 11}
    assert rules.double_after_split
    assert rules.max_splits == 1 and rules.split_by == "value"
    assert not rules.late_surrender  # "does not allow a player to surrender"
    assert rules.rebet_multipliers == {1, 2} and rules.rebet_deals  # REBET / REBET X 2
    assert not rules.break_even_message
    # "The first of the dealer's cards is placed face down (the 'hole' card), the second is
    # placed face up (the 'upcard')"
    assert rules.hole_card_first
    # "before the dealer views the hole card" (an ace, after insurance); never a ten: "If the
    # dealer has a Blackjack and the player has a total of 21 with more than two cards"
    assert rules.peek_on_ace and not rules.peek_on_ten


def test_atlantic_city_is_seed_002_first_part() -> None:
    rules = preset("atlantic-city")
    assert rules.decks == 8 and rules.reshuffle == ReshuffleEveryRound()
    assert not rules.dealer_hits_soft_17 and rules.double_after_split
    assert rules.max_splits == 1 and rules.split_by == "rank"  # "same denomination"
    assert rules.split_aces_one_card and not rules.late_surrender
    assert rules.blackjack_win_rounded_down_to == 100  # "the cents part will not be paid out"
    assert rules.seats == 1


def test_atlantic_city_multi_is_seed_002_second_part() -> None:
    rules = preset("atlantic-city-multi")
    single = preset("atlantic-city")
    assert rules.seats == 5  # "each table can accommodate five players"
    assert rules.turn_seconds == 15  # "within 15 seconds"
    assert rules.reshuffle == ReshuffleAtPenetration(used=Fraction(1, 3))
    same = {"name", "seats", "turn_seconds", "reshuffle"}
    assert rules.model_dump(exclude=same) == single.model_dump(exclude=same)


def test_surrender_is_seed_003() -> None:
    rules = preset("surrender")
    assert rules.decks == 4 and rules.reshuffle == ReshuffleEveryRound()
    assert rules.boxes_per_seat == 3  # "up to three hands"
    assert not rules.dealer_hits_soft_17  # "The Dealer stands on 17."
    assert rules.peek_on_ace and rules.peek_on_ten and rules.insurance
    assert rules.late_surrender and rules.max_splits == 1 and rules.split_by == "value"
    assert rules.rebet_multipliers == {1} and not rules.rebet_deals  # Repeat places only
    assert rules.refund_bets_on_disconnect


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_common_rules(name: str) -> None:
    rules = preset(name)
    assert rules.split_aces_one_card
    assert rules.insurance and rules.insurance_pays == 2
    assert rules.blackjack_pays == Fraction(3, 2)
    # a round can never run the shoe dry
    assert rules.cards_left_at_reshuffle >= rules.max_cards_in_round


def test_unknown_preset_and_bad_overrides() -> None:
    with pytest.raises(KeyError, match="known"):
        preset("spanish-21")
    with pytest.raises(ValidationError):
        preset("mini-h17").with_overrides({"min_bet": 60_000})
    with pytest.raises(ValidationError):  # 2 decks cut at 20% leave too few cards for a round
        preset("atlantic-city-multi").with_overrides({"decks": 2})
    assert preset("mini-s17").with_overrides({"double_totals": [10, 11]}).double_totals == {10, 11}


# ---- money --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "stake", "winnings"),
    [
        ("mini-h17", 1000, 1500),
        ("mini-h17", 101, 151),  # 151.5: the half cent is not paid
        ("mini-h17", 1, 1),
        ("surrender", 1000, 1500),  # "a $10 bet pays out $15"
        ("atlantic-city", 500, 700),  # "$5 ... plus $7"
        ("atlantic-city", 5000, 7500),  # "$50 ... plus $75"
        ("atlantic-city", 550, 800),  # 8.25: the cents of the winnings are cut
        ("atlantic-city-multi", 700, 1000),  # 10.50
    ],
)
def test_blackjack_winnings(name: str, stake: int, winnings: int) -> None:
    assert blackjack_winnings(preset(name), stake) == winnings


def test_insurance_and_surrender_rounding() -> None:
    rules = preset("mini-h17")
    assert insurance_stake(1000) == 500
    assert insurance_stake(101) == 50  # the odd cent is not charged
    assert insurance_stake(1) == 0
    assert insurance_return(rules, 500) == 1500  # stake back plus 2:1
    assert surrender_refund(1000) == 500
    assert surrender_refund(101) == 50  # the odd cent stays with the house


# ---- hands --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cards", "best", "soft"),
    [
        (("AS", "6S"), 17, True),  # "Ace-6 is soft 17"
        (("AS", "6S", "TS"), 17, False),  # "Ace-6-10 is hard 17"
        (("AS", "AH"), 12, True),  # "a total hand of either 12 or 2"
        (("AS", "7S", "8S"), 16, False),  # "(Ace, 7, 8). Its total value is 16."
        (("5S", "7S", "9S"), 21, False),
        (("JS", "3S", "4S"), 17, False),
        (("AS", "AH", "AD", "AC", "TS"), 14, False),
        (("TS", "QS", "2S"), 22, False),
    ],
)
def test_totals(cards: tuple[str, ...], best: int, soft: bool) -> None:
    assert total(cards) == (best, soft)
    assert is_bust(cards) == (best > 21)


def test_naturals() -> None:
    assert is_natural(("AS", "KS")) and is_natural(("TH", "AD"))
    assert not is_natural(("AS", "AH"))
    assert not is_natural(("5S", "6S", "TS"))
    assert not is_natural(("AS", "5S", "5H"))


# ---- the shoe -----------------------------------------------------------------------------


def _between_rounds(name: str, dealt: int) -> TableState:
    rules = preset(name)
    order = fresh_shoe(rules.decks)
    shoe = Shoe(
        number=1, order=order, salt="s" * 16, commitment=commitment(order, "s" * 16), position=dealt
    )
    return TableState(opened=True, rules=rules, shoe=shoe)


@pytest.mark.parametrize(
    ("name", "last_without", "first_with"),
    [
        ("mini-h17", 83, 84),  # 20% of 416 = 83.2
        ("atlantic-city-multi", 138, 139),  # a third of 416 = 138.67
        ("atlantic-city", 0, 1),  # after every hand
        ("surrender", 0, 1),
        ("mini-s17", 0, 1),
    ],
)
def test_a_new_shuffle_is_due_exactly_at_the_cut(
    name: str, last_without: int, first_with: int
) -> None:
    assert not needs_shuffle(_between_rounds(name, last_without))
    assert needs_shuffle(_between_rounds(name, first_with))


def test_a_table_without_a_shoe_needs_one_and_a_closed_table_none() -> None:
    assert needs_shuffle(TableState(opened=True, rules=preset("mini-h17")))
    assert not needs_shuffle(TableState())


def test_the_commitment_binds_the_order_and_the_salt() -> None:
    order = fresh_shoe(1)
    swapped = (order[1], order[0], *order[2:])
    assert commitment(order, "a" * 16) != commitment(swapped, "a" * 16)
    assert commitment(order, "a" * 16) != commitment(order, "b" * 16)
    assert len(commitment(order, "a" * 16)) == 64
