"""A table's amounts are minor units of its currency: a table opened in a currency of other
decimals than its preset's states them anew, and no blackjack win is cut to more than one
whole unit (the scenarios in tests/scenarios/operations play such tables' rounds)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.currencies import decimals, money, whole_unit
from blackjack.domain.decide import decide
from blackjack.domain.evolve import evolve
from blackjack.domain.payouts import blackjack_winnings
from blackjack.domain.rejections import Rejection
from blackjack.domain.rules import preset
from blackjack.domain.state import INITIAL_STATE

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _open(variant: str, overrides: dict[str, object]) -> ev.TableOpened | Rejection:
    decision = decide(INITIAL_STATE, cmd.OpenTable(variant=variant, overrides=overrides), NOW)
    if isinstance(decision, Rejection):
        return decision
    (opened,) = decision
    assert isinstance(opened, ev.TableOpened)
    return opened


@pytest.mark.parametrize(
    ("code", "places", "unit"), [("USD", 2, 100), ("EUR", 2, 100), ("JPY", 0, 1), ("KWD", 3, 1000)]
)
def test_a_currency_s_decimals(code: str, places: int, unit: int) -> None:
    assert (decimals(code), whole_unit(code)) == (places, unit)
    assert money(12345, code) == {0: "12345", 2: "123.45", 3: "12.345"}[places]


@pytest.mark.parametrize(
    ("variant", "overrides", "unstated"),
    [
        ("atlantic-city", {"currency": "JPY"}, "min_bet, max_bet, blackjack_win_rounded_down_to"),
        ("atlantic-city", {"currency": "KWD", "min_bet": 1000}, "max_bet, blackjack_win_rounded"),
        ("mini-h17", {"currency": "JPY", "max_bet": 50_000}, "min_bet in JPY's minor units"),
    ],
)
def test_a_currency_of_other_decimals_states_the_amounts_anew(
    variant: str, overrides: dict[str, object], unstated: str
) -> None:
    """The preset's $1 minimum is 100 minor units: one yen would read as a hundred."""
    refused = _open(variant, overrides)
    assert isinstance(refused, Rejection) and refused.code == "invalid_rules"
    assert refused.message.startswith(f"currency: {overrides['currency']} has ")
    assert unstated in refused.message


@pytest.mark.parametrize(
    ("currency", "cut"), [("USD", 101), ("USD", 200), ("EUR", 1000), ("JPY", 100), ("KWD", 1001)]
)
def test_no_blackjack_win_is_cut_to_more_than_a_whole_unit(currency: str, cut: int) -> None:
    overrides = {"currency": currency, "blackjack_win_rounded_down_to": cut}
    if decimals(currency) != 2:
        overrides |= {"min_bet": 1000, "max_bet": 100_000}
    refused = _open("atlantic-city", overrides)
    assert isinstance(refused, Rejection) and refused.code == "invalid_rules"
    assert refused.message == (
        f"blackjack_win_rounded_down_to: at most {whole_unit(currency)} minor units "
        f"(one whole {currency}), not {cut}"
    )


IN_YEN: dict[str, object] = {
    "currency": "JPY",
    "min_bet": 500,
    "max_bet": 50_000,
    "blackjack_win_rounded_down_to": 1,
}
"""Atlantic City's table in yen: its limits and its cut (none: a yen has no cents) in yen."""
IN_DINARS: dict[str, object] = {
    "currency": "KWD",
    "min_bet": 1000,
    "max_bet": 500_000,
    "blackjack_win_rounded_down_to": 1000,
}
"""Atlantic City's table in Kuwaiti dinars: 1.000-500.000 KWD, a natural's win in whole dinars."""


@pytest.mark.parametrize(
    ("overrides", "stake", "win"),
    [
        ({"currency": "EUR"}, 500, 700),  # two decimals, as the preset's dollars: as written
        (IN_YEN, 505, 757),
        (IN_DINARS, 5500, 8000),
    ],
)
def test_a_table_in_another_currency_opens_and_pays_in_its_units(
    overrides: dict[str, object], stake: int, win: int
) -> None:
    opened = _open("atlantic-city", overrides)
    assert isinstance(opened, ev.TableOpened)
    assert opened.rules.currency == overrides["currency"]
    assert blackjack_winnings(opened.rules, stake) == win


def test_a_table_opened_before_the_check_still_reads() -> None:
    """Checked when a table opens, not in the rules: a yen table an earlier release opened
    with the preset's cut of 100 folds as it was written (it drops up to 99 yen, as it did)."""
    rules = preset("atlantic-city").with_overrides({"currency": "JPY"})
    state = evolve(INITIAL_STATE, ev.TableOpened(rules=rules))
    assert state.rules.blackjack_win_rounded_down_to == 100
    assert blackjack_winnings(state.rules, 505) == 700
