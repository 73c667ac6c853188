"""Cards as compact two-character codes: rank then suit, e.g. ``AS``, ``TH``, ``9C``."""

from __future__ import annotations

from functools import cache
from typing import Annotated, Final

from pydantic import StringConstraints

RANKS: Final = "A23456789TJQK"
SUITS: Final = "SHDC"

_VALUES: Final = {rank: min(index + 1, 10) for index, rank in enumerate(RANKS)}


def _check_card(code: str) -> str:
    if len(code) != 2 or code[0] not in RANKS or code[1] not in SUITS:
        raise ValueError(f"not a card code: {code!r} (rank in {RANKS}, suit in {SUITS})")
    return code


Card = Annotated[str, StringConstraints(pattern=r"^[A2-9TJQK][SHDC]$")]
"""A card code. Ten is ``T`` so that every code has two characters. (A pattern, not a Python
validator: pydantic checks it natively, which matters for 416-card shoes.)"""


def value_of(card: str) -> int:
    """Point value with an ace counted as one; the hand decides when an ace is eleven."""
    return _VALUES[card[0]]


def is_ace(card: str) -> bool:
    return card[0] == "A"


def is_ten_value(card: str) -> bool:
    return _VALUES[card[0]] == 10


def parse_card(text: str) -> str:
    """Accept ``10H`` as well as ``TH`` and lower case, as people write cards."""
    cleaned = text.strip().upper()
    if cleaned.startswith("10"):
        cleaned = "T" + cleaned[2:]
    return _check_card(cleaned)


@cache  # a tuple never changes; the reshuffle-every-round variants ask for it every round
def fresh_shoe(decks: int) -> tuple[str, ...]:
    """All cards of ``decks`` decks in a fixed, unshuffled order."""
    one_deck = tuple(rank + suit for suit in SUITS for rank in RANKS)
    return one_deck * decks
