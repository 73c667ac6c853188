"""``double_totals_ace_low``: a soft hand doubles on its total with the ace counted one.

Page 001 doubles on "a total value of 9, 10 or 11" and lets the player "decide the value" of
an ace; the presets read the total as the one shown (A-8 is a 19), the option as either."""

from __future__ import annotations

from typing import Any

import pytest

from blackjack.audit.replay import replay_stream
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.rules import PRESETS, Rules, fingerprint, preset
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import to_wire
from tests.integration.conftest_projections import Script
from tests.unit.test_replay_engine import tamper

ACE_LOW: dict[str, object] = {"double_totals_ace_low": True}
# mini-s17 deals the hole card first: ann A, the dealer's hole 7, ann 8, the upcard 9; then
# ann's double draws the 5 (A-8-5 = 14), and the dealer's 16 draws the ace (17)
ACE_EIGHT_AGAINST_NINE = ["AS", "7S", "8S", "9S", "5S", "AH"]


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_no_preset_has_the_option_and_its_rules_document_does_not_name_it(name: str) -> None:
    # the pages' reading stays the preset's; a table opened before the option reads the same
    rules = preset(name)
    assert rules.double_totals_ace_low is False
    doc: dict[str, Any] = rules.model_dump(mode="json")
    assert "double_totals_ace_low" not in doc
    assert fingerprint(Rules.model_validate(doc)) == fingerprint(rules)
    with_option = preset("mini-s17").with_overrides(ACE_LOW)
    assert with_option.model_dump(mode="json")["double_totals_ace_low"] is True
    assert fingerprint(with_option) != fingerprint(preset("mini-s17"))


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
    seal = ShoeSeal.from_hex(ShoeSeal.new_key_hex())
    script = Script("mini-s17", [ACE_EIGHT_AGAINST_NINE], overrides=ACE_LOW)
    script.do(
        cmd.PlaceBet(player_id="alice", box=0, amount=1000),
        cmd.Deal(player_id="alice"),
        cmd.Double(player_id="alice", box=0),
    )
    log = [to_wire(e, seal) for e in script.envelopes if e.stream_id == script.stream_id]
    settled = [w.data for w in log if isinstance(w.data, ev.HandSettled)]
    assert [(e.outcome, e.stake, e.payout) for e in settled] == [("lose", 2000, 0)]
    assert [f.message for f in replay_stream(log, seal).findings] == []

    without = {"double_totals_ace_low": False}
    forged = tamper(log, ev.TableOpened, lambda e: {"rules": e.rules.model_copy(update=without)})
    findings = [f.message for f in replay_stream(forged, seal).findings]
    assert any("a double on 19, not one of the table's totals" in m for m in findings), findings
