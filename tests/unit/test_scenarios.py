"""Every scenario file in tests/scenarios plays through the real decider with no failed
expectation; each file cites the sentence of the seed it checks."""

from __future__ import annotations

from pathlib import Path

import pytest

from blackjack.scenario import load, run

SCENARIOS = sorted((Path(__file__).parents[1] / "scenarios").glob("*.yaml"))


def test_there_is_a_scenario_for_every_preset() -> None:
    variants = {load(path).variant for path in SCENARIOS}
    assert variants == {"mini-h17", "mini-s17", "atlantic-city", "atlantic-city-multi", "surrender"}


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path) -> None:
    scenario = load(path)
    assert scenario.seed and scenario.cites, "a scenario cites the seed sentence it checks"
    lines: list[str] = []
    summary = run(scenario, emit=lines.append)
    assert summary["failures"] == []
    assert lines[-1].startswith('{"summary"')
