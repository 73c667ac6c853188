"""The scripts behind the docs' migration and game report figures still run, at a tiny size on
SQLite, and print the figures they are named for (no time is asserted: the machine is
shared)."""

from __future__ import annotations

import re

import pytest

from tests.integration import measure_game_report, measure_migrations


async def test_the_migrations_script_times_0005_0006_and_0012_against_the_fold(
    capsys: pytest.CaptureFixture[str],
    logging_left_as_it_was: None,  # the script sends the logs to stderr
) -> None:
    await measure_migrations.main(None, tables=1, rounds=2)
    printed = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"1 tables x 2 rounds: [\d,]+ events; seconds", printed[0])
    timed = r"sqlite +fold +[\d.]+  0005 +[\d.]+  0006 +[\d.]+  0012 +[\d.]+"
    assert re.fullmatch(timed, printed[1])


async def test_the_game_report_script_times_every_option(
    capsys: pytest.CaptureFixture[str],
) -> None:
    await measure_game_report.main(None, tables=20, days=3, report_days=2, repeats=1)
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("20 tables x 3 days = 60 game_days rows")
    options = [line.split()[1] for line in printed[1:]]
    assert options == list(measure_game_report.OPTIONS)
