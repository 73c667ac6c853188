"""``blackjack redrive``: the money steps the logs show stuck, made again and sent.

A step of money between a wallet and a shared table (a buy-in's ``Deposit``, the table's
``ConfirmBuyIn`` or ``RefundBuyIn``, a ``CashOut``) is a signed command the handler writes in
the transaction of the event that causes it. One its receiver refused (signed under a key
that handler does not accept: a key rotation's step 3 begun before step 1 had finished
everywhere, a handler given another key) is not remembered there, and nothing sends it again:
the money stays in transit, and ``blackjack audit`` finds it ``STUCK_AFTER`` on.

This reads the events topic to its end, finds those steps as the audit does
(``audit.transfers``), makes each again from its cause as the handler made it
(``command_handler.records``: the same command id and body, signed under the current key of
``BLACKJACK_SHOE_KEY``) and, with ``--send``, sends it and waits for its answer. Sending one
that was only slow moves nothing twice: a receiver answers a copy within its window with the
first answer, and tells a step it handled by its number (a table the last buy-in it took or
declined of each wallet, a wallet its pending buy-ins and the last payout of each table).
What it cannot mend, it says: a deposit whose number a later buy-in of its wallet has passed
where it went (that table, or the partition's ``#declined`` stream for ids no table was
opened under), or a payout a later one of its table has passed, is refused
``transfer_already_handled``, and stays a finding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from aiokafka.structs import ConsumerRecord

from blackjack.audit.transfers import STUCK_AFTER, Movements, Reconciled, StuckStep
from blackjack.bus.header_names import header_name_not_utf8
from blackjack.bus.settings import PLAINTEXT, KafkaSecurity
from blackjack.bus.topics import Topics
from blackjack.command_handler.records import Outgoing, RecordWriter
from blackjack.command_handler.signing import CommandSigner
from blackjack.domain.currencies import money
from blackjack.domain.wallet import wallet_stream
from blackjack.messages.wire import decode, not_the_service_s
from blackjack.projections.rebuild import read_consumer_records

SOURCE = "/blackjack/redrive"
"""The ``ce_source`` of the steps sent again: the handler's own are its ``BLACKJACK_SOURCE``."""

READ_S = 3_600.0
"""How long the events topic may take to read (the audit's replay allows as long)."""


class UnreadableLog(Exception):
    """An event of the service this release cannot read: nothing is sent on half a log."""


class StepWriter(RecordWriter):
    """The handler's step records (``deposit_step``, ``buy_in_answer_step``,
    ``cash_out_step``), written outside a handler: signed under the current key."""

    def __init__(self, signer: CommandSigner, topics: Topics, partitions: int) -> None:
        self.signer = signer
        self.topics = topics
        self.partitions = partitions
        self.source = SOURCE


@dataclass(frozen=True)
class Redrive:
    """A stuck step and its record, made again."""

    step: StuckStep
    record: Outgoing

    @property
    def command_id(self) -> str:
        return dict(self.record.headers)["ce_id"].decode()

    @property
    def stream_id(self) -> str:
        return self.record.key.decode()

    def describe(self) -> str:
        step, cur = self.step, self.step.currency
        amount, table = f"{money(step.amount, cur)} {cur}", step.table_id
        wallet = wallet_stream(step.player_id)
        what = {
            "deposit": f"buy-in {step.number} of {amount} from {wallet}: its Deposit",
            "confirm": f"buy-in {step.number} of {amount} that {table} took: its ConfirmBuyIn",
            "refund": f"buy-in {step.number} of {amount} that {table} declined "
            f"({step.declined}): its RefundBuyIn",
            "cashout": f"{amount} paid out at {table} (its event {step.number}): its CashOut",
        }[step.step]
        return f"{what} to {self.stream_id} ({self.command_id})"


def remade(step: StuckStep, writer: RecordWriter, now: datetime) -> Outgoing:
    """``step``'s record as the handler made it from its cause (sent now)."""
    match step.step:
        case "deposit":
            return writer.deposit_step(
                cause=step.cause,
                correlation=step.correlation,
                table_id=step.table_id,
                player_id=step.player_id,
                amount=step.amount,
                currency=step.currency,
                transfer=step.number,
                now=now,
            )
        case "confirm" | "refund":
            return writer.buy_in_answer_step(
                deposit_id=step.cause,
                correlation=step.correlation,
                player_id=step.player_id,
                transfer=step.number,
                declined=step.declined,
                now=now,
            )
        case "cashout":
            return writer.cash_out_step(
                cause=step.cause,
                correlation=step.correlation,
                table_id=step.table_id,
                table_sequence=step.number,
                player_id=step.player_id,
                amount=step.amount,
                now=now,
            )
    raise ValueError(f"no such step: {step.step}")


def plan(reconciled: Reconciled, writer: RecordWriter, now: datetime) -> list[Redrive]:
    return [Redrive(step, remade(step, writer, now)) for step in reconciled.stuck]


@dataclass
class LogRead:
    """The movements of money on the events topic, read to its end."""

    movements: Movements
    events: int = 0
    copies: int = 0
    """events read again at a place already read (a retried write): counted once"""
    stepped_over: int = 0
    """records the service did not write, or whose header names are not UTF-8"""

    def feed(self, records: Sequence[ConsumerRecord]) -> None:
        for record in records:
            if header_name_not_utf8(record.headers) or not_the_service_s(
                record.value, record.headers
            ):
                self.stepped_over += 1
                continue
            try:
                envelope = decode(record.value or b"")
            except (ValueError, KeyError, TypeError) as error:
                raise UnreadableLog(
                    f"{record.topic}[{record.partition}] offset {record.offset}: {error}"
                ) from error
            stream_id = envelope.stream_id
            # a stream's events come in order (its single writer): one at or below the last
            # read is a copy a retried write left
            if envelope.sequence <= self.movements.read_to.get(stream_id, 0):
                self.copies += 1
                continue
            self.movements.read(stream_id, [envelope])
            self.events += 1


async def read_movements(
    bootstrap: str,
    topic: str,
    *,
    stuck_after: timedelta = STUCK_AFTER,
    now: datetime | None = None,
    security: KafkaSecurity = PLAINTEXT,
) -> tuple[LogRead, Reconciled]:
    """Every movement of money on ``topic`` (read_committed, to its end as of now), matched:
    nothing read lags, so a step not answered ``stuck_after`` before ``now`` (or the last
    event, if later) is stuck. (The audit counts to the last event only: a quiet log's last
    step stays in transit there, and alone in a log, the step the alert paged about would
    never be listed.)"""
    log = LogRead(Movements(lambda stream_id: False, stuck_after))
    await read_consumer_records(bootstrap, topic, log.feed, timeout=READ_S, security=security)
    return log, log.movements.matched(now)
