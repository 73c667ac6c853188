"""A new shoe: the order the shell shuffled, checked to be whole decks, and committed to."""

from __future__ import annotations

from typing import Final

from blackjack.domain import commands as cmd
from blackjack.domain import facts
from blackjack.domain.cards import fresh_shoe
from blackjack.domain.decisions.draft import Draft, refuse
from blackjack.domain.shoe import commitment


def shuffle_shoe(r: Draft, c: cmd.ShuffleShoe) -> None:
    state = r.state
    # Committed before anyone wagers on it: a shoe changed once a round has bets (or cards)
    # would let whoever shuffles choose the cards against the bets on the table.
    if state.hands_in_play or state.round_open:
        raise refuse(
            "round_in_progress", "the shoe is changed between rounds only, before the first bet"
        )
    if not _is_permutation_of_decks(c.order, state.rules.decks):
        raise refuse("invalid_shoe", f"the order is not a permutation of {state.rules.decks} decks")
    old = state.shoe
    if old is not None:
        r.emit(
            facts.shoe_retired(
                shoe=old.number,
                commitment=old.commitment,
                cards_dealt=old.position,
                order=old.order,
                salt=old.salt,
            )
        )
    r.emit(
        facts.shoe_shuffled(
            shoe=state.shoes_used + 1,
            commitment=commitment(c.order, c.salt),
            cards=len(c.order),
            order=c.order,
            salt=c.salt,
        )
    )


_CARD_INDEX: Final = {card: index for index, card in enumerate(fresh_shoe(1))}


def _is_permutation_of_decks(order: tuple[str, ...], decks: int) -> bool:
    """Each of the 52 cards exactly ``decks`` times: counted by index into a list (linear, no
    sort), which for the reshuffle-every-round variants runs every round."""
    counts = [0] * len(_CARD_INDEX)
    index = _CARD_INDEX
    for card in order:
        position = index.get(card, -1)
        if position < 0:
            return False
        counts[position] += 1
    return all(count == decks for count in counts)
