"""The rules sheet a player reads (``blackjack rules``, ``rules`` in ``blackjack play``):
written from the table's ``Rules``, so every rule a player meets shows in it and an override
changes it."""

from __future__ import annotations

import asyncio
import shlex
import threading
from pathlib import Path
from typing import Any

import pytest

from blackjack.cli import build_parser, main
from blackjack.domain import commands as cmd
from blackjack.domain.rules import (
    LATER_TERMS,
    MAX_BET,
    PRESETS,
    Rules,
    fingerprint,
    preset,
    stored_rules,
)
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import encode, to_wire
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter, Record
from blackjack.rules_sheet import Returns, as_dealt_command, rules_sheet, table_returns
from blackjack.scenario import Scenario, load, run
from tests.integration.conftest_projections import Script

NOT_A_PLAYER_RULE = {"name", "insurance_pays"}
"""The variant's label, and insurance's payout that no table may change (always 2 to 1)."""

OVERRIDES: dict[str, dict[str, Any]] = {
    "currency": {"currency": "EUR"},
    "decks": {"decks": 6},
    "reshuffle": {"reshuffle": {"kind": "penetration", "used": "1/2"}},
    "dealer_hits_soft_17": {"dealer_hits_soft_17": True},
    "peek_on_ace": {"peek_on_ace": False},
    "peek_on_ten": {"peek_on_ten": False},
    "hole_card_first": {"hole_card_first": True},
    "peek_on_ace_only_if_insured": {"peek_on_ace_only_if_insured": True},
    "insurance": {"insurance": False},
    "late_surrender": {"late_surrender": True},
    "double_on": {"double_on": "totals", "double_totals": [10, 11]},
    "double_totals": {"double_on": "totals", "double_totals": [11]},
    "double_totals_ace_low": {
        "double_on": "totals",
        "double_totals": [9, 10, 11],
        "double_totals_ace_low": True,
    },
    "double_after_split": {"double_after_split": False},
    "max_splits": {"max_splits": 3},
    "split_by": {"split_by": "value"},
    "split_aces_one_card": {"split_aces_one_card": False},
    "blackjack_pays": {"blackjack_pays": "6/5"},
    "blackjack_win_rounded_down_to": {"blackjack_win_rounded_down_to": 5},
    "blackjack_paid_at_once": {"blackjack_paid_at_once": True},
    "surrender_paid_at_once": {"surrender_paid_at_once": True},
    "bust_settled_at_once": {"bust_settled_at_once": True},
    "min_bet": {"min_bet": 500},
    "max_bet": {"max_bet": 100_000},
    "boxes_per_seat": {"boxes_per_seat": 2},
    "rebet_multipliers": {"rebet_multipliers": [1, 2]},
    "rebet_deals": {"rebet_deals": True},
    "seats": {"seats": 3, "turn_seconds": 15},
    "turn_seconds": {"seats": 3, "turn_seconds": 20},
    "refund_bets_on_disconnect": {"refund_bets_on_disconnect": True},
    "interrupted_round_days": {"interrupted_round_days": 7},
    "break_even_message": {"break_even_message": True},
    "void_on_malfunction": {"void_on_malfunction": True},
    "move_declines_insurance": {"move_declines_insurance": False},  # atlantic-city's is true
    "seat_released_after_rounds_sat_out": {
        "seats": 3,
        "turn_seconds": 15,
        "seat_released_after_rounds_sat_out": 10,
    },
}


def sheet(rules: Rules) -> str:
    return "\n".join(rules_sheet(rules))


def test_every_rule_a_player_meets_has_an_override_below() -> None:
    """A new option of ``Rules`` must be taught to the sheet (and to this test)."""
    assert set(Rules.model_fields) - NOT_A_PLAYER_RULE == set(OVERRIDES)


@pytest.mark.parametrize("field", sorted(OVERRIDES))
def test_an_override_of_any_rule_changes_the_sheet(field: str) -> None:
    base = preset("atlantic-city")
    changed = base.with_overrides(OVERRIDES[field])
    if field in ("turn_seconds", "seat_released_after_rounds_sat_out"):
        base = base.with_overrides(OVERRIDES["seats"])
    if field == "double_totals_ace_low":  # said where doubling is on totals
        base = base.with_overrides({"double_on": "totals", "double_totals": [9, 10, 11]})
    if field == "surrender_paid_at_once":  # said where surrender is offered
        base = base.with_overrides({"late_surrender": True})
        changed = base.with_overrides(OVERRIDES[field])
    assert sheet(changed) != sheet(base)


@pytest.mark.parametrize(
    ("variant", "phrases"),
    [
        (
            "mini-h17",
            [
                "8 decks of 52 cards, shuffled again once 1/5 of the shoe has been dealt",
                "hits a soft 17",
                "again, or 2 times them (x2), and deals at once",
                "Surrender: once the dealer has checked for blackjack under an ace or a ten "
                "(at once under any other card",
                "Answer Yes or No to insurance before you play the hand.",
                '"Break Even"',
                "Bets from 1.00 to 500.00 USD a box",
            ],
        ),
        (
            "mini-s17",
            [
                "shuffled before every round",
                "stands on every 17, soft 17 included",
                "Double on a first-two-card total of 9, 10 or 11, also after a split",
                "Against a ten the dealer does not check",
                "first card is dealt face down",
                "Surrender is not offered",
            ],
        ),
        (
            "atlantic-city",
            [
                "pays 3 to 2; the winnings are paid in whole multiples of 1.00 USD",
                "the same rank (K-K, not K-Q) once (two hands)",
                "Split aces take one card each",
                "Instead of answering No you may play the hand (hit, stand, double, ...)",
            ],
        ),
        (
            "atlantic-city-multi",
            [
                "shuffled again once 1/3 of the shoe has been dealt",
                "A table of 5 seats",
                "15 seconds to bet and deal, or pass",
                "waits for the next round; seats change between rounds",
            ],
        ),
        (
            "surrender",
            [
                "4 decks of 52 cards, shuffled before every round",
                "on up to 3 boxes",
                "it is paid as soon as the dealer is known not to have one",
                "get half its bet back at once, to play your other hands with",
                "If you disconnect before the cards are dealt, your bet is returned",
                "unfinished for 30 days may be closed by the operator",
            ],
        ),
    ],
)
def test_each_preset_s_sheet_says_its_own_rules(variant: str, phrases: list[str]) -> None:
    text = sheet(PRESETS[variant])
    for phrase in phrases:
        assert phrase in text, phrase


def test_the_return_names_the_lowest_bet_level_only_when_it_is_lower() -> None:
    rules = preset("atlantic-city")
    lower = rules_sheet(rules, Returns(99.5123, 96.1259, 133))[-2]
    assert "99.51 %" in lower and "the lowest is 96.13 %, at a bet of 1.33 USD" in lower
    same = rules_sheet(rules, Returns(99.6616, 99.6601, 101))[-2]
    assert "99.66 %" in same and "lowest" not in same


@pytest.mark.parametrize("variant", sorted(PRESETS))
def test_the_return_says_which_figure_it_is_and_how_to_get_the_other(variant: str) -> None:
    """The sheet gave the return of a round off a full shoe ("from a full shoe: 99.39 %") and
    no word of the return as dealt to the reshuffle point (``blackjack rtp --as-dealt``, tens
    of seconds, so not computed here): a player of mini-h17 could take the one for the other.
    Now it says which it shows; where every round is off a fresh shoe the two are one, and
    elsewhere the other is named, with the command, and no figure claimed for it."""
    rules = PRESETS[variant]
    *_, shown, dealt = rules_sheet(rules, Returns(99.5, 99.5, 100))
    assert "for a round dealt from a full shoe: 99.50 %" in shown
    if variant in ("mini-h17", "atlantic-city-multi"):  # a shoe deals rounds to a cut
        assert "the return as dealt to that point differs" in dealt
        assert "not shown here" in dealt and "%" not in dealt
        assert f"; blackjack rtp {variant} --as-dealt computes it" in dealt
    else:
        assert dealt == (
            "Every round here is dealt from a freshly shuffled shoe: this is the return as dealt."
        )


def test_the_as_dealt_command_of_a_table_with_its_own_rules_computes_those_rules() -> None:
    """At a table opened with overrides the command named for the return as dealt carries
    them, so it computes the table's rules, not its preset's."""
    base = PRESETS["atlantic-city-multi"]
    own = base.with_overrides(
        {
            "min_bet": 500,
            "reshuffle": {"kind": "penetration", "used": "1/4"},
            "move_declines_insurance": False,
        }
    )
    command = as_dealt_command(own)
    assert command is not None
    args = build_parser().parse_args(shlex.split(command)[1:])
    assert (args.variant, args.as_dealt) == ("atlantic-city-multi", True)
    assert base.with_overrides(args.overrides) == own
    assert as_dealt_command(base) == "blackjack rtp atlantic-city-multi --as-dealt"
    assert "This table deals rounds from a shoe until 1/4 of it" in sheet_with_return(own)


def sheet_with_return(rules: Rules) -> str:
    return "\n".join(rules_sheet(rules, Returns(99.5, 99.5, 100)))


@pytest.mark.parametrize("variant", sorted(PRESETS))
def test_the_command_s_sheet_fits_an_80_column_terminal(
    variant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """``blackjack rules VARIANT`` printed each rule on one line of up to 300 columns."""
    assert main(["rules", variant, "--no-return"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 78, max(lines, key=len)
    assert all(line.startswith(("- ", "  ")) for line in lines[1:-1])


def test_the_command_prints_the_surrender_page_s_stated_return(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Page 003 states an RTP of 99.66 %: the sheet of its rules, computed, says the same."""
    assert main(["rules", "surrender"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("surrender: the rules\n- 4 decks")
    said = " ".join(out.split())  # wrapped at 78 columns
    assert "with basic strategy, for a round dealt from a full shoe: 99.66 %" in said


def test_the_command_prints_a_table_s_own_rules_from_the_read_model(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A table opened with overrides plays its own rules, which ``blackjack rules VARIANT``
    does not show (a QA session had no way outside ``blackjack play`` to see them)."""
    script = Script(
        "atlantic-city-multi",
        [["TS", "7S"]],
        players={"ann": 10_000},
        overrides={"seat_released_after_rounds_sat_out": 2, "min_bet": 500},
        stream_id="mt-1",
    )
    script.do(cmd.Withdraw(player_id="ann", amount=1))
    seal = ShoeSeal.from_hex(ShoeSeal.new_key_hex())
    records = [
        Record("blackjack.events", 0, offset, encode(to_wire(envelope, seal)))
        for offset, envelope in enumerate(script.envelopes)
    ]
    url = f"sqlite+aiosqlite:///{tmp_path / 'read.db'}"

    async def fold() -> None:
        store = ProjectionStore(url)
        try:
            await store.migrate()
            await ProjectionWriter(store).apply(records)
        finally:
            await store.close()

    asyncio.run(fold())
    assert main(["rules", "--table", "mt-1", "--db-url", url, "--no-return"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("mt-1 (atlantic-city-multi, with its own rules): the rules\n")
    assert "Bets from 5.00 to" in out
    assert "If you sit out 2 rounds in a row" in out
    # the name of its rule set in the game report (rules=apart), not the preset's
    own = PRESETS["atlantic-city-multi"].model_copy(
        update={"seat_released_after_rounds_sat_out": 2, "min_bet": 500}
    )
    assert out.endswith(f"Fingerprint (the game report's rules=apart lines): {fingerprint(own)}\n")
    assert fingerprint(own) != fingerprint(PRESETS["atlantic-city-multi"])
    assert main(["rules", "--table", "nope", "--db-url", url, "--no-return"]) == 2
    assert "no table 'nope'" in capsys.readouterr().err
    assert main(["rules", "--no-return"]) == 2


def test_a_rule_set_s_fingerprint_is_that_of_its_rules_however_stored(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Equal rules have one fingerprint whichever release stored them and in what order; any
    rule changed, another; ``blackjack rules VARIANT`` prints the preset's."""
    rules = PRESETS["surrender"]
    doc = rules.model_dump(mode="json")
    earlier = {k: doc[k] for k in reversed(doc) if k not in LATER_TERMS}
    assert fingerprint(stored_rules(earlier)) == fingerprint(rules) == "6e4064ec5ede9266"
    assert fingerprint(earlier) != fingerprint(rules)  # the document as it is: another
    for name, value in [("min_bet", 200), ("blackjack_pays", "6/5"), ("decks", 6)]:
        other = stored_rules({**doc, name: value})
        assert fingerprint(other) != fingerprint(rules), name
    assert main(["rules", "surrender", "--no-return"]) == 0
    assert capsys.readouterr().out.endswith(
        "\nFingerprint (the game report's rules=apart lines): 6e4064ec5ede9266\n"
    )


def test_the_shared_table_s_clock_is_described_as_the_engine_runs_it() -> None:
    """The sheet once told a player who bet but did not press Deal that he is left out (the
    clock deals his bet), and gave each decision 15 seconds (a hand has 15 seconds for all
    of them: a hit does not restart its clock). Bob bets at t=2 and never deals: at t=15 he
    is dealt in, carol (no bet) left out. Alice (5S 4S) hits at t=29: at t=30 her hand's
    clock, started at t=15, has run out and the server stands her 11."""
    played = run(
        Scenario.model_validate(
            {
                "variant": "atlantic-city-multi",
                "players": [
                    {"id": "alice", "seat": 0, "balance": 10_000},
                    {"id": "bob", "seat": 1, "balance": 10_000},
                    {"id": "carol", "seat": 2, "balance": 10_000},
                ],
                "shoe": ["5S", "TH", "7S", "4S", "9S", "TD", "2H"],
                "commands": [
                    {"do": "PlaceBet", "box": 0, "amount": 1000, "at": 0},
                    {"do": "Deal", "at": 1},
                    {"do": "PlaceBet", "player": "bob", "box": 1, "amount": 1000, "at": 2},
                    {"do": "ExpireTimers", "at": 15},
                    {"do": "Hit", "box": 0, "at": 29},
                    {"do": "ExpireTimers", "at": 30},
                    {"do": "Stand", "player": "bob", "box": 1, "at": 31},
                ],
                "expect": {
                    "events": [
                        {"type": "PlayerTimedOut", "player_id": "bob", "action": "dealt_in"},
                        {"type": "PlayerTimedOut", "player_id": "carol", "action": "left_out"},
                        {"type": "DealStarted", "boxes": [0, 1]},
                        {"type": "PlayerHit", "player_id": "alice"},
                        {"type": "PlayerTimedOut", "player_id": "alice", "action": "stood"},
                    ],
                    "hands": [
                        {"round": 1, "box": 0, "outcome": "lose", "stake": 1000},
                        {"round": 1, "box": 1, "outcome": "win", "stake": 1000},
                    ],
                },
            }
        ),
        emit=lambda line: None,
    )
    assert played["failures"] == []
    text = sheet(PRESETS["atlantic-city-multi"])
    assert "a bet on the table is dealt as if you had pressed Deal" in text
    assert "with no bet you are left out of the round" in text
    assert "Each hand has 15 seconds for all its decisions (a hit does not restart" in text
    assert "or is left out of the round" not in text and "each decision has" not in text


@pytest.mark.parametrize(
    ("scenario", "phrases"),
    [
        ("mini-h17-no-surrender-after-split", ["on its first two cards, not after a split"]),
        (
            "mini-h17-odd-cents-insurance-and-surrender",
            ["half its bet (an odd cent is not charged)", "(an odd cent stays with the house)"],
        ),
    ],
)
def test_surrender_and_insurance_are_described_as_the_engine_plays_them(
    scenario: str, phrases: list[str]
) -> None:
    """The sheet once offered surrender on any two-card hand (a split hand's is refused) and
    half the bet back (10.01 surrendered returns 5.00): the scenario plays what it says."""
    path = Path(__file__).parents[1] / "scenarios" / f"{scenario}.yaml"
    loaded = load(path)
    assert run(loaded, emit=lambda line: None)["failures"] == []
    text = sheet(PRESETS[loaded.variant])
    for phrase in phrases:
        assert phrase in text, phrase


def test_the_lowest_return_is_found_without_trying_every_bet_up_to_the_maximum() -> None:
    """``rules`` in ``blackjack play`` computes the return of the table's own rules: it tried
    every bet from the minimum to the maximum (33 us each), so a table opened with a maximum
    of 10^9 minor units took some nine hours, and 10^12 (``MAX_BET``) a year, in a thread the
    session waits on. The answer is the one trying every bet gives (at 1.33 USD), at any
    maximum, in seconds."""
    small = preset("atlantic-city").with_overrides({"max_bet": 2_000})
    from blackjack.strategy import compute_rtp

    every = min((compute_rtp(small, bet).rtp_percent, bet) for bet in range(100, 2_001))
    assert every[1] == 133
    found = table_returns(small)
    assert (found.lowest_percent, found.lowest_at_bet) == every
    answers: list[Returns] = []
    largest = preset("atlantic-city").with_overrides({"max_bet": MAX_BET})
    worker = threading.Thread(target=lambda: answers.append(table_returns(largest)), daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert answers, "no answer within 60 s"
    assert (answers[0].lowest_percent, answers[0].lowest_at_bet) == every
    assert answers[0].rtp_percent == found.rtp_percent


def test_a_blackjack_s_odd_cent_not_paid_is_said() -> None:
    """3 to 2 on 1.01 wins 1.51 (``payouts.blackjack_winnings`` floors the cent): a sheet
    that says only "pays 3 to 2" promises 1.515. Even money and 2 to 1 have no cent to cut."""
    from blackjack.domain.payouts import blackjack_winnings

    rules = preset("mini-h17")
    assert blackjack_winnings(rules, 101) == 151
    assert "pays 3 to 2; the winnings are paid in whole multiples of 0.01 USD" in sheet(rules)
    assert "whole multiples" not in sheet(rules.with_overrides({"blackjack_pays": 2}))


def test_surrender_where_the_dealer_does_not_check_is_described_as_played() -> None:
    """At a table whose dealer does not check a ten (mini-s17) opened with surrender, a hand
    surrendered against a ten gets half back even when the hole card makes a blackjack: the
    sheet said surrender came after the check and that such a blackjack takes every bet."""
    played = run(
        Scenario.model_validate(
            {
                "variant": "mini-s17",
                "rules": {"late_surrender": True},
                "balance": 10_000,
                # the hole card first at mini-s17: T 6 for the player, AS down, KS up
                "shoe": ["TS", "AS", "6S", "KS"],
                "commands": [
                    {"do": "PlaceBet", "box": 0, "amount": 1000},
                    "Deal",
                    {"do": "Surrender", "box": 0},
                ],
                "expect": {
                    "hands": [{"outcome": "surrender", "stake": 1000, "payout": 500}],
                    "events": [{"type": "DealerHoleCardRevealed", "card": "AS"}],
                },
            }
        ),
        emit=lambda line: None,
    )
    assert played["failures"] == []
    text = sheet(preset("mini-s17").with_overrides({"late_surrender": True}))
    assert "splits included, but half of a surrendered hand comes back." in text
    assert "a ten included, which she does not check, before she turns her hole card" in text


def test_a_player_left_out_is_told_the_next_rounds_do_not_wait_for_him() -> None:
    """The sheet gave every player the clock's 15 seconds to bet; one the clock left out sits
    out (``betting.deal_when_all_decided``): round 2 is dealt the moment alice deals, carol
    given no time at all."""
    played = run(
        Scenario.model_validate(
            {
                "variant": "atlantic-city-multi",
                "players": [
                    {"id": "alice", "seat": 0, "balance": 10_000},
                    {"id": "carol", "seat": 1, "balance": 10_000},
                ],
                "shoe": ["TS", "7S", "9S", "TD", "TH", "7H", "9H", "TC"],
                "commands": [
                    {"do": "PlaceBet", "box": 0, "amount": 1000, "at": 0},
                    {"do": "Deal", "at": 1},
                    {"do": "ExpireTimers", "at": 15},
                    {"do": "Stand", "box": 0, "at": 16},
                    {"do": "PlaceBet", "box": 0, "amount": 1000, "at": 20},
                    {"do": "Deal", "at": 21},
                    {
                        "do": "PlaceBet",
                        "player": "carol",
                        "box": 1,
                        "amount": 1000,
                        "at": 22,
                        "reject": "not_betting_time",
                    },
                ],
                "expect": {
                    "events": [
                        {"type": "PlayerTimedOut", "player_id": "carol", "sits_out": True},
                        {"type": "DealStarted", "round": 2, "boxes": [0]},
                    ],
                },
            }
        ),
        emit=lambda line: None,
    )
    assert played["failures"] == []
    text = sheet(PRESETS["atlantic-city-multi"])
    assert "sit out: later rounds are dealt without waiting for you until you bet" in text


def test_split_aces_are_not_split_again_where_other_pairs_may_be() -> None:
    """With three splits allowed, aces split take one card each and stand: A A dealt to a
    split ace is not split again (the table finishes the round), which the sheet's "up to
    3 times" did not except."""
    played = run(
        Scenario.model_validate(
            {
                "variant": "atlantic-city",
                "rules": {"max_splits": 3},
                "balance": 10_000,
                "shoe": ["AS", "7S", "AH", "TD", "AD", "9C"],
                "commands": [
                    {"do": "PlaceBet", "box": 0, "amount": 1000},
                    "Deal",
                    {"do": "Split", "box": 0},
                    {"do": "Split", "box": 0, "hand": 0, "reject": "not_your_turn"},
                ],
                "expect": {"hands": [{"hand": 0, "outcome": "lose"}, {"hand": 1}]},
            }
        ),
        emit=lambda line: None,
    )
    assert played["failures"] == []
    text = sheet(preset("atlantic-city").with_overrides({"max_splits": 3}))
    assert "up to 3 times (4 hands)" in text
    assert "Split aces take one card each, and a pair of aces is split once only." in text
    assert "Split aces take one card each." in sheet(preset("atlantic-city"))


def test_a_seat_freed_after_one_round_sat_out_is_said_in_a_sentence() -> None:
    """The sheet's sentence for a count of 1 read "If you sit out round, ... when the last of
    them ends"."""
    rules = preset("atlantic-city").with_overrides(
        {"seats": 3, "turn_seconds": 15, "seat_released_after_rounds_sat_out": 1}
    )
    assert "If you sit out a round, the server stands you up when it ends:" in sheet(rules)
    rules = rules.with_overrides({"seat_released_after_rounds_sat_out": 2})
    assert (
        "If you sit out 2 rounds in a row, the server stands you up when the last of them ends:"
        in sheet(rules)
    )
