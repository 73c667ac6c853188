"""A copy of a signed money step (a buy-in's ``Deposit``, a ``CashOut``), sent again after the
idempotency window has moved on, is refused by the handler's processor, without Kafka: the
stream keeps every signed command id it accepted, with no window, in its snapshot and in what
a rebuild reads back from the events."""

from __future__ import annotations

import base64
import json
import zlib
from datetime import UTC, datetime

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from blackjack.command_handler.processor import Handled, Inbound, Outgoing
from blackjack.command_handler.snapshots import SealedSnapshot, SnapshotCodec
from blackjack.command_handler.streams import PartitionStore, Stream, initial_state
from blackjack.domain import commands as cmd
from blackjack.domain.state import TableState
from blackjack.domain.wallet import BuyIn, WalletDeposit, WalletState, WalletWithdraw, wallet_stream
from blackjack.messages.envelope import CommandEnvelope, CommandResult
from tests.unit.processor_harness import TOPICS, new_processor

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

    def table(self) -> TableState:
        state = self.store.streams[TABLE].state
        assert isinstance(state, TableState)
        return state

    def wallet(self) -> WalletState:
        state = self.store.streams[WALLET].state
        assert isinstance(state, WalletState)
        return state


def steps(handled: Handled) -> list[Outgoing]:
    return [r for r in handled.outgoing if r.topic == TOPICS.commands]


def results(handled: Handled) -> list[CommandResult]:
    return [
        CommandResult.model_validate_json(r.value)
        for r in handled.outgoing
        if r.topic == TOPICS.results
    ]


def assert_refused_replay(handled: Handled) -> None:
    """Typed rejection, one result record and nothing else: no events, no steps."""
    [result] = results(handled)
    assert result.status == "rejected" and result.rejection is not None
    assert result.rejection.code == "unauthorized"
    assert "already applied" in result.rejection.message
    assert handled.events == [] and steps(handled) == [] and handled.duplicate


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
    for _ in range(WINDOW + 2):
        h.send(TABLE, cmd.Reconnect(player_id=PLAYER))
        h.send(WALLET, WalletWithdraw(player_id=PLAYER, amount=1_000_000))  # refused, remembered


def test_a_signed_deposit_or_cash_out_sent_again_after_the_window_is_refused() -> None:
    h, deposit, cash_out = bought_in()
    push_past_the_window(h)
    ids = {CommandEnvelope.model_validate_json(r.value).command_id for r in (deposit, cash_out)}
    assert not ids & {*h.store.streams[TABLE].results, *h.store.streams[WALLET].results}
    table_sequence, wallet_sequence = h.store.streams[TABLE].sequence, h.wallet().transfers
    assert_refused_replay(h.forward(deposit))  # no second credit, no confirm nor refund
    assert_refused_replay(h.forward(cash_out))
    assert h.table().players[PLAYER].balance == 200 and h.wallet().balance == 800
    assert h.store.streams[TABLE].sequence == table_sequence
    assert h.wallet().transfers == wallet_sequence and h.wallet().pending == ()
    # And again: the refusal is now in the window, still nothing changes.
    assert_refused_replay(h.forward(deposit))
    assert h.table().players[PLAYER].balance == 200


def test_the_signed_ids_survive_the_snapshot_and_a_rebuild_from_the_events() -> None:
    h, deposit, cash_out = bought_in()
    push_past_the_window(h)
    live = {s: set(h.store.streams[s].signed) for s in (TABLE, WALLET)}
    assert len(live[TABLE]) == 1 and len(live[WALLET]) == 2  # the deposit; confirm + cash-out

    # From the events alone (as a rebuild without a checkpoint reads them).
    for stream_id in (TABLE, WALLET):
        rebuilt = Stream(stream_id, initial_state(stream_id))
        for handled in h.handled:
            for envelope in handled.events:
                if envelope.stream_id == stream_id:
                    rebuilt.fold(envelope)
                    rebuilt.note_signed(envelope)
        assert rebuilt.signed == live[stream_id]

    # Through a sealed snapshot, into a fresh partition store (a restarted handler).
    codec = SnapshotCodec(b"s" * 32)
    fresh = Harness()
    fresh.processor = h.processor
    for stream_id in (TABLE, WALLET):
        opened = codec.decode(codec.encode(h.store.streams[stream_id]))
        assert opened.signed == live[stream_id] and not opened.signed_incomplete
        assert opened.last_seen == h.store.streams[stream_id].last_seen
        fresh.store.streams[stream_id] = opened
    assert PLAYER in fresh.store.streams[TABLE].last_seen
    assert_refused_replay(fresh.forward(deposit))
    assert_refused_replay(fresh.forward(cash_out))
    assert fresh.table().players[PLAYER].balance == 200 and fresh.wallet().balance == 800


def test_a_snapshot_without_the_signed_ids_is_marked_for_completion() -> None:
    h, _, _ = bought_in()
    codec = SnapshotCodec(b"s" * 32)
    stream = h.store.streams[TABLE]
    stream.signed = set()
    raw = codec.encode(stream)
    # An older handler's snapshot: the same body without "signed"; the rebuild then reads the
    # stream's events before the checkpoint for them.
    record = SealedSnapshot.model_validate_json(raw)
    blob = base64.b64decode(record.sealed)
    aad = f"snapshot/{record.stream_id}/{record.sequence}".encode()
    aead = AESGCM(b"s" * 32)
    body = json.loads(zlib.decompress(aead.decrypt(blob[:12], blob[12:], aad)))
    del body["signed"]
    plain = zlib.compress(json.dumps(body).encode())
    legacy = record.model_copy(
        update={
            "sealed": base64.b64encode(blob[:12] + aead.encrypt(blob[:12], plain, aad)).decode()
        }
    )
    opened = codec.decode(legacy.model_dump_json().encode())
    assert opened.signed_incomplete and opened.signed == set()


def test_an_unsigned_copy_of_a_signed_step_is_still_unauthorized() -> None:
    h, deposit, _ = bought_in()
    push_past_the_window(h)
    unsigned = h.deliver(deposit.key, deposit.value, [])
    [result] = results(unsigned)
    assert result.rejection is not None and result.rejection.code == "unauthorized"
    assert "signed money steps" in result.rejection.message and not unsigned.events


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
    assert_refused_replay(h.forward(deposit))  # no credit, no confirm nor second refund
    assert h.table().players[PLAYER].balance == 0 and h.wallet().balance == 1_000
    assert h.store.streams[TABLE].sequence == sequence and h.wallet().pending == ()


def test_a_declined_transfer_is_kept_by_a_rebuild_from_the_events_and_the_snapshot() -> None:
    h, deposit = declined_buy_in()
    push_past_the_window(h)
    live = set(h.store.streams[TABLE].signed)
    assert len(live) == 1
    rebuilt = Stream(TABLE, initial_state(TABLE))
    for handled in h.handled:
        for envelope in handled.events:
            if envelope.stream_id == TABLE:
                rebuilt.fold(envelope)
                rebuilt.note_signed(envelope)
    assert rebuilt.signed == live and rebuilt.state == h.table()
    codec = SnapshotCodec(b"s" * 32)
    for stream in (rebuilt, h.store.streams[TABLE]):
        fresh = Harness()
        fresh.processor = h.processor
        fresh.store.streams[TABLE] = codec.decode(codec.encode(stream))
        fresh.store.streams[WALLET] = h.store.streams[WALLET]
        assert_refused_replay(fresh.forward(deposit))
        # Belt and braces: even without the signed id, the table knows the transfer.
        fresh.store.streams[TABLE].signed.clear()
        fresh.store.streams[TABLE].results.clear()
        again = fresh.forward(deposit)
        [result] = results(again)
        assert not steps(again) and not again.events  # no confirmation, no second refund
        assert result.rejection is not None
        assert result.rejection.code == "transfer_already_handled"
        assert fresh.table().players[PLAYER].balance == 0


def test_a_platform_deposit_naming_a_transfer_is_unauthorized() -> None:
    h = Harness()
    h.send(TABLE, cmd.OpenTable(variant="mini-h17"))
    h.send(TABLE, cmd.SitDown(player_id=PLAYER))
    forged = h.send(TABLE, cmd.Deposit(player_id=PLAYER, amount=5, transfer="wallet:eve/1"))
    [result] = results(forged)
    assert result.rejection is not None and result.rejection.code == "unauthorized"
    assert h.send(TABLE, cmd.Deposit(player_id=PLAYER, amount=5)).events  # the platform's own
