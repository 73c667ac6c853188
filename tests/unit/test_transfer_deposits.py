"""A buy-in's deposit (a ``Deposit`` with the wallet's ``transfer``) is taken or declined by
the table, never simply refused: either way the table's log keeps the transfer, and the table
never takes the same transfer again, nor one a wallet numbered before the last it handled from
that wallet (a wallet's buy-ins reach a table in order). A platform's own deposit (no
transfer) is unchanged."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.decide import decide
from blackjack.domain.errors import CorruptLog
from blackjack.domain.evolve import fold
from blackjack.domain.payouts import MAX_BALANCE
from blackjack.domain.rejections import Rejection
from blackjack.domain.rules import PRESETS
from blackjack.domain.state import INITIAL_STATE, TableState
from blackjack.domain.transfers import transfer_origin

NOW = datetime(2026, 5, 1, tzinfo=UTC)
T1, T2 = "wallet:ann/1", "wallet:ann/2"


def multi(*, seated: bool) -> TableState:
    events: list[ev.Event] = [ev.TableOpened(rules=PRESETS["atlantic-city-multi"])]
    if seated:
        events.append(ev.SeatTaken(player_id="ann", seat=0))
    return fold(events)


def deposit(amount: int = 300, transfer: str | None = T1) -> cmd.Deposit:
    return cmd.Deposit(player_id="ann", amount=amount, transfer=transfer)


def declined(state: TableState, command: cmd.Deposit, code: str) -> TableState:
    events = decide(state, command, NOW)
    assert not isinstance(events, Rejection), events
    [event] = events
    assert isinstance(event, ev.TransferDeclined)
    assert (event.player_id, event.amount, event.transfer, event.reason_code) == (
        "ann",
        command.amount,
        command.transfer,
        code,
    )
    after = fold(events, state)
    assert after.players == state.players  # no money moves at the table
    assert command.transfer is not None
    wallet, number = transfer_origin(command.transfer)
    assert after.buy_ins[wallet] == number
    return after


def refused(state: TableState, command: cmd.Command) -> str:
    rejection = decide(state, command, NOW)
    assert isinstance(rejection, Rejection), rejection
    return rejection.code


def test_a_seated_player_s_transfer_is_taken_once() -> None:
    state = multi(seated=True)
    events = decide(state, deposit(), NOW)
    assert events == [
        ev.FundsDeposited(player_id="ann", amount=300, balance_after=300, transfer=T1)
    ]
    assert isinstance(events, list)
    after = fold(events, state)
    assert after.players["ann"].balance == 300 and after.buy_ins == {"wallet:ann": 1}
    assert refused(after, deposit()) == "transfer_already_handled"
    # Another transfer of the same wallet is another buy-in.
    again = decide(after, deposit(200, T2), NOW)
    assert isinstance(again, list) and fold(again, after).players["ann"].balance == 500


def test_a_table_remembers_one_number_per_wallet_and_refuses_what_lies_below_it() -> None:
    state = multi(seated=True)
    state = fold([ev.SeatTaken(player_id="bob", seat=1)], state)
    for player, number in (("ann", 3), ("bob", 1), ("ann", 9)):
        command = cmd.Deposit(player_id=player, amount=10, transfer=f"wallet:{player}/{number}")
        events = decide(state, command, NOW)
        assert isinstance(events, list), events
        state = fold(events, state)
    assert state.buy_ins == {"wallet:ann": 9, "wallet:bob": 1}
    assert (state.players["ann"].balance, state.players["bob"].balance) == (20, 10)
    # Numbers 4-8 went to other tables: arriving here now, they can only be copies.
    for number in (3, 5, 9):
        assert refused(state, deposit(transfer=f"wallet:ann/{number}")) == (
            "transfer_already_handled"
        )
    assert refused(state, deposit(transfer="wallet:ann")) == "malformed"
    taken = decide(state, deposit(transfer="wallet:ann/10"), NOW)
    assert isinstance(taken, list) and fold(taken, state).buy_ins["wallet:ann"] == 10


def test_a_log_with_a_buy_in_after_a_later_one_of_its_wallet_is_corrupt() -> None:
    state = multi(seated=True)
    taken = ev.FundsDeposited(player_id="ann", amount=5, balance_after=5, transfer=T2)
    earlier = ev.TransferDeclined(
        player_id="ann", amount=5, transfer=T1, reason_code="not_seated", message="-"
    )
    with pytest.raises(CorruptLog, match="after a later one"):
        fold([taken, earlier], state)


def test_a_transfer_the_table_cannot_take_is_declined_and_never_taken_later() -> None:
    state = declined(multi(seated=False), deposit(), "not_seated")
    seated = fold([ev.SeatTaken(player_id="ann", seat=0)], state)
    # The player sits down afterwards: the declined transfer is still never taken.
    assert refused(seated, deposit()) == "transfer_already_handled"
    assert seated.players["ann"].balance == 0


def test_a_transfer_to_a_table_not_open_or_single_player_is_declined() -> None:
    unopened = declined(INITIAL_STATE, deposit(), "table_not_open")
    assert not unopened.opened
    opened = fold([ev.TableOpened(rules=PRESETS["atlantic-city-multi"])], unopened)
    opened = fold([ev.SeatTaken(player_id="ann", seat=0)], opened)
    assert refused(opened, deposit()) == "transfer_already_handled"
    single = fold([ev.TableOpened(rules=PRESETS["mini-h17"])])
    single = fold([ev.SeatTaken(player_id="ann", seat=0)], single)
    declined(single, deposit(), "unauthorized")
    declined(multi(seated=True), deposit(0), "invalid_amount")


def test_a_buy_in_past_the_balance_limit_is_declined_so_the_wallet_gets_it_back() -> None:
    rich = fold(
        [ev.FundsDeposited(player_id="ann", amount=MAX_BALANCE, balance_after=MAX_BALANCE)],
        multi(seated=True),
    )
    declined(rich, deposit(1), "balance_limit")


def test_a_platform_deposit_without_a_transfer_is_unchanged() -> None:
    assert refused(INITIAL_STATE, deposit(transfer=None)) == "table_not_open"
    single = fold([ev.TableOpened(rules=PRESETS["mini-h17"])])
    assert refused(single, deposit(transfer=None)) == "not_seated"
    single = fold([ev.SeatTaken(player_id="ann", seat=0)], single)
    [event] = decide(single, deposit(transfer=None), NOW)
    assert event == ev.FundsDeposited(player_id="ann", amount=300, balance_after=300)
    assert event.transfer is None and fold([event], single).buy_ins == {}
