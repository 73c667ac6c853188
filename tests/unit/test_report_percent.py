"""The game report's returns: exact ratios as text, four decimals of a percent, rounded half
to even, never through a float."""

from __future__ import annotations

import pytest

from blackjack.projections.reports import parse_day, percent


@pytest.mark.parametrize(
    ("part", "whole", "text"),
    [
        (1, 3, "33.3333"),
        (2, 3, "66.6667"),
        (99_660, 100_000, "99.6600"),
        (1, 800_000, "0.0001"),  # 0.000125 %: half of the last place, to the even 0.0001
        (3, 800_000, "0.0004"),  # 0.000375 %: to the even 0.0004
        (5, 800_000, "0.0006"),  # 0.000625 %: to the even 0.0006
        (0, 7, "0.0000"),
        (-10, 10, "-100.0000"),
        (-1, 800_000, "-0.0001"),
        (10**30 + 1, 10**30, "100.0000"),  # past a float's 53 bits, exact
        (10**20 + 10**15, 10**20, "100.0010"),
    ],
)
def test_a_ratio_is_a_percent_with_four_decimals(part: int, whole: int, text: str) -> None:
    assert percent(part, whole) == text


def test_nothing_to_divide_by_is_no_return() -> None:
    assert percent(0, 0) is None and percent(5, 0) is None


@pytest.mark.parametrize(
    "text", ["2026-3-1", "20260301", "2026-W09-1", "2026-02-30", "", "٢٠٢٦-03-01"]
)
def test_a_day_is_yyyy_mm_dd_only(text: str) -> None:
    assert parse_day(text) is None


def test_a_day() -> None:
    day = parse_day("2028-02-29")
    assert day is not None and day.isoformat() == "2028-02-29"
