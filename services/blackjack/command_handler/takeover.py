"""Partitions changing hands: the group's assignments and revocations, and taking a partition
over (fencing its last owner, rebuilding its streams, resuming at the committed offset)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Final, Literal

import structlog
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.errors import (
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    KafkaConnectionError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    NodeNotReadyError,
    NotCoordinatorError,
    NotLeaderForPartitionError,
    RequestTimedOutError,
)
from aiokafka.structs import OffsetAndMetadata

from blackjack.bus.settings import TRANSACTION_RETRY_BACKOFF_MS
from blackjack.bus.topics import RECORD_MAX_BYTES, SNAPSHOT_MAX_BYTES
from blackjack.command_handler.partitions import (
    RETRY_AFTER_FAILURE_S,
    Partitions,
    _Partition,
    _Retained,
)
from blackjack.command_handler.replay import RebuildStats, end_offsets, rebuild
from blackjack.command_handler.snapshots import SIGNED_CHECKPOINTS_MARK
from blackjack.command_handler.streams import PartitionStore
from blackjack.observability import metrics

REBUILD_TIMEOUT_S = 300.0

TAKEOVER_TIMEOUT_S = REBUILD_TIMEOUT_S + 60
"""One partition's whole takeover: its producer's start (fencing the last owner), the
rebuild, the committed offset; past it the takeover fails and is retried later."""

AWAY_LOG_EVERY = 60
"""A takeover failing because the broker is away logs its trace once, then a line every this
many attempts in a row (once a minute)."""

TRANSACTION_BATCH_BYTES = RECORD_MAX_BYTES
"""How many bytes of records a partition's producer gathers in one batch per topic partition
(aiokafka's default is 16 KiB): a transaction's events and results each fit one batch, and
one produce request, instead of a new batch every 16 KiB whose ``send`` waited for the one
before to be sent (a round trip in the middle of handling a fetch). A batch of several records
never grows past it, so it stays under the topics' max.message.bytes, as a record does."""

BROKER_AWAY_ERRORS: Final = (
    KafkaConnectionError,
    NodeNotReadyError,
    RequestTimedOutError,
    KafkaTimeoutError,
    CoordinatorNotAvailableError,
    NotCoordinatorError,
    CoordinatorLoadInProgressError,
    LeaderNotAvailableError,
    NotLeaderForPartitionError,
)
"""A broker that cannot be reached, does not answer in time, or is still electing leaders
and loading coordinators: what a restart or an outage looks like. Not aiokafka's whole
``retriable`` set: a deleted topic, a failed disk or unmet min.insync.replicas are retriable
there too, but do not pass by themselves, and are not the broker being away."""


def broker_away(error: BaseException) -> bool:
    """Whether a takeover failed because the broker is away (``BROKER_AWAY_ERRORS``): that
    passes by itself, so the partition is tried again every ``RETRY_AFTER_FAILURE_S``, not
    after a pause doubled at each failure up to ``RETRY_AT_MOST_S``: a fault drill measured
    tables still unanswered 6.4 s after a broker stopped for 25 s was back (up to 30 s after a
    longer outage)."""
    return isinstance(error, BROKER_AWAY_ERRORS)


class AnsweredElsewhere(RuntimeError):
    """A partition whose commands the log shows answered past this group's position."""


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, handler: Takeovers) -> None:
        self._handler = handler

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._handler._revoke(revoked)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self._handler._assign(assigned)


class Takeovers(Partitions):
    """Assignment, revocation and the takeover of a partition."""

    # ---- the group ------------------------------------------------------------------

    def _assign(self, assigned: set[TopicPartition]) -> None:
        assert self._consumer is not None
        # The whole assignment (aiokafka's rebalances are eager): a partition revoked and
        # not given back went to another instance, whose writes a return would rebuild from.
        numbers = {tp.partition for tp in assigned}
        for number in [n for n in self._retained if n not in numbers]:
            self._retained.pop(number).store.close()
        for tp in assigned:
            if tp.partition not in self._partitions:
                self._partitions[tp.partition] = _Partition(tp.partition, tp)
        # Nothing is consumed from a partition before it is rebuilt; _prepare resumes it.
        self._consumer.pause(*(self._partitions[tp.partition].tp for tp in assigned))
        self._assigned_once.set()
        self._rebalancing = False
        self.log.info("partitions assigned", partitions=sorted(tp.partition for tp in assigned))
        self._changed()

    async def _revoke(self, revoked: set[TopicPartition]) -> None:
        # (aiokafka calls this before every join, with no partition too: a rebalance begins)
        self._rebalancing = True
        for tp in revoked:
            partition = self._partitions.pop(tp.partition, None)
            if partition is None:
                continue
            if partition.status != "ready":
                # Being taken (``_prepare`` notices and lets go) or failed: nothing to keep.
                partition.status = "revoked"
                continue
            async with partition.lock:  # lets a transaction in progress finish first
                partition.status = "revoked"
                await self._close_producer(partition)
                if partition.store is not None and partition.ends is not None:
                    self._retained[tp.partition] = _Retained(partition.store, partition.ends)
        if revoked:
            self.log.info("partitions revoked", partitions=sorted(tp.partition for tp in revoked))
        self._changed()

    # ---- taking a partition -----------------------------------------------------------

    async def _prepare(self, partition: _Partition) -> None:
        """Fence the last owner, rebuild the streams, and resume at the committed offset."""
        assert self._consumer is not None and self._reader is not None
        number = partition.number
        log = self.log.bind(partition=number)
        producer = self._transactional_producer(number)
        try:
            async with asyncio.timeout(TAKEOVER_TIMEOUT_S):
                await producer.start()
                # An empty transaction completes the producer's registration: from here on the
                # partition's previous owner is fenced and its open transaction, if any, aborted.
                await producer.begin_transaction()
                await producer.commit_transaction()
                started = time.monotonic()
                ends = await end_offsets(self._reader, self.topics, number)
                store, kind = await self._rebuilt(partition, ends, log)
                metrics.REBUILDS.labels(kind).inc()
                metrics.REBUILD_SECONDS.observe(time.monotonic() - started)
                committed = await self._consumer.committed(partition.tp)
                _check_answered_here(store, committed, self.config.group_id)
                store.answered_to = max(store.answered_to, committed or 0)
        except asyncio.CancelledError:
            # the handler stops while it takes the partition (a long rebuild, a broker away):
            # its transactional producer was left open, its sender task and connections with it
            with contextlib.suppress(Exception):
                await producer.stop()
            raise
        except Exception as error:
            away = broker_away(error)
            if not away or partition.away == 0:
                log.exception("taking the partition failed; will retry")
            elif partition.away % AWAY_LOG_EVERY == 0:
                log.warning(
                    "taking the partition still fails: the broker is away; will retry",
                    attempts=partition.away,
                    error=str(error)[:300],
                )
            with contextlib.suppress(Exception):
                await producer.stop()
            self._drop(partition, "failed", RETRY_AFTER_FAILURE_S, doubling=not away)
            return
        if self._partitions.get(number) is not partition:  # revoked meanwhile
            try:
                await producer.stop()
            finally:
                store.close()  # its cold streams' file, removed now rather than when collected
            return
        self._serve(partition, producer, store, ends, committed)
        log.info("partition ready", committed_offset=committed, streams=store.count())
        self._changed()

    def _transactional_producer(self, number: int) -> AIOKafkaProducer:
        """The producer of partition ``number``'s transactions, under its transactional id: its
        start fences the partition's last owner."""
        return AIOKafkaProducer(
            **self.config.kafka.client_options(),
            client_id=f"{self.config.instance_id}-p{number}",
            transactional_id=self.config.transactional_id(number),
            enable_idempotence=True,
            acks="all",
            max_request_size=SNAPSHOT_MAX_BYTES + 64 * 1024,
            max_batch_size=TRANSACTION_BATCH_BYTES,
            retry_backoff_ms=TRANSACTION_RETRY_BACKOFF_MS,
            compression_type=self.config.compression_type,
        )

    async def _rebuilt(
        self, partition: _Partition, ends: tuple[int, ...], log: structlog.stdlib.BoundLogger
    ) -> tuple[PartitionStore, Literal["kept", "checkpoint", "full"]]:
        """The partition's streams: kept from when this instance last held it if nothing was
        written there since (``ends``, the topics' end offsets, unchanged), else rebuilt
        from its checkpoint or its whole log; and how."""
        assert self._reader is not None
        retained = self._retained.pop(partition.number, None)
        if retained is not None and retained.ends == ends:
            return retained.store, "kept"
        if retained is not None:  # written to meanwhile: rebuilt instead
            retained.store.close()
        store, stats = await rebuild(
            self._reader,
            self.topics,
            partition.number,
            codec=self._codec,
            checkpoints=self._checkpoints,
            unsigned=await self._unsigned_checkpoints(partition),
            seal=self._seal,
            dedup_window=self.config.dedup_window,
            money_retention=self.config.money_retention,
            now=self._now(),
            timeout=REBUILD_TIMEOUT_S,
        )
        _report_rebuild(stats, store, log)
        return store, "checkpoint" if stats.checkpoint else "full"

    def _serve(
        self,
        partition: _Partition,
        producer: AIOKafkaProducer,
        store: PartitionStore,
        ends: tuple[int, ...],
        committed: int | None,
    ) -> None:
        """The partition taken: its commands consumed from the group's committed offset."""
        assert self._consumer is not None
        # Nothing committed yet: from 0 (an offset below the log start resets to the earliest).
        self._consumer.seek(partition.tp, committed or 0)
        partition.producer = producer
        partition.store = store
        partition.ends = ends
        partition.status = "ready"
        # Its failures in a row end with its first commit, not here: a fault met only when
        # writing (min.insync.replicas unmet) let every takeover succeed, and rebuilt the
        # partition every second with a trace each time.
        partition.away = 0
        self._timers.forget(partition.number)
        partition.checkpointed_at = time.monotonic()
        if store.checkpoint_due:  # the clock's next tick writes it (``_checkpoint_if_quiet``)
            store.since_checkpoint = max(store.since_checkpoint, 1)
            partition.checkpointed_at -= self.config.checkpoint_after_s
        self._consumer.resume(partition.tp)

    async def _unsigned_checkpoints(self, partition: _Partition) -> Literal["accept", "refuse"]:
        """Whether an unsigned checkpoint is trusted: only while the release before may have
        written it, i.e. unless refused by configuration or the partition's committed offsets
        are not the release before's (``SIGNED_CHECKPOINTS_MARK``, or none at all)."""
        if self.config.unsigned_checkpoints == "refuse":
            return "refuse"
        assert self._consumer is not None
        # aiokafka's ``committed`` gives the offset only; its coordinator has the metadata
        committed = await self._consumer._coordinator.fetch_committed_offsets([partition.tp])
        return unsigned_checkpoints_for(committed.get(partition.tp))

    async def _prepare_due(self) -> bool:
        """Take over (rebuild) one partition that is due, if any; True when more are due.

        One per turn of the loop, so the consumer is polled between two rebuilds: a poll
        must come within ``max_poll_interval_ms`` or the instance leaves its group, and the
        partitions already ready take their commands between two takeovers."""
        now = time.monotonic()
        due = [
            partition
            for partition in self._partitions.values()
            if partition.status == "pending"
            or (partition.status in ("failed", "fenced") and now >= partition.retry_at)
        ]
        if not due:
            return False
        partition = due[0]
        async with partition.lock:
            if self._partitions.get(partition.number) is partition:
                await self._close_producer(partition)
                await self._prepare(partition)
        return len(due) > 1


def unsigned_checkpoints_for(committed: OffsetAndMetadata | None) -> Literal["accept", "refuse"]:
    """An unsigned checkpoint is the release before's only where that release committed last
    (offsets without the mark). Without committed offsets it is refused too: the release before
    committed with every batch it checkpointed, so none means the group's offsets were deleted
    or expired (``offsets.retention.minutes``, 7 days by default) or never written, and a
    forged checkpoint there would otherwise be trusted (and could say it answered nothing, so
    that ``AnsweredElsewhere`` let the partition be taken)."""
    if committed is None or committed.metadata == SIGNED_CHECKPOINTS_MARK:
        return "refuse"
    return "accept"


def _check_answered_here(store: PartitionStore, committed: int | None, group_id: str) -> None:
    """``AnsweredElsewhere`` when the log answers this partition's commands past the group's
    committed offset: another group decided them, and this one would decide them again."""
    if store.answered_to <= (committed or 0):
        return
    consumed = (
        "has no committed offset there"
        if committed is None
        else f"has consumed only to {committed}"
    )
    raise AnsweredElsewhere(
        f"the log answers this partition's commands up to offset "
        f"{store.answered_to}, but the group {group_id} {consumed}: "
        "another consumer group handles these topics (one group per "
        "deployment, BLACKJACK_GROUP_ID), or this group's offsets expired; not "
        "taken, so no command is decided twice"
    )


def _report_rebuild(
    stats: RebuildStats, store: PartitionStore, log: structlog.stdlib.BoundLogger
) -> None:
    """A rebuild said and counted: what it read, and anything in the log not to be trusted."""
    metrics.REBUILD_EVENTS.inc(stats.events)
    log.info(
        "partition rebuilt",
        from_checkpoint=stats.checkpoint,
        snapshots=stats.snapshots,
        events=stats.events,
        results=stats.results,
        streams=store.count(),
        seconds=round(stats.seconds, 3),
    )
    if stats.distrusted is not None:
        metrics.CHECKPOINTS_DISTRUSTED.labels(stats.distrusted).inc()
        log.error(
            "the partition's checkpoint is not to be trusted (written by no "
            "handler of this deployment for this partition, or its snapshots "
            "are not the ones it was written with; who may write to the "
            "snapshots topic?): rebuilt from the start of its log instead",
            reason=stats.distrusted,
        )
    elif stats.unsigned:
        metrics.CHECKPOINTS_UNSIGNED.inc()
        log.warning(
            "rebuilt from an unsigned checkpoint (written by the release "
            "before); a signed one is written now"
        )
    if stats.older_key or stats.resealed:
        metrics.SNAPSHOTS_RESEALED.inc(stats.resealed)
        log.info(
            "rebuilt from what a key rotation's older key sealed or signed: "
            "sealed and signed again under the current key now",
            older_key_checkpoint=stats.older_key,
            resealed=stats.resealed,
        )
    if stats.unreadable:
        log.warning(
            "records no reader can read stepped over (a header name that is "
            "not UTF-8: no handler writes one; who may write to these topics?)",
            records=list(stats.unreadable),
        )
    if stats.unopened:
        log.warning(
            "snapshots that could not be opened stepped over (a byte changed, a record "
            "half written or not a handler's; the key opens the others): their streams "
            "were made from the events",
            snapshots=list(stats.unopened),
        )
    if stats.foreign:
        log.warning(
            "records not written by the service stepped over (no ce_type "
            "header, not an event or a command result; who may write to "
            "these topics?)",
            records=list(stats.foreign),
        )
