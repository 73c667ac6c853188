"""The shoe's randomness: the operating system's CSPRNG, never Python's ``random`` module."""

from __future__ import annotations

import secrets

from blackjack.domain.cards import fresh_shoe
from blackjack.domain.commands import ShuffleShoe
from blackjack.domain.rules import Rules

_SYSTEM_RANDOM = secrets.SystemRandom()


def csprng_shuffle(rules: Rules) -> ShuffleShoe:
    """An unbiased Fisher-Yates shuffle (``SystemRandom.shuffle``) and a fresh 128-bit salt."""
    order = list(fresh_shoe(rules.decks))
    _SYSTEM_RANDOM.shuffle(order)
    return ShuffleShoe(order=tuple(order), salt=secrets.token_hex(16))
