"""The published 8-deck rule sets the strategy tests check against: peek, double any two and
after a split, split to 4 hands, one card to split aces, late surrender, blackjack 3:2."""

from __future__ import annotations

from fractions import Fraction

from blackjack.domain.rules import Rules

EIGHT_DECKS_S17_DAS_LS = Rules(
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
EIGHT_DECKS_H17_DAS_LS = EIGHT_DECKS_S17_DAS_LS.with_overrides(
    {"name": "8D H17 DAS LS", "dealer_hits_soft_17": True}
)
