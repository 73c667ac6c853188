"""The published house edges the exact calculator is checked against.

Source: the Wizard of Odds blackjack house edge calculator (8 decks, basic strategy, a fresh
shuffle every hand), as the product issue quotes it. Base game: dealer hits soft 17, double
any two cards, double after split, split to 4 hands, no resplitting aces, one card to split
aces, late surrender, peek, blackjack 3:2 -> 0.555 %; each other anchor changes one rule from
the base, except the last four, from the Wizard's Blackjack Appendix 9 (5 and 6 decks).
``blackjack anchors`` prints each against the computed figure;
``tests/unit/test_strategy_exact.py`` holds them to ``TOLERANCE``.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Final

from blackjack.domain.rules import Rules

TOLERANCE: Final = 0.02
"""Percentage points: the product issue's bound on the gap to a published figure."""

EIGHT_DECKS_S17_DAS_LS: Final = Rules(
    name="8D S17 DAS LS",
    decks=8,
    dealer_hits_soft_17=False,
    peek_on_ace=True,
    peek_on_ten=True,
    double_on="any_two",
    double_after_split=True,
    max_splits=3,
    split_by="value",
    split_aces_one_card=True,
    late_surrender=True,
    blackjack_pays=Fraction(3, 2),
)
EIGHT_DECKS_H17_DAS_LS: Final = EIGHT_DECKS_S17_DAS_LS.with_overrides(
    {"name": "8D H17 DAS LS", "dealer_hits_soft_17": True}
)


@dataclass(frozen=True)
class Anchor:
    change: str
    overrides: dict[str, object]
    house_edge_percent: float

    @property
    def rules(self) -> Rules:
        return EIGHT_DECKS_H17_DAS_LS.with_overrides({**self.overrides, "name": self.change})


_SIX_DECKS_NO_HOLE_CARD: Final[dict[str, object]] = {
    "decks": 6,
    "peek_on_ace": False,
    "peek_on_ten": False,
    "late_surrender": False,
}

WIZARD_OF_ODDS: Final = (
    Anchor("base", {}, 0.555),
    Anchor("dealer stands on soft 17", {"dealer_hits_soft_17": False}, 0.357),
    Anchor("no double after split", {"double_after_split": False}, 0.699),
    Anchor(
        "double on 10-11 only", {"double_on": "totals", "double_totals": frozenset({10, 11})}, 0.752
    ),
    Anchor("split to 2 hands", {"max_splits": 1}, 0.610),
    Anchor("no surrender", {"late_surrender": False}, 0.647),
    # The Wizard of Odds' Blackjack Appendix 9 (H17, resplit to 4 hands but not aces, no
    # surrender), computed exactly per two-card hand ("Expected return of game"): 5 decks with
    # the peek, -0.005918 and without double after split -0.007366; 6 decks with no hole card
    # (a dealer blackjack takes doubles and splits too), -0.0072705 and -0.0086975. Other
    # deck counts (surrender deals 4), and the no-peek game mini-s17 plays under a ten.
    Anchor("5D no surrender", {"decks": 5, "late_surrender": False}, 0.5918),
    Anchor(
        "5D no surrender, no DAS",
        {"decks": 5, "late_surrender": False, "double_after_split": False},
        0.7366,
    ),
    Anchor("6D no hole card", {**_SIX_DECKS_NO_HOLE_CARD}, 0.72705),
    Anchor(
        "6D no hole card, no DAS",
        {**_SIX_DECKS_NO_HOLE_CARD, "double_after_split": False},
        0.86975,
    ),
)
