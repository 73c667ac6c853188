"""`blackjack rtp|strategy|simulate --overrides JSON`: a what-if of a preset's rules is a
command, so the README's findings about the rules (the surrender page's 99.66 % needs double
after split; mini-s17 before it stopped peeking under a ten) come with the command that
reproduces them."""

from __future__ import annotations

import json

import pytest

from blackjack.cli import main


def rtp(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, object]:
    assert main(["rtp", *args]) == 0
    line: dict[str, object] = json.loads(capsys.readouterr().out)
    return line


def test_the_surrender_page_s_99_66_needs_double_after_split(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert rtp(capsys, "surrender")["rtp_percent"] == 99.6616
    without = rtp(capsys, "surrender", "--overrides", '{"double_after_split": false}')
    assert without["rtp_percent"] == 99.5388
    assert without["overrides"] == {"double_after_split": False}


def test_mini_s17_peeking_under_a_ten_as_before_the_fifth_session(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert rtp(capsys, "mini-s17", "--overrides", '{"peek_on_ten": true}')["rtp_percent"] == 99.4192


def test_the_chart_follows_the_overrides(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["strategy", "mini-s17", "--overrides", '{"peek_on_ten": true}']) == 0
    chart = capsys.readouterr().out
    assert "dealer peeks," in chart and "peeks on ace only" not in chart
    hard_11 = next(line for line in chart.splitlines() if line.startswith("11 "))
    assert hard_11.split()[-2] == "D"  # doubles 11 against a ten once she peeks there


def test_a_simulation_plays_the_overridden_rules(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", "surrender", "--rounds", "200", "--seed", "3", "--workers", "1"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["hand_outcomes"]["surrender"] > 0
    assert main([*args, "--overrides", '{"late_surrender": false}']) == 0
    line = json.loads(capsys.readouterr().out)
    assert line["overrides"] == {"late_surrender": False}
    assert "surrender" not in line["hand_outcomes"]


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("{", "argument --overrides: not JSON"),
        ("[1]", "argument --overrides: a JSON object of rule fields"),
        ('{"name": "x"}', "name: the variant's name is not a rule to override"),
        ('{"decks": 0}', "blackjack rtp: --overrides: decks: Input should be greater than or"),
        ('{"no_such_rule": 1}', "blackjack rtp: --overrides: no_such_rule: Extra inputs"),
    ],
)
def test_overrides_the_rules_refuse_are_named_in_one_line(
    text: str, named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(["rtp", "mini-h17", "--overrides", text])
    except SystemExit as exit:  # argparse's own refusal
        code = int(str(exit.code))
    assert code == 2
    error = capsys.readouterr().err
    assert named in error and "Traceback" not in error


def test_a_simulation_s_stdout_is_its_json_line_alone(capsys: pytest.CaptureFixture[str]) -> None:
    """The progress bar goes to stderr: on stdout it left an empty line before the JSON (a
    reader of the first line got nothing), as a newcomer walkthrough found."""
    assert main(["simulate", "mini-h17", "--rounds", "200", "--seed", "3", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and json.loads(out.splitlines()[0])["rounds"] == 200
