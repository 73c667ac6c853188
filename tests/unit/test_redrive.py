"""``blackjack redrive``'s core (``audit.redrive``), on the handler's processor without Kafka:
a money step its receiver refused (signed under a key that handler does not accept) is stuck;
made again from the logs, it is the handler's record (same id, body and transfer; signed
under the current key), its receiver takes it, and the money arrives where it was going. One
that was not lost moves nothing when sent again."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from blackjack.audit.redrive import StepWriter, plan
from blackjack.audit.transfers import Movements, Reconciled
from blackjack.cli import main
from blackjack.command_handler.records import Outgoing
from blackjack.command_handler.signing import SIGNATURE_HEADER, TRANSFER_HEADER, CommandSigner
from blackjack.domain import commands as cmd
from blackjack.domain.wallet import BuyIn, WalletDeposit
from blackjack.messages.wire import to_wire
from tests.unit.processor_harness import SIGNER, TOPICS
from tests.unit.test_handler_signed_replay import (
    PLAYER,
    TABLE,
    WALLET,
    Harness,
    push_past_the_window,
    results,
    steps,
)

LATER = datetime(2026, 5, 2, tzinfo=UTC)
OTHER_KEY = CommandSigner(b"o" * 32)
"""A handler's key that the harness's processor does not accept."""


def reconciled(
    h: Harness, stuck_after: timedelta = timedelta(0), at: datetime | None = None
) -> Reconciled:
    """The harness's logs matched as ``blackjack redrive`` reads them (``at``: now)."""
    movements = Movements(lambda stream_id: False, stuck_after)
    for stream_id in dict.fromkeys(e.stream_id for handled in h.handled for e in handled.events):
        movements.read(
            stream_id, [to_wire(envelope, h.processor.seal) for envelope in h.events_of(stream_id)]
        )
    return movements.matched(at)


def signed_elsewhere(record: Outgoing) -> Outgoing:
    """``record`` as a handler holding another key signed it."""
    found = dict(record.headers)
    transfer = found.get(TRANSFER_HEADER)
    others = [(name, value) for name, value in record.headers if name not in _SIGNED]
    signature = OTHER_KEY.headers(
        record.key, record.value, None if transfer is None else int(transfer)
    )
    return Outgoing(record.topic, record.key, record.value, others + signature, record.partition)


_SIGNED = {SIGNATURE_HEADER, TRANSFER_HEADER}


def refused(h: Harness, record: Outgoing) -> None:
    """``record`` delivered signed under the other key: refused, nothing written down."""
    handled = h.forward(signed_elsewhere(record))
    [result] = results(handled)
    assert result.status == "rejected" and result.rejection is not None
    assert result.rejection.code == "unauthorized"
    # the operator is told the key, not only that the id is the service's (a runbook drill)
    said = result.rejection.message[:200]  # as much as the handler's log line keeps
    assert said.startswith("not signed under a key this handler accepts")
    assert "blackjack redrive --stuck-after 0 --send" in said
    assert handled.events == [] and steps(handled) == []


def redriven(h: Harness) -> list[Outgoing]:
    return [r.record for r in plan(reconciled(h), StepWriter(SIGNER, TOPICS, 1), LATER)]


def described(h: Harness) -> list[str]:
    """The lines ``blackjack redrive`` lists the stuck steps with, without their ids."""
    steps = plan(reconciled(h), StepWriter(SIGNER, TOPICS, 1), LATER)
    return [r.describe().rsplit(" (", 1)[0] for r in steps]


def body(record: Outgoing) -> dict[str, object]:
    """The command record's body without the time it was sent."""
    value = json.loads(record.value)
    value.pop("sent_at")
    return dict(value)


def same_step(remade: Outgoing, original: Outgoing) -> None:
    assert (remade.topic, remade.key, remade.partition) == (
        original.topic,
        original.key,
        original.partition,
    )
    assert body(remade) == body(original)
    kept = {"ce_id", "ce_type", "ce_subject", "ce_causationid", "ce_correlationid", TRANSFER_HEADER}
    assert {n: v for n, v in remade.headers if n in kept} == {
        n: v for n, v in original.headers if n in kept
    }
    assert SIGNER.verify(remade.key, remade.value, remade.headers)[0]


def seated_with_money() -> Harness:
    h = Harness()
    h.send(TABLE, cmd.OpenTable(variant="atlantic-city-multi"))
    h.send(TABLE, cmd.SitDown(player_id=PLAYER))
    h.send(WALLET, WalletDeposit(player_id=PLAYER, amount=1_000))
    return h


def test_a_deposit_its_table_refused_is_made_again_and_taken() -> None:
    h = seated_with_money()
    [deposit] = steps(h.send(WALLET, BuyIn(player_id=PLAYER, table_id=TABLE, amount=300)))
    refused(h, deposit)
    assert h.wallet().balance == 700 and len(h.wallet().pending) == 1
    found = reconciled(h)
    [stuck] = found.stuck
    assert (stuck.step, stuck.number, stuck.amount) == ("deposit", 1, 300)
    assert [str(f) for f in found.findings] == [str(stuck.finding)]
    in_transit = reconciled(h, timedelta(minutes=15))  # that soon, by the log's own time
    assert in_transit.stuck == [] and in_transit.in_transit == 1
    # counted to now instead, a day later (blackjack redrive's: a log quiet since)
    assert [s.step for s in reconciled(h, timedelta(minutes=15), at=LATER).stuck] == ["deposit"]
    assert described(h) == [f"buy-in 1 of 3.00 USD from {WALLET}: its Deposit to {TABLE}"]
    [remade] = redriven(h)
    same_step(remade, deposit)
    taken = h.forward(remade)
    assert results(taken)[0].status == "accepted"
    assert [e.type for e in taken.events] == ["FundsDeposited"]
    [confirm] = steps(taken)
    assert results(h.forward(confirm))[0].status == "accepted"
    assert h.table().players[PLAYER].balance == 300
    assert h.wallet().balance == 700 and h.wallet().pending == ()
    after = reconciled(h)
    assert after.findings == [] and after.in_transit == 0 and redriven(h) == []


def test_a_refund_its_wallet_refused_is_made_again_and_the_money_comes_back() -> None:
    h = Harness()
    h.send(TABLE, cmd.OpenTable(variant="atlantic-city-multi"))
    h.send(WALLET, WalletDeposit(player_id=PLAYER, amount=1_000))
    [deposit] = steps(h.send(WALLET, BuyIn(player_id=PLAYER, table_id=TABLE, amount=300)))
    [refund] = steps(h.forward(deposit))  # not seated: declined
    refused(h, refund)
    assert h.wallet().balance == 700
    assert described(h) == [
        f"buy-in 1 of 3.00 USD that {TABLE} declined (not_seated): its RefundBuyIn to {WALLET}"
    ]
    [remade] = redriven(h)
    same_step(remade, refund)
    assert results(h.forward(remade))[0].status == "accepted"
    assert h.wallet().balance == 1_000 and h.wallet().pending == ()
    assert reconciled(h).findings == [] and redriven(h) == []


def test_a_confirmation_its_wallet_refused_is_made_again_and_closes_the_buy_in() -> None:
    h = seated_with_money()
    [deposit] = steps(h.send(WALLET, BuyIn(player_id=PLAYER, table_id=TABLE, amount=300)))
    [confirm] = steps(h.forward(deposit))
    refused(h, confirm)
    assert len(h.wallet().pending) == 1
    [stuck] = reconciled(h).stuck
    assert stuck.step == "confirm"
    assert described(h) == [f"buy-in 1 of 3.00 USD that {TABLE} took: its ConfirmBuyIn to {WALLET}"]
    [remade] = redriven(h)
    same_step(remade, confirm)
    assert results(h.forward(remade))[0].status == "accepted"
    assert h.wallet().pending == () and h.wallet().balance == 700
    assert reconciled(h).findings == []


def test_a_cash_out_its_wallet_refused_is_made_again_and_received() -> None:
    h = seated_with_money()
    [deposit] = steps(h.send(WALLET, BuyIn(player_id=PLAYER, table_id=TABLE, amount=300)))
    h.forward(steps(h.forward(deposit))[0])
    [cash_out] = steps(h.send(TABLE, cmd.LeaveTable(player_id=PLAYER)))
    refused(h, cash_out)
    assert h.wallet().balance == 700
    [stuck] = reconciled(h).stuck
    assert (stuck.step, stuck.amount) == ("cashout", 300)
    assert described(h) == [
        f"3.00 USD paid out at {TABLE} (its event {stuck.number}): its CashOut to {WALLET}"
    ]
    [remade] = redriven(h)
    same_step(remade, cash_out)
    assert results(h.forward(remade))[0].status == "accepted"
    assert h.wallet().balance == 1_000
    assert reconciled(h).findings == [] and redriven(h) == []


def test_a_step_sent_again_that_was_not_lost_moves_nothing() -> None:
    """Its receiver had taken it: a copy within the window gets the first answer, and past it
    the number tells it (the stuck time set wrong, a step only slow)."""
    h = seated_with_money()
    [deposit] = steps(h.send(WALLET, BuyIn(player_id=PLAYER, table_id=TABLE, amount=300)))
    refused(h, deposit)
    [remade] = redriven(h)
    [confirm] = steps(h.forward(remade))
    h.forward(confirm)
    again = h.forward(remade)  # sent twice by two operators
    assert again.duplicate and again.events == [] and steps(again) == []
    push_past_the_window(h)
    late = h.forward(remade)
    [result] = results(late)
    assert result.rejection is not None and result.rejection.code == "transfer_already_handled"
    assert late.events == [] and h.table().players[PLAYER].balance == 300


def test_a_deposit_a_later_buy_in_passed_stays_stuck() -> None:
    """The limit: a table keeps the last buy-in number of each wallet, so buy-in 1 refused
    and buy-in 2 taken leaves 1 refused ``transfer_already_handled`` when sent again, and the
    audit's finding stands (docs/operations.md)."""
    h = seated_with_money()
    [first] = steps(h.send(WALLET, BuyIn(player_id=PLAYER, table_id=TABLE, amount=300)))
    refused(h, first)
    [second] = steps(h.send(WALLET, BuyIn(player_id=PLAYER, table_id=TABLE, amount=100)))
    h.forward(steps(h.forward(second))[0])
    [remade] = redriven(h)
    [result] = results(h.forward(remade))
    assert result.rejection is not None and result.rejection.code == "transfer_already_handled"
    assert h.table().players[PLAYER].balance == 100 and h.wallet().balance == 600
    assert [s.number for s in reconciled(h).stuck] == [1]


def test_the_command_line_without_a_broker_says_so_in_a_line_and_exits_2(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Exit 1 means steps are stuck or refused: a broker not reached is 2 (a review: it was a
    traceback and 1)."""
    monkeypatch.setenv("BLACKJACK_SHOE_KEY", "ab" * 32)
    assert main(["redrive", "--bootstrap", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert "blackjack redrive: Kafka at 127.0.0.1:1: KafkaConnectionError: Unable to" in err
    assert "Traceback" not in err and err.count("KafkaConnectionError") == 1
