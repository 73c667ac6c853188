"""The wallet decider: the single writer of a player's money between tables.

Given / when / then: the past wallet events, a command, the new events or the rejection.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from blackjack.domain.errors import CorruptLog
from blackjack.domain.payouts import MAX_BALANCE
from blackjack.domain.rejections import Rejection
from blackjack.domain.wallet import (
    INITIAL_WALLET,
    BuyIn,
    BuyInCompleted,
    BuyInRefunded,
    BuyInSent,
    CashOut,
    CashOutReceived,
    ConfirmBuyIn,
    RefundBuyIn,
    WalletCommand,
    WalletDeposit,
    WalletDeposited,
    WalletEvent,
    WalletState,
    WalletWithdraw,
    WalletWithdrawn,
    decide_wallet,
    fold_wallet,
    is_wallet_stream,
    wallet_stream,
)
from blackjack.messages import wire

P = "alice"


def given_(*events: WalletEvent) -> WalletState:
    return fold_wallet(events)


def rejected(state: WalletState, command: WalletCommand) -> str:
    decision = decide_wallet(state, command)
    assert isinstance(decision, Rejection), decision
    return decision.code


def test_the_wallet_stream_is_named_after_the_player() -> None:
    assert wallet_stream("alice") == "wallet:alice"
    assert is_wallet_stream("wallet:alice") and not is_wallet_stream("table-1")


def test_a_deposit_credits_and_a_withdrawal_debits() -> None:
    state = given_(WalletDeposited(player_id=P, amount=1000, balance_after=1000))
    assert decide_wallet(state, WalletWithdraw(player_id=P, amount=400)) == [
        WalletWithdrawn(player_id=P, amount=400, balance_after=600)
    ]
    assert decide_wallet(state, WalletDeposit(player_id=P, amount=1)) == [
        WalletDeposited(player_id=P, amount=1, balance_after=1001)
    ]


def test_no_withdrawal_or_buy_in_beyond_the_balance() -> None:
    state = given_(WalletDeposited(player_id=P, amount=1000, balance_after=1000))
    assert rejected(state, WalletWithdraw(player_id=P, amount=1001)) == "insufficient_funds"
    assert rejected(state, BuyIn(player_id=P, table_id="t", amount=1001)) == "insufficient_funds"


def test_amounts_are_positive() -> None:
    for command in (
        WalletDeposit(player_id=P, amount=0),
        WalletWithdraw(player_id=P, amount=-5),
        BuyIn(player_id=P, table_id="t", amount=0),
        CashOut(player_id=P, table_id="t", amount=-1),
    ):
        assert rejected(INITIAL_WALLET, command) == "invalid_amount"


def test_a_wallet_takes_no_deposit_past_the_balance_limit() -> None:
    assert (
        rejected(INITIAL_WALLET, WalletDeposit(player_id=P, amount=2 * 10**15)) == "balance_limit"
    )
    full = given_(WalletDeposited(player_id=P, amount=MAX_BALANCE, balance_after=MAX_BALANCE))
    assert rejected(full, WalletDeposit(player_id=P, amount=1)) == "balance_limit"
    # a table's cash-out is never refused for it: that money has left the table already
    assert decide_wallet(full, CashOut(player_id=P, table_id="t", amount=5)) == [
        CashOutReceived(player_id=P, table_id="t", amount=5, balance_after=MAX_BALANCE + 5)
    ]


def test_a_buy_in_debits_at_once_and_numbers_the_transfer() -> None:
    state = given_(
        WalletDeposited(player_id=P, amount=1000, balance_after=1000),
        BuyInSent(player_id=P, transfer=1, table_id="t1", amount=300, balance_after=700),
    )
    assert decide_wallet(state, BuyIn(player_id=P, table_id="t2", amount=700)) == [
        BuyInSent(player_id=P, transfer=2, table_id="t2", amount=700, balance_after=0)
    ]


def test_a_confirmed_buy_in_closes_the_transfer_and_keeps_the_money_at_the_table() -> None:
    state = given_(
        WalletDeposited(player_id=P, amount=1000, balance_after=1000),
        BuyInSent(player_id=P, transfer=1, table_id="t1", amount=300, balance_after=700),
    )
    events = decide_wallet(state, ConfirmBuyIn(player_id=P, transfer=1))
    assert events == [BuyInCompleted(player_id=P, transfer=1, table_id="t1", amount=300)]
    after = fold_wallet(events, state)
    assert after.balance == 700 and after.pending == ()


def test_a_refused_buy_in_comes_back_once() -> None:
    state = given_(
        WalletDeposited(player_id=P, amount=1000, balance_after=1000),
        BuyInSent(player_id=P, transfer=1, table_id="t1", amount=300, balance_after=700),
    )
    refund = RefundBuyIn(player_id=P, transfer=1, reason="not_seated")
    events = decide_wallet(state, refund)
    assert events == [
        BuyInRefunded(
            player_id=P,
            transfer=1,
            table_id="t1",
            amount=300,
            reason="not_seated",
            balance_after=1000,
        )
    ]
    after = fold_wallet(events, state)
    assert after.balance == 1000
    assert rejected(after, refund) == "unknown_transfer"
    assert rejected(after, ConfirmBuyIn(player_id=P, transfer=1)) == "unknown_transfer"


def test_a_cash_out_from_a_table_credits_the_wallet() -> None:
    state = given_(WalletDeposited(player_id=P, amount=100, balance_after=100))
    assert decide_wallet(state, CashOut(player_id=P, table_id="t1", amount=250)) == [
        CashOutReceived(player_id=P, table_id="t1", amount=250, balance_after=350)
    ]


def cashed(state: WalletState, table: str, sequence: int, amount: int = 10) -> WalletState:
    command = CashOut(player_id=P, table_id=table, amount=amount, table_sequence=sequence)
    decision = decide_wallet(state, command)
    assert isinstance(decision, list), decision
    [event] = decision
    assert isinstance(event, CashOutReceived) and event.table_sequence == sequence
    return fold_wallet(decision, state)


def test_a_wallet_remembers_the_last_table_event_it_was_paid_from_per_table() -> None:
    state = cashed(cashed(cashed(INITIAL_WALLET, "t1", 4), "t2", 9), "t1", 12)
    assert state.balance == 30 and state.cashed_out == {"t1": 12, "t2": 9}
    # A table's cash-outs arrive in the order of its events: one not after the last is a copy.
    for table, sequence in (("t1", 12), ("t1", 5), ("t2", 9)):
        copy = CashOut(player_id=P, table_id=table, amount=10, table_sequence=sequence)
        assert rejected(state, copy) == "transfer_already_handled"
    assert cashed(state, "t1", 13).cashed_out == {"t1": 13, "t2": 9}
    with pytest.raises(ValidationError):
        CashOut(player_id=P, table_id="t1", amount=10, table_sequence=0)


def test_a_log_with_a_cash_out_received_twice_is_corrupt() -> None:
    paid = CashOutReceived(player_id=P, table_id="t1", amount=5, balance_after=5, table_sequence=3)
    again = paid.model_copy(update={"balance_after": 10})
    with pytest.raises(CorruptLog, match="received twice"):
        fold_wallet([paid, again])


def test_a_version_1_cash_out_received_is_upcast_with_no_table_event() -> None:
    old = {"type": "CashOutReceived", "version": 1, "player_id": P, "table_id": "t1"}
    old |= {"amount": 25, "balance_after": 25}
    envelope = {
        "event_id": "e-1",
        "type": "CashOutReceived",
        "schema_version": 1,
        "stream_id": wallet_stream(P),
        "sequence": 1,
        "occurred_at": "2026-01-01T00:00:00+00:00",
        "data": old,
    }
    event = wire.decode(json.dumps(envelope).encode()).data
    assert isinstance(event, CashOutReceived)
    assert (event.version, event.table_sequence, event.amount) == (2, None, 25)
    state = fold_wallet([event])
    assert state.balance == 25 and state.cashed_out == {}
    # A document without a version reads as version 1; one naming its table event keeps it.
    del envelope["data"]["version"]  # type: ignore[attr-defined]
    envelope["data"]["table_sequence"] = 7  # type: ignore[index]
    event = wire.decode(json.dumps(envelope).encode()).data
    assert isinstance(event, CashOutReceived) and event.table_sequence == 7


_amount = st.integers(min_value=-5, max_value=600)
_commands = st.lists(
    st.one_of(
        st.builds(WalletDeposit, player_id=st.just(P), amount=_amount),
        st.builds(WalletWithdraw, player_id=st.just(P), amount=_amount),
        st.builds(BuyIn, player_id=st.just(P), table_id=st.just("t"), amount=_amount),
        st.builds(ConfirmBuyIn, player_id=st.just(P), transfer=st.integers(0, 6)),
        st.builds(
            RefundBuyIn,
            player_id=st.just(P),
            transfer=st.integers(0, 6),
            reason=st.just("not_seated"),
        ),
        st.builds(
            CashOut,
            player_id=st.just(P),
            table_id=st.just("t"),
            amount=_amount,
            table_sequence=st.none() | st.integers(1, 6),
        ),
    ),
    max_size=40,
)


@given(_commands)
def test_money_is_conserved_and_never_negative(commands: list[WalletCommand]) -> None:
    """balance + money in transit = deposits + cash-outs - withdrawals - completed buy-ins."""
    state = INITIAL_WALLET
    flows = 0
    for command in commands:
        decision = decide_wallet(state, command)
        if isinstance(decision, Rejection):
            continue
        for event in decision:
            if isinstance(event, WalletDeposited | CashOutReceived):
                flows += event.amount
            elif isinstance(event, WalletWithdrawn | BuyInCompleted):
                flows -= event.amount
        state = fold_wallet(decision, state)
        in_transit = sum(p.amount for p in state.pending)
        assert state.balance >= 0
        assert state.balance + in_transit == flows
