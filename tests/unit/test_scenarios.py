"""Every scenario file in tests/scenarios plays through the real decider with no failed
expectation; each file cites the sentence of the seed it checks. The operator's scenarios
(tests/scenarios/operations: rules no seed page states, such as suspending a table) say what
they check instead."""

from __future__ import annotations

from pathlib import Path

import pytest

from blackjack.scenario import load, run

SCENARIOS = sorted((Path(__file__).parents[1] / "scenarios").glob("*.yaml"))
OPERATIONS = sorted((Path(__file__).parents[1] / "scenarios" / "operations").glob("*.yaml"))


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


@pytest.mark.parametrize("path", OPERATIONS, ids=[p.stem for p in OPERATIONS])
def test_operations_scenario(path: Path) -> None:
    scenario = load(path)
    assert scenario.seed is None and scenario.cites, "it says what it checks, and no seed"
    assert run(scenario, emit=lambda line: None)["failures"] == []


def test_a_step_the_service_would_not_know_is_answered_as_the_service_answers_it(
    tmp_path: Path,
) -> None:
    script = tmp_path / "typos.yaml"
    script.write_text(
        "variant: mini-h17\n"
        "players: [{id: alice, seat: 0, balance: 10000}]\n"
        "commands:\n"
        "  - {do: Fly, reject: unknown_command}\n"
        '  - {do: PlaceBet, box: 0, amount: "x", reject: malformed}\n'
    )
    summary = run(load(script))
    assert summary["failures"] == []
    fly, bet = summary["steps"]
    assert fly["message"] == "no command type 'Fly'"
    assert bet["message"] == "PlaceBet.amount: Input should be a valid integer"
