"""Page 001's "If you accept Insurance, the dealer will check ('peek') at their hole card for
Blackjack", read the other way: ``peek_on_ace_only_if_insured``.

mini-s17 reads the page as a dealer who views her hole card under an ace whatever the players
decide ("you are given the option to accept Insurance before the dealer views the hole card";
``test_seed_audit``'s declined-insurance test pins it). An operator who reads the sentence as a
condition sets the option: then, with no box insured, nobody checks the ace, the hands are
played, and a blackjack she turns over at the end takes every bet, as under her unchecked ten.
"""

from __future__ import annotations

import pytest

from blackjack.domain import commands as cmd
from blackjack.domain.rules import preset
from tests.integration.conftest_projections import Script
from tests.unit.test_replay_engine import SEAL, messages, wires, with_rules
from tests.unit.test_seed_audit import BET, S001, S003, play

ONLY_IF_INSURED: dict[str, object] = {"peek_on_ace_only_if_insured": True}
# mini-s17 deals the hole card before the upcard: player 5, dealer K (hole), player 6, dealer A
FIVE_SIX_AGAINST_ACE_KING = ["5S", "KS", "6S", "AS", "TS"]


def test_uninsured_the_dealer_does_not_check_her_ace_and_her_blackjack_takes_the_double() -> None:
    # given mini-s17 with the option, 5-6 against the dealer's A up and K in the hole
    played = play(
        "mini-s17",
        [
            BET,
            "Deal",
            {"do": "DeclineInsurance", "box": 0, "offered": ["insurance:0", "no_insurance:0"]},
            {"do": "Double", "box": 0, "offered": ["hit", "stand", "double"]},
        ],
        seed=S001,
        shoe=FIVE_SIX_AGAINST_ACE_KING,
        rules=ONLY_IF_INSURED,
    )
    # then no one insured, so no one checked: the 11 was doubled onto a T (21), and the
    # blackjack turned over at the end took the bet and the double
    assert played.failures == []
    assert played.of_type("DealerPeeked") == []
    types = played.types()
    assert types.index("HandDoubled") < types.index("DealerHoleCardRevealed")
    assert played.of_type("RoundSettled")[0]["dealer_blackjack"] is True
    assert played.hands() == [(0, 0, "lose", 2000, 0)]
    assert played.balance() == 8000


def test_insured_the_dealer_checks_her_ace_and_the_round_ends_on_her_blackjack() -> None:
    # given the same cards, and the player takes insurance
    played = play(
        "mini-s17",
        [
            BET,
            "Deal",
            {"do": "TakeInsurance", "box": 0},
            {"do": "Double", "box": 0, "reject": "not_your_turn"},
        ],
        seed=S001,
        shoe=FIVE_SIX_AGAINST_ACE_KING,
        rules=ONLY_IF_INSURED,
    )
    # then the dealer checked, found the blackjack: the $5 insurance paid 2:1 the $10 lost
    assert played.failures == []
    assert [e["has_blackjack"] for e in played.of_type("DealerPeeked")] == [True]
    assert "TurnStarted" not in played.types()
    assert played.hands() == [(0, 0, "lose", 1000, 0)]
    assert played.balance() == 10_000


def test_one_insured_box_has_the_dealer_check_for_every_box() -> None:
    # given surrender with the option, box 0 insured and box 1 not, the dealer A / 7
    played = play(
        "surrender",
        [
            {"do": "PlaceBet", "box": 0, "amount": 1000},
            {"do": "PlaceBet", "box": 1, "amount": 1000},
            "Deal",
            {"do": "TakeInsurance", "box": 0},
            {"do": "DeclineInsurance", "box": 1},
            {"do": "Stand", "box": 0},
            {"do": "Surrender", "box": 1, "offered": ["hit", "stand", "double", "surrender"]},
        ],
        seed=S003,
        shoe=["TS", "9S", "AS", "8S", "7S", "7H"],
        rules=ONLY_IF_INSURED,
    )
    # then she checked (no blackjack) before anyone played: T-8 stands on 18 against soft 18
    assert played.failures == []
    assert [e["has_blackjack"] for e in played.of_type("DealerPeeked")] == [False]
    # (box 1's surrender is paid when made, before the round settles box 0: page 003)
    assert played.hands() == [(1, 0, "surrender", 1000, 500), (0, 0, "push", 1000, 1000)]


@pytest.mark.parametrize("off", ["peek_on_ace", "insurance"])
def test_the_option_needs_a_peek_on_the_ace_and_insurance(off: str) -> None:
    # an ace never checked, or insurance never offered, leaves the option nothing to decide
    with pytest.raises(ValueError, match="needs peek_on_ace and insurance"):
        preset("mini-s17").with_overrides({**ONLY_IF_INSURED, off: False})


def test_the_audit_holds_the_log_to_the_option() -> None:
    """An unchecked ace is right at a table with the option, and found at one without it."""
    script = Script("mini-s17", [FIVE_SIX_AGAINST_ACE_KING], overrides=ONLY_IF_INSURED)
    script.do(
        cmd.PlaceBet(player_id="alice", box=0, amount=1000),
        cmd.Deal(player_id="alice"),
        cmd.DeclineInsurance(player_id="alice", box=0),
        cmd.Double(player_id="alice", box=0),
    )
    log = wires(script)
    assert messages(log, SEAL) == []

    findings = messages(with_rules(log, peek_on_ace_only_if_insured=False), SEAL)
    assert any("play started without the peek the rules require" in m for m in findings)
