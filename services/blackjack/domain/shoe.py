"""When a shoe must be reshuffled, and the commitment that proves its order was fixed early."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from blackjack.domain.rules import ReshuffleAtPenetration
from blackjack.domain.state import TableState


def commitment(order: Sequence[str], salt: str) -> str:
    """sha256 over the salt and the cards in order; published before the first card is dealt."""
    return hashlib.sha256(f"{salt}:{''.join(order)}".encode()).hexdigest()


def needs_shuffle(state: TableState) -> bool:
    """True between rounds when the next round must start from a freshly shuffled shoe."""
    if not state.opened or state.hands_in_play:
        return False
    shoe = state.shoe
    if shoe is None:
        return True
    policy = state.rules.reshuffle
    if isinstance(policy, ReshuffleAtPenetration):
        # Integer arithmetic: dealt / size >= used. One call for both terms: a Fraction's
        # ``numerator`` and ``denominator`` are Python properties, and this runs a few times a
        # round.
        numerator, denominator = policy.used.as_integer_ratio()
        return shoe.position * denominator >= numerator * len(shoe.order)
    return shoe.position > 0
