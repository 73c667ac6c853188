"""Scoring a hand: hard and soft totals, blackjack, bust."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, NamedTuple

from blackjack.domain.cards import _VALUES, RANKS, SUITS


class Total(NamedTuple):
    best: int
    soft: bool  # an ace is counted as eleven in ``best``


# ``total`` and ``is_natural`` run about ten times a round: the card values are looked up
# inline rather than through ``value_of``/``is_ace``/``is_ten_value`` (same arithmetic).

_CARD_VALUES: Final = {rank + suit: _VALUES[rank] for rank in RANKS for suit in SUITS}
"""Every card code's value, an ace one (the only card worth one): a lookup of the whole code
is cheaper than taking its rank, looking that up and comparing it."""


def _count(cards: Sequence[str]) -> tuple[int, bool]:
    """The hard total (every ace one) and whether the hand holds an ace."""
    hard = 0
    has_ace = False
    for card in cards:
        value = _CARD_VALUES[card]
        hard += value
        if value == 1:
            has_ace = True
    return hard, has_ace


def total(cards: Sequence[str]) -> Total:
    """Best total: one ace counts eleven when that does not bust the hand (A-A is soft 12)."""
    hard, has_ace = _count(cards)
    if has_ace and hard + 10 <= 21:
        return Total(hard + 10, True)
    return Total(hard, False)


def best_total(cards: Sequence[str]) -> int:
    """``total(cards).best`` without building a ``Total``: the decider asks for it about ten
    times a round."""
    hard, has_ace = _count(cards)
    return hard + 10 if has_ace and hard + 10 <= 21 else hard


def is_natural(cards: Sequence[str]) -> bool:
    """Ace and a ten-value card as the first two cards (the caller rules out split hands)."""
    if len(cards) != 2:
        return False
    first, second = cards[0][0], cards[1][0]
    return (first == "A" or second == "A") and (_VALUES[first] == 10 or _VALUES[second] == 10)


def is_bust(cards: Sequence[str]) -> bool:
    return total(cards).best > 21
