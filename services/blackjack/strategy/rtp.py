"""Exact house edge and return to player of a variant played by its computed basic strategy.

``compute_rtp(rules, bet)`` is the expected result of one round for one box that bets ``bet``
(integer minor units) and plays ``compute_strategy(rules)`` -- never taking insurance or even
money -- off a freshly shuffled shoe of ``rules.decks`` decks. House edge and RTP are per unit
of *initial* bet (the usual convention: doubles and splits add money at risk but not to the
denominator), so ``rtp_percent == 100 - house_edge_percent``.

What is exact and what is approximated (details in ``blackjack.strategy.solver``):

* Exact: finite-shoe probabilities by composition for the dealer and the player (the player's
  to 6 removed cards, beyond which a very long hand draws from the shoe as it stood; the
  dealer's walked exactly to 3 removed cards and extrapolated to second order beyond -- together
  about 1e-5 percentage points of house edge from walking everything exactly); the dealer's
  peek on ace/ten (values conditioned on her not having blackjack, which settles only the initial
  bet); hit/stand on soft 17; double rules by best total; late surrender; one card to split aces;
  a non-resplit split (exactly twice one hand from the shoe without both pair cards).
* Approximated: resplits (the number of hands is exact, but each hand's value ignores the
  cards of the other split hands apart from the resplit pair cards); split aces are never
  resplit (``Rules`` has no flag for it); when splitting by rank only the splittable share of
  two-ten hands differs (splitting tens is never the chosen play).
* Not modelled here: the reshuffle policy -- every round is valued as the first off a fresh
  shoe. At a preset that deals several rounds from a shoe (mini-h17, atlantic-city-multi) the
  cut-card effect costs the player a little more: ``blackjack.simulation.dealt`` computes it
  (``blackjack rtp VARIANT --as-dealt [--boxes N]``: shoes dealt by the real engine, each
  round valued by its expectation from the shoe left; figures with their 95 % intervals in
  README, *The math*: about -0.02 points at one box). Off a fresh shoe, other boxes at the
  table do not change a box's expectation, since their cards are unseen by this strategy; at a
  penetration preset they do, through the number of rounds a shoe lasts.
* Per-bet rounding comes from ``blackjack.domain.payouts``: the blackjack win
  (``blackjack_winnings``: floored to the cent, then to ``blackjack_win_rounded_down_to``) and
  the surrender refund (``surrender_refund``: floor of half). With ``bet=None`` neither is
  rounded: the result is the limit for large bets, where the truncation is negligible (at the
  atlantic-city presets a $5.00 blackjack pays 7/5 and a $1.00 one only 1/1, so the per-bet
  figures are worse; pass the bet to get them).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from blackjack.domain.payouts import blackjack_winnings, surrender_refund
from blackjack.domain.rules import Rules
from blackjack.strategy.basic import Strategy, compute_strategy
from blackjack.strategy.dealer import DEFAULT_EXACT_REMOVED
from blackjack.strategy.solver import DEFAULT_DEPTH, solve


@dataclass(frozen=True)
class RtpReport:
    """One variant's expected return per round under its computed basic strategy."""

    rules_name: str
    bet: int | None
    blackjack_win_ratio: Fraction  # what a blackjack wins per unit bet, after rounding
    surrender_loss_ratio: Fraction  # what a surrender loses per unit bet, after rounding
    player_ev: float  # expected net win per unit of initial bet
    house_edge_percent: float
    rtp_percent: float
    expected_loss: float | None  # minor units the house expects per round at ``bet``
    blackjack_probability: float  # the player is dealt a blackjack
    surrender_probability: float  # the strategy surrenders
    strategy: Strategy


def blackjack_win_ratio(rules: Rules, bet: int | None) -> Fraction:
    if bet is None:
        return Fraction(rules.blackjack_pays)
    return Fraction(blackjack_winnings(rules, bet), bet)


def surrender_loss_ratio(bet: int | None) -> Fraction:
    if bet is None:
        return Fraction(1, 2)
    return Fraction(bet - surrender_refund(bet), bet)


def compute_rtp(
    rules: Rules,
    bet: int | None = None,
    *,
    depth: int = DEFAULT_DEPTH,
    dealer_depth: int = DEFAULT_EXACT_REMOVED,
) -> RtpReport:
    """House edge and RTP, in percent, for ``rules`` at a bet of ``bet`` minor units.

    ``bet=None`` gives the unrounded figure (the large-bet limit); see the module docstring for
    the method and its approximations. Cached per rule set: only the first call computes.
    """
    if bet is not None and bet < 1:
        raise ValueError("bet must be a positive number of minor units")
    strategy = compute_strategy(rules, depth=depth, dealer_depth=dealer_depth)
    solution = solve(rules, depth, dealer_depth)
    bj = blackjack_win_ratio(rules, bet)
    sur = surrender_loss_ratio(bet)
    ev = solution.expected_value(bj, sur)
    return RtpReport(
        rules_name=rules.name,
        bet=bet,
        blackjack_win_ratio=bj,
        surrender_loss_ratio=sur,
        player_ev=ev,
        house_edge_percent=-100.0 * ev,
        rtp_percent=100.0 + 100.0 * ev,
        expected_loss=None if bet is None else -ev * bet,
        blackjack_probability=solution.probability("blackjack_probability"),
        surrender_probability=solution.probability("surrender_probability"),
        strategy=strategy,
    )
