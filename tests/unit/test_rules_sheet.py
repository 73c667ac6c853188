"""The rules sheet a player reads (``blackjack rules``, ``rules`` in ``blackjack play``):
written from the table's ``Rules``, so every rule a player meets shows in it and an override
changes it."""

from __future__ import annotations

from typing import Any

import pytest

from blackjack.cli import main
from blackjack.domain.rules import PRESETS, Rules, preset
from blackjack.rules_sheet import Returns, rules_sheet

NOT_A_PLAYER_RULE = {"name", "insurance_pays"}
"""The variant's label, and insurance's payout that no table may change (always 2 to 1)."""

OVERRIDES: dict[str, dict[str, Any]] = {
    "currency": {"currency": "EUR"},
    "decks": {"decks": 6},
    "reshuffle": {"reshuffle": {"kind": "penetration", "used": "1/2"}},
    "dealer_hits_soft_17": {"dealer_hits_soft_17": True},
    "peek_on_ace": {"peek_on_ace": False},
    "peek_on_ten": {"peek_on_ten": False},
    "hole_card_first": {"hole_card_first": True},
    "insurance": {"insurance": False},
    "late_surrender": {"late_surrender": True},
    "double_on": {"double_on": "totals", "double_totals": [10, 11]},
    "double_totals": {"double_on": "totals", "double_totals": [11]},
    "double_after_split": {"double_after_split": False},
    "max_splits": {"max_splits": 3},
    "split_by": {"split_by": "value"},
    "split_aces_one_card": {"split_aces_one_card": False},
    "blackjack_pays": {"blackjack_pays": "6/5"},
    "blackjack_win_rounded_down_to": {"blackjack_win_rounded_down_to": 5},
    "blackjack_paid_at_once": {"blackjack_paid_at_once": True},
    "min_bet": {"min_bet": 500},
    "max_bet": {"max_bet": 100_000},
    "boxes_per_seat": {"boxes_per_seat": 2},
    "rebet_multipliers": {"rebet_multipliers": [1, 2]},
    "rebet_deals": {"rebet_deals": True},
    "seats": {"seats": 3, "turn_seconds": 15},
    "turn_seconds": {"seats": 3, "turn_seconds": 20},
    "refund_bets_on_disconnect": {"refund_bets_on_disconnect": True},
    "interrupted_round_days": {"interrupted_round_days": 7},
    "break_even_message": {"break_even_message": True},
}


def sheet(rules: Rules) -> str:
    return "\n".join(rules_sheet(rules))


def test_every_rule_a_player_meets_has_an_override_below() -> None:
    """A new option of ``Rules`` must be taught to the sheet (and to this test)."""
    assert set(Rules.model_fields) - NOT_A_PLAYER_RULE == set(OVERRIDES)


@pytest.mark.parametrize("field", sorted(OVERRIDES))
def test_an_override_of_any_rule_changes_the_sheet(field: str) -> None:
    base = preset("atlantic-city")
    changed = base.with_overrides(OVERRIDES[field])
    if field == "turn_seconds":
        base = base.with_overrides(OVERRIDES["seats"])
    assert sheet(changed) != sheet(base)


@pytest.mark.parametrize(
    ("variant", "phrases"),
    [
        (
            "mini-h17",
            [
                "8 decks of 52 cards, shuffled again once 1/5 of the shoe has been dealt",
                "hits a soft 17",
                "again, or 2 times them (x2), and deals at once",
                "Surrender: after the dealer has checked for blackjack",
                '"Break Even"',
                "Bets from 1.00 to 500.00 USD a box",
            ],
        ),
        (
            "mini-s17",
            [
                "shuffled before every round",
                "stands on every 17, soft 17 included",
                "Double on a first-two-card total of 9, 10 or 11, also after a split",
                "Against a ten the dealer does not check",
                "first card is dealt face down",
                "Surrender is not offered",
            ],
        ),
        (
            "atlantic-city",
            [
                "pays 3 to 2; the winnings are paid in whole multiples of 1.00 USD",
                "the same rank (K-K, not K-Q) once (two hands)",
                "Split aces take one card each",
            ],
        ),
        (
            "atlantic-city-multi",
            [
                "shuffled again once 1/3 of the shoe has been dealt",
                "A table of 5 seats",
                "15 seconds to bet and deal, or pass, or is left out of the round",
                "waits for the next; seats change between rounds",
            ],
        ),
        (
            "surrender",
            [
                "4 decks of 52 cards, shuffled before every round",
                "on up to 3 boxes",
                "it is paid as soon as the dealer is known not to have one",
                "If you disconnect before the cards are dealt, your bet is returned",
                "unfinished for 30 days may be closed by the operator",
            ],
        ),
    ],
)
def test_each_preset_s_sheet_says_its_own_rules(variant: str, phrases: list[str]) -> None:
    text = sheet(PRESETS[variant])
    for phrase in phrases:
        assert phrase in text, phrase


def test_the_return_names_the_lowest_bet_level_only_when_it_is_lower() -> None:
    rules = preset("atlantic-city")
    lower = rules_sheet(rules, Returns(99.5123, 96.1259, 133))[-1]
    assert "99.51 %" in lower and "the lowest is 96.13 %, at a bet of 1.33 USD" in lower
    same = rules_sheet(rules, Returns(99.6616, 99.6601, 101))[-1]
    assert "99.66 %" in same and "lowest" not in same


def test_the_command_prints_the_surrender_page_s_stated_return(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Page 003 states an RTP of 99.66 %: the sheet of its rules, computed, says the same."""
    assert main(["rules", "surrender"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("surrender: the rules\n- 4 decks")
    assert "Theoretical return to player with the best play: 99.66 %" in out
