"""The script behind docs/operations.md's per-table memory figures still runs (at one table
and a small window): it fills the window it is asked for and measures a table hot, cold and
sealed."""

from __future__ import annotations

from tests.unit.measure_table_memory import digest_microseconds, measure, seal_microseconds


def test_the_table_memory_script_fills_the_window_and_measures_it() -> None:
    rounds, hot, cold, snapshot, sealed, codec = measure(tables=1, window=63)
    assert 10 < rounds < 63  # every round answers a bet, a deal and at least one move
    assert hot > cold > 0
    assert sealed == len(snapshot) / 1024 > 0
    assert min(seal_microseconds(codec, snapshot, times=3)) > 0
    assert digest_microseconds(snapshot, times=3) > 0
