"""``play.moves.move``: every word a player may type at ``blackjack play`` and what it becomes,
its short and long forms alike, and what is no move (a word with too many or too few
arguments); test_play covers the table screens these moves are typed at."""

from __future__ import annotations

import pytest

from blackjack.domain import commands as cmd
from blackjack.domain import wallet as wl
from blackjack.domain.decisions.funds import buy_in_deposit
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import to_wire
from blackjack.play.moves import Help, History, Move, NotAMove, Quit, ShowRules, move
from blackjack.projections.projector import StreamProjection
from tests.integration.conftest_projections import Script
from tests.unit.test_currencies import IN_YEN

SEAL = ShoeSeal.from_hex(ShoeSeal.new_key_hex())
A = "alice"
B = "bob"


def folded(script: Script) -> StreamProjection:
    """The table's public view, as the player's session folds it."""
    table = StreamProjection.new(script.stream_id)
    for envelope in script.envelopes:
        if envelope.stream_id == script.stream_id:  # not the wallets funding a shared table
            table.apply(to_wire(envelope, SEAL))
    return table


def three_boxes() -> StreamProjection:
    """``surrender``: three boxes a seat, alice at seat 0 (boxes 0 to 2), betting open."""
    return folded(Script("surrender", [], players={A: 10_000}))


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("q", Quit()),
        ("quit", Quit()),
        ("EXIT", Quit()),
        ("q now", Quit()),  # what follows a way out is not read
        ("?", Help()),
        ("help", Help()),
        ("help me", Help()),
        ("history", History()),
        ("recall", History()),
        ("rules", ShowRules()),
        ("bet 2.50", cmd.PlaceBet(player_id=A, box=0, amount=250)),
        ("b 2.50", cmd.PlaceBet(player_id=A, box=0, amount=250)),
        ("bet 5 box 2", cmd.PlaceBet(player_id=A, box=2, amount=500)),
        ("b 5 BOX 1", cmd.PlaceBet(player_id=A, box=1, amount=500)),
        ("deposit 20", cmd.Deposit(player_id=A, amount=2000)),
        ("dep 20", cmd.Deposit(player_id=A, amount=2000)),
        ("buyin 20", wl.BuyIn(player_id=A, table_id="table-1", amount=2000)),
        ("buy-in 0.5", wl.BuyIn(player_id=A, table_id="table-1", amount=50)),
        ("withdraw 1.05", cmd.Withdraw(player_id=A, amount=105)),
        ("w 1.05", cmd.Withdraw(player_id=A, amount=105)),
        # page 003: "To remove a bet completely or decrease its value, you should remove the
        # chip or chips placed": only ClearBets (every box) could be typed
        ("remove", cmd.RemoveBet(player_id=A, box=0)),
        ("remove 1.50", cmd.RemoveBet(player_id=A, box=0, amount=150)),
        ("remove box 2", cmd.RemoveBet(player_id=A, box=2)),
        ("remove 1 box 1", cmd.RemoveBet(player_id=A, box=1, amount=100)),
        ("i", cmd.TakeInsurance(player_id=A, box=0)),
        ("insure", cmd.TakeInsurance(player_id=A, box=0)),
        ("insurance", cmd.TakeInsurance(player_id=A, box=0)),
        ("n", cmd.DeclineInsurance(player_id=A, box=0)),
        ("no", cmd.DeclineInsurance(player_id=A, box=0)),
        ("rebet", cmd.Rebet(player_id=A)),
        ("rebet2", cmd.Rebet(player_id=A, multiplier=2)),
        ("clear", cmd.ClearBets(player_id=A)),
        ("deal", cmd.Deal(player_id=A)),
        ("pass", cmd.Pass(player_id=A)),
        ("leave", cmd.LeaveTable(player_id=A)),
        ("sit 2", cmd.SitDown(player_id=A, seat=2)),
        ("seat 3", cmd.MoveSeat(player_id=A, seat=3)),
        # A hand's decision out of turn goes to the player's first box: the table refuses it.
        ("h", cmd.Hit(player_id=A, box=0)),
        ("hit", cmd.Hit(player_id=A, box=0)),
        ("s", cmd.Stand(player_id=A, box=0)),
        ("stand", cmd.Stand(player_id=A, box=0)),
        ("d", cmd.Double(player_id=A, box=0)),
        ("double", cmd.Double(player_id=A, box=0)),
        ("p", cmd.Split(player_id=A, box=0)),
        ("split", cmd.Split(player_id=A, box=0)),
        ("r", cmd.Surrender(player_id=A, box=0)),
        ("surrender", cmd.Surrender(player_id=A, box=0)),
    ],
)
def test_each_word_and_its_short_form_is_its_move(line: str, expected: Move) -> None:
    assert move(line, three_boxes(), A) == expected


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("", "type a move, ? for the list"),
        ("   ", "type a move, ? for the list"),
        ("history 5", "history takes nothing after it"),
        ("recall me", "recall takes nothing after it"),
        ("rules please", "rules takes nothing after it"),
        ("h 1", "h takes nothing after it"),
        ("stand now", "stand takes nothing after it"),
        # a money move said how it is typed: it read as no move at all
        ("bet", "bet is typed as bet 5 [box N]"),
        ("bet 5 6", "bet is typed as bet 5 [box N]"),
        ("bet 5 box", "bet is typed as bet 5 [box N]"),
        ("bet 5 seat 2", "bet is typed as bet 5 [box N]"),
        ("deposit", "deposit is typed as deposit 100"),
        ("buyin 5 now", "buyin is typed as buyin 50"),
        ("remove box", "remove is typed as remove [5] [box N]"),
        ("remove 5 from 1", "remove is typed as remove [5] [box N]"),
        ("remove 5.555", "5.555 USD has more than 2 decimals"),
        ("remove box x", "'x' is not a box number"),
        ("i 0", "'i 0' is not a move, ? for the list"),
        ("n please", "'n please' is not a move, ? for the list"),
        ("deal now", "'deal now' is not a move, ? for the list"),
        ("rebet 2", "'rebet 2' is not a move, ? for the list"),
        ("sit", "'sit' is not a move, ? for the list"),
        ("seat 1 2", "'seat 1 2' is not a move, ? for the list"),
        ("  Fold  ", "'Fold' is not a move, ? for the list"),
        ("bet five", "'five' is not an amount"),
        ("bet 5 box two", "'two' is not a box number"),
        ("sit two", "'two' is not a seat number"),
    ],
)
def test_what_is_no_move_is_said(line: str, said: str) -> None:
    with pytest.raises(NotAMove) as refused:
        move(line, three_boxes(), A)
    assert str(refused.value) == said


def test_a_decision_in_turn_goes_to_the_hand_and_out_of_turn_to_the_first_box() -> None:
    script = Script("atlantic-city-multi", [["8H", "9C", "7S", "8D", "TC", "QD"]], {A: 0, B: 0})
    script.do(
        buy_in_deposit(A, 10_000),
        buy_in_deposit(B, 10_000),
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.PlaceBet(player_id=B, box=1, amount=1000),
        cmd.Deal(player_id=A),
        cmd.Deal(player_id=B),
    )
    table = folded(script)
    assert table.view.active is not None and table.view.active.player_id == A
    assert move("s", table, A) == cmd.Stand(player_id=A, box=0, hand=0)
    assert move("s", table, B) == cmd.Stand(player_id=B, box=1)  # bob's first box


def test_an_amount_is_read_in_the_table_s_currency_and_in_dollars_before_it_is_known() -> None:
    yen = folded(Script("atlantic-city", [], overrides=IN_YEN))
    assert move("bet 500", yen, A) == cmd.PlaceBet(player_id=A, box=0, amount=500)
    with pytest.raises(NotAMove, match="JPY has more than 0 decimals"):
        move("deposit 5.5", yen, A)
    unknown = StreamProjection.new("table-9")  # nothing folded yet: no currency
    assert unknown.view.currency is None
    assert move("w 5.5", unknown, A) == cmd.Withdraw(player_id=A, amount=550)


def test_insurance_goes_to_the_first_box_still_offered_it() -> None:
    script = Script("surrender", [["TH", "9D", "AS", "5D", "8D", "7C"]], {A: 10_000})
    script.do(
        cmd.PlaceBet(player_id=A, box=0, amount=1000),
        cmd.PlaceBet(player_id=A, box=1, amount=1000),
        cmd.Deal(player_id=A),
    )
    assert folded(script).view.phase == "insurance"
    script.do(cmd.DeclineInsurance(player_id=A, box=0))
    table = folded(script)
    assert move("insurance", table, A) == cmd.TakeInsurance(player_id=A, box=1)
    assert move("no", table, A) == cmd.DeclineInsurance(player_id=A, box=1)


def test_a_deposit_at_a_table_funded_from_the_wallet_says_buyin() -> None:
    """A shared table takes money only from the wallet: Deposit was sent and refused in the
    wire's words ("unauthorized ... send BuyIn to wallet:alice")."""
    shared = folded(Script("atlantic-city-multi", [], players={A: 1_000}))
    with pytest.raises(NotAMove) as refused:
        move("deposit 5", shared, A)
    assert str(refused.value) == "this table is funded from your wallet: buyin AMOUNT"
    assert move("buyin 5", shared, A) == wl.BuyIn(player_id=A, table_id="table-1", amount=500)


def test_remove_naming_no_box_takes_from_the_one_with_chips() -> None:
    """At page 003's three boxes, a bare remove went to box 0 whatever held the chips, and
    was refused there (no_bets)."""
    script = Script("surrender", [], players={A: 10_000})
    script.do(cmd.PlaceBet(player_id=A, box=1, amount=500))
    assert move("remove", folded(script), A) == cmd.RemoveBet(player_id=A, box=1)
    assert move("remove 2", folded(script), A) == cmd.RemoveBet(player_id=A, box=1, amount=200)
    script.do(cmd.PlaceBet(player_id=A, box=2, amount=500))
    with pytest.raises(NotAMove) as refused:
        move("remove", folded(script), A)
    assert str(refused.value) == "chips are on boxes 1, 2: remove [AMOUNT] box N says which"
    assert move("remove box 2", folded(script), A) == cmd.RemoveBet(player_id=A, box=2)


def test_every_rebet_multiple_a_table_may_offer_can_be_typed() -> None:
    """The prompt names what the rules offer (``rebet_multipliers``, 1 to 4): rebet3 and rebet4
    read as no move."""
    table = three_boxes()
    for multiple in (2, 3, 4):
        expected = cmd.Rebet(player_id=A, multiplier=multiple)
        assert move(f"rebet{multiple}", table, A) == expected
