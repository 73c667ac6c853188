"""A copy of a signed money step (a buy-in's ``Deposit``, its ``ConfirmBuyIn`` or
``RefundBuyIn``, a ``CashOut``), sent again after the idempotency window has moved on, is
refused by the handler's processor, without Kafka. The deciders refuse it by what it carries
(a table keeps the last buy-in number of each wallet, a wallet the last table event of each
table it received a cash-out from), so a stream's memory does not grow with its buy-ins and
cash-outs. Only a cash-out from a handler from before cash-outs named their table event is
still kept by command id."""

from __future__ import annotations

import base64
import dataclasses
import json
import zlib
from datetime import UTC, datetime
from typing import Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from blackjack.command_handler.processor import Handled
from blackjack.command_handler.reading import Inbound
from blackjack.command_handler.records import Outgoing
from blackjack.command_handler.signing import TRANSFER_HEADER
from blackjack.command_handler.snapshots import SealedSnapshot, SnapshotCodec
from blackjack.command_handler.streams import PartitionStore, Stream, initial_state
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.state import TableState
from blackjack.domain.wallet import (
    BuyIn,
    CashOut,
    WalletDeposit,
    WalletState,
    WalletWithdraw,
    wallet_stream,
)
from blackjack.messages.envelope import CommandEnvelope, CommandResult, EventEnvelope
from tests.unit.processor_harness import SIGNER, TOPICS, new_processor

NOW = datetime(2026, 5, 1, tzinfo=UTC)
WINDOW = 4
PLAYER, TABLE, WALLET = "eve", "replay-multi", wallet_stream("eve")


class Harness:
    def __init__(self) -> None:
        self.processor = new_processor(dedup_window=WINDOW)
        self.store = PartitionStore(0)
        self.offset = 0
        self.handled: list[Handled] = []

    def deliver(self, key: bytes, value: bytes, headers: list[tuple[str, bytes]]) -> Handled:
        self.offset += 1
        handled = self.processor.handle(
            self.store, Inbound(key, value, headers, 0, self.offset), NOW
        )
        self.handled.append(handled)
        return handled

    def send(self, stream: str, command: object) -> Handled:
        envelope = CommandEnvelope(
            command_id=f"c-{self.offset + 1}", stream_id=stream, command=command
        )
        return self.deliver(stream.encode(), envelope.model_dump_json().encode(), [])

    def forward(self, record: Outgoing) -> Handled:
        return self.deliver(record.key, record.value, record.headers)

    def events_of(self, stream_id: str) -> list[EventEnvelope]:
        """The events of ``stream_id`` written so far, in order."""
        return [e for h in self.handled for e in h.events if e.stream_id == stream_id]

    def table(self) -> TableState:
        state = self.store.streams[TABLE].state
        assert isinstance(state, TableState)
        return state

    def wallet(self) -> WalletState:
        state = self.store.streams[WALLET].state
        assert isinstance(state, WalletState)
        return state


def rebuilt_from(events: list[EventEnvelope]) -> Stream:
    """A stream rebuilt from its events alone, as a rebuild without a checkpoint reads them."""
    stream = Stream(events[0].stream_id, initial_state(events[0].stream_id))
    for envelope in events:
        stream.fold(envelope)
        stream.note_signed(envelope)
    return stream


def steps(handled: Handled) -> list[Outgoing]:
    return [r for r in handled.outgoing if r.topic == TOPICS.commands]


def results(handled: Handled) -> list[CommandResult]:
    return [
        CommandResult.model_validate_json(r.value)
        for r in handled.outgoing
        if r.topic == TOPICS.results
    ]


def assert_refused_copy(handled: Handled, code: str) -> CommandResult:
    """Typed rejection, one result record and nothing else: no events, no steps; counted as
    a duplicate."""
    [result] = results(handled)
    assert result.status == "rejected" and result.rejection is not None
    assert result.rejection.code == code, result.rejection
    assert handled.events == [] and steps(handled) == [] and handled.duplicate
    return result


def assert_refused_legacy_copy(handled: Handled) -> None:
    """A cash-out that named no table event: refused by its id, before the decider."""
    result = assert_refused_copy(handled, "unauthorized")
    assert result.rejection is not None and "already applied" in result.rejection.message


def bought_in() -> tuple[Harness, Outgoing, Outgoing]:
    """A wallet-funded buy-in at a multi-seat table, then the player leaves (cash-out):
    returns the harness, the signed Deposit record and the signed CashOut record."""
    h = Harness()
    h.send(TABLE, cmd.OpenTable(variant="atlantic-city-multi"))
    h.send(TABLE, cmd.SitDown(player_id=PLAYER))
    h.send(WALLET, WalletDeposit(player_id=PLAYER, amount=1_000))
    [deposit] = steps(h.send(WALLET, BuyIn(player_id=PLAYER, table_id=TABLE, amount=300)))
    credited = h.forward(deposit)
    assert results(credited)[0].status == "accepted"
    [confirm] = steps(credited)
    assert results(h.forward(confirm))[0].status == "accepted"
    assert h.table().players[PLAYER].balance == 300 and h.wallet().balance == 700
    # Within the window a copy gets the original result, as before.
    again = h.forward(deposit)
    assert results(again) == results(credited) and again.duplicate and not steps(again)
    [cash_out] = steps(h.send(TABLE, cmd.Withdraw(player_id=PLAYER, amount=100)))
    assert results(h.forward(cash_out))[0].status == "accepted"
    assert h.table().players[PLAYER].balance == 200 and h.wallet().balance == 800
    return h, deposit, cash_out


def push_past_the_window(h: Harness) -> None:
    """Answers of each kind remembered apart (streams.py) at the table and the wallet, past the
    window: refusals, and accepted commands that wrote events but moved no money (the table's
    player away and back, a cent paid into the wallet and out)."""
    for _ in range(WINDOW + 2):
        h.send(TABLE, cmd.Withdraw(player_id=PLAYER, amount=1_000_000))  # refused, remembered
        h.send(WALLET, WalletWithdraw(player_id=PLAYER, amount=1_000_000))  # refused, remembered
    for _ in range(WINDOW // 2 + 1):
        for handled in (
            h.send(TABLE, cmd.Disconnect(player_id=PLAYER)),
            h.send(TABLE, cmd.Reconnect(player_id=PLAYER)),
            h.send(WALLET, WalletDeposit(player_id=PLAYER, amount=1)),
            h.send(WALLET, WalletWithdraw(player_id=PLAYER, amount=1)),
        ):
            assert results(handled)[0].status == "accepted" and handled.events


def test_a_signed_deposit_or_cash_out_sent_again_after_the_window_is_refused() -> None:
    h, deposit, cash_out = bought_in()
    push_past_the_window(h)
    ids = {CommandEnvelope.model_validate_json(r.value).command_id for r in (deposit, cash_out)}
    assert not ids & {*h.store.streams[TABLE].results, *h.store.streams[WALLET].results}
    table_sequence, wallet_sequence = h.store.streams[TABLE].sequence, h.wallet().transfers
    # no second credit, no confirm nor refund
    assert_refused_copy(h.forward(deposit), "transfer_already_handled")
    assert_refused_copy(h.forward(cash_out), "transfer_already_handled")
    assert h.table().players[PLAYER].balance == 200 and h.wallet().balance == 800
    assert h.store.streams[TABLE].sequence == table_sequence
    assert h.wallet().transfers == wallet_sequence and h.wallet().pending == ()
    # And again: the refusal is now in the window, still nothing changes.
    again = h.forward(deposit)
    assert again.duplicate and not again.events and not steps(again)
    assert h.table().players[PLAYER].balance == 200
    assert not h.store.streams[TABLE].signed and not h.store.streams[WALLET].signed


def test_a_copy_of_a_buy_in_s_confirmation_is_refused_by_the_wallet() -> None:
    h = Harness()
    h.send(TABLE, cmd.OpenTable(variant="atlantic-city-multi"))
    h.send(TABLE, cmd.SitDown(player_id=PLAYER))
    h.send(WALLET, WalletDeposit(player_id=PLAYER, amount=1_000))
    [deposit] = steps(h.send(WALLET, BuyIn(player_id=PLAYER, table_id=TABLE, amount=300)))
    [confirm] = steps(h.forward(deposit))
    assert results(h.forward(confirm))[0].status == "accepted"
    push_past_the_window(h)
    assert_refused_copy(h.forward(confirm), "unknown_transfer")
    assert h.wallet().balance == 700 and h.wallet().pending == ()


def round_trips(h: Harness, count: int) -> None:
    """``count`` buy-ins of 10 at the table, each forwarded and confirmed, and as many
    withdrawals cashed out to the wallet."""
    for _ in range(count):
        [deposit] = steps(h.send(WALLET, BuyIn(player_id=PLAYER, table_id=TABLE, amount=10)))
        [confirm] = steps(h.forward(deposit))
        h.forward(confirm)
        [cash_out] = steps(h.send(TABLE, cmd.Withdraw(player_id=PLAYER, amount=10)))
        assert results(h.forward(cash_out))[0].status == "accepted"


def test_a_stream_s_memory_does_not_grow_with_its_buy_ins_and_cash_outs() -> None:
    h, deposit, cash_out = bought_in()
    codec = SnapshotCodec(b"s" * 32)
    round_trips(h, 20)
    sizes = {
        s: len(codec.encode(dataclasses.replace(h.store.streams[s], money={})))
        for s in (TABLE, WALLET)
    }
    round_trips(h, 400)
    assert h.wallet().balance == 800 and h.table().players[PLAYER].balance == 200
    assert h.table().buy_ins == {WALLET: 421} and h.wallet().transfers == 421
    assert list(h.wallet().cashed_out) == [TABLE]
    assert not h.store.streams[TABLE].signed and not h.store.streams[WALLET].signed
    # The table's withdrawals are the platform's money commands, and the wallet's buy-ins are
    # kept by id as they are, for their retention (``domain.platform_money``): all 421 of
    # each here, sent at one time (the wallet's deposit too).
    withdrawals = h.store.streams[TABLE].money
    assert len(withdrawals) == 421 and len(h.store.streams[WALLET].money) == 422
    for stream_id, before in sizes.items():
        # Same window, one number per counterpart: only the digits of the numbers grow
        # (zlib makes the size wobble by a few bytes either way).
        stream = dataclasses.replace(h.store.streams[stream_id], money={})
        assert abs(len(codec.encode(stream)) - before) < 64
    assert_refused_copy(h.forward(deposit), "transfer_already_handled")
    assert_refused_copy(h.forward(cash_out), "transfer_already_handled")


def test_a_rebuild_from_the_events_or_the_snapshot_refuses_the_copies_the_same_way() -> None:
    h, deposit, cash_out = bought_in()
    push_past_the_window(h)
    for stream_id in (TABLE, WALLET):
        rebuilt = rebuilt_from(h.events_of(stream_id))
        assert rebuilt.state == h.store.streams[stream_id].state and not rebuilt.signed

    # Through a sealed snapshot, into a fresh partition store (a restarted handler).
    codec = SnapshotCodec(b"s" * 32)
    fresh = Harness()
    fresh.processor = h.processor
    for stream_id in (TABLE, WALLET):
        opened = codec.decode(codec.encode(h.store.streams[stream_id]))
        assert opened.state == h.store.streams[stream_id].state and not opened.signed_incomplete
        assert opened.last_seen == h.store.streams[stream_id].last_seen
        fresh.store.streams[stream_id] = opened
    assert PLAYER in fresh.store.streams[TABLE].last_seen
    assert_refused_copy(fresh.forward(deposit), "transfer_already_handled")
    assert_refused_copy(fresh.forward(cash_out), "transfer_already_handled")
    assert fresh.table().players[PLAYER].balance == 200 and fresh.wallet().balance == 800


def legacy_cash_out(h: Harness, amount: int) -> Outgoing:
    """A signed ``CashOut`` as a handler from before ``table_sequence`` sent it."""
    envelope = CommandEnvelope(
        command_id="3f1c0a52-0000-5000-8000-000000000001.cashout",
        stream_id=WALLET,
        command=CashOut(player_id=PLAYER, table_id=TABLE, amount=amount),
    )
    key, value = WALLET.encode(), envelope.model_dump_json().encode()
    return Outgoing(TOPICS.commands, key, value, h.processor.signer.headers(key, value), 0)


def test_a_cash_out_that_names_no_table_event_is_still_kept_by_its_id() -> None:
    h, _, _ = bought_in()
    paid_out = h.store.streams[TABLE].sequence  # the table's FundsWithdrawn
    old = legacy_cash_out(h, 50)
    assert results(h.forward(old))[0].status == "accepted"
    assert h.wallet().balance == 850 and h.wallet().cashed_out == {TABLE: paid_out}
    [kept] = h.store.streams[WALLET].signed
    push_past_the_window(h)
    assert_refused_legacy_copy(h.forward(old))
    assert h.wallet().balance == 850
    # A rebuild finds it again: from the events (a version 1 event has no table_sequence)...
    assert rebuilt_from(h.events_of(WALLET)).signed == {kept}
    # ... and from the snapshot.
    codec = SnapshotCodec(b"s" * 32)
    assert codec.decode(codec.encode(h.store.streams[WALLET])).signed == {kept}


def sealed_body(raw: bytes) -> tuple[SealedSnapshot, dict[str, Any]]:
    record = SealedSnapshot.model_validate_json(raw)
    blob = base64.b64decode(record.sealed)
    aad = f"snapshot/{record.stream_id}/{record.sequence}".encode()
    body = json.loads(zlib.decompress(AESGCM(b"s" * 32).decrypt(blob[:12], blob[12:], aad)))
    return record, body


def resealed(record: SealedSnapshot, body: dict[str, Any]) -> bytes:
    """The snapshot an older handler would have written with ``body``."""
    aad = f"snapshot/{record.stream_id}/{record.sequence}".encode()
    nonce = base64.b64decode(record.sealed)[:12]
    plain = zlib.compress(json.dumps(body).encode())
    sealed = base64.b64encode(nonce + AESGCM(b"s" * 32).encrypt(nonce, plain, aad)).decode()
    return record.model_copy(update={"sealed": sealed}).model_dump_json().encode()


def test_an_older_snapshot_keeps_its_signed_ids() -> None:
    # Older handlers kept the id of every signed step: kept as they are, and no new one joins.
    h, _, _ = bought_in()
    codec = SnapshotCodec(b"s" * 32)
    record, body = sealed_body(codec.encode(h.store.streams[WALLET]))
    old = {"e1.cashout", "e2.confirm", "e3.refund", "e4.deposit"}
    body["signed"] = sorted(old)
    opened = codec.decode(resealed(record, body))
    assert opened.signed == old
    fresh = Harness()
    fresh.processor = h.processor
    fresh.store.streams = {TABLE: h.store.streams[TABLE], WALLET: opened}
    round_trips(fresh, 3)
    assert fresh.store.streams[WALLET].signed == old and not fresh.store.streams[TABLE].signed


def test_a_buy_in_deposit_from_before_deposits_named_their_transfer_is_kept_by_id() -> None:
    """Before deposits named their transfer, a multi-seat table's ``FundsDeposited`` of a
    buy-in had none, and only the deposit's id refused a copy: a rebuild still finds it."""
    h, deposit, _ = bought_in()
    legacy_log = []
    for envelope in h.events_of(TABLE):
        data = envelope.data
        if isinstance(data, ev.FundsDeposited):
            data = data.model_copy(update={"transfer": None})
        legacy_log.append(envelope.model_copy(update={"data": data}))
    rebuilt = rebuilt_from(legacy_log)
    deposit_id = CommandEnvelope.model_validate_json(deposit.value).command_id
    assert rebuilt.signed == {deposit_id} and rebuilt.state.buy_ins == {}  # type: ignore[union-attr]
    codec = SnapshotCodec(b"s" * 32)
    fresh = Harness()
    fresh.processor = h.processor
    fresh.store.streams = {
        TABLE: codec.decode(codec.encode(rebuilt)),
        WALLET: h.store.streams[WALLET],
    }
    assert_refused_legacy_copy(fresh.forward(deposit))
    assert fresh.table().players[PLAYER].balance == 200


def test_a_cash_out_names_its_table_event_in_the_signed_header_not_the_body() -> None:
    """An older handler refuses a body with a field it does not know: the table event goes in
    the signed ``bj_transfer`` header, which it ignores for a cash-out."""
    h = Harness()
    h.send(TABLE, cmd.OpenTable(variant="atlantic-city-multi"))
    h.send(TABLE, cmd.SitDown(player_id=PLAYER))
    h.send(WALLET, WalletDeposit(player_id=PLAYER, amount=1_000))
    [deposit] = steps(h.send(WALLET, BuyIn(player_id=PLAYER, table_id=TABLE, amount=300)))
    h.forward(steps(h.forward(deposit))[0])
    withdrawn = h.send(TABLE, cmd.Withdraw(player_id=PLAYER, amount=100))
    [cash_out] = steps(withdrawn)
    assert "table_sequence" not in json.loads(cash_out.value)["command"]
    assert dict(cash_out.headers)[TRANSFER_HEADER] == str(withdrawn.events[0].sequence).encode()
    # A table event named in the body alone (no header) is not believed: kept by id instead.
    body = json.loads(cash_out.value)
    body["command_id"] = "3f1c0a52-0000-5000-8000-000000000002.cashout"
    body["command"]["table_sequence"] = 10**6
    value = json.dumps(body).encode()
    record = Outgoing(TOPICS.commands, cash_out.key, value, SIGNER.headers(cash_out.key, value), 0)
    assert results(h.forward(record))[0].status == "accepted"
    assert h.store.streams[WALLET].signed == {body["command_id"]}
    assert h.wallet().cashed_out == {}  # the real cash-out has not arrived yet
    assert results(h.forward(cash_out))[0].status == "accepted"
    assert h.wallet().cashed_out == {TABLE: withdrawn.events[0].sequence}


def test_a_snapshot_without_the_signed_ids_is_marked_for_completion() -> None:
    h, _, _ = bought_in()
    codec = SnapshotCodec(b"s" * 32)
    # An older handler's snapshot: the same body without "signed"; the rebuild then reads the
    # stream's events before the checkpoint for them.
    record, body = sealed_body(codec.encode(h.store.streams[TABLE]))
    del body["signed"]
    opened = codec.decode(resealed(record, body))
    assert opened.signed_incomplete and opened.signed == set()


def test_an_unsigned_copy_of_a_signed_step_is_still_unauthorized() -> None:
    h, deposit, _ = bought_in()
    push_past_the_window(h)
    unsigned = h.deliver(deposit.key, deposit.value, [])
    [result] = results(unsigned)
    assert result.rejection is not None and result.rejection.code == "unauthorized"
    assert "signed money steps" in result.rejection.message and not unsigned.events
    assert "signature" not in result.rejection.message  # none came with it


def declined_buy_in() -> tuple[Harness, Outgoing]:
    """A buy-in to a multi-seat table where the player has no seat yet: the table declines it
    (``TransferDeclined``) and the wallet takes its refund. Returns the signed Deposit."""
    h = Harness()
    h.send(TABLE, cmd.OpenTable(variant="atlantic-city-multi"))
    h.send(WALLET, WalletDeposit(player_id=PLAYER, amount=1_000))
    [deposit] = steps(h.send(WALLET, BuyIn(player_id=PLAYER, table_id=TABLE, amount=300)))
    answer = h.forward(deposit)
    [result] = results(answer)
    assert result.status == "accepted"
    assert [e.type for e in answer.events] == ["TransferDeclined"]
    [refund] = steps(answer)
    assert CommandEnvelope.model_validate_json(refund.value).command.type == "RefundBuyIn"
    assert results(h.forward(refund))[0].status == "accepted"
    assert h.wallet().balance == 1_000 and h.wallet().pending == ()
    # Now the player sits down: a copy of the declined deposit must still credit nothing.
    h.send(TABLE, cmd.SitDown(player_id=PLAYER))
    return h, deposit


def test_a_declined_signed_deposit_sent_again_after_the_window_is_refused() -> None:
    h, deposit = declined_buy_in()
    push_past_the_window(h)
    sequence = h.store.streams[TABLE].sequence
    # no credit, no confirm nor second refund
    assert_refused_copy(h.forward(deposit), "transfer_already_handled")
    assert h.table().players[PLAYER].balance == 0 and h.wallet().balance == 1_000
    assert h.store.streams[TABLE].sequence == sequence and h.wallet().pending == ()


def test_a_declined_transfer_is_kept_by_a_rebuild_from_the_events_and_the_snapshot() -> None:
    h, deposit = declined_buy_in()
    push_past_the_window(h)
    rebuilt = rebuilt_from(h.events_of(TABLE))
    assert rebuilt.state == h.table() and h.table().buy_ins == {WALLET: 1}
    codec = SnapshotCodec(b"s" * 32)
    for stream in (rebuilt, h.store.streams[TABLE]):
        fresh = Harness()
        fresh.processor = h.processor
        fresh.store.streams[TABLE] = codec.decode(codec.encode(stream))
        fresh.store.streams[WALLET] = h.store.streams[WALLET]
        assert_refused_copy(fresh.forward(deposit), "transfer_already_handled")
        assert fresh.table().players[PLAYER].balance == 0


def test_a_platform_deposit_naming_a_transfer_is_unauthorized() -> None:
    h = Harness()
    h.send(TABLE, cmd.OpenTable(variant="mini-h17"))
    h.send(TABLE, cmd.SitDown(player_id=PLAYER))
    forged = h.send(TABLE, cmd.Deposit(player_id=PLAYER, amount=5, transfer="wallet:eve/1"))
    [result] = results(forged)
    assert result.rejection is not None and result.rejection.code == "unauthorized"
    assert h.send(TABLE, cmd.Deposit(player_id=PLAYER, amount=5)).events  # the platform's own


def test_a_signed_deposit_without_its_transfer_header_is_refused() -> None:
    """The service signs a Deposit only as a buy-in's, with its transfer in the signed header:
    one without it (a transfer in the body is not believed) credits nothing."""
    h = Harness()
    h.send(TABLE, cmd.OpenTable(variant="atlantic-city-multi"))
    h.send(TABLE, cmd.SitDown(player_id=PLAYER))
    for number, transfer in enumerate((None, "wallet:eve/7")):
        deposit = cmd.Deposit(player_id=PLAYER, amount=500, transfer=transfer)
        envelope = CommandEnvelope(command_id=f"d-{number}", stream_id=TABLE, command=deposit)
        key, value = TABLE.encode(), envelope.model_dump_json().encode()
        [result] = results(h.deliver(key, value, SIGNER.headers(key, value)))
        assert result.rejection is not None and result.rejection.code == "unauthorized"
        assert "names its transfer" in result.rejection.message
    assert h.table().players[PLAYER].balance == 0 and h.table().buy_ins == {}
