"""The RTP as dealt to the reshuffle point (``blackjack rtp VARIANT --as-dealt``): the
part-dealt valuation it rests on, its effects of removal against published ones, its linear
form against exact valuations, and the cut-card effect's sign and size (small seeded runs; the
README's figures are the command's own, with more shoes)."""

from __future__ import annotations

import json
import random

import pytest

from blackjack.cli import main
from blackjack.domain.rules import PRESETS, preset
from blackjack.simulation.dealt import (
    Valuer,
    _mean_se,
    _ratio_with_control,
    compute_as_dealt,
    deal_shoes,
    deepest_start,
    make_valuer,
    shoe_sums,
)
from blackjack.strategy import compute_strategy
from blackjack.strategy.dealer import full_shoe
from blackjack.strategy.solver import solve, value_shoe


@pytest.fixture(scope="module")
def mini_valuer() -> Valuer:
    return make_valuer(preset("mini-h17"), None)


def test_a_fresh_shoe_valued_as_part_dealt_is_the_fresh_figure() -> None:
    """``value_shoe`` plays the fresh chart from the shoe it is given: at the full shoe it is
    the fresh solution to the last bit, for a preset with a peek and one without."""
    for name in ("mini-h17", "mini-s17"):
        rules = preset(name)
        fresh = solve(rules)
        valued = value_shoe(rules, full_shoe(rules.decks))
        assert valued.expected_value(1.5, 0.5) == fresh.expected_value(1.5, 0.5)


def test_a_random_card_gone_leaves_the_expectation_unchanged(mini_valuer: Valuer) -> None:
    """Exchangeability: the round after one random card is burnt is the first round of a
    shuffled shoe, so the effects of removal, weighted by how many of each value the shoe
    holds, sum to zero. Computed from eleven independent valuations of part-dealt shoes, it
    holds to rounding (a shoe counted wrong, or a chart adapted to the shoe, breaks it)."""
    assert abs(mini_valuer.eor_mean) < 1e-8
    assert mini_valuer.eor[4] > 0 > mini_valuer.eor[9]  # a five gone helps, a ten gone hurts


# Cacarulo's exact values with a fixed total-dependent basic strategy, 6 decks, S17, double on
# any two, double after split, split to four hands (aces once), late surrender, EV in percent
# by the card removed, and off the top -0.3317035785 (Blackjack: The Forum, 2025,
# https://www.blackjacktheforum.com/showthread.php?46508-Deck-Composition-and-Round-Depth
# post 321410). By value index: A, 2..9, T.
CAC_SIX_DECKS = (
    -0.4245165255,
    -0.2619103255,
    -0.2476875354,
    -0.2170750840,
    -0.1853267626,
    -0.2562006321,
    -0.2912666188,
    -0.3431801739,
    -0.3742086172,
    -0.4276935613,
)
CAC_OFF_THE_TOP = -0.3317035785


def test_effects_of_removal_match_a_published_fixed_strategy_table() -> None:
    """The solver's effects of removal, on the published rules (the surrender preset's, at 6
    decks with up to three splits), within 0.008 points of each published one (the largest gap
    is the five's, 0.0068: the two charts differ in a cell or two), summing to zero as the
    published ones do."""
    rules = preset("surrender").with_overrides({"decks": 6, "max_splits": 3})
    valuer = make_valuer(rules, None)
    published = [ev - CAC_OFF_THE_TOP for ev in CAC_SIX_DECKS]
    ours = [100 * e for e in valuer.eor]
    gaps = [abs(a - b) for a, b in zip(ours, published, strict=True)]
    assert max(gaps) < 0.008, gaps
    assert abs(100 * valuer.fresh - CAC_OFF_THE_TOP) < 0.002
    weights = full_shoe(6)
    assert abs(sum(w * p for w, p in zip(weights, published, strict=True))) / 312 < 1e-6


def test_the_linear_form_is_within_its_bound_at_the_reshuffle_point(
    mini_valuer: Valuer,
) -> None:
    """At mini-h17's deepest round start (83 cards gone), three seeded shoes: the effects of
    removal give the change of the round's expectation to within 0.04 points (measured 0.016 to
    0.025 on these, about a tenth of the change): the part the command values exactly, round
    by round, instead of trusting the linear form."""
    rules = preset("mini-h17")
    full = full_shoe(rules.decks)
    depth = deepest_start(rules)
    for seed in range(3):
        cards = [c for c in range(10) for _ in range(full[c])]
        random.Random(seed).shuffle(cards)
        left = list(full)
        for c in cards[:depth]:
            left[c] -= 1
        change = mini_valuer.value(tuple(left)) - mini_valuer.fresh
        residual = change - mini_valuer.linear(cards, depth)
        assert abs(100 * residual) < 0.04
        assert abs(residual) < 0.2 * abs(change)


def test_the_engine_ends_each_shoe_at_its_reshuffle_point() -> None:
    """The shoes are the engine's: no round starts deeper than ``Rules`` allows (138 cards
    of 416 at a third), some start at that very depth, and more boxes take more cards a round,
    so fewer rounds a shoe."""
    rules = preset("atlantic-city-multi")
    strategy = compute_strategy(rules)
    depth = deepest_start(rules)
    one = deal_shoes(rules, strategy, 30, boxes=1, bet=100, seed=3)
    five = deal_shoes(rules, strategy, 30, boxes=5, bet=100, seed=3)
    for shoes in (one, five):
        assert all(s.starts[0] == 0 and max(s.starts) <= depth for s in shoes)
        assert len({s.cards for s in shoes}) == len(shoes)
    assert depth == 138 and any(depth in s.starts for s in one + five)
    rounds = [sum(len(s.starts) for s in shoes) / len(shoes) for shoes in (one, five)]
    assert rounds[0] > 2 * rounds[1]
    with pytest.raises(ValueError, match="5 boxes, not 6"):
        deal_shoes(rules, strategy, 1, boxes=6, bet=100, seed=3)


def test_a_preset_that_reshuffles_every_round_is_its_fresh_figure_exactly(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["rtp", "atlantic-city", "--as-dealt"]) == 0
    line = json.loads(capsys.readouterr().out)
    assert line["as_dealt"]["rtp_percent"] == line["rtp_percent"] == 99.5123
    assert line["as_dealt"]["cut_card_effect_points"] == 0.0
    assert "no sampling" in line["as_dealt"]["method"]
    found = compute_as_dealt(PRESETS["surrender"], 500, boxes=3)
    assert found.reshuffles_every_round and found.effect == 0.0
    assert found.rtp_percent == found.fresh_rtp_percent


def test_the_cut_card_effect_at_mini_h17_costs_the_player_a_few_hundredths(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A small seeded run (300 shoes, 8 rounds valued exactly): the effect is negative, its
    95 % interval excludes zero, and its size is of the order published for 8 decks (the
    Wizard of Odds' continuous shuffler against the cut card: 0.014 points, at a deeper cut;
    a shallower cut costs more a round), well under a tenth of a point."""
    args = ["rtp", "mini-h17", "--as-dealt", "--shoes", "300", "--exact", "8", "--seed", "5"]
    assert main(args) == 0
    line = json.loads(capsys.readouterr().out)
    dealt = line["as_dealt"]
    effect, se = dealt["cut_card_effect_points"], dealt["standard_error_points"]
    assert -0.1 < effect < -0.005
    assert effect + 1.96 * se < 0
    assert dealt["ci95_percent"][0] < dealt["rtp_percent"] < line["rtp_percent"]
    assert 15 < dealt["rounds_per_shoe"] < 17 and dealt["boxes"] == 1
    assert -0.03 < dealt["linear_part_points"] < -0.01


def test_the_command_refuses_more_boxes_than_the_table_has(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["rtp", "mini-h17", "--as-dealt", "--boxes", "2"]) == 2
    assert "mini-h17 has 1 boxes, not 2" in capsys.readouterr().err


def test_the_control_variate_agrees_with_the_plain_ratio(mini_valuer: Valuer) -> None:
    """The control (L averaged over every depth a round may start at) has mean zero, so the
    controlled estimate of the linear part agrees with the plain ratio sum L / sum rounds,
    within the plain one's error, at a small fraction of it."""
    rules = preset("mini-h17")
    shoes = deal_shoes(rules, compute_strategy(rules), 600, boxes=1, bet=100, seed=11)
    sums = [shoe_sums(mini_valuer, shoe) for shoe in shoes]
    controlled, controlled_se, correlation = _ratio_with_control(sums)
    rounds = sum(s.rounds for s in sums) / len(sums)
    plain = sum(s.linear for s in sums) / sum(s.rounds for s in sums)
    _, plain_se = _mean_se([(s.linear - plain * s.rounds) / rounds for s in sums])
    assert abs(controlled - plain) < 3 * plain_se
    assert correlation > 0.95 and controlled_se < plain_se / 4
    assert controlled < 0


def test_a_shoe_that_deals_one_round_costs_nothing() -> None:
    """Reshuffled once a single card of the shoe is gone, every shoe deals one round, the
    first off a fresh shoe: the engine-dealt shoes give an effect of exactly zero."""
    rules = preset("mini-h17").with_overrides(
        {"reshuffle": {"kind": "penetration", "used": "1/416"}}
    )
    found = compute_as_dealt(rules, shoes=50, exact_shoes=2, workers=1)
    assert found.rounds_per_shoe == 1.0
    assert found.effect == 0.0 and found.effect_se == 0.0
    assert found.rtp_percent == found.fresh_rtp_percent
