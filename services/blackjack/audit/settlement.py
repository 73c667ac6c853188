"""The auditor's own derivation of what a settled hand pays, how the dealer must play and
which moves the rules allow.

Written apart from the decider on purpose: an audit that called the code it audits could not
catch that code's mistakes. It shares only the rule data (``Rules``), the card values and hand
totals, and the rounding functions of ``domain.payouts`` (each of them tested against the seed
pages).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import get_args

from blackjack.domain.cards import value_of
from blackjack.domain.events import Outcome, TurnAction
from blackjack.domain.hand import is_natural, total
from blackjack.domain.payouts import (
    blackjack_winnings,
    insurance_return,
    insurance_stake,
    surrender_refund,
)
from blackjack.domain.rules import Rules
from blackjack.domain.state import Hand, TableState


def hand_result(rules: Rules, hand: Hand, dealer: Sequence[str]) -> tuple[Outcome, int]:
    """(outcome, everything paid back for the hand, stake included)."""
    if hand.status == "surrendered":
        return "surrender", surrender_refund(hand.stake)
    mine = total(hand.cards).best
    if mine > 21:
        return "bust", 0
    dealer_natural = is_natural(dealer)
    natural = len(hand.cards) == 2 and not hand.from_split and is_natural(hand.cards)
    if natural:
        if dealer_natural:
            return "push", hand.stake
        return "blackjack", hand.stake + blackjack_winnings(rules, hand.stake)
    if dealer_natural:
        return "lose", 0
    theirs = total(dealer).best
    if theirs > 21 or mine > theirs:
        return "win", 2 * hand.stake
    if mine == theirs:
        return "push", hand.stake
    return "lose", 0


def peek_required(state: TableState) -> bool:
    """Whether the rules make the dealer look under this upcard before the hands are played."""
    upcard = state.upcard
    if upcard is None:
        return False
    insured = any(box.insurance_stake > 0 for box in state.boxes)
    return state.rules.peeks_under(upcard, insured)


def dealer_blackjack_ruled_out(state: TableState) -> bool:
    """Whether the players can know the dealer has no blackjack: an upcard that cannot make
    one, or one the table's rules make the dealer peek under."""
    upcard = state.upcard
    if upcard is None:
        return False
    return upcard[0] not in "ATJQK" or peek_required(state)


def insurance_due(state: TableState) -> tuple[int, ...]:
    """The boxes the rules offer insurance to once the cards are dealt: under an ace, where the
    table has insurance, each box dealt whose hand is not a blackjack (page 000: "Insurance is
    not offered to you if you get a blackjack"; page 001: "No Insurance will be offered if you
    have Blackjack") and whose player's balance covers half its bet (page 000: "If your hand
    qualifies for insurance, but your game balance is not sufficient for the additional bet,
    the insurance option will not be offered")."""
    upcard = state.upcard
    if upcard is None or upcard[0] != "A" or not state.rules.insurance:
        return ()
    due = []
    for index, box in enumerate(state.boxes):
        if not box.hands or box.player_id is None or box.player_id not in state.players:
            continue
        first = box.hands[0]
        natural = len(first.cards) == 2 and not first.from_split and is_natural(first.cards)
        stake = insurance_stake(box.bet)
        if not natural and 0 < stake <= state.players[box.player_id].balance:
            due.append(index)
    return tuple(due)


def insurance_result(rules: Rules, stake: int, dealer: Sequence[str]) -> tuple[bool, int]:
    """(won, everything paid back): insurance wins on a dealer blackjack and pays 2:1."""
    won = is_natural(dealer)
    return won, insurance_return(rules, stake) if won else 0


def dealer_must_draw(rules: Rules, cards: Sequence[str]) -> bool:
    best, soft = total(cards)
    return best < 17 or (best == 17 and soft and rules.dealer_hits_soft_17)


def dealer_play_problem(rules: Rules, dealer: Sequence[str], any_live_hand: bool) -> str | None:
    """Why the dealer's cards break the drawing rule, or None when they follow it."""
    drawn = len(dealer) - 2
    if is_natural(dealer) or not any_live_hand:
        return None if drawn == 0 else f"the dealer drew {drawn} card(s) with nothing to play for"
    for count in range(2, len(dealer)):
        if not dealer_must_draw(rules, dealer[:count]):
            return f"the dealer drew on {total(dealer[:count]).best}, where the rule is to stand"
    if dealer_must_draw(rules, dealer):
        return f"the dealer stood on {total(dealer).best}, where the rule is to draw"
    return None


Move = TurnAction


def move_problem(state: TableState, player_id: str, box: int, hand: int, move: Move) -> str | None:
    """Why the rules did not allow this player this move on this hand now, or None.

    The auditor's own reading of the rule data, like ``hand_result``: whose turn it is, the
    hand still open, two cards to double, split or surrender, the table's doubling totals and
    double after split, pairs by rank or value and the number of splits, late surrender on an
    unsplit hand. Money is checked apart (every balance after is)."""
    rules = state.rules
    if state.phase != "playing" or state.active != (box, hand):
        return f"a {move} on box {box} hand {hand}, whose turn it was not"
    if state.boxes[box].player_id != player_id:
        return f"a {move} by {player_id} on a box that is not theirs"
    cards = state.boxes[box].hands[hand]
    if move == "stand":
        return None if cards.status == "open" else "a stand on a finished hand"
    if cards.status != "open" or total(cards.cards).best >= 21:
        return f"a {move} on a hand that takes no more cards"
    two = len(cards.cards) == 2
    if move == "double":
        if not two or cards.split_aces or (cards.from_split and not rules.double_after_split):
            return "a double the table does not allow on this hand"
        if not rules.doubles_on(*total(cards.cards)):
            return f"a double on {total(cards.cards).best}, not one of the table's totals"
    if move == "split":
        pair = two and (
            cards.cards[0][0] == cards.cards[1][0]
            if rules.split_by == "rank"
            else value_of(cards.cards[0]) == value_of(cards.cards[1])
        )
        if not pair:
            return f"a split of {' '.join(cards.cards)}, not a pair at this table"
        if len(state.boxes[box].hands) > rules.max_splits:
            return "a split beyond the table's number of splits"
    if move == "surrender" and not (
        rules.late_surrender and two and not cards.from_split and len(state.boxes[box].hands) == 1
    ):
        return "a surrender the table does not allow on this hand"
    return None


def moves_allowed(state: TableState, player_id: str, box: int, hand: int) -> tuple[Move, ...]:
    """The moves the rules allow this player on this hand now, in the order ``TurnStarted``
    lists them: ``move_problem`` says which, and a double or split needs the hand's stake
    again from the balance."""
    player = state.players.get(player_id)
    balance = player.balance if player is not None else 0
    stake = state.boxes[box].hands[hand].stake
    return tuple(
        move
        for move in get_args(TurnAction)
        if move_problem(state, player_id, box, hand, move) is None
        and (move not in ("double", "split") or stake <= balance)
    )
