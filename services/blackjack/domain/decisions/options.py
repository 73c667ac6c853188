"""Which decisions the waiting hand may take (stand always; hit, double, split and surrender
from the rules, the hand and the balance), as the decider checks them and TurnStarted lists
them."""

from __future__ import annotations

from typing import Final, get_args

from blackjack.domain import events as ev
from blackjack.domain.cards import value_of
from blackjack.domain.decisions.checks import own_box, unaffordable
from blackjack.domain.decisions.draft import Refused, refuse
from blackjack.domain.hand import best_total, total
from blackjack.domain.state import Hand, Player, TableState


def turn_hand(state: TableState, player: Player, box: int, hand: int | None) -> Hand:
    """The hand a play command acts on; it must be the hand whose turn it is."""
    own_box(state, player, box)
    if state.phase != "playing" or state.active is None:
        raise refuse("not_your_turn", "no hand is waiting for a decision")
    active_box, active_hand = state.active
    if box != active_box or (hand is not None and hand != active_hand):
        raise refuse("not_your_turn", f"it is the turn of box {active_box} hand {active_hand}")
    return state.boxes[box].hands[active_hand]


# The turn checks return their refusal rather than raise it: every TurnStarted asks all four
# (``hand_actions``), and most of them say no.


def hit_refusal(state: TableState, hand: Hand) -> Refused | None:
    if hand.status != "open" or best_total(hand.cards) >= 21:
        return refuse("cannot_hit", "this hand takes no more cards")
    return None


def double_refusal(state: TableState, player: Player, hand: Hand) -> Refused | None:
    rules = state.rules
    if hand.status != "open" or len(hand.cards) != 2:
        return refuse("cannot_double", "a double needs a hand of exactly two cards")
    if hand.from_split and not rules.double_after_split:
        return refuse("cannot_double", "no double after a split at this table")
    if hand.split_aces:
        return refuse("cannot_double", "split aces take one card only")
    if rules.double_on == "totals" and not rules.doubles_on(*total(hand.cards)):
        totals = rules.double_totals
        return refuse(
            "cannot_double",
            lambda: f"double only on a total of {', '.join(str(t) for t in sorted(totals))}",
        )
    return unaffordable(player, hand.stake, "a double")


def is_pair(state: TableState, cards: tuple[str, ...]) -> bool:
    if len(cards) != 2:
        return False
    if state.rules.split_by == "rank":
        return cards[0][0] == cards[1][0]
    return value_of(cards[0]) == value_of(cards[1])


def split_refusal(state: TableState, player: Player, box: int, hand: Hand) -> Refused | None:
    rules = state.rules
    if hand.status != "open" or not is_pair(state, hand.cards):
        pairing = "rank" if rules.split_by == "rank" else "value"
        return refuse("cannot_split", f"a split needs two cards of the same {pairing}")
    if len(state.boxes[box].hands) > rules.max_splits:
        return refuse("cannot_split", f"only {rules.max_splits} split(s) per box")
    return unaffordable(player, hand.stake, "a split")


def surrender_refusal(state: TableState, box: int, hand: Hand) -> Refused | None:
    if not state.rules.late_surrender:
        return refuse("cannot_surrender", "this table has no surrender")
    if hand.status != "open" or hand.from_split or len(hand.cards) != 2:
        return refuse("cannot_surrender", "surrender only on the first two cards, before any play")
    if len(state.boxes[box].hands) != 1:
        return refuse("cannot_surrender", "no surrender after a split")
    return None


def turn_options(state: TableState) -> frozenset[str]:
    """The actions open on the hand whose turn it is, from the same checks the decider makes
    but without deciding anything, as TurnStarted lists them (``legal.legal_actions`` asks
    ``decide`` itself, and the property tests check that the two agree). It does not read the
    clock: from a timed turn's deadline on, the decider refuses every move."""
    if state.active is None or state.phase != "playing":
        return frozenset()
    return _OPTION_SETS[options_mask(state, *state.active)]


def hand_actions(state: TableState, box: int, hand: int) -> tuple[ev.TurnAction, ...]:
    """The decisions open on this hand if it were its turn now, as TurnStarted lists them."""
    return _OPTION_TUPLES[options_mask(state, box, hand)]


def options_mask(state: TableState, box_index: int, hand_index: int) -> int:
    box = state.boxes[box_index]
    assert box.player_id is not None
    player = state.players[box.player_id]
    hand = box.hands[hand_index]
    return (
        (hit_refusal(state, hand) is None)
        | (double_refusal(state, player, hand) is None) << 1
        | (split_refusal(state, player, box_index, hand) is None) << 2
        | (surrender_refusal(state, box_index, hand) is None) << 3
    )


# Every combination of the four optional actions, built once: every decision of a hand asks
# for its options, and an answer that is always the same object hashes once.
_OPTIONAL_ACTIONS: Final = ("hit", "double", "split", "surrender")  # bits 0-3 of the mask


_OPTION_SETS: Final = tuple(
    frozenset(["stand", *(name for bit, name in enumerate(_OPTIONAL_ACTIONS) if mask >> bit & 1)])
    for mask in range(16)
)


# The same sets as the tuples TurnStarted lists, in the order of ``events.TurnAction``.
_OPTION_TUPLES: Final[tuple[tuple[ev.TurnAction, ...], ...]] = tuple(
    tuple(a for a in get_args(ev.TurnAction) if a in options) for options in _OPTION_SETS
)
