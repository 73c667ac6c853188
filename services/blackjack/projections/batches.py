"""Folding each batch the projection worker is given, one database transaction per batch: a
batch that fails is rolled back and folded again partition by partition, up to the record that
failed, and the failing partition is held back (rewound and paused for ``RETRY_SECONDS``) so
that nothing is skipped and the other partitions go on (``_Folder``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog
from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from blackjack.error_text import error_text
from blackjack.projections.health import REPEAT_LOG_EVERY, FoldHealth
from blackjack.projections.metrics import (
    FAILED_BATCHES,
    LAG,
    POSITION,
    count_folded,
    count_games_from_zero,
    store_answered,
    store_failed,
)
from blackjack.projections.positions import (
    RETRY_SECONDS,
    SeekToStoredPositions,
    _first_offsets,
    _pause,
)
from blackjack.projections.revision import SchemaMismatch
from blackjack.projections.store import is_store_outage
from blackjack.projections.writer import BatchResult, ProjectionWriter, Record, StoreBehind

if TYPE_CHECKING:
    from aiokafka import AIOKafkaConsumer


log = structlog.get_logger("blackjack.projections")


class _Folder:
    """Folds each batch the subscriber gets; a batch that fails is folded again partition by
    partition, up to the record that failed, and the rest held back to be read again."""

    def __init__(
        self,
        writer: ProjectionWriter,
        positions: SeekToStoredPositions,
        health: FoldHealth,
        consumer: Callable[[], AIOKafkaConsumer | None],
    ) -> None:
        self.writer = writer
        self.positions = positions
        self.health = health
        self.consumer = consumer
        count_games_from_zero()

    async def fold(self, records: list[Record]) -> None:
        """Fold a batch; a store at another schema revision stops the worker (``health``),
        nothing of the batch written, nothing more folded."""
        if self.health.fatal is not None:  # stopping: nothing more is folded
            return
        try:
            await self._fold(records)
        except SchemaMismatch as error:
            self.health.schema_mismatched(error)

    async def _fold(self, records: list[Record]) -> None:
        if self.positions.unsynced:  # fetched before the partitions were sought: read again
            await self.positions.put_back(records)
            return
        try:
            result = await self.writer.apply(records)
        except SchemaMismatch:
            raise
        except StoreBehind as error:
            # no record is to blame: the store lost commits; read on from where it stands
            log.warning(
                "read model behind what this worker folded; read again from it", error=str(error)
            )
            await self.positions.put_back(records)
            return
        except Exception as error:
            FAILED_BATCHES.inc()
            parts = _by_partition(records)
            if len(parts) == 1:
                await self._fold_up_to(records, error)
                return
            # A batch mixes partitions, and one record (a poison event) must not stop the
            # others: fold each partition in a transaction of its own (its position with it),
            # so those that fold advance and only a failing one is held back. Not reported to
            # ``health`` yet: the attempt per partition tells which one is to blame.
            log.debug(  # counted in FAILED_BATCHES; a failing partition logs for itself
                "batch rolled back; folding it again partition by partition",
                records=len(records),
                error=error_text(error),
            )
            for part in parts:
                try:
                    result = await self.writer.apply(part)
                except SchemaMismatch:
                    raise
                except Exception as failure:
                    await self._fold_up_to(part, failure)
                else:
                    await self._folded(result)
            return
        await self._folded(result)

    async def _folded(self, result: BatchResult) -> None:
        count_folded(result)
        for record in result.unreadable:
            log.error(
                "a record no reader can read stepped over (a header name that is not UTF-8: "
                "no handler writes one; who may write to the events topic?)",
                record=f"{record.topic}@{record.offset}",
                kafka_partition=record.partition,
                kafka_offset=record.offset,
            )
        store_answered(self.health)
        self.positions.known.update(result.positions)
        # the partitions revoked meanwhile: their new owner reports them
        owned = self.positions.still_assigned(result.positions)
        for (name, partition), offset in owned.items():
            POSITION.labels(name, str(partition)).set(offset)
        self.health.folded(owned)
        kafka = self.consumer()
        await _lag(kafka, owned, self.positions)
        if kafka is not None:
            await _commit_for_dashboards(kafka, result)

    async def _hold_back(self, part: list[Record], error: Exception) -> None:
        """Nothing of ``part`` (one partition's records) was folded: read that partition again
        from its stored position after ``RETRY_SECONDS``, by pausing it rather than sleeping
        here, which would hold back the worker's other partitions too."""
        tp = TopicPartition(part[0].topic, part[0].partition)
        if is_store_outage(error):  # the database, not this record: nothing is stuck on it
            store_failed(self.health, error)
        elif tp in self.positions.assigned:
            self.health.failed(part, self.writer.failed_at, error)
            _log_rollback(self.health.failures_of(part[0].position), len(part), error)
        else:  # revoked meanwhile: its new owner folds it, and reports how that goes
            log.info("not folded; partition revoked meanwhile", error=str(error)[:300])
        kafka = self.consumer()
        await _lag(kafka, self.positions.still_assigned(_first_offsets(part)))
        await self.positions.put_back(part, failure_recorded=True)
        if kafka is not None:
            _pause(kafka, tp, RETRY_SECONDS)

    async def _fold_up_to(self, part: list[Record], error: Exception) -> None:
        """``part`` (one partition's records) failed: fold the records before the one that
        failed in a transaction of their own, so the stored position stops exactly at that
        record (what ``docs/operations.md`` tells an operator to step over), then hold the
        rest back."""
        at = self.writer.failed_at
        before = [r for r in part if at is not None and r.offset < at.offset]
        if at is None or at.position != part[0].position or not before:
            await self._hold_back(part, error)
            return
        try:
            result = await self.writer.apply(before)
        except SchemaMismatch:
            raise
        except Exception as failure:
            await self._hold_back(part, failure)
            return
        await self._folded(result)
        self.writer.failed_at = at  # the record that failed, for ``health``
        await self._hold_back([r for r in part if r.offset >= at.offset], error)


def _log_rollback(failures: int, records: int, error: Exception) -> None:
    event = "records rolled back; their partition is read again"
    if failures <= 1:
        log.error(event, records=records, exc_info=error)
    elif failures % REPEAT_LOG_EVERY == 0:
        log.warning(
            event,
            records=records,
            failures=failures,
            error=error_text(error)[:500],
        )


def _by_partition(records: list[Record]) -> list[list[Record]]:
    """The records of each partition, in their order."""
    parts: dict[tuple[str, int], list[Record]] = {}
    for record in records:
        parts.setdefault(record.position, []).append(record)
    return list(parts.values())


async def _lag(
    consumer: AIOKafkaConsumer | None,
    positions: dict[tuple[str, int], int],
    reading: SeekToStoredPositions | None = None,
) -> None:
    """The lag from ``positions``, or from where the consumer reads on when ``reading`` is
    given and that is further (past the commit markers of a folded batch)."""
    if consumer is None:
        return
    for (topic, partition), stored in positions.items():
        tp = TopicPartition(topic, partition)
        try:
            end = consumer.last_stable_offset(tp)
        except AssertionError:  # revoked meanwhile: its new owner reports it
            continue
        read = 0 if reading is None else await reading.handed_out(consumer, tp)
        if end is not None:
            LAG.labels(topic, str(partition)).set(max(end - max(stored, read), 0))


async def _commit_for_dashboards(consumer: AIOKafkaConsumer, result: BatchResult) -> None:
    """The store's positions, for dashboards and for the workers that do not own these
    partitions: the group past their store on one means another store folds it
    (``split.py``). Committed after the store's transaction, never before: on one shared
    store the group is never past it."""
    offsets = {TopicPartition(t, p): offset for (t, p), offset in result.positions.items()}
    try:
        await consumer.commit(offsets)
    except KafkaError as error:  # a rebalance in between: harmless, the store is the truth
        # (and the group left behind the store, which no worker takes for another store)
        log.debug("group offsets not committed", error=str(error))
