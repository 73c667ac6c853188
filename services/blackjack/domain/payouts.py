"""Money arithmetic of one hand, in integer minor units. Every rounding is floored (a payout's
odd cent stays with the house; insurance's odd cent is not charged) and named here so that
the README and the tests can point at one place."""

from __future__ import annotations

from fractions import Fraction
from typing import Final

from blackjack.domain.rules import Rules

MAX_BALANCE: Final = 10**15
"""The most a seat or a wallet may hold after money is paid in: 10,000,000,000,000.00 in a
two-decimal currency. Far above any casino's limits and far below what the read model's
64-bit integers hold (9.2e18), so that no balance overflows a database column (a deposit of
10^30 was once taken, and no read model could fold it); winnings add to a balance only by bets
the table limits, round by round (``rules.MAX_BET``: from this balance, 2^63 is more than
340,000 rounds of the largest win away). Lifetime sums are not capped: they reach 9.2e18 only
after more than 9,000 deposits of this size."""


def over_balance_limit(balance: int, amount: int) -> bool:
    """Would paying ``amount`` in take ``balance`` past ``MAX_BALANCE``?"""
    return amount > MAX_BALANCE - balance


def blackjack_winnings(rules: Rules, stake: int) -> int:
    """3:2 on the stake, odd cents dropped; then cut to ``blackjack_win_rounded_down_to``.

    The Atlantic City page: "if you bet $5 and win with a natural blackjack, you will be paid
    out $5 (your bet) plus $7": the stake comes back whole, only the winnings are cut.
    """
    exact = Fraction(stake) * rules.blackjack_pays
    unit = rules.blackjack_win_rounded_down_to
    return (exact.numerator // exact.denominator) // unit * unit


def insurance_stake(bet: int) -> int:
    """Insurance costs half the bet; an odd cent is not charged (half of 101 is 50)."""
    return bet // 2


def insurance_return(rules: Rules, stake: int) -> int:
    """What a won insurance bet gives back: the stake plus 2:1."""
    return stake * (rules.insurance_pays + 1)


def surrender_refund(stake: int) -> int:
    """Half the bet comes back; an odd cent stays with the house (101 returns 50)."""
    return stake // 2
