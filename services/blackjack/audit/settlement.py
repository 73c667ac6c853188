"""The auditor's own derivation of what a settled hand pays and how the dealer must play.

Written apart from the decider on purpose: an audit that called the code it audits could not
catch that code's mistakes. It shares only the rule data (``Rules``), the hand totals and the
rounding functions of ``domain.payouts`` (each of them tested against the seed pages).
"""

from __future__ import annotations

from collections.abc import Sequence

from blackjack.domain.events import Outcome
from blackjack.domain.hand import is_natural, total
from blackjack.domain.payouts import blackjack_winnings, insurance_return, surrender_refund
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


def dealer_blackjack_ruled_out(state: TableState) -> bool:
    """Whether the players can know the dealer has no blackjack: an upcard that cannot make
    one, or one the table's rules make the dealer peek under."""
    upcard = state.upcard
    if upcard is None:
        return False
    rank = upcard[0]
    if rank == "A":
        return state.rules.peek_on_ace
    if rank in "TJQK":
        return state.rules.peek_on_ten
    return True


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
