"""Scoring a hand: hard and soft totals, blackjack, bust."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from blackjack.domain.cards import is_ace, is_ten_value, value_of


class Total(NamedTuple):
    best: int
    soft: bool  # an ace is counted as eleven in ``best``


def total(cards: Sequence[str]) -> Total:
    """Best total: one ace counts eleven when that does not bust the hand (A-A is soft 12)."""
    hard = 0
    has_ace = False
    for card in cards:
        hard += value_of(card)
        has_ace = has_ace or is_ace(card)
    if has_ace and hard + 10 <= 21:
        return Total(hard + 10, True)
    return Total(hard, False)


def is_natural(cards: Sequence[str]) -> bool:
    """Ace and a ten-value card as the first two cards (the caller rules out split hands)."""
    return (
        len(cards) == 2
        and (is_ace(cards[0]) or is_ace(cards[1]))
        and (is_ten_value(cards[0]) or is_ten_value(cards[1]))
    )


def is_bust(cards: Sequence[str]) -> bool:
    return total(cards).best > 21
