"""The consume-transact loop: each batch of a partition's commands decided (``Processor``) and
written in one Kafka transaction with the consumed offsets; a transaction that fails drops
the partition's memory, which is rebuilt from Kafka."""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import UTC, datetime

import structlog
from aiokafka import AIOKafkaProducer, ConsumerRecord
from aiokafka.errors import KafkaError, ProducerFenced
from aiokafka.structs import RecordMetadata

from blackjack.bus.header_names import header_name_not_utf8
from blackjack.bus.headers import COMMAND_OFFSET_HEADER
from blackjack.command_handler.checkpointing import Checkpointing
from blackjack.command_handler.partitions import (
    RETRY_AFTER_FAILURE_S,
    _Partition,
    transaction_failure,
)
from blackjack.command_handler.processor import Handled
from blackjack.command_handler.reading import Inbound
from blackjack.command_handler.signing import carries_signature
from blackjack.command_handler.snapshots import SIGNED_CHECKPOINTS_MARK
from blackjack.messages.envelope import CommandResult
from blackjack.observability import metrics

RETRY_AFTER_FENCING_S = 30.0
"""A fenced instance waits for the rebalance that takes the partition away; if none comes
(the broker aborted a transaction that ran too long), it takes the partition back."""
POLL_MS = 200
LOG_APPEND_TIME = 1  # a record's timestamp_type when the broker stamped it


def receipt_time(record: ConsumerRecord[bytes, bytes]) -> datetime | None:
    """When the broker took the command, if the topic has it stamp its records (see
    ``topics.topic_configs``); a producer's own time is not trusted for that."""
    if record.timestamp_type != LOG_APPEND_TIME:
        return None
    return datetime.fromtimestamp(record.timestamp / 1000, UTC)


def _forget_outcomes(sent: list[tuple[str, asyncio.Future[RecordMetadata]]]) -> None:
    """The sends of a failed transaction fail with it; their errors are the transaction's."""
    for _, future in sent:
        future.add_done_callback(lambda done: done.cancelled() or done.exception())


async def _abandon(
    producer: AIOKafkaProducer, sent: list[tuple[str, asyncio.Future[RecordMetadata]]]
) -> None:
    """Stopped mid-transaction: abort it now, or every read_committed reader of the topics it
    wrote waits for the next owner or the transaction timeout."""
    _forget_outcomes(sent)
    with contextlib.suppress(Exception):
        await asyncio.shield(producer.abort_transaction())


class Transactions(Checkpointing):
    """The loop that consumes the commands and writes what they cause."""

    # ---- the loop -----------------------------------------------------------------------

    async def _consume(self) -> None:
        assert self._consumer is not None
        while not self._stopping.is_set():
            more_due = await self._prepare_due()
            try:
                batches = await self._consumer.getmany(
                    timeout_ms=0 if more_due else POLL_MS, max_records=self.config.max_batch
                )
            except Exception as failure:
                if not isinstance(failure, KafkaError):
                    raise
                self.log.exception("fetching commands failed")
                await asyncio.sleep(RETRY_AFTER_FAILURE_S)
                continue
            # One transaction per partition, all at once, so that a command need not wait for
            # the broker round trips of the partitions fetched before it (docs/load.md). Each
            # partition has its own producer, lock and memory; what they share (the
            # processor, the consumer's pause, metrics) is only touched between awaits.
            outcomes = await asyncio.gather(
                *(
                    self._transaction(partition, records)
                    for tp, records in batches.items()
                    if records and (partition := self._partitions.get(tp.partition)) is not None
                ),
                return_exceptions=True,  # every transaction ends before the loop goes on
            )
            errors = [o for o in outcomes if isinstance(o, BaseException)]
            for error in errors[1:]:
                self.log.error("partition transaction failed", exc_info=error)
            if errors:
                raise errors[0]

    async def _transaction(
        self,
        partition: _Partition,
        records: list[ConsumerRecord[bytes, bytes]],
    ) -> None:
        async with partition.lock:
            if partition.status != "ready":
                return  # records of a partition being taken: refetched after its seek
            producer, store = partition.producer, partition.store
            assert producer is not None and store is not None
            started = time.monotonic()
            handled: list[Handled] = []
            sent: list[tuple[str, asyncio.Future[RecordMetadata]]] = []
            try:
                await producer.begin_transaction()
                for record in records:
                    inbound = Inbound(
                        record.key,
                        record.value,
                        record.headers,
                        record.partition,
                        record.offset,
                        receipt_time(record),
                        unreadable=header_name_not_utf8(record.headers),
                    )
                    with structlog.contextvars.bound_contextvars(kafka_offset=record.offset):
                        outcome = self.processor.handle(store, inbound, self._now())
                    handled.append(outcome)
                    answered = (COMMAND_OFFSET_HEADER, str(record.offset).encode())
                    for out in outcome.outgoing:
                        headers = out.headers
                        if out.topic == self.topics.results:  # which command it answers
                            headers = [*headers, answered]
                        future = await producer.send(
                            out.topic,
                            out.value,
                            key=out.key,
                            headers=headers,
                            partition=out.partition,
                        )
                        sent.append((out.topic, future))
                store.answered_to = records[-1].offset + 1
                if store.since_checkpoint >= self.config.snapshot_every:
                    await self._checkpoint(partition, store, producer, sent)
                await producer.send_offsets_to_transaction(
                    {partition.tp: (records[-1].offset + 1, SIGNED_CHECKPOINTS_MARK)},
                    self.config.group_id,
                )
                # Every record on the broker before the commit: aiokafka fails a batch that
                # outlives its delivery timeout (no leader during an outage) without failing
                # the transaction, whose commit would then carry the consumed offsets without
                # the events and results (commands lost without an answer).
                await self._advance(store, sent)
                await producer.commit_transaction()
            except Exception as error:
                _forget_outcomes(sent)
                await self._failed(partition, producer, error)
                return
            except asyncio.CancelledError:
                await _abandon(producer, sent)
                raise
            self._committed(partition, sent)
            metrics.TRANSACTIONS.labels("committed").inc()
            metrics.TRANSACTION_SECONDS.observe(time.monotonic() - started)
            partition.failures = 0
            self._report(handled, records)

    async def _failed(
        self, partition: _Partition, producer: AIOKafkaProducer, error: Exception
    ) -> None:
        """A transaction that did not commit: the partition is rebuilt from Kafka."""
        if isinstance(error, ProducerFenced) or isinstance(
            transaction_failure(producer), ProducerFenced
        ):
            metrics.TRANSACTIONS.labels("fenced").inc()
            # the broker says the same when it aborted a transaction that outlived its
            # timeout (a paused process) as when another instance took the partition
            self.log.warning(
                "fenced: another owner, or a transaction past its timeout",
                partition=partition.number,
            )
            self._drop(partition, "fenced", RETRY_AFTER_FENCING_S)
        else:
            metrics.TRANSACTIONS.labels("aborted").inc()
            # called from the except clause: the log line carries its traceback
            self.log.exception("transaction failed; rebuilding", partition=partition.number)
            # failed at once (readiness, gauges): the abort waits for a broker that may be gone
            self._drop(partition, "failed", RETRY_AFTER_FAILURE_S)
            with contextlib.suppress(Exception):
                await producer.abort_transaction()
        await self._close_producer(partition)

    async def _checkpoint_if_quiet(self, partition: _Partition) -> None:
        """A checkpoint in a transaction of its own, on a partition that has handled commands
        since its last one but too few to take another: the results topic keeps answers for
        7 days, and a rebuild after that must not need the ones it lost."""
        async with partition.lock:
            producer, store = partition.producer, partition.store
            if partition.status != "ready" or producer is None or store is None:
                return
            if not store.since_checkpoint:
                return
            sent: list[tuple[str, asyncio.Future[RecordMetadata]]] = []
            try:
                await producer.begin_transaction()
                await self._checkpoint(partition, store, producer, sent)
                if store.answered_to:
                    # The offset already committed, with the mark: taken from an unsigned
                    # checkpoint, a partition no command comes to would otherwise keep the
                    # release before's commit and trust a forged unsigned checkpoint for ever.
                    await producer.send_offsets_to_transaction(
                        {partition.tp: (store.answered_to, SIGNED_CHECKPOINTS_MARK)},
                        self.config.group_id,
                    )
                await self._advance(store, sent)  # the snapshots are written, as above
                await producer.commit_transaction()
            except Exception as error:
                _forget_outcomes(sent)
                await self._failed(partition, producer, error)
                return
            except asyncio.CancelledError:  # the clock stopped with the handler
                await _abandon(producer, sent)
                raise
            self._committed(partition, sent)
            metrics.TRANSACTIONS.labels("committed").inc()
            partition.failures = 0

    def _report(self, handled: list[Handled], records: list[ConsumerRecord[bytes, bytes]]) -> None:
        """Metrics and one log line per command, once its transaction has committed."""
        now_ms = time.time() * 1000
        for outcome, record in zip(handled, records, strict=True):
            result = outcome.result
            code = result.rejection.code if result.rejection else ""
            metrics.COMMANDS.labels(outcome.command_type, result.status, code).inc()
            if code == "unauthorized" and carries_signature(record.headers):
                metrics.SIGNED_REFUSED.labels(outcome.command_type).inc()
            metrics.COMMAND_LAG_SECONDS.observe(max(now_ms - record.timestamp, 0) / 1000)
            if outcome.duplicate:
                metrics.DUPLICATES.labels("id").inc()
            elif code == "stale_command":  # a copy no id told: the round it names is over
                metrics.DUPLICATES.labels("round").inc()
            for event in outcome.events:
                metrics.EVENTS.labels(event.type).inc()
            ids = structlog.contextvars.bound_contextvars(
                command_id=result.command_id,
                correlation_id=result.correlation_id or result.command_id,
                stream_id=result.stream_id,
            )
            with ids:
                reason = _invalid_reason(result)
                self.log.info(
                    "command handled",
                    command_type=outcome.command_type,
                    status=result.status,
                    code=code or None,
                    events=len(outcome.events),
                    duplicate=outcome.duplicate,
                    **({} if reason is None else {"reason": reason}),
                )


INVALID_CODES = frozenset({"malformed", "unknown_command", "unauthorized"})
"""The refusals ``BlackjackInvalidCommands`` alerts on: an integration's fault, whose reason
its log line carries, so that whoever is paged need not read the results topic."""

REASON_CHARS = 200
"""At most this much of the reason (it may quote the record: a log line stays a line)."""


def _invalid_reason(result: CommandResult) -> str | None:
    rejection = result.rejection
    if rejection is None or rejection.code not in INVALID_CODES:
        return None
    return rejection.message[:REASON_CHARS]
