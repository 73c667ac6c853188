"""``double_totals_ace_low``: a soft hand doubles on its total with the ace counted one.

Page 001 doubles on "a total value of 9, 10 or 11" and lets the player "decide the value" of
an ace; the presets read the total as the one shown (A-8 is a 19), the option as either."""

from __future__ import annotations

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.rules import preset
from tests.integration.conftest_projections import Script
from tests.unit.test_replay_engine import SEAL, messages, wires, with_rules

ACE_LOW: dict[str, object] = {"double_totals_ace_low": True}
# mini-s17 deals the hole card first: ann A, the dealer's hole 7, ann 8, the upcard 9; then
# ann's double draws the 5 (A-8-5 = 14), and the dealer's 16 draws the ace (17)
ACE_EIGHT_AGAINST_NINE = ["AS", "7S", "8S", "9S", "5S", "AH"]


def test_the_rules_answer_which_totals_double() -> None:
    low = preset("mini-s17").with_overrides(ACE_LOW)
    assert [t for t in range(12, 22) if low.doubles_on(t, soft=True)] == [19, 20, 21]
    assert [t for t in range(4, 22) if low.doubles_on(t, soft=False)] == [9, 10, 11]
    plain = preset("mini-s17")
    assert [t for t in range(12, 22) if plain.doubles_on(t, soft=True)] == []
    assert all(
        preset("mini-h17").doubles_on(t, soft) for t in range(4, 22) for soft in (True, False)
    )


def test_the_audit_holds_the_log_to_the_option() -> None:
    """A double on A-8 is right at a table with the option, and found at one without it."""
    script = Script("mini-s17", [ACE_EIGHT_AGAINST_NINE], overrides=ACE_LOW)
    script.do(
        cmd.PlaceBet(player_id="alice", box=0, amount=1000),
        cmd.Deal(player_id="alice"),
        cmd.Double(player_id="alice", box=0),
    )
    log = wires(script)
    settled = [w.data for w in log if isinstance(w.data, ev.HandSettled)]
    assert [(e.outcome, e.stake, e.payout) for e in settled] == [("lose", 2000, 0)]
    assert messages(log, SEAL) == []

    findings = messages(with_rules(log, double_totals_ace_low=False), SEAL)
    assert any("a double on 19, not one of the table's totals" in m for m in findings), findings
