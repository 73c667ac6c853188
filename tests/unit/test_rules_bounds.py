"""No rule override can make a table pay a negative or absurd amount: OpenTable refuses it;
and what a table's rules document holds (the options off in every preset are not written)."""

from __future__ import annotations

from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

import pytest

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.decide import decide
from blackjack.domain.payouts import blackjack_winnings
from blackjack.domain.rejections import Rejection
from blackjack.domain.rules import (
    MAX_INT,
    PRESETS,
    ReshuffleAtPenetration,
    Rules,
    fingerprint,
    preset,
    stored_rules,
)
from blackjack.domain.state import INITIAL_STATE

NOW = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    "overrides",
    [
        {"blackjack_pays": "-3"},
        {"blackjack_pays": "0"},
        {"blackjack_pays": "1000"},
        {"insurance_pays": -1},
        {"insurance_pays": 10},
        {"blackjack_win_rounded_down_to": 0},
        {"blackjack_win_rounded_down_to": 10_000},
        {"double_totals": [9, 30], "double_on": "totals"},
        {"double_totals_ace_low": True},  # mini-h17 doubles on any two: no totals to count
        {"rebet_multipliers": [0]},
        {"rebet_multipliers": [100]},
        {"min_bet": 0},
        {"min_bet": 500, "max_bet": 100},
        {"max_bet": 10**12 + 1},  # winnings would near the read model's 64-bit columns
        {"max_bet": 10**30},
        {"decks": 0},
        {"unknown_rule": True},
    ],
)
def test_an_out_of_bounds_override_is_refused(overrides: dict[str, object]) -> None:
    decision = decide(INITIAL_STATE, cmd.OpenTable(variant="mini-h17", overrides=overrides), NOW)
    assert isinstance(decision, Rejection)
    assert decision.code == "invalid_rules"


@pytest.mark.parametrize("pays", ["1", "6/5", "3/2", "2"])
def test_the_usual_blackjack_payouts_are_accepted(pays: str) -> None:
    decision = decide(
        INITIAL_STATE, cmd.OpenTable(variant="mini-h17", overrides={"blackjack_pays": pays}), NOW
    )
    assert not isinstance(decision, Rejection)


@pytest.mark.parametrize(
    ("variant", "overrides"),
    [("atlantic-city-multi", {"turn_seconds": None}), ("surrender", {"seats": 2, "decks": 8})],
)
def test_a_shared_table_without_a_clock_is_refused(
    variant: str, overrides: dict[str, object]
) -> None:
    """The multi-seat review: such a table stalled for good on one idle or disconnected player,
    with the others' money in play."""
    decision = decide(INITIAL_STATE, cmd.OpenTable(variant=variant, overrides=overrides), NOW)
    assert isinstance(decision, Rejection)
    assert decision.code == "invalid_rules" and decision.message.startswith("turn_seconds: ")
    with_clock = {**overrides, "turn_seconds": 20}
    assert not isinstance(
        decide(INITIAL_STATE, cmd.OpenTable(variant=variant, overrides=with_clock), NOW), Rejection
    )


@pytest.mark.parametrize(("written", "ratio"), [(1.15, Fraction(23, 20)), (1.2, Fraction(6, 5))])
def test_a_payout_written_as_a_float_is_the_decimal_written_not_the_binary_float(
    written: float, ratio: Fraction
) -> None:
    """Fraction(1.15) is 1.149999999999999911...: floored to the cent, a $20.00 blackjack at a
    table opened with ``blackjack_pays: 1.15`` paid 22.99."""
    rules = PRESETS["mini-h17"].model_validate(
        {**PRESETS["mini-h17"].model_dump(), "blackjack_pays": written}
    )
    assert rules.blackjack_pays == ratio
    assert blackjack_winnings(rules, 2000) == 2000 * ratio
    table = decide(
        INITIAL_STATE,
        cmd.OpenTable(variant="mini-h17", overrides={"blackjack_pays": written}),
        NOW,
    )
    assert not isinstance(table, Rejection)
    opened = table[0]
    assert isinstance(opened, ev.TableOpened) and opened.rules.blackjack_pays == ratio


@pytest.mark.parametrize(
    "overrides",
    [
        {"max_bet": "50000"},  # a number as text: a command's amount "10" is malformed
        {"min_bet": True},  # a table of one-cent bets
        {"max_bet": 10_000.0},  # 10000.0 as an amount is malformed too (docs/kafka.md)
        {"decks": 6.0},
        {"turn_seconds": "15", "seats": 5},
        {"max_splits": False},
        {"insurance": "yes"},
        {"late_surrender": 1},
        {"rebet_multipliers": [1, "2"]},
        {"double_on": "totals", "double_totals": [9, 10.0, 11]},
        {"blackjack_pays": True},  # even money, from a checkbox
    ],
)
def test_an_override_of_the_wrong_json_type_is_refused_not_coerced(
    overrides: dict[str, object],
) -> None:
    """They were read as pydantic's lax mode reads them ("50000" as 50000, true as 1, "yes"
    as true): a platform's bug opened a table on other rules than it meant, and accepted."""
    decision = decide(INITIAL_STATE, cmd.OpenTable(variant="mini-h17", overrides=overrides), NOW)
    assert isinstance(decision, Rejection), decision
    assert decision.code == "invalid_rules"


@pytest.mark.parametrize(
    "overrides",
    [
        {"max_bet": 10_000, "min_bet": 500},
        {"insurance": False, "late_surrender": True},
        {"turn_seconds": 15, "seats": 5},
        {"turn_seconds": None},
        {"rebet_multipliers": [1, 2]},
        {"double_on": "totals", "double_totals": [9, 10, 11]},
        {"blackjack_pays": "6/5"},
        {"blackjack_pays": 1.2},
        {"blackjack_pays": 2},
        {"reshuffle": {"kind": "penetration", "used": "1/3"}},
        {"reshuffle": {"kind": "penetration", "used": 0.25}},
    ],
)
def test_overrides_of_their_json_type_are_taken(overrides: dict[str, object]) -> None:
    decision = decide(INITIAL_STATE, cmd.OpenTable(variant="mini-h17", overrides=overrides), NOW)
    assert not isinstance(decision, Rejection), decision


@pytest.mark.parametrize(
    "overrides",
    [
        {"reshuffle": {"kind": "penetration", "used": "1e-4300"}},  # 4,301 digits below
        {"blackjack_pays": "19." + "0" * 4298 + "1e-1"},  # 4,301 digits above, 1.9...
        {"reshuffle": {"kind": "penetration", "used": 1e-300}},
        {"blackjack_pays": f"{MAX_INT + 1}/{MAX_INT}"},
    ],
)
def test_a_ratio_whose_terms_pass_max_int_is_refused(overrides: dict[str, object]) -> None:
    """The first two were taken, and their ``TableOpened`` held ``"<unprintable Fraction
    object>"`` (Python writes no integer past 4,300 digits): no rebuild could read the
    partition (tests/integration/test_handler_rule_ratios.py)."""
    decision = decide(INITIAL_STATE, cmd.OpenTable(variant="mini-h17", overrides=overrides), NOW)
    assert isinstance(decision, Rejection), decision
    assert decision.code == "invalid_rules" and str(MAX_INT) in decision.message


def test_a_ratio_the_log_holds_past_max_int_still_reads() -> None:
    """A table an older release opened with such a ratio (one it could write) reads as it was
    opened."""
    doc = {**PRESETS["mini-h17"].model_dump(mode="json"), "reshuffle": {"kind": "penetration"}}
    doc["reshuffle"]["used"] = f"1/{10**300}"
    reshuffle = stored_rules(doc).reshuffle
    assert isinstance(reshuffle, ReshuffleAtPenetration)
    assert reshuffle.used == Fraction(1, 10**300)


OFF_IN_EVERY_PRESET: dict[str, dict[str, object]] = {
    "peek_on_ace_only_if_insured": {
        "peek_on_ace_only_if_insured": True,
        "peek_on_ace": True,
        "insurance": True,
    },
    "double_totals_ace_low": {
        "double_on": "totals",
        "double_totals": [9, 10, 11],
        "double_totals_ace_low": True,
    },
}
"""Options written in a rules document only when on, each with the overrides that turn it on."""


@pytest.mark.parametrize("option", sorted(OFF_IN_EVERY_PRESET))
@pytest.mark.parametrize("name", sorted(PRESETS))
def test_no_preset_has_the_option_and_its_rules_document_does_not_name_it(
    name: str, option: str
) -> None:
    # the pages' reading stays the preset's; a table opened before the option reads the same
    rules = preset(name)
    assert getattr(rules, option) is False
    doc: dict[str, Any] = rules.model_dump(mode="json")
    assert option not in doc
    assert fingerprint(Rules.model_validate(doc)) == fingerprint(rules)
    with_option = rules.with_overrides(OFF_IN_EVERY_PRESET[option])
    assert with_option.model_dump(mode="json")[option] is True
    assert fingerprint(with_option) != fingerprint(rules)
