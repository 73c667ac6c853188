"""``blackjack play``: what the player types becomes the table's command, and the screen shows
the table as the read model folds it (cards, totals, whose turn, the buttons, the money)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from rich.console import Console

from blackjack.domain import commands as cmd
from blackjack.domain.rules import Rules
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import to_wire
from blackjack.play.moves import (
    Help,
    History,
    NotAMove,
    Quit,
    ShowRules,
    amount_in_minor_units,
    move,
)
from blackjack.play.screen import history_screen, prompt_for, rules_screen, table_screen
from blackjack.projections.projector import StreamProjection
from blackjack.rules_sheet import Returns
from tests.integration.conftest_projections import Script

SEAL = ShoeSeal.from_hex(ShoeSeal.new_key_hex())
A = "alice"


def folded(script: Script) -> StreamProjection:
    table = StreamProjection.new(script.stream_id)
    for envelope in script.envelopes:
        if envelope.stream_id == script.stream_id:  # not the wallets funding a shared table
            table.apply(to_wire(envelope, SEAL))
    return table


def shown(table: StreamProjection, player_id: str = A) -> str:
    console = Console(width=100, record=True, color_system=None)
    console.print(table_screen(table, player_id))
    return console.export_text()


@pytest.mark.parametrize(
    ("text", "currency", "minor"),
    [
        ("5", "USD", 500),
        ("5.5", "USD", 550),
        ("0.01", "EUR", 1),
        ("1e2", "USD", 10_000),
        ("700", "JPY", 700),
        ("1.234", "KWD", 1234),
        ("5.000000000000000000000000000000000", "USD", 500),
        ("12345678901234567.89", "USD", 1234567890123456789),
    ],
)
def test_amounts_are_typed_in_the_currency_s_units(text: str, currency: str, minor: int) -> None:
    assert amount_in_minor_units(text, currency) == minor


@pytest.mark.parametrize(
    ("text", "currency"),
    [
        ("5.555", "USD"),
        ("5.5", "JPY"),
        ("0", "USD"),
        ("-1", "USD"),
        ("nan", "USD"),
        ("inf", "USD"),
        ("five", "USD"),
        ("", "USD"),
        # past decimal's 28 digits of precision: was rounded to 1.00 (100 cents) and sent
        ("1.000000000000000000000000000001", "USD"),
        ("5.0000000000000000000000000000000001", "USD"),
        ("1e1000000", "USD"),  # was decimal.Overflow: a traceback ended the session
        ("1e999", "USD"),
        ("5_0", "USD"),  # Decimal's underscores, other scripts' digits, signs
        ("\u0661\u0662", "USD"),
        ("+5", "USD"),
    ],
)
def test_an_amount_that_is_not_exact_money_is_refused_not_rounded(text: str, currency: str) -> None:
    with pytest.raises(NotAMove):
        amount_in_minor_units(text, currency)


def test_a_decision_goes_to_the_hand_whose_turn_it_is() -> None:
    script = Script("atlantic-city", [["8H", "7S", "8D", "QD", "5C", "2C"]])
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    script.do(cmd.Split(player_id=A, box=0, hand=0), cmd.Stand(player_id=A, box=0, hand=0))
    table = folded(script)
    assert move("h", table, A) == cmd.Hit(player_id=A, box=0, hand=1)
    assert move(" STAND ", table, A) == cmd.Stand(player_id=A, box=0, hand=1)
    assert move("d", table, A) == cmd.Double(player_id=A, box=0, hand=1)
    text = shown(table)
    assert "hand 1" in text and "hand 2" in text
    assert "◀ your turn" in text.split("hand 2")[1]  # the second hand's line
    assert "your move: hit (h)  stand (s)  double (d)" in text


def test_bets_money_and_the_table_s_other_commands() -> None:
    table = folded(Script("surrender", [], players={A: 10_000}))  # three boxes a seat
    assert move("bet 2.50", table, A) == cmd.PlaceBet(player_id=A, box=0, amount=250)
    assert move("b 5 box 2", table, A) == cmd.PlaceBet(player_id=A, box=2, amount=500)
    assert move("deposit 20", table, A) == cmd.Deposit(player_id=A, amount=2000)
    assert move("w 1.05", table, A) == cmd.Withdraw(player_id=A, amount=105)
    assert move("rebet2", table, A) == cmd.Rebet(player_id=A, multiplier=2)
    assert move("deal", table, A) == cmd.Deal(player_id=A)
    assert move("leave", table, A) == cmd.LeaveTable(player_id=A)
    assert isinstance(move("q", table, A), Quit) and isinstance(move("?", table, A), Help)
    for wrong in ("", "bet", "bet 5 box two", "hit me", "fold", "bet 5.001"):
        with pytest.raises(NotAMove):
            move(wrong, table, A)


def test_a_seat_s_boxes_follow_the_rules_and_the_clock_is_shown() -> None:
    script = Script("atlantic-city-multi", [], players={A: 10_000, "bob": 10_000})
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=500))
    table = folded(script)
    assert move("bet 5", table, "bob") == cmd.PlaceBet(player_id="bob", box=1, amount=500)
    deadline = table.view.deadline
    assert deadline is not None
    console = Console(width=100, record=True, color_system=None)
    console.print(table_screen(table, "bob", deadline - timedelta(seconds=9.2)))
    text = console.export_text()
    assert "round 1 · betting · 10 s left" in text and "bet 5.00 (alice)" in text


def test_insurance_goes_to_the_box_offered_it_and_the_hole_card_stays_face_down() -> None:
    script = Script("mini-h17", [["TH", "AS", "9D", "7C"]])
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    table = folded(script)
    assert table.view.phase == "insurance"
    assert move("i", table, A) == cmd.TakeInsurance(player_id=A, box=0)
    assert move("n", table, A) == cmd.DeclineInsurance(player_id=A, box=0)
    assert prompt_for(table, A) == "insurance? i (take) / n (no)"
    text = shown(table)
    assert "A♠ ▒▒  shows A" in text and "7♣" not in text  # the hole card stays face down
    assert "balance 90.00 USD · in play 10.00" in text


def test_a_settled_round_shows_the_outcome_and_the_money() -> None:
    script = Script("atlantic-city", [["TH", "7S", "AH", "QD"]])  # blackjack: 3:2, cents dropped
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=500), cmd.Deal(player_id=A))
    text = shown(folded(script))
    assert "A♥ 10♥" in text or "10♥ A♥" in text
    assert "blackjack pays 12.00" in text  # 5.00 + 7.50 paid as 7.00
    assert "balance 107.00 USD" in text
    assert "bet AMOUNT, rebet, deal" in text


def test_a_lost_hand_is_not_said_to_pay() -> None:
    script = Script("atlantic-city", [["TH", "TS", "7H", "QD"]])
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=500), cmd.Deal(player_id=A))
    script.do(cmd.Stand(player_id=A, box=0, hand=0))
    text = shown(folded(script))
    assert "10♥ 7♥  17  lose" in text and "pays" not in text
    assert "10♠ Q♦  20" in text


def test_a_suspended_table_says_so_and_offers_no_bet_until_it_is_resumed() -> None:
    script = Script("atlantic-city", [])
    script.do(cmd.SuspendTable(operator="ops-1", reason="maintenance until 04:00"))
    text = shown(folded(script))
    assert "suspended by the operator: maintenance until 04:00" in text
    assert "bet AMOUNT" not in text and "withdraw AMOUNT" in text
    script.do(cmd.ResumeTable(operator="ops-1"))
    text = shown(folded(script))
    assert "suspended" not in text and "bet AMOUNT, rebet, deal" in text


def test_rules_shows_the_table_s_own_rules_overrides_included() -> None:
    script = Script("atlantic-city", [])
    assert move("rules", folded(script), A) == ShowRules()
    with pytest.raises(NotAMove):
        move("rules please", folded(script), A)
    opened = Rules.model_validate(folded(script).view.rules)
    paying = opened.with_overrides({"blackjack_pays": "6/5"})
    console = Console(width=200, record=True, color_system=None)
    console.print(rules_screen(paying, Returns(98.1, 98.1, 100)))
    text = console.export_text()
    assert "atlantic-city: the rules" in text and "pays 6 to 5" in text and "98.10 %" in text


def test_history_recalls_the_player_s_rounds_newest_first_with_the_money() -> None:
    script = Script("atlantic-city", [["TH", "7S", "AH", "QD"], ["TH", "TS", "7H", "QD"]])
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=500), cmd.Deal(player_id=A))  # blackjack
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    script.do(cmd.Stand(player_id=A, box=0, hand=0))  # 17 against 20
    table = folded(script)
    assert move("history", table, A) == History()
    console = Console(width=120, record=True, color_system=None)
    console.print(history_screen(table, A, 10))
    text = console.export_text()
    assert text.index("│     2 │") < text.index("│     1 │")  # newest first
    assert "10♥ 7♥  17  lose" in text and "blackjack pays 12.00" in text
    assert "107.00 -> 97.00" in text and "100.00 -> 107.00" in text
    console = Console(width=120, record=True, color_system=None)
    console.print(history_screen(table, "nobody", 10))
    assert "no rounds played here yet" in console.export_text()
