"""The records a command's transaction writes: its events on the wire, its result, and the
signed commands its events cause on other streams (the steps of a buy-in or a cash-out)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from blackjack.bus.headers import COMMAND_DIGEST_HEADER, command_headers, result_headers
from blackjack.bus.topics import Topics, partition_for
from blackjack.command_handler.answers import remembered
from blackjack.command_handler.ids import event_id, step_id
from blackjack.command_handler.signing import CommandSigner
from blackjack.command_handler.streams import Stream
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.state import TableState
from blackjack.domain.wallet import (
    BuyInSent,
    CashOut,
    ConfirmBuyIn,
    RefundBuyIn,
    WalletCommand,
    WalletEvent,
    WalletState,
    wallet_stream,
)
from blackjack.messages.envelope import CommandEnvelope, CommandResult, EventEnvelope, type_name
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import cloudevents_headers, encode_event

_HEADER_ONLY: dict[type, dict[str, set[str]]] = {CashOut: {"command": {"table_sequence"}}}
"""Command fields that are set from a signed header on reading, never sent in the body."""


@dataclass(frozen=True)
class Outgoing:
    """A record the transaction writes."""

    topic: str
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]
    partition: int


def record_size(record: Outgoing) -> int:
    """About what the record weighs against the broker's limit (its framing is a few dozen
    bytes more)."""
    headers = sum([len(name) + len(value or b"") for name, value in record.headers])
    return len(record.key) + len(record.value) + headers


class RecordWriter:
    """Writes the records of one partition's transactions (``Processor`` is one)."""

    topics: Topics
    partitions: int
    seal: ShoeSeal
    signer: CommandSigner
    source: str

    def _records_of(
        self,
        envelope: CommandEnvelope,
        stream: Stream,
        domain_events: Sequence[ev.Event | WalletEvent],
        now: datetime,
    ) -> tuple[list[EventEnvelope], list[Outgoing]]:
        """The envelopes of the decided events (numbered after the stream's last), and every
        record they make: the events on the wire and the steps they cause on other streams."""
        correlation = envelope.correlation_id or envelope.command_id
        built = [
            EventEnvelope(
                event_id=event_id(stream.stream_id, sequence),
                type=type_name(type(event)),
                schema_version=event.version,
                stream_id=stream.stream_id,
                sequence=sequence,
                occurred_at=now,
                causation_id=envelope.command_id,
                correlation_id=correlation,
                data=event,
            )
            for sequence, event in enumerate(domain_events, start=stream.sequence + 1)
        ]
        partition = partition_for(stream.stream_id, self.partitions)
        records: list[Outgoing] = []
        for event_envelope in built:
            records.append(
                Outgoing(
                    topic=self.topics.events,
                    key=stream.stream_id.encode(),
                    value=encode_event(event_envelope, self.seal),
                    # the wire envelope's meta is the envelope's: only the data is sealed
                    headers=cloudevents_headers(event_envelope, self.source),
                    partition=partition,
                )
            )
            records.extend(self._steps_of(event_envelope, stream.state, correlation, now))
        return built, records

    # ---- money between streams ----------------------------------------------------------

    def _steps_of(
        self,
        envelope: EventEnvelope,
        before: TableState | WalletState,
        correlation: str,
        now: datetime,
    ) -> list[Outgoing]:
        """The commands an event causes on other streams, each with an id derived from it."""
        event = envelope.data
        if isinstance(event, BuyInSent):
            deposit = self.deposit_step(
                cause=envelope.event_id,
                correlation=correlation,
                table_id=event.table_id,
                player_id=event.player_id,
                amount=event.amount,
                currency=event.currency,
                transfer=event.transfer,
                now=now,
            )
            return [deposit]
        by_wallet = isinstance(before, TableState) and before.rules.funded_by_wallet
        if not by_wallet or not isinstance(event, ev.SeatLeft | ev.FundsWithdrawn):
            return []
        amount = event.balance_returned if isinstance(event, ev.SeatLeft) else event.amount
        if amount <= 0:
            return []
        cash_out = self.cash_out_step(
            cause=envelope.event_id,
            correlation=correlation,
            table_id=envelope.stream_id,
            table_sequence=envelope.sequence,
            player_id=event.player_id,
            amount=amount,
            now=now,
        )
        return [cash_out]

    # The steps, each made from what its cause carries: by the handler as the cause is
    # written, and again by ``blackjack redrive`` from the cause in the log (audit.redrive).

    def deposit_step(
        self,
        *,
        cause: str,
        correlation: str,
        table_id: str,
        player_id: str,
        amount: int,
        currency: str,
        transfer: int,
        now: datetime,
    ) -> Outgoing:
        """A buy-in's ``Deposit`` at its table, caused by the wallet's ``BuyInSent``."""
        deposit = cmd.Deposit(player_id=player_id, amount=amount, currency=currency)
        return self._command_record(
            step_id(cause, "deposit"),
            table_id,
            deposit,
            correlation,
            cause,
            now,
            transfer=transfer,
        )

    def cash_out_step(
        self,
        *,
        cause: str,
        correlation: str,
        table_id: str,
        table_sequence: int,
        player_id: str,
        amount: int,
        now: datetime,
    ) -> Outgoing:
        """The ``CashOut`` of money a shared table paid out (``SeatLeft``, ``FundsWithdrawn``:
        its event ``table_sequence``) to the player's wallet."""
        cash_out = CashOut(player_id=player_id, table_id=table_id, amount=amount)
        return self._command_record(
            step_id(cause, "cashout"),
            wallet_stream(player_id),
            cash_out,
            correlation,
            cause,
            now,
            # in the signed header, where an older handler ignores it (a field in the
            # body would make it refuse the cash-out as malformed during an upgrade)
            transfer=table_sequence,
        )

    def _buy_in_answer(
        self,
        envelope: CommandEnvelope,
        deposit: cmd.Deposit,
        transfer: int,
        declined: ev.TransferDeclined | None,
        now: datetime,
    ) -> Outgoing:
        """The table's answer to a buy-in: confirm it to the wallet, or, when the table
        declined it, give the money back."""
        return self.buy_in_answer_step(
            deposit_id=envelope.command_id,
            correlation=envelope.correlation_id or envelope.command_id,
            player_id=deposit.player_id,
            transfer=transfer,
            declined=None if declined is None else declined.reason_code,
            now=now,
        )

    def buy_in_answer_step(
        self,
        *,
        deposit_id: str,
        correlation: str,
        player_id: str,
        transfer: int,
        declined: str | None,
        now: datetime,
    ) -> Outgoing:
        """The ``ConfirmBuyIn`` of a buy-in its table took, or the ``RefundBuyIn`` of one it
        declined (``declined``: the reason's code), to the wallet."""
        answer: WalletCommand
        if declined is None:
            answer = ConfirmBuyIn(player_id=player_id, transfer=transfer)
            step = "confirm"
        else:
            answer = RefundBuyIn(player_id=player_id, transfer=transfer, reason=declined)
            step = "refund"
        return self._command_record(
            step_id(deposit_id, step),
            wallet_stream(player_id),
            answer,
            correlation,
            deposit_id,
            now,
        )

    # ---- records ----------------------------------------------------------------------

    def _command_record(  # noqa: PLR0917
        self,
        command_id: str,
        stream_id: str,
        command: cmd.Command | WalletCommand,
        correlation: str,
        cause: str,
        now: datetime,
        *,
        transfer: int | None = None,
    ) -> Outgoing:
        envelope = CommandEnvelope(
            command_id=command_id,
            stream_id=stream_id,
            correlation_id=correlation,
            sent_at=now,
            command=command,
        )
        key = stream_id.encode()
        # A cash-out's table event travels in the signed header (see ``_steps_of``): its body
        # stays what an older handler reads.
        value = envelope.model_dump_json(exclude=_HEADER_ONLY.get(type(command))).encode()
        headers = command_headers(envelope, self.source, cause)
        headers += self.signer.headers(key, value, transfer)
        return Outgoing(
            topic=self.topics.commands,
            key=key,
            value=value,
            headers=headers,
            partition=partition_for(stream_id, self.partitions),
        )

    def _result_record(
        self, result: CommandResult, key: bytes, partition: int, digest: str | None = None
    ) -> Outgoing:
        """The answer's record; with the ``digest`` of the command it answers where its stream
        keeps one (``COMMAND_DIGEST_HEADER``: a rebuild keeps it as the live window does)."""
        value = result.model_dump_json().encode()
        headers = result_headers(result, value, self.source)
        if digest is not None and remembered(result):
            headers.append((COMMAND_DIGEST_HEADER, digest.encode()))
        return Outgoing(
            topic=self.topics.results,
            key=key,
            value=value,
            headers=headers,
            partition=partition,
        )
