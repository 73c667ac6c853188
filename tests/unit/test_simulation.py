"""The simulator plays the real engine with the computed strategy, and its RTP agrees with the
exact figure within its 95 % interval (small, seeded runs: the full runs are README commands)."""

from __future__ import annotations

import pytest

from blackjack.domain.rules import preset
from blackjack.simulation.commands import money
from blackjack.simulation.run import simulate
from blackjack.strategy import compute_rtp, compute_strategy


@pytest.mark.parametrize(("variant", "bet"), [("mini-h17", None), ("atlantic-city", 500)])
def test_simulated_rtp_agrees_with_the_exact_rtp(variant: str, bet: int | None) -> None:
    rules = preset(variant)
    report = simulate(rules, compute_strategy, 12_000, bet=bet, seed=7, workers=2)
    exact = compute_rtp(rules, report.bet).rtp_percent / 100
    assert report.tally.rounds == 12_000
    assert abs(report.rtp - exact) <= report.half_width
    assert report.half_width < 0.03  # the interval is informative, not vacuous
    shares = report.outcome_shares()
    assert 0.035 < shares["blackjack"] < 0.055  # about 4.7 % of hands are naturals


def test_the_same_seed_plays_the_same_rounds() -> None:
    rules = preset("surrender")
    first = simulate(rules, compute_strategy, 2_000, seed=3, workers=1)
    second = simulate(rules, compute_strategy, 2_000, seed=3, workers=1)
    assert first.tally == second.tally


def test_bet_levels_are_whole_cents() -> None:
    assert money("5.00") == 500
    assert money("0.01") == 1
    for bad in ("5.001", "-1", "0", "five"):
        with pytest.raises(Exception, match="not"):
            money(bad)
