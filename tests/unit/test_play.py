"""``blackjack play``: what the player types becomes the table's command, and the screen shows
the table as the read model folds it (cards, totals, whose turn, the buttons, the money)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import itertools
import time
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from rich.console import Console
from rich.text import Text

from blackjack.domain import commands as cmd
from blackjack.domain import wallet as wl
from blackjack.domain.rules import PRESETS, Rules
from blackjack.domain.wallet import WalletDeposit
from blackjack.messages.envelope import CommandResult
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import to_wire
from blackjack.play.cli import VARIANTS
from blackjack.play.follow import TableFollower, WalletFollower
from blackjack.play.moves import (
    Help,
    History,
    NotAMove,
    Quit,
    ShowRules,
    amount_in_minor_units,
    move,
)
from blackjack.play.screen import (
    clock_reminder,
    history_screen,
    prompt_for,
    result_line,
    rules_screen,
    table_screen,
)
from blackjack.play.session import PlaySession
from blackjack.projections.projector import StreamProjection
from blackjack.projections.wallets import Transfer, WalletView
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


def without_a_broker(table: StreamProjection) -> SimpleNamespace:
    """A session's follower, its table folded so far and no event of it kept."""
    return SimpleNamespace(
        table=table,
        stream_id=table.view.stream_id,
        sequence=table.view.last_sequence,
        folded_since=lambda sequence: [],
    )


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
        ("700", "JPY", 700),
        ("1.234", "KWD", 1234),
        ("5.000000000000000000000000000000000", "USD", 500),
        ("12345678901234.56", "USD", 1234567890123456),
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
        ("1e2", "USD"),  # was 100.00: a typo for 12 staked eight times as much
        ("1e-2", "USD"),
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
    # page 003: "You may bet on up to three hands": the prompt said "bet AMOUNT" alone
    # no rebet before a first round (page 003: "for your first bet, the Repeat control is
    # disabled")
    assert prompt_for(table, A).startswith("bet AMOUNT [box 0-2] · ")  # no deal: no chips
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


PAGE_002_INSURANCE = "insurance? i (take) / n (no), or decline by playing: h, s, d ..."


def test_at_page_002_a_move_typed_during_the_insurance_offer_declines_it_and_is_played() -> None:
    """Page 002: "If you do not wish to take insurance, you may simply click on one of the
    other buttons (hit, double down, stand, etc.)": h typed at the offer gets the hit."""
    script = Script("atlantic-city", [["TH", "AS", "5D", "7C", "2S"]])  # 15 vs A / 7
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    table = folded(script)
    assert table.view.phase == "insurance"
    assert prompt_for(table, A) == PAGE_002_INSURANCE
    hit = move("h", table, A)
    assert hit == cmd.Hit(player_id=A, box=0)
    script.do(hit)
    table = folded(script)
    assert table.view.phase == "playing"
    assert prompt_for(table, A).startswith("your move: ")
    text = shown(table)
    assert "10♥ 5♦ 2♠" in text and "insurance declined" in text


def test_at_page_002_the_box_s_insurance_line_says_a_move_declines_it_as_the_prompt_does() -> None:
    """Page 002 has no "no" button: "you may simply click on one of the other buttons (hit,
    double down, stand, etc.)". The prompt said so; the box's own line still read
    "insurance offered: i (take) / n (no)", as at the tables where a move is refused."""
    script = Script("atlantic-city", [["TH", "AS", "5D", "7C"]])
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    text = shown(folded(script))
    assert "insurance offered: i (take) / n (no), or decline by playing" in text
    assert PAGE_002_INSURANCE in text
    script = Script("mini-h17", [["TH", "AS", "5D", "7C"]])  # page 000: Yes or No only
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    text = shown(folded(script))
    [line] = [line for line in text.splitlines() if "insurance offered" in line]
    assert line.strip("│ ").endswith("insurance offered: i (take) / n (no)"), line
    assert "decline by playing" not in text


def test_at_the_shared_page_002_table_only_the_move_the_table_takes_is_offered_as_a_decline() -> (
    None
):
    """A move declines insurance only on the last insurance answer, and on the box that plays
    first (``decisions/insurance.py``). Every player offered insurance was told "or decline by
    playing: h, s, d ...": bob's s, typed as told, was refused (not_your_turn), box 0 still
    deciding or playing first."""
    players = {A: 10_000, "bob": 10_000}
    shoe = ["TH", "9S", "AS", "5D", "7C", "7H", "2S", "3S"]  # 15 and 16 against A / 7
    script = Script("atlantic-city-multi", [shoe], players)
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000))
    script.do(cmd.PlaceBet(player_id="bob", box=1, amount=1000))
    script.do(cmd.Deal(player_id=A), cmd.Deal(player_id="bob"))
    table = folded(script)
    assert table.view.phase == "insurance"
    for player in (A, "bob"):  # two answers open: no move declines yet
        said = prompt_for(table, player)
        assert said == "insurance? i (take) / n (no), then play when your turn comes", player
        assert "decline by playing" not in shown(table, player)
        assert not script.submit(cmd.Stand(player_id=player, box=int(player == "bob")))
    script.do(cmd.DeclineInsurance(player_id=A, box=0))
    table = folded(script)  # bob's is the last answer, but alice's box plays first
    assert prompt_for(table, "bob").endswith("then play when your turn comes")
    assert not script.submit(cmd.Stand(player_id="bob", box=1))
    script = Script("atlantic-city-multi", [shoe], players)
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000))
    script.do(cmd.PlaceBet(player_id="bob", box=1, amount=1000))
    script.do(cmd.Deal(player_id=A), cmd.Deal(player_id="bob"))
    script.do(cmd.TakeInsurance(player_id="bob", box=1))
    table = folded(script)  # alice's is the last answer, and her box plays first
    assert prompt_for(table, A) == PAGE_002_INSURANCE
    assert "insurance offered: i (take) / n (no), or decline by playing" in shown(table)
    assert script.submit(cmd.Hit(player_id=A, box=0))


def test_a_settled_round_shows_the_outcome_and_the_money() -> None:
    script = Script("atlantic-city", [["TH", "7S", "AH", "QD"]])  # blackjack: 3:2, cents dropped
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=500), cmd.Deal(player_id=A))
    text = shown(folded(script))
    assert "A♥ 10♥" in text or "10♥ A♥" in text
    assert "blackjack pays 7.00 (12.00 back)" in text  # page 002: "$5 ... plus $7"
    assert "balance 107.00 USD" in text
    assert "bet AMOUNT, rebet · " in text


def test_pays_is_what_a_wager_wins_as_the_pages_say_and_the_rest_comes_back() -> None:
    """The pages' "pays" is the winnings: "a $10 bet pays out $10 and you get your initial bet
    back" (003), "$5 (your bet) plus $7" (002). The screen's "pays" was the whole return: a
    push "pays 10.00" (nothing won), a surrender "pays 5.00", an insurance of 5.00 won "pays
    15.00" where 003 says the player "receives $10"."""
    script = Script("mini-h17", [["TH", "9S", "9H", "QD", "TH", "9S", "6H", "QD"]])  # one shoe
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    script.do(cmd.Stand(player_id=A, box=0, hand=0))  # 19 against 19
    text = shown(folded(script))
    assert "10♥ 9♥  19  push, 10.00 back" in text and "pays" not in text
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    script.do(cmd.Surrender(player_id=A, box=0, hand=0))
    text = shown(folded(script))
    assert "10♥ 6♥  16  surrender, 5.00 back" in text and "pays" not in text
    script = Script("mini-h17", [["TH", "AS", "9D", "KC"]])
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    script.do(cmd.TakeInsurance(player_id=A, box=0))
    text = shown(folded(script))
    assert "insurance 5.00 won, pays 10.00 (15.00 back)" in text
    assert "balance 100.00 USD" in text  # 100 - 10 - 5 + 15: the bet lost, the insurance won


def test_with_several_boxes_offered_insurance_the_screen_says_which_box_i_or_n_answers() -> None:
    """Page 003's three boxes: each box's line read "insurance offered: i (take) / n (no)"
    and the prompt "insurance? i (take) / n (no)", as if one i insured them all; it insures
    the first box still offered it, the others are asked in turn."""
    script = Script("surrender", [["TH", "9S", "AS", "6D", "7C", "8H"]])
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.PlaceBet(player_id=A, box=1, amount=1000),
        cmd.Deal(player_id=A),
    )
    table = folded(script)
    assert prompt_for(table, A) == "insurance on box 0? i (take) / n (no)"
    text = shown(table)
    assert text.count("insurance offered: i (take) / n (no)") == 1
    assert text.index("insurance offered: i (take)") < text.index("Box 1")
    assert move("i", table, A) == cmd.TakeInsurance(player_id=A, box=0)
    script.do(cmd.TakeInsurance(player_id=A, box=0))
    table = folded(script)
    # one box left to answer: still named (the player has three)
    assert prompt_for(table, A) == "insurance on box 1? i (take) / n (no)"
    text = shown(table)
    assert "insurance taken 5.00" in text
    assert text.index("insurance offered: i (take) / n (no)") > text.index("Box 1")


def test_the_dealer_s_line_says_the_check_for_blackjack_found_none() -> None:
    """Pages 000 and 003: the dealer checks for blackjack on a ten or an ace before the
    player plays (surrender is offered only then). The screen showed "shows K" whether or not
    the dealer had checked; at page 001's tables, which never check on a ten, a blackjack
    turned up after the player's moves with nothing to tell the two apart."""
    script = Script("mini-h17", [["TH", "KS", "6H", "7D"]])
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    assert "K♠ ▒▒  shows K, checked: no blackjack" in shown(folded(script))
    script = Script("mini-s17", [["TH", "6D", "7H", "KS"]])  # the hole card dealt first
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    text = shown(folded(script))
    assert "▒▒ K♠  shows K " in text and "checked" not in text


def test_a_refusal_s_amounts_are_said_in_the_currency_the_player_typed() -> None:
    """The table's messages give amounts in minor units, as its commands carry them: "bet 501"
    at mini-h17 was answered "the maximum bet is 50000", which a player reads as 50,000
    dollars; "withdraw 1000" with 39.50 left, "needs 100000, the balance is 3950"."""
    script = Script("mini-h17", [], players={A: 3950})

    def refused(command: object) -> str:
        assert isinstance(command, cmd.COMMAND_TYPES)  # a move the table answers
        assert not script.submit(command)
        result = CommandResult(
            command_id="c-1",
            stream_id="table-1",
            status="rejected",
            rejection=script.rejection,
            handled_at=script.now,
        )
        return result_line(type(command).__name__, result, "USD").plain

    assert refused(move("bet 501", folded(script), A)) == (
        "PlaceBet refused (bet_above_maximum): the maximum bet is 500.00"
    )
    assert refused(move("withdraw 1000", folded(script), A)) == (
        "Withdraw refused (insufficient_funds): the withdrawal needs 1000.00, the balance is 39.50"
    )
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=50))
    assert refused(cmd.Deal(player_id=A)) == (
        "Deal refused (bet_below_minimum): box 0 holds 0.50, under the minimum bet of 1.00: "
        "add at least 0.50 or take it back"
    )
    # before: "box 0 holds a bet of 50, not 1000" to a player who typed "remove 10"
    assert refused(move("remove 10", folded(script), A)) == (
        "RemoveBet refused (invalid_amount): box 0 holds a bet of 0.50, not 10.00"
    )


def test_with_no_money_at_the_table_the_prompt_offers_paying_in_not_betting() -> None:
    """A player who lost the last of the balance was still offered "bet AMOUNT, rebet, deal
    · deposit AMOUNT, withdraw AMOUNT": each bet, rebet and withdraw typed was refused
    (insufficient_funds)."""
    script = Script("mini-h17", [["TH", "9S", "6H", "7D", "AS"]], players={A: 1000})
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    assert prompt_for(folded(script), A).startswith("your move: ")
    script.do(cmd.Stand(player_id=A, box=0, hand=0))  # 16 against 9 7 A: the last 10.00 lost
    table = folded(script)
    assert prompt_for(table, A) == (
        "no money at the table: deposit AMOUNT to bet · leave · ? help, q quit"
    )
    assert not script.submit(cmd.Rebet(player_id=A))
    script.do(cmd.Deposit(player_id=A, amount=500))
    # the 10.00 rebet is more than the 5.00 there: not offered (refused insufficient_funds)
    assert prompt_for(folded(script), A).startswith("bet AMOUNT · ")
    assert not script.submit(cmd.Rebet(player_id=A))
    script.do(cmd.Deposit(player_id=A, amount=500))
    assert prompt_for(folded(script), A).startswith("bet AMOUNT, rebet · ")  # not the 20.00
    script.do(cmd.Deposit(player_id=A, amount=1000))
    assert prompt_for(folded(script), A).startswith("bet AMOUNT, rebet, rebet2 · ")
    shared = Script("atlantic-city-multi", [], players={A: 0, "bob": 5_000})
    assert prompt_for(folded(shared), A).startswith("no money at the table: buyin AMOUNT")
    assert prompt_for(folded(shared), "bob").startswith("bet AMOUNT, pass")
    assert not shared.submit(cmd.Deal(player_id="bob"))  # no chips down: not offered


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
    assert "suspended" not in text and "bet AMOUNT · " in text


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
    console = Console(width=80, record=True, color_system=None)
    console.print(rules_screen(paying, Returns(98.1, 98.1, 100)))
    lines = console.export_text().splitlines()
    # a rule wrapped at 80 columns goes on under its text, not under its dash
    assert (
        "│ - Bets from 1.00 to 500.00 USD a box (a double or a split may take a box's   │" in lines
    )
    assert (
        "│   stake past the maximum).                                                   │" in lines
    )


def test_history_recalls_the_player_s_rounds_newest_first_with_the_money() -> None:
    script = Script("atlantic-city", [["TH", "7S", "AH", "QD"], ["TH", "TS", "7H", "QD"]])
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=500), cmd.Deal(player_id=A))  # blackjack
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    script.do(cmd.Stand(player_id=A, box=0, hand=0))  # 17 against 20
    table = folded(script)
    assert move("history", table, A) == History()
    console = Console(width=160, record=True, color_system=None)
    console.print(history_screen(table, A, 10))
    text = console.export_text()
    assert text.index("│  table-1:2 │") < text.index("│  table-1:1 │")  # newest first
    assert "stake 10.00  10♥ 7♥  17  lose" in text and "stake 5.00  10♥ A♥" in text
    assert "blackjack pays 7.00 (12.00 back)" in text
    assert "107.00 -> 97.00" in text and "100.00 -> 107.00" in text
    assert f"{A} at {table.view.stream_id}, last 2 rounds" in text
    console = Console(width=120, record=True, color_system=None)
    console.print(history_screen(table, A, 1))
    assert f"{A} at {table.view.stream_id}, last round" in console.export_text()  # not "1 rounds"
    console = Console(width=120, record=True, color_system=None)
    console.print(history_screen(table, "nobody", 10))
    assert "no rounds played here yet" in console.export_text()


def test_history_says_when_each_game_cycle_was_played_its_id_its_boxes_and_splits() -> None:
    """GLI-19's game recall: the date and time of each game cycle and its unique id, each
    wager (a split's too) on the box it was made on, and a round still under way shown as such
    with the money it holds. The lab's recall at a three-box surrender table showed four hand
    lines and no box, no split, no time, and a round in play as "wagered 0.00"."""
    script = Script("surrender", [["8S", "TD", "7C", "8H", "9D", "2C", "3S"], ["TH", "9C", "7S"]])
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.PlaceBet(player_id=A, box=1, amount=1000),
        cmd.Deal(player_id=A),
        cmd.Split(player_id=A, box=0, hand=0),
        cmd.Stand(player_id=A, box=0, hand=0),
        cmd.Stand(player_id=A, box=0, hand=1),
    )
    script.tick(60)
    script.do(cmd.Stand(player_id=A, box=1, hand=0))  # 17 against 19
    script.tick(3600)
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=500), cmd.Deal(player_id=A))
    table = folded(script)
    first, second = table.rounds[1], table.rounds[2]
    assert first.status == "settled" and second.status == "playing"
    console = Console(width=180, record=True, color_system=None)
    console.print(history_screen(table, A, 10))
    text = console.export_text()
    assert "table-1:1" in text and "table-1:2" in text
    assert f"{first.opened_at:%Y-%m-%d %H:%M:%S}" in text
    assert first.closed_at is not None and f"to {first.closed_at:%H:%M:%S}" in text
    assert f"{second.opened_at:%Y-%m-%d %H:%M:%S}" in text and "not finished" in text
    assert "box 0  stake 10.00  8♠ 3♠  11  (split)  lose" in text
    assert "box 0  stake 10.00  8♥ A♠  soft 19  (split)  win pays 10.00 (20.00 back)" in text
    assert "box 1  stake 10.00  10♦ 9♦  19  win pays 10.00 (20.00 back)" in text
    assert "in play 5.00" in text  # not "wagered 0.00" for the round under way


def test_history_shows_what_a_round_in_play_has_paid_so_far() -> None:
    """Page 003's surrender is paid at once: the round's line holds it before the round ends
    (the read model's line follows each payment), and the recall said paid "-" until then."""
    script = Script("surrender", [["TS", "9C", "TD", "6H", "8D", "7C"]])
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.PlaceBet(player_id=A, box=1, amount=1000),
        cmd.Deal(player_id=A),
        cmd.Surrender(player_id=A, box=0, hand=0),  # 16 against a ten: half back, at once
    )
    table = folded(script)
    assert table.rounds[1].status == "playing"
    for width in (180, 80):
        console = Console(width=width, record=True, color_system=None)
        console.print(history_screen(table, A, 10))
        assert "5.00 so far" in console.export_text(), width


def test_history_shows_money_paid_in_and_taken_out_during_a_round() -> None:
    """The recall review: a deposit of 1.11 and a withdrawal of 2.22 while the round played
    left "wagered 10.00 · paid 20.00 · balance 100.00 -> 98.89" on the line, which does not
    add up; the line names them."""
    script = Script("mini-h17", [["TS", "7S", "TD", "9H"]])
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.Deal(player_id=A),
        cmd.Deposit(player_id=A, amount=111),
        cmd.Withdraw(player_id=A, amount=222),
        cmd.Stand(player_id=A, box=0),  # 20 against 16, the dealer draws 9: bust
    )
    for width in (180, 80):
        console = Console(width=width, record=True, color_system=None)
        console.print(history_screen(folded(script), A, 10))
        text = " ".join(console.export_text().split())
        assert "100.00 -> 108.89 (paid in 1.11, taken out 2.22)" in text, text


def test_history_at_80_columns_keeps_each_cycle_s_date_and_each_hand_on_a_line() -> None:
    """``history`` at an 80-column terminal squeezed the table's seven columns to 9 each:
    the date was cut to "2026-03-…" (GLI-19's recall gives each game's date and time), and a
    hand took five lines. Narrower than the table, each cycle is a block."""
    script = Script("surrender", [["8S", "TD", "7C", "8H", "9D", "2C", "3S"], ["TH", "9C", "7S"]])
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.PlaceBet(player_id=A, box=1, amount=1000),
        cmd.Deal(player_id=A),
        cmd.Split(player_id=A, box=0, hand=0),
        cmd.Stand(player_id=A, box=0, hand=0),
        cmd.Stand(player_id=A, box=0, hand=1),
    )
    script.do(cmd.Stand(player_id=A, box=1, hand=0))
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=500), cmd.Deal(player_id=A))
    table = folded(script)
    first, second = table.rounds[1], table.rounds[2]
    assert first.closed_at is not None
    console = Console(width=80, record=True, color_system=None)
    console.print(history_screen(table, A, 10))
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 80, text
    lines = [line.rstrip() for line in text.splitlines()]
    assert f"{A} at table-1, last 2 rounds (times in UTC)" in lines
    assert f"table-1:2  {second.opened_at:%Y-%m-%d %H:%M:%S} not finished (playing)" in lines
    assert f"table-1:1  {first.opened_at:%Y-%m-%d %H:%M:%S} to {first.closed_at:%H:%M:%S}" in lines
    assert "  box 0  stake 10.00  8♥ A♠  soft 19  (split)  win pays 10.00 (20.00 back)" in lines
    assert "  box 1  stake 10.00  10♦ 9♦  19  win pays 10.00 (20.00 back)" in lines
    assert "  dealer 7♣ 2♣ 2♠ 3♠ 4♠" in lines
    assert "  wagered 30.00 · paid 40.00 · balance 100.00 -> 110.00" in lines
    assert "  in play 5.00 · balance 110.00 -> 105.00" in lines


def test_history_shows_an_interrupted_round_and_how_it_was_completed() -> None:
    """GLI-19's interrupted games, as the lab recalled one at the surrender table: a bet the
    server gave back on a disconnection before Deal, then a dealt hand left when the player
    disconnected and finished on their return. The query API's log had every step; the
    player's history showed only the cards, as if nothing had happened. The bet given back
    ends its game cycle (no bet left, no clock to close it): the hand dealt later is the next
    cycle's, which starts with its own bet."""
    script = Script("surrender", [["6C", "7S", "JH", "7C", "5C"]])
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=500), cmd.Disconnect(player_id=A))
    script.tick(10)
    script.do(
        cmd.Reconnect(player_id=A),
        cmd.PlaceBet(player_id=A, box=0, amount=500),
        cmd.Deal(player_id=A),
    )
    script.tick(5)
    script.do(cmd.Disconnect(player_id=A))
    script.tick(600)
    script.do(cmd.Reconnect(player_id=A), cmd.Stand(player_id=A, box=0, hand=0))
    table = folded(script)
    given_back, played = table.rounds[1], table.rounds[2]
    assert (given_back.status, played.status) == ("cancelled", "settled")
    [first_off] = [e.at for e in given_back.log if e.event == "PlayerDisconnected"]
    [second_off] = [e.at for e in played.log if e.event == "PlayerDisconnected"]
    [second_back] = [e.at for e in played.log if e.event == "PlayerReconnected"]
    [bet] = [e.at for e in played.log if e.event == "BetPlaced"]
    assert played.opened_at == bet > first_off
    console = Console(width=200, record=True, color_system=None)
    console.print(history_screen(table, A, 10))
    text = " ".join(console.export_text().replace("│", " ").split())
    assert f"table-1:1 {first_off:%Y-%m-%d %H:%M:%S} disconnected at {first_off:%H:%M:%S}" in text
    assert "bet of 5.00 returned by the server: disconnected before Deal" in text
    assert f"table-1:2 {bet:%Y-%m-%d %H:%M:%S} disconnected at {second_off:%H:%M:%S}" in text
    assert f"back at {second_back:%H:%M:%S}: the round went on as it was left" in text
    assert text.index(f"disconnected at {second_off:%H:%M:%S}") < text.index("6♣ J♥")


def test_history_shows_the_operator_suspending_the_table_during_a_round() -> None:
    """Game disable during a cycle: the round completes, and the player's recall says the
    table was suspended while it played (the query API's log had the TableSuspended)."""
    script = Script("mini-h17", [["TS", "7S", "9S", "TD"]])
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    script.tick(5)
    script.do(cmd.SuspendTable(operator="ops-1", reason="dealer maintenance"))
    script.do(cmd.Stand(player_id=A, box=0, hand=0))
    table = folded(script)
    [suspended] = [e.at for e in table.rounds[1].log if e.event == "TableSuspended"]
    console = Console(width=200, record=True, color_system=None)
    console.print(history_screen(table, A, 10))
    text = " ".join(console.export_text().split())
    assert f"table suspended at {suspended:%H:%M:%S} by the operator: dealer maintenance" in text
    assert "ops-1" not in text  # who on the operator's staff did it is for the record only
    assert "10♠ 9♠ 19 win pays 10.00 (20.00 back)" in text


def test_the_screens_show_what_the_server_decided_for_players_out_of_time() -> None:
    """The multi-player page's clock (dealt in, left out, a hand stood at its deadline) and
    the interrupted-games rule (the server records the decisions it made for the player):
    the screens showed a stood 16 as if the player had stood it, and nothing of being left
    out; only the query API's ``decided_by`` said so."""
    players = {A: 10_000, "bob": 10_000, "carol": 10_000}
    script = Script("atlantic-city-multi", [["TH", "TS", "9D", "8H", "6C", "8S"]], players)
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000))
    script.do(cmd.PlaceBet(player_id="bob", box=1, amount=1000), cmd.Deal(player_id=A))
    script.tick(16)
    script.do(cmd.ExpireTimers())  # bob bet and pressed nothing, carol did not bet
    script.do(cmd.Stand(player_id=A, box=0, hand=0))
    script.tick(16)
    script.do(cmd.ExpireTimers())  # bob's 16 stood for him
    table = folded(script)
    assert not table.view.round_open
    bob = shown(table, "bob")
    assert "10♠ 6♣  16  (stood by the server: no move in time)  lose" in bob
    assert "dealt in by the server at the deadline" in bob
    assert "carol left out of the round by the server: no bet or pass in time" in " ".join(
        bob.split()
    )
    alice = shown(table)
    assert (
        "10♥ 8♥  18  win pays 10.00 (20.00 back)" in alice
        and "(stood" not in alice.split("Box 1")[0]
    )
    assert "16  (stood by the server: no move in time)  lose" in alice
    console = Console(width=180, record=True, color_system=None)
    console.print(history_screen(table, "bob", 10))
    recalled = console.export_text()
    assert "16  (stood by the server: no move in time)  lose" in recalled
    # the decision for no one box too (a review: only the live screen said it)
    assert "dealt in by the server at the deadline" in recalled


def test_the_screen_says_why_a_bet_was_given_back() -> None:
    """The surrender page's disconnection policy returns a bet not dealt: the screen showed
    the balance back and the bet gone, and the player's Deal refused (no_bets), unexplained."""
    script = Script("surrender", [], players={A: 10_000})
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Disconnect(player_id=A))
    text = shown(folded(script))
    assert "your bet of 10.00 returned: disconnected before Deal" in text
    assert "balance 100.00 USD" in text


def test_only_a_player_offered_insurance_is_asked_for_it_and_its_result_is_shown() -> None:
    """At a shared table every screen said "insurance? i (take) / n (no)" in the insurance
    phase: to a player with a blackjack (never offered it), one who passed, one who had
    answered; each ``i`` or ``n`` typed was refused (insurance_not_offered). A settled
    insurance showed as "insurance settled", not what it cost or paid."""
    players = {A: 10_000, "bob": 10_000, "carol": 10_000}
    script = Script("atlantic-city-multi", [["TH", "AS", "AD", "9H", "KS", "7C"]], players)
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000))
    script.do(cmd.PlaceBet(player_id="bob", box=1, amount=1000), cmd.Pass(player_id="carol"))
    script.do(cmd.Deal(player_id=A), cmd.Deal(player_id="bob"))
    table = folded(script)
    assert table.view.phase == "insurance"
    assert prompt_for(table, A) == PAGE_002_INSURANCE
    assert prompt_for(table, "bob") == "waiting for the insurance answers"  # a blackjack
    # no box: told so at once (a player sitting down now was told only by a bet refused)
    assert prompt_for(table, "carol") == (
        "waiting for the insurance answers · you play from the next round"
    )
    script.do(cmd.SitDown(player_id="dave", seat=3))
    assert prompt_for(folded(script), "dave").endswith(" · you play from the next round")
    assert "A♠ K♠  blackjack" in shown(table, "bob")
    script.do(cmd.TakeInsurance(player_id=A, box=0), cmd.Stand(player_id=A, box=0, hand=0))
    text = shown(folded(script))
    assert "insurance 5.00 lost" in text and "10♥ 9♥  19  win pays 10.00 (20.00 back)" in text
    assert "A♠ K♠  blackjack pays 15.00 (25.00 back)" in text
    assert "balance 105.00 USD" in text  # 100 - 10 - 5 + 20
    console = Console(width=140, record=True, color_system=None)
    console.print(history_screen(folded(script), A, 10))
    recall = console.export_text()  # the wager of 15.00 is the bet and its insurance
    assert "insurance 5.00 lost" in recall and "15.00" in recall, recall


def test_a_player_who_dealt_or_passed_at_a_shared_table_is_told_what_the_table_waits_for() -> None:
    """Page 002's shared table deals when every player has chosen Deal or Pass (or at the
    15 s deadline). After alice's Deal her screen still offered "bet AMOUNT, rebet, deal,
    pass": each deal typed was refused (already_dealt_in), and nothing said the table was
    waiting for bob."""
    players = {A: 10_000, "bob": 10_000, "carol": 10_000}
    script = Script("atlantic-city-multi", [["TH", "9S", "7H", "QD"]], players)
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    script.do(cmd.Pass(player_id="carol"))
    table = folded(script)
    assert table.view.phase == "betting"
    said = "the cards come when the others deal or pass, or at the deadline"
    assert prompt_for(table, A) == f"dealt in: {said}"
    assert prompt_for(table, "carol") == f"you pass this round: {said}"
    assert prompt_for(table, "bob").startswith("bet AMOUNT, pass")
    assert not script.submit(cmd.Deal(player_id=A))  # as the prompt no longer offers it
    assert not script.submit(cmd.PlaceBet(player_id=A, box=0, amount=500))


def test_a_player_changes_seats_between_rounds_and_then_bets_at_the_new_seat() -> None:
    """The multi-player page: "You may change your position on the table by clicking on the
    desired spot between hands". ``blackjack play`` had no move for it (MoveSeat)."""
    script = Script("atlantic-city-multi", [], players={A: 10_000, "bob": 10_000})
    table = folded(script)
    assert "seat 0 · balance 100.00 USD" in shown(table)
    assert move("seat 3", table, A) == cmd.MoveSeat(player_id=A, seat=3)
    for wrong in ("seat", "seat two", "seat -1", "seat 1 2"):
        with pytest.raises(NotAMove):
            move(wrong, table, A)
    script.do(cmd.MoveSeat(player_id=A, seat=3))
    table = folded(script)
    assert "seat 3 · balance 100.00 USD" in shown(table)
    assert move("bet 5", table, A) == cmd.PlaceBet(player_id=A, box=3, amount=500)


def test_a_player_who_left_is_told_so_and_can_sit_down_again() -> None:
    """After ``leave`` the screen said "balance 0.00 USD" and offered "bet AMOUNT, rebet,
    deal", every one of them refused (not_seated), and the session had no move to sit again."""
    script = Script("atlantic-city-multi", [], players={A: 5_000, "bob": 5_000})
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.LeaveTable(player_id=A))
    table = folded(script)
    text = " ".join(shown(table).split())
    assert "your bet of 10.00 returned: left the table" in text
    assert (
        "You not seated: sit N to sit down · cashed out to your wallet at this table in all: "
        "50.00 USD" in text
    )
    assert prompt_for(table, A) == "sit N to sit down at seat N · ? help, q quit"
    assert "bet AMOUNT" not in text and "balance" not in text
    assert move("sit 2", table, A) == cmd.SitDown(player_id=A, seat=2)
    script.do(cmd.SitDown(player_id=A, seat=2))
    assert "seat 2 · balance 0.00 USD" in shown(folded(script))


class _Unanswered:
    """A client whose commands reach the topic but get no answer in time (the service
    restarting, a partition changing hands)."""

    def __init__(self) -> None:
        self.sent: list[cmd.Command] = []

    async def execute(self, stream_id: str, command: cmd.Command, timeout: float) -> None:
        self.sent.append(command)
        raise TimeoutError


async def test_a_move_without_an_answer_in_time_is_said_and_the_session_goes_on() -> None:
    """The session ended ("blackjack play: TimeoutError", exit 2) when the service was away
    for longer than the timeout, and the bet it had sent was taken when the service came
    back: money moved with no client left to show it."""
    table = folded(Script("mini-h17", []))
    client = _Unanswered()
    follower = without_a_broker(table)
    session = PlaySession(client, follower, A, timeout=2.5)  # type: ignore[arg-type]
    shown_lines = await session.handle("bet 7")
    # naming the round the table shows next (its first): a copy sent later is refused, never
    # taken in a later round
    assert client.sent == [cmd.PlaceBet(player_id=A, box=0, amount=700, round=1)]
    assert not session.over
    console = Console(width=200, record=True, color_system=None)
    for line in shown_lines:
        console.print(line)
    text = console.export_text()
    assert "PlaceBet: no answer from the table in 2.5 s; it was sent, and the table may" in text
    assert "balance 100.00 USD" in text  # the screen as folded so far


def test_a_shared_table_s_screen_shows_the_wallet_it_is_funded_from() -> None:
    """Money at a shared table comes from the player's wallet and goes back to it: the screen
    showed the table's balance alone, never the wallet a buy-in drew on or a leave paid."""
    table = folded(Script("atlantic-city-multi", [], players={A: 5_000}))
    wallet = WalletView(stream_id="wallet:alice", player_id=A, balance=15_001, currency="USD")
    wallet.pending = [
        Transfer(
            transfer=2, table_id="table-1", amount=1_000, sent_at=datetime(2026, 3, 1, tzinfo=UTC)
        )
    ]
    console = Console(width=120, record=True, color_system=None)
    console.print(table_screen(table, A, None, wallet))
    text = " ".join(console.export_text().split())
    assert "Wallet 150.01 USD · 10.00 on its way to a table" in text
    assert "seat 0 · balance 50.00 USD" in text


async def test_quitting_says_the_seat_and_its_money_stay_at_the_table() -> None:
    """``q`` ended the session without a word: at a shared table the money stays at the
    table (only ``leave`` cashes out to the wallet) and nothing says so."""
    script = Script("atlantic-city-multi", [], players={A: 5_000})
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000))
    table = folded(script)
    follower = without_a_broker(table)
    session = PlaySession(_Unanswered(), follower, A)  # type: ignore[arg-type]
    said = " ".join(str(line) for line in await session.handle("q"))
    assert session.over
    # the screen's "balance 40.00 · in play 10.00", said apart (a walkthrough read the sum as
    # the balance)
    assert "still seated at table-1 with 50.00 USD (40.00 available and 10.00 in play)" in said
    assert "leave" in said


async def test_quitting_says_what_becomes_of_the_round_under_way() -> None:
    """Quitting mid-round said only "you are still seated ... type leave to cash out", the
    same at every table, and "leave to cash out" with 0.00 there. What happens to the round
    differs by page: the shared table's clock plays on (002), a bet not dealt is returned
    (003's disconnection policy), the round waits as it was left (000, 001)."""

    async def said_on_quitting(script: Script) -> str:
        session = PlaySession(_Unanswered(), without_a_broker(folded(script)), A)  # type: ignore[arg-type]
        return " ".join(str(line) for line in await session.handle("q"))

    script = Script("mini-h17", [["TH", "9S", "6H", "7D", "AS"]], players={A: 1000})
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    said = await said_on_quitting(script)
    assert said == (
        "you are still seated at table-1 with 10.00 USD (0.00 available and 10.00 in play): start "
        "blackjack play again and type leave to cash out; your round waits for you as you left "
        "it"
    )
    script.do(cmd.Stand(player_id=A, box=0, hand=0))  # 16 against 9 7 A: lost, nothing left
    said = await said_on_quitting(script)
    assert said == (
        "you are still seated at table-1, with no money there: start blackjack play again to "
        "play on"
    )
    script = Script("surrender", [], players={A: 5_000})
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000))
    said = await said_on_quitting(script)
    assert said.endswith("; your bet not dealt is returned to you once the table finds you gone")
    script = Script("atlantic-city-multi", [], players={A: 5_000, "bob": 5_000})
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000))
    said = await said_on_quitting(script)
    assert said.endswith(
        "; the round goes on without you: your bet is dealt in with the round (once the others "
        "press Deal, at the latest at the deadline), and the clock stands your hand"
    )
    script.do(cmd.Pass(player_id="bob"), cmd.Deal(player_id=A))
    said = await said_on_quitting(script)
    assert said.endswith(
        "; the round goes on without you: the clock stands your hand at its deadline"
    )


async def test_a_cash_out_not_in_the_wallet_in_time_is_said_to_be_on_its_way() -> None:
    """A ``leave`` at a shared table pays the seat's money out to the wallet in a second step
    (the wallet's ``CashOutReceived``): quitting before it landed showed the table's money
    gone and the wallet without it. Waited for up to the timeout; past it, said on its way."""
    script = Script("atlantic-city-multi", [], players={A: 5_000})
    before = len(script.envelopes)
    script.do(cmd.LeaveTable(player_id=A))
    table = TableFollower("127.0.0.1:1", "table-1")  # never started: folded by hand
    wallet = WalletFollower("127.0.0.1:1", A)
    for envelope in script.envelopes:
        if envelope.stream_id == "table-1":
            table._fold(to_wire(envelope, SEAL))
    landed = [e for e in script.envelopes if isinstance(e.data, wl.CashOutReceived)]
    assert [e.data.amount for e in landed if isinstance(e.data, wl.CashOutReceived)] == [5_000]
    for envelope in script.envelopes[:before]:  # the wallet before the cash-out
        if envelope.stream_id == "wallet:alice":
            wallet._fold(to_wire(envelope, SEAL))
    session = PlaySession(None, table, A, timeout=0.2, wallet=wallet)  # type: ignore[arg-type]
    session._since = script.envelopes[before - 1].sequence
    assert session.cashing_out() == 5_000
    assert "Wallet 0.00 USD · 50.00 on its way from this table" in text(session.screen())
    said = " ".join(text(line) for line in await session.quit())
    assert "cash-out of 50.00 USD from table-1 is on its way to your wallet" in said, said
    wallet._fold(to_wire(landed[0], SEAL))  # it lands: nothing more is owed
    assert session.cashing_out() == 0
    assert await session.quit() == []
    assert "Wallet 50.00 USD" in text(session.screen())


def text(renderable: object) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(renderable)
    return " ".join(console.export_text().split())


def test_a_shared_table_offers_its_own_moves_not_a_deposit() -> None:
    """A shared table is funded from the wallet (a table ``Deposit`` there is refused): the
    prompt offered "deposit AMOUNT" and neither buyin, pass nor a seat change."""
    table = folded(Script("atlantic-city-multi", [], players={A: 5_000}))
    prompt = prompt_for(table, A)
    assert "deposit" not in prompt
    for offered in ("bet AMOUNT", "pass", "buyin AMOUNT", "withdraw AMOUNT", "seat N", "leave"):
        assert offered in prompt, prompt
    assert "deposit AMOUNT" in prompt_for(folded(Script("mini-h17", [])), A)


def test_a_player_the_clock_waits_on_is_reminded_of_the_time_left() -> None:
    """The screen's "15 s left" is the time when it was drawn, and it is drawn again only
    when the table changes: 2 s before being left out, a player still read "15 s left"."""
    players = {A: 10_000, "bob": 10_000}
    script = Script("atlantic-city-multi", [["TH", "TS", "9D", "8H", "6C", "8S"]], players)
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000))
    table = folded(script)
    deadline = table.view.deadline
    assert deadline is not None
    soon = deadline - timedelta(seconds=3.5)
    said = clock_reminder(table, A, soon)  # she bet, and pressed neither Deal nor Pass
    assert said == "4 s left to deal or pass: then you are dealt in"
    said = clock_reminder(table, "bob", soon)
    assert said == "4 s left to bet: then you are left out of this round"
    assert clock_reminder(table, A, deadline) is None  # the clock's own turn now
    script.do(cmd.PlaceBet(player_id="bob", box=1, amount=1000), cmd.Deal(player_id=A))
    assert clock_reminder(folded(script), A, soon) is None  # A has pressed Deal
    script.do(cmd.Deal(player_id="bob"))
    table = folded(script)
    deadline = table.view.deadline
    assert deadline is not None and table.view.phase == "playing"
    soon = deadline - timedelta(seconds=2)
    assert (
        clock_reminder(table, A, soon) == "2 s left for your move: then the server stands the hand"
    )
    assert clock_reminder(table, "bob", soon) is None  # not bob's turn


def test_a_round_the_operator_closed_shows_who_decided_for_the_player() -> None:
    """The surrender page's 30 days: the operator closes an interrupted round and the server
    stands the hand (PlayerTimedOut after InterruptedRoundClosed); the player coming back
    reads it as the operator's closing, not as a move of their own."""
    script = Script("surrender", [["TS", "6H", "5S", "TD", "9C"]])
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    idle_since = script.now
    script.tick(30 * 24 * 3600)
    script.do(cmd.CloseInterruptedRound(operator="ops-1", idle_since=idle_since))
    table = folded(script)
    assert not table.view.round_open
    text = shown(table)
    assert "10♠ 5♠  15  (stood by the server: the operator closed the round after 30 days)" in text
    script.do(cmd.LeaveTable(player_id=A))
    text = wide(folded(script), A)
    assert (
        "not seated: sit N to sit down · paid out at this table in all:" in text
        and "wallet" not in text
    )


class _Answering:
    async def execute(self, stream_id: str, command: cmd.Command, timeout: float) -> object:
        return SimpleNamespace(status="accepted", rejection=None, last_sequence=None)


async def test_only_the_table_s_own_commands_count_as_presence_there() -> None:
    """The presence clock counts the commands a table handles: a wallet's (a buy-in) said
    nothing to it, and put off the session's next Reconnect as if it had."""
    table = folded(Script("surrender", []))
    follower = without_a_broker(table)
    session = PlaySession(_Answering(), follower, A)  # type: ignore[arg-type]
    session.last_sent = 0.0
    await session.send(WalletDeposit(player_id=A, amount=100))
    assert session.last_sent == 0.0
    await session.send(cmd.Reconnect(player_id=A))
    assert session.last_sent > 0.0


class _Beating:
    """A client that notes each command sent, and when the first one was."""

    def __init__(self) -> None:
        self.sent: list[cmd.Command] = []
        self.first = asyncio.Event()

    async def send(self, stream_id: str, command: cmd.Command, **_: object) -> str:
        self.sent.append(command)
        self.first.set()
        return "id"


async def test_a_session_started_over_a_bet_says_at_once_that_the_player_is_there() -> None:
    """The service's presence clock counts from the last command of the session before: a
    client started again 20 s later sent its first beat 10 s after its start, and the bet was
    returned under the player's eyes (``disconnected before Deal``), the Deal refused."""
    script = Script("surrender", [])
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000))
    client = _Beating()
    session = PlaySession(client, without_a_broker(folded(script)), A)  # type: ignore[arg-type]
    beating = asyncio.create_task(session.keep_present(every=10.0))
    try:
        await asyncio.wait_for(client.first.wait(), 2.0)  # before: 10 s
    finally:
        beating.cancel()
    assert client.sent == [cmd.Reconnect(player_id=A)]


def test_a_double_rebet_past_the_maximum_bet_is_not_offered() -> None:
    """Page 000's DOUBLE BET of a 300.00 bet is 600.00, over the 500.00 maximum: the table
    refuses it (bet_above_maximum), and the prompt offered it."""
    script = Script("mini-h17", [["TH", "6S", "QD", "TC", "KD"]], players={A: 200_000})
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=30_000), cmd.Deal(player_id=A))
    script.do(cmd.Stand(player_id=A, box=0, hand=0))
    assert prompt_for(folded(script), A).startswith("bet AMOUNT, rebet · ")
    assert not script.submit(cmd.Rebet(player_id=A, multiplier=2))
    assert script.submit(cmd.Rebet(player_id=A))


def test_a_bet_on_the_layout_at_a_suspended_table_is_offered_the_deal() -> None:
    """The bet placed before the suspension is dealt if its player deals (the decider takes
    Deal and ClearBets): the prompt offered only a withdrawal and leaving."""
    script = Script("atlantic-city", [])
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000))
    script.do(cmd.SuspendTable(operator="ops-1", reason="maintenance"))
    prompt = prompt_for(folded(script), A)
    assert prompt.startswith("the table is suspended") and "deal, clear" in prompt


def wide(table: StreamProjection, player_id: str) -> str:
    """The screen's text on one line per row, its words single-spaced."""
    console = Console(width=200, record=True, color_system=None)
    console.print(table_screen(table, player_id))
    return " ".join(console.export_text().split())


def left_out(overrides: dict[str, object]) -> Script:
    """atlantic-city-multi: alice bets and deals, bob does nothing until the clock leaves
    him out of the round."""
    players = {A: 10_000, "bob": 10_000}
    script = Script("atlantic-city-multi", [["TH", "9S", "7D", "8H"]], players, overrides=overrides)
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    script.tick(16)
    script.do(cmd.ExpireTimers())
    return script


def test_a_player_left_out_is_told_they_sit_out_what_brings_them_back_and_when_the_seat_goes() -> (
    None
):
    """A player the clock left out sat out without a word on their screen (only the round's
    note 'left out of the round'), nor of the rounds a table's rules give them before their
    seat is freed; the others saw nothing of it either."""
    script = left_out({"seat_released_after_rounds_sat_out": 3})
    bob = wide(folded(script), "bob")
    assert (
        "You sitting out: rounds are dealt without you · bet or pass while betting is open to play "
        "again · "
        "2 more rounds dealt without you free your seat" in bob
    )
    assert "Seats 0 alice · 1 you (sits out, seat freed after 2 more rounds)" in bob
    alice = wide(folded(script), A)
    assert "Seats 0 you · 1 bob (sits out, seat freed after 2 more rounds)" in alice
    assert "sitting out" not in alice
    script.do(cmd.Stand(player_id=A, box=0))
    script.tick()
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    bob = wide(folded(script), "bob")
    assert "1 more round dealt without you frees your seat" in bob
    script.do(cmd.Stand(player_id=A, box=0))
    script.tick()
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    bob = wide(folded(script), "bob")
    assert "your seat is freed when this round ends" in bob
    assert "1 you (sits out, seat freed as this round ends)" in bob
    script.do(cmd.Stand(player_id=A, box=0))  # the third round sat out ends: bob stood up
    bob = wide(folded(script), "bob")
    assert "sitting out" not in bob and "stood up by the server after 3 rounds sat out" in bob


def test_where_no_seat_is_freed_the_line_says_only_what_brings_the_player_back() -> None:
    script = left_out({})
    bob = wide(folded(script), "bob")
    back = (
        "sitting out: rounds are dealt without you · bet or pass while betting is open to play "
        "again"
    )
    assert bob.count(back) == 1
    assert "dealt without you free" not in bob and "1 you (sits out)" in bob
    script.do(cmd.Stand(player_id=A, box=0))
    script.tick()
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Pass(player_id="bob"))
    bob = wide(folded(script), "bob")
    assert "sitting out" not in bob and "sits out" not in bob and "Seats 0 alice · 1 you" in bob


@pytest.mark.parametrize("player", ["[/]x", "[VIP] ann", "ann [bold]", "[link=https://x.test]ann"])
def test_a_player_id_with_square_brackets_is_shown_as_it_is_never_read_as_markup(
    player: str,
) -> None:
    """A player id is any printable text at a single-player table, square brackets too, which
    rich reads as markup in a plain string: ``history`` ended the session of a player named
    ``[/]x`` on a MarkupError (exit 1), and ``[bold]`` would have been a style, not the name."""
    script = Script("mini-h17", [["TH", "7S", "9H", "QD"]], players={player: 10_000})
    script.do(
        cmd.PlaceBet(player_id=player, box=0, amount=1_000),
        cmd.Deal(player_id=player),
        cmd.Stand(player_id=player, box=0),
    )
    table = folded(script)
    console = Console(width=160, record=True, color_system=None)
    console.print(history_screen(table, player, 10))
    console.print(table_screen(table, player))
    assert f"{player} at table-1, last round" in console.export_text()


DIGITS = "9" * 5_000  # past Python's 4,300-digit limit on reading an integer


@pytest.mark.parametrize(
    "line",
    [
        f"bet {DIGITS}",
        f"deposit {DIGITS}",
        f"withdraw {DIGITS}",
        f"buyin {DIGITS}",
        "bet 5." + "0" * 5_000 + "1",
        f"bet 5 box {DIGITS}",
        f"sit {DIGITS}",
        f"seat {DIGITS}",
    ],
)
def test_a_number_of_thousands_of_digits_is_no_move_and_the_session_goes_on(line: str) -> None:
    """Typed at the prompt, it ended the session on int()'s ValueError (exit 1): a move that
    is not one is said and the session goes on."""
    with pytest.raises(NotAMove):
        move(line, StreamProjection.new("table-1"), A)


def test_an_amount_with_many_trailing_zeros_is_still_the_amount() -> None:
    assert amount_in_minor_units("5." + "0" * 5_000, "USD") == 500
    assert amount_in_minor_units("5" + "0" * 13, "USD") == 5 * 10**15


@pytest.mark.parametrize(
    "line",
    ["bet 90071992547410", "deposit 1" + "0" * 17, "sit 9007199254740992", "seat 10" + "0" * 17],
)
def test_a_number_past_what_a_command_holds_is_no_move(line: str) -> None:
    """Past 2^53 - 1 (``commands.MAX_INT``) a command is malformed: built from what the player
    typed, it would end the session on pydantic's ValidationError, not say it."""
    with pytest.raises(NotAMove):
        move(line, StreamProjection.new("table-1"), A)


def test_what_others_wrote_reaches_the_terminal_without_its_control_characters() -> None:
    """The commands refuse them now (test_unprintable_text), but a log written before holds
    them: a TableSuspended whose reason held ESC [2J cleared the player's screen, U+202E
    turned the rest of the line around. The session's console prints them as U+FFFD."""
    from blackjack.domain import events as ev
    from blackjack.messages.envelope import EventEnvelope, type_name
    from blackjack.play.screen import ScreenConsole

    script = Script("mini-h17", [["TH", "7S", "9H", "QD"]])
    last = script.envelopes[-1]
    suspended = ev.TableSuspended(operator="ops", reason="\x1b[2J\x1b[31mwon\u202e 1000")
    script.envelopes.append(
        EventEnvelope(
            event_id="e-x",
            type=type_name(type(suspended)),
            schema_version=suspended.version,
            stream_id=last.stream_id,
            sequence=last.sequence + 1,
            occurred_at=last.occurred_at,
            data=suspended,
        )
    )
    out = io.StringIO()
    console = ScreenConsole(file=out, width=120, force_terminal=True, color_system="standard")
    console.print(table_screen(folded(script), A))
    console.print("a line", Text("\x07bell \x9b31m"), style="bold")
    printed = out.getvalue()
    assert "\x1b[2J" not in printed and "\x1b[31m" not in printed and "\u202e" not in printed
    assert "\x9b" not in printed and "\ufffd[2J\ufffd[31mwon\ufffd 1000" in printed
    assert "\x1b[1m" in printed  # the console's own styles still reach the terminal


def test_a_cleared_bet_leaves_the_table_as_before_it() -> None:
    """Clear ends a single-player game cycle with nothing dealt (``RoundCancelled``): the
    table shows no dealer nor box of it, only the balance back; the next bet opens the
    next cycle."""
    script = Script("mini-h17", [["TS", "7S", "9S", "TD"]])
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.ClearBets(player_id=A))
    text = shown(folded(script))
    assert "Dealer" not in text and "Box 0" not in text
    assert "balance 100.00 USD" in text and "in play" not in text
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=500))
    text = shown(folded(script))
    assert "round 2 · betting" in text and "bet 5.00 (you)" in text


def test_a_voided_round_is_told_on_the_table_and_in_the_history() -> None:
    script = Script("mini-h17", [["8S", "6H", "8D", "TD", "3C", "2C", "9D"]])
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.Deal(player_id=A),
        cmd.Split(player_id=A, box=0),
        cmd.VoidRound(round=1, operator="ops-17", reason="card reader fault"),
    )
    table = folded(script)
    console = Console(width=160, record=True, color_system=None)
    console.print(table_screen(table, A))
    text = console.export_text()
    assert "voided by the operator for a malfunction (card reader fault)" in text
    assert "every wager back, 20.00 USD to you" in text and "ops-17" not in text
    console = Console(width=160, record=True, color_system=None)
    console.print(history_screen(table, A, 10))
    recalled = console.export_text()
    assert "(voided)" in recalled and "100.00 -> 100.00" in recalled
    # the reason the operator gave, meant for the player (not the operator's name)
    assert "voided for a malfunction, every wager back: card reader fault" in recalled
    assert "ops-17" not in recalled


def blackjack_paid_at_once_then_voided() -> Script:
    """surrender with the void term: ann's blackjack on box 0 paid at once (25.00 for 10.00),
    box 1 still to play, when the round is voided."""
    script = Script(
        "surrender",
        [["AS", "TC", "6H", "KS", "5C", "TD"]],
        overrides={"void_on_malfunction": True},
    )
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.PlaceBet(player_id=A, box=1, amount=1000),
        cmd.Deal(player_id=A),
        cmd.VoidRound(round=1, operator="ops-17", reason="card reader fault"),
    )
    return script


def test_a_void_that_takes_a_payment_back_tells_the_player_so() -> None:
    """surrender with the void term: ann's blackjack was paid at once (25.00 for 10.00) and
    her other box was still to play: the void takes 5.00 back, said as taken back."""
    script = blackjack_paid_at_once_then_voided()
    console = Console(width=160, record=True, color_system=None)
    console.print(table_screen(folded(script), A))
    text = console.export_text()
    assert "every wager back, 5.00 USD taken back from you" in text and "-5.00" not in text


def test_the_history_shows_a_payout_settled_before_a_void_as_voided() -> None:
    """surrender with the void term: ann's blackjack on box 0 was paid at once (25.00) when
    the round is voided; her history keeps what was paid then and says the void took it."""
    script = blackjack_paid_at_once_then_voided()
    console = Console(width=160, record=True, color_system=None)
    console.print(history_screen(folded(script), A, 10))
    recalled = console.export_text()
    assert "blackjack pays 15.00 (25.00 back), voided" in recalled, recalled


def test_a_surrender_paid_at_once_shows_its_half_on_the_balance_while_the_round_goes_on() -> None:
    """surrender (page 003: "Upon Surrender you receive half of your initial bet back"): all
    25.00 bet on three boxes, box 0 surrendered: its half is on the balance and out of what is
    in play while box 1 plays, and the double it pays for is offered."""
    cards = [c + "S" for c in ("T", "6", "T", "T", "6", "5", "9", "7", "T")]
    script = Script("surrender", [cards], {A: 2500})
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.PlaceBet(player_id=A, box=1, amount=500),
        cmd.PlaceBet(player_id=A, box=2, amount=1000),
        cmd.Deal(player_id=A),
        cmd.Surrender(player_id=A, box=0),
    )
    console = Console(width=160, record=True, color_system=None)
    console.print(table_screen(folded(script), A))
    text = console.export_text()
    assert "10♠ 6♠  16  surrender, 5.00 back" in text, text
    assert "balance 5.00 USD · in play 15.00" in text, text
    assert "your move: hit (h)  stand (s)  double (d)  surrender (r)" in text, text


def test_the_history_shows_an_insurance_settled_before_a_void_as_voided() -> None:
    script = Script("mini-h17", [["TS", "AH", "9S", "7D"]])
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.Deal(player_id=A),
        cmd.TakeInsurance(player_id=A, box=0),
        cmd.VoidRound(round=1, operator="ops-17", reason="card reader fault"),
    )
    console = Console(width=160, record=True, color_system=None)
    console.print(history_screen(folded(script), A, 10))
    recalled = console.export_text()
    assert "insurance 5.00 lost, voided" in recalled, recalled


def test_a_doubled_hand_shows_the_stake_it_plays_for() -> None:
    # The box's line reads the bet placed (5.00); the doubled hand plays for 10.00, which the
    # screen showed only in the history and the recall.
    script = Script("atlantic-city", [["6H", "7S", "5D", "TC", "9C"]])
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=500), cmd.Deal(player_id=A))
    script.do(cmd.Double(player_id=A, box=0, hand=0))  # 11 against 7: 20 against 17
    text = shown(folded(script))
    assert "bet 5.00" in text
    assert "stake 10.00" in text.split("bet 5.00")[1]
    assert "win pays 10.00 (20.00 back)" in text  # the doubled stake's win


def test_the_bet_limits_are_shown_while_bets_are_made() -> None:
    """Page 003: "The betting limits are displayed in the frame to the top left of the game
    table" (and page 000's "$1 USD ... $500 USD"): before the deal and once the round is
    settled the screen's first line says them, the table's overrides included; not while the
    hands are played."""

    def lines(script: Script) -> list[str]:
        console = Console(width=80, record=True, color_system=None)
        console.print(table_screen(folded(script), A))
        return [" ".join(line.split()) for line in console.export_text().splitlines()]

    script = Script("surrender", [["TS", "9S", "TH", "7S", "6S"]], {A: 3000})
    assert lines(script)[1] == "│ Bets from 1.00 to 500.00 USD a box │"
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    assert not any("Bets from" in line for line in lines(script))
    script.do(cmd.Stand(player_id=A, box=0))
    assert lines(script)[1] == "│ Bets from 1.00 to 500.00 USD a box │"
    own = Script("mini-h17", [["TS"]], {A: 3000}, overrides={"min_bet": 500, "max_bet": 2000})
    assert lines(own)[1] == "│ Bets from 5.00 to 20.00 USD a box │"


def test_the_players_money_is_in_yellow_under_you() -> None:
    """Page 002's multi-player table: "Your spot on the table will be noted by the word "You"
    under which your total money will be noted in yellow"."""
    script = Script("atlantic-city-multi", [], players={A: 5_000, "bob": 5_000})
    console = Console(width=100, record=True, color_system="standard", force_terminal=True)
    console.print(table_screen(folded(script), A))
    coloured = console.export_text(styles=True)
    assert "\x1b[33mbalance 50.00 USD\x1b[0m" in coloured, repr(coloured)


def test_a_hand_over_21_says_bust_before_the_round_settles_it() -> None:
    """mini-h17 settles a bust with the round (``bust_settled_at_once`` off, page 000 says
    nothing of when): a split hand that went over 21 still says bust while the other hand
    plays ("If you bust, a message will be displayed alongside your cards", page 001)."""
    script = Script("mini-h17", [["8S", "9H", "8H", "TD", "5S", "3S", "KS"]], {A: 5000})
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.Deal(player_id=A),
        cmd.Split(player_id=A, box=0),
        cmd.Hit(player_id=A, box=0, hand=0),
    )
    console = Console(width=100, record=True, color_system=None)
    console.print(table_screen(folded(script), A))
    text = console.export_text()
    assert "8♠ 5♠ K♠  23  bust" in text, text
    assert "8♥ 3♠  11  ◀ your turn" in text, text


class _SlowToAnswer:
    """A client whose commands reach the topic at once and are answered ``answer_s`` later
    (a loaded service, a slow network): when each was sent (``time.monotonic``)."""

    def __init__(self, answer_s: float) -> None:
        self.answer_s = answer_s
        self.sent: list[tuple[float, cmd.Command]] = []

    async def send(self, stream_id: str, command: cmd.Command) -> str:
        self.sent.append((time.monotonic(), command))
        return "id"

    async def execute(self, stream_id: str, command: cmd.Command, timeout: float) -> None:
        await self.send(stream_id, command)
        await asyncio.sleep(self.answer_s)
        raise TimeoutError

    def reconnects(self) -> list[float]:
        return [at for at, command in self.sent if isinstance(command, cmd.Reconnect)]


async def present_while(session: PlaySession, every: float, seconds: float) -> None:
    beating = asyncio.create_task(session.keep_present(every))
    try:
        await asyncio.sleep(seconds)
    finally:
        beating.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beating


async def test_the_heartbeat_keeps_its_schedule_when_answers_are_slow() -> None:
    """Each heartbeat waited for its answer before the next: an answer slower than the
    presence timeout (a third of it between beats, here 0.1 s; answers in 1 s) left the
    service a silence as long, and it took a player who was there for gone (their bet
    returned: ``PlayerDisconnected``)."""
    script = Script("surrender", [], players={A: 5_000})
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000))
    client = _SlowToAnswer(answer_s=1.0)
    session = PlaySession(client, without_a_broker(folded(script)), A)  # type: ignore[arg-type]
    await present_while(session, every=0.1, seconds=1.2)
    beats = client.reconnects()
    assert len(beats) >= 3, beats
    assert max(b - a for a, b in itertools.pairwise(beats)) < 0.5, beats


async def test_the_heartbeat_starts_while_the_bet_is_still_unanswered() -> None:
    """The first heartbeat waited until the session had seen its own bet (answered and
    folded), while the service counts the silence from when it took the bet: a slow answer
    left the player silent for longer than the timeout and the bet was returned."""
    script = Script("surrender", [], players={A: 5_000})
    client = _SlowToAnswer(answer_s=1.0)
    session = PlaySession(client, without_a_broker(folded(script)), A)  # type: ignore[arg-type]
    beating = asyncio.create_task(session.keep_present(0.1))
    try:
        await session.handle("bet 5")  # answered (here: not in time) after 1 s
    finally:
        beating.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beating
    bet_at = next(at for at, command in client.sent if isinstance(command, cmd.PlaceBet))
    beats = [bet_at, *client.reconnects()]
    assert len(beats) >= 3, beats
    assert max(b - a for a, b in itertools.pairwise(beats)) < 0.5, beats


def test_the_prompt_offers_the_rebets_once_there_is_a_bet_to_repeat_and_chips_to_take_back() -> (
    None
):
    """A fresh table's prompt offered "rebet", refused (no_previous_bet; page 003: "for your
    first bet, the Repeat control is disabled"), never page 000's DOUBLE BET (rebet2), and no
    way to take chips back from one box."""
    script = Script("mini-h17", [["TH", "6S", "QD", "TC", "KD"]])
    # no deal either until chips are down: the table refuses it (no_bets)
    assert prompt_for(folded(script), A).startswith("bet AMOUNT · ")
    assert not script.submit(cmd.Deal(player_id=A))
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000))
    assert prompt_for(folded(script), A).startswith("bet AMOUNT, remove, deal · ")
    script.do(cmd.Deal(player_id=A), cmd.Stand(player_id=A, box=0, hand=0))
    table = folded(script)
    assert prompt_for(table, A).startswith("bet AMOUNT, rebet, rebet2 · ")
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=100))
    # chips on the layout: the table refuses a rebet then
    assert prompt_for(folded(script), A).startswith("bet AMOUNT, remove, deal · ")
    script.do(cmd.RemoveBet(player_id=A, box=0))
    assert script.submit(cmd.Rebet(player_id=A, multiplier=2))


def test_a_dealer_s_bust_is_said_as_a_hand_s() -> None:
    script = Script("mini-h17", [["TH", "6S", "QD", "TC", "KD"]])  # 20 against 6 T K: 26
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.Deal(player_id=A),
        cmd.Stand(player_id=A, box=0, hand=0),
    )
    text = shown(folded(script))
    assert "26 bust" in text.split("Dealer")[1].splitlines()[0]


def test_a_player_who_left_is_told_what_the_table_paid_out_withdrawals_included() -> None:
    """ "paid out at this table in all: 0.01 USD" after 999.99 withdrawn and 0.01 taken on
    leaving: the line counted the seat's cash-out alone."""
    script = Script("mini-h17", [], players={A: 100_000})
    script.do(cmd.Withdraw(player_id=A, amount=99_999), cmd.LeaveTable(player_id=A))
    console = Console(width=200, record=True, color_system=None)
    console.print(table_screen(folded(script), A))
    text = console.export_text()
    assert "paid out at this table in all: 1000.00 USD (999.99 withdrawn, 0.01 on leaving)" in text


def test_the_variants_play_offers_to_open_are_the_presets() -> None:
    """``play --open`` names the presets without building them (a hand-written copy)."""
    assert tuple(sorted(PRESETS)) == VARIANTS


def test_a_bet_taken_back_by_a_pass_is_said() -> None:
    """A review: `bet 3` then `pass` took the box away and the balance went up by 3.00 with no
    word, where leaving and disconnecting each say "your bet of ... returned: ..."."""
    players = {A: 10_000, "bob": 10_000}
    script = Script("atlantic-city-multi", [], players)
    script.do(cmd.PlaceBet(player_id="bob", box=1, amount=300), cmd.Pass(player_id="bob"))
    assert "your bet of 3.00 returned: passed this round" in shown(folded(script), "bob")
    assert "bob's bet of 3.00 returned: passed this round" in shown(folded(script), A)


def test_a_pass_is_no_interruption_in_the_recall() -> None:
    """A diff review: the bet a pass took back was listed among the round's interruptions as
    "returned by the server: passed this round" (the recall a regulator reads)."""
    players = {A: 10_000, "bob": 10_000}
    script = Script("atlantic-city-multi", [["TH", "AS", "AD", "9H", "KS", "7C"]], players)
    script.do(cmd.PlaceBet(player_id="bob", box=1, amount=300), cmd.Pass(player_id="bob"))
    script.do(cmd.PlaceBet(player_id=A, box=0, amount=1000), cmd.Deal(player_id=A))
    console = Console(width=140, record=True, color_system=None)
    console.print(history_screen(folded(script), "bob", 10))
    assert "passed this round" not in console.export_text()
