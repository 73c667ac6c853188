"""``audit.transfers``: every buy-in and cash-out between a wallet and a shared table is
matched across the two logs. Logs made by the handler's processor match; a forged or lost
movement is a finding naming the stream and event."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from blackjack.audit.transfers import reconcile
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain import wallet as wl
from blackjack.messages.wire import WireEnvelope, to_wire
from tests.integration.conftest_projections import placed
from tests.unit.test_handler_signed_replay import (
    PLAYER,
    TABLE,
    WALLET,
    Harness,
    bought_in,
    declined_buy_in,
    round_trips,
    steps,
)

Logs = dict[str, list[WireEnvelope]]


def logs_of(h: Harness) -> Logs:
    return {
        stream: [to_wire(envelope, h.processor.seal) for envelope in h.events_of(stream)]
        for stream in (TABLE, WALLET)
    }


def changed(logs: Logs, stream: str, kind: type, **update: object) -> Logs:
    """The logs with the last ``kind`` event of ``stream`` changed."""
    events = list(logs[stream])
    index = max(i for i, e in enumerate(events) if isinstance(e.data, kind))
    data = events[index].data.model_copy(update=update)
    events[index] = events[index].model_copy(update={"data": data})
    return {**logs, stream: events}


def appended(logs: Logs, stream: str, kind: type) -> Logs:
    """The logs with the last ``kind`` event of ``stream`` written again at the end."""
    events = list(logs[stream])
    copy = next(e for e in reversed(events) if isinstance(e.data, kind))
    events.append(placed(copy, events[-1].sequence + 1))
    return {**logs, stream: events}


def honest() -> Logs:
    h, _, _ = bought_in()
    round_trips(h, 3)
    h.send(TABLE, cmd.LeaveTable(player_id=PLAYER))
    [cash_out] = steps(h.handled[-1])
    h.forward(cash_out)
    return logs_of(h)


def test_the_handler_s_buy_ins_refunds_and_cash_outs_all_match() -> None:
    logs = honest()
    wallet = [e.data for e in logs[WALLET]]
    assert sum(isinstance(e, wl.CashOutReceived) for e in wallet) == 5
    assert sum(isinstance(e, wl.BuyInCompleted) for e in wallet) == 4
    assert reconcile(logs).findings == []
    h, _ = declined_buy_in()
    assert reconcile(logs_of(h)).findings == []


def in_bobs_wallet_too(logs: Logs) -> Logs:
    """The logs with the last cash-out of the wallet written in bob's wallet too."""
    [copy] = [e for e in logs[WALLET] if isinstance(e.data, wl.CashOutReceived)][-1:]
    return {**logs, "wallet:bob": [copy.model_copy(update={"stream_id": "wallet:bob"})]}


FORGERIES: dict[str, tuple[Callable[[Logs], Logs], str]] = {
    "cash-out of more than was paid": (
        lambda logs: changed(logs, WALLET, wl.CashOutReceived, amount=10_000),
        "which paid 2.00 to eve",
    ),
    "cash-out naming an event that paid nothing": (
        lambda logs: changed(logs, WALLET, wl.CashOutReceived, table_sequence=1),
        "which paid nothing out",
    ),
    "cash-out received twice": (
        lambda logs: appended(logs, WALLET, wl.CashOutReceived),
        f"received again (also at {WALLET} event ",
    ),
    "deposit the wallet never sent": (
        lambda logs: changed(logs, TABLE, ev.FundsDeposited, transfer="wallet:eve/99"),
        "wallet:eve never sent it",
    ),
    "deposit of another amount": (
        lambda logs: changed(logs, TABLE, ev.FundsDeposited, amount=5_000),
        "the table handled 50.00",
    ),
    "cash-out in another player's wallet": (
        in_bobs_wallet_too,
        "in another player's wallet",
    ),
    "cash-out in another player's wallet, named with the first": (
        in_bobs_wallet_too,
        # the other wallet that has it is named (before: "first at N", no wallet)
        f"received again (also at {WALLET} event ",
    ),
    "buy-in the wallet refunded but the table took": (
        lambda logs: {
            **logs,
            WALLET: [
                e.model_copy(
                    update={
                        "data": wl.BuyInRefunded(
                            player_id=PLAYER,
                            transfer=e.data.transfer,
                            table_id=TABLE,
                            amount=e.data.amount,
                            reason="not_seated",
                            balance_after=0,
                        )
                    }
                )
                if isinstance(e.data, wl.BuyInCompleted)
                else e
                for e in logs[WALLET]
            ],
        },
        "refunded, but replay-multi answered FundsDeposited",
    ),
    "deposit taken twice": (
        lambda logs: appended(logs, TABLE, ev.FundsDeposited),
        "handled again",
    ),
}


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_forged_movement_is_found(name: str) -> None:
    forge, message = FORGERIES[name]
    findings = reconcile(forge(honest())).findings
    assert findings, name
    assert any(message in str(f) for f in findings), [str(f) for f in findings]


def test_a_buy_in_closed_the_other_way_than_the_table_answered_is_found() -> None:
    h, _ = declined_buy_in()
    logs = logs_of(h)
    [refunded] = [e for e in logs[WALLET] if isinstance(e.data, wl.BuyInRefunded)]
    assert reconcile(logs).findings == []
    completed = wl.BuyInCompleted(player_id=PLAYER, transfer=1, table_id=TABLE, amount=300)
    forged = [
        e.model_copy(update={"data": completed}) if e is refunded else e for e in logs[WALLET]
    ]
    [finding] = reconcile({**logs, WALLET: forged}).findings
    assert str(finding) == (
        f"{WALLET} event {refunded.sequence}: buy-in 1 completed, but {TABLE} answered "
        "TransferDeclined"
    )


def test_with_projection_lag_a_movement_without_its_cause_is_in_transit() -> None:
    """The audit reads each events partition up to where the projection got: the table's may
    lag behind the wallet's, so an answer can be read before its cause."""
    logs = honest()
    table_behind = {**logs, TABLE: logs[TABLE][:2]}  # opened, seated: nothing else yet
    assert len(reconcile(table_behind).findings) == 4 + 5  # read as complete: lost causes
    lagging = reconcile(table_behind, lagging=lambda stream_id: stream_id == TABLE)
    assert lagging.findings == [] and lagging.in_transit == 4 + 5  # closes, cash-outs
    # the money that arrived ahead of its cause: the cash-outs (a close moves none)
    cashed = sum(e.data.amount for e in logs[WALLET] if isinstance(e.data, wl.CashOutReceived))
    assert lagging.ahead == {(PLAYER, False): cashed}
    # Lag elsewhere excuses nothing here.
    assert len(reconcile(table_behind, lagging=lambda s: s != TABLE).findings) == 4 + 5


def test_with_the_wallet_s_partition_behind_a_deposit_without_its_buy_in_is_in_transit() -> None:
    logs = honest()
    last_sent = max(i for i, e in enumerate(logs[WALLET]) if isinstance(e.data, wl.BuyInSent))
    wallet_behind = {**logs, WALLET: logs[WALLET][:last_sent]}
    [finding] = reconcile(wallet_behind).findings
    assert "wallet:eve/4: wallet:eve never sent it" in str(finding)
    lagging = reconcile(wallet_behind, lagging=lambda stream_id: stream_id == WALLET)
    # and the table's last two payouts, which the wallet read as far as this has not received
    assert lagging.findings == [] and lagging.in_transit == 1 + 2


def test_a_cash_out_naming_an_event_already_read_is_judged_even_with_lag() -> None:
    logs = honest()
    forged = changed(logs, WALLET, wl.CashOutReceived, table_sequence=1)  # TableOpened
    [finding] = reconcile(forged, lagging=lambda stream_id: True).findings
    assert "which paid nothing out" in str(finding)


def test_a_deposit_naming_no_buy_in_after_the_table_recorded_transfers_is_found() -> None:
    logs = honest()
    forged = changed(logs, TABLE, ev.FundsDeposited, transfer=None)  # the last buy-in's
    findings = [str(f) for f in reconcile(forged).findings]
    assert any("names no buy-in" in f for f in findings), findings


def test_buy_ins_a_table_handled_before_it_recorded_transfers_are_unverifiable() -> None:
    """Older handlers recorded a taken buy-in as a deposit without its transfer (and a
    declined one not at all): those closes cannot be matched, and are counted apart. Buy-ins
    sent after the table started recording transfers are matched as ever."""
    logs = honest()
    earlier = timedelta(days=1)
    older_deposits = 2
    table: list[WireEnvelope] = []
    for envelope in logs[TABLE]:
        data, at = envelope.data, envelope.occurred_at
        if isinstance(data, ev.FundsDeposited) and older_deposits:
            older_deposits -= 1
            data, at = data.model_copy(update={"transfer": None}), at - earlier
        table.append(envelope.model_copy(update={"data": data, "occurred_at": at}))
    wallet = [
        e.model_copy(update={"occurred_at": e.occurred_at - earlier})
        if isinstance(e.data, wl.BuyInSent) and e.data.transfer <= 2
        else e
        for e in logs[WALLET]
    ]
    result = reconcile({**logs, TABLE: table, WALLET: wallet})
    assert result.findings == [] and result.unverifiable == 2
    # A later buy-in closed without the table's answer is still found.
    last = max(
        i for i, e in enumerate(table) if isinstance(e.data, ev.FundsDeposited) and e.data.transfer
    )
    result = reconcile({**logs, TABLE: table[:last] + table[last + 1 :], WALLET: wallet})
    assert result.unverifiable == 2
    [finding] = result.findings
    assert "buy-in 4 completed, but" in str(finding)
    # A table with no deposit of the older kind has no excuse at all.
    no_deposits = [e for e in logs[TABLE] if not isinstance(e.data, ev.FundsDeposited)]
    assert len(reconcile({**logs, TABLE: no_deposits}).findings) == 4


def test_buy_ins_declined_at_tables_that_do_not_exist_match_their_refunds() -> None:
    """Declined in the partition's stream of such declines (``#declined/0``), not in a stream
    made for the id: each matches the buy-in the wallet sent to that id and its refund; a
    decline there for another amount, or for another reason, is still a finding."""
    h = Harness()
    h.send(WALLET, wl.WalletDeposit(player_id=PLAYER, amount=1_000))
    for number in range(3):
        sent = h.send(WALLET, wl.BuyIn(player_id=PLAYER, table_id=f"nowhere-{number}", amount=300))
        [deposit] = steps(sent)
        [refund] = steps(h.forward(deposit))
        h.forward(refund)
    declines = "#declined/0"
    logs = {
        stream: [to_wire(envelope, h.processor.seal) for envelope in h.events_of(stream)]
        for stream in (declines, WALLET)
    }
    assert [e.type for e in logs[declines]] == ["TransferDeclined"] * 3
    assert reconcile(logs).findings == []
    more = reconcile(changed(logs, declines, ev.TransferDeclined, amount=200)).findings
    assert [f.message for f in more] == [
        "buy-in wallet:eve/3: the wallet sent 3.00 of eve to nowhere-2, the table handled "
        "2.00 of eve"
    ]
    other = reconcile(changed(logs, declines, ev.TransferDeclined, reason_code="not_seated"))
    assert [f.message for f in other.findings] == [
        "buy-in wallet:eve/3: the wallet sent 3.00 of eve to nowhere-2, the table handled "
        "3.00 of eve"
    ]


def test_a_deposit_naming_another_player_s_wallet_is_found_whatever_lags() -> None:
    """A review of the change: eve's deposit naming bob's buy-in, bob's wallet partition
    lagging, was in transit, and its money counted as arrived ahead for eve (so the money
    totals excused it as lag)."""
    forged = changed(honest(), TABLE, ev.FundsDeposited, transfer="wallet:bob/99")
    reconciled = reconcile(forged, lagging=lambda stream_id: stream_id == "wallet:bob")
    found = [f.message for f in reconciled.findings]
    assert "buy-in wallet:bob/99 for eve: another's wallet" in found  # (and eve's buy-in
    # the table no longer answered: "buy-in 4 completed, but replay-multi did nothing")
    assert (PLAYER, True) not in reconciled.ahead
