"""The command partitions a handler holds: each one's status, producer, streams in memory and
retry pause, and the gauges that publish them. ``Partitions`` is the base of the handler's
parts (``takeover``, ``checkpointing``, ``transactions``, ``ticker``, ``service``): what they
share, declared once."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import ProducerFenced

from blackjack.bus.topics import Topics
from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.processor import Processor
from blackjack.command_handler.snapshots import CheckpointSigner, SnapshotCodec
from blackjack.command_handler.streams import PartitionStore
from blackjack.command_handler.timers import TimerSender
from blackjack.messages.sealing import ShoeSeal
from blackjack.observability import metrics

Status = Literal["pending", "ready", "failed", "fenced", "revoked"]

RETRY_AFTER_FAILURE_S = 1.0
RETRY_AT_MOST_S = 30.0
"""A partition that keeps failing (a corrupt log, a foreign shoe key, a write the brokers
refuse) is retried with a doubling pause up to this, and stays out of service (``/readyz``
says so) meanwhile."""
MAX_DOUBLINGS = 16  # past RETRY_AT_MOST_S long before; keeps 2**n a small number


@dataclass
class _Partition:
    number: int
    tp: TopicPartition
    status: Status = "pending"
    store: PartitionStore | None = None
    producer: AIOKafkaProducer | None = None
    retry_at: float = 0.0
    failures: int = 0
    """Failures since the last commit: each doubles the pause before the next try."""
    away: int = 0
    """Takeovers that failed on the broker being away since the last one that succeeded
    (tried every second; counted for the log only)."""
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    checkpointed_at: float = 0.0
    """``time.monotonic()`` of the last checkpoint, or of the partition becoming ready."""
    ends: tuple[int, ...] | None = None
    """Where the partition's events, results and snapshots end (``replay.end_offsets``) once
    this instance's last commit there is complete: all its memory has seen. A revoked
    partition's memory is kept against these, never against the ends when it is revoked: an
    instance frozen past its group session (SIGSTOP, a paused VM) learns that it was revoked
    only when it wakes, after another instance wrote there, and kept its stale streams."""


def transaction_failure(producer: AIOKafkaProducer) -> BaseException | None:
    """What failed the producer's transaction in its background sender, as aiokafka keeps it
    (on its transaction manager's waiter; None when it keeps none, or on an aiokafka shaped
    otherwise). A fence the sender met shows at the next ``send`` only as ``IllegalOperation``
    ("not in transaction"), which was counted an abort and retried at once (a pause drill).
    (Read here, it is not reported "never retrieved" when the producer is collected; nor are
    the waiters aiokafka replaced: ``ignore_unread_fences``.)"""
    manager = getattr(producer, "_txn_manager", None)
    waiting = getattr(manager, "wait_for_transaction_end", None)
    waiter = waiting() if callable(waiting) else None
    if isinstance(waiter, asyncio.Future) and waiter.done() and not waiter.cancelled():
        return waiter.exception()
    return None


def ignore_unread_fences(loop: asyncio.AbstractEventLoop) -> None:
    """The loop's exception handler leaves out "Future exception was never retrieved" for a
    ``ProducerFenced``: aiokafka sets the fence on its transaction's waiters, and replaces one
    that already failed by another (``fatal_error``) which no one can read. Logged at error
    level when the producer was collected, 2 to 12 times in every handler woken from a
    freeze (two pause drills), they sent the on-call after a fault that is the design's:
    the fence itself is logged and counted (``blackjack_transactions_total{outcome="fenced"}``).
    Everything else goes to the handler there was."""
    previous = loop.get_exception_handler()
    if getattr(previous, "ignores_unread_fences", False):
        return

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        unread = str(context.get("message", "")).startswith("Future exception was never retrieved")
        if unread and isinstance(context.get("exception"), ProducerFenced):
            return
        if previous is None:
            loop.default_exception_handler(context)
        else:
            previous(loop, context)

    handler.ignores_unread_fences = True  # type: ignore[attr-defined]
    loop.set_exception_handler(handler)


@dataclass
class _Retained:
    store: PartitionStore
    ends: tuple[int, ...]


class Partitions:
    """The partitions a ``CommandHandler`` holds, and what its parts share."""

    config: HandlerConfig
    topics: Topics
    _now: Callable[[], datetime]
    _seal: ShoeSeal
    _codec: SnapshotCodec
    _checkpoints: CheckpointSigner
    processor: Processor
    _partitions: dict[int, _Partition]
    _retained: dict[int, _Retained]
    _assigned_once: asyncio.Event
    _rebalancing: bool
    _change: asyncio.Event
    _stopping: asyncio.Event
    _backlog_shown: set[int]
    _consumer: AIOKafkaConsumer | None
    _reader: AIOKafkaConsumer | None
    log: Any
    _timers: TimerSender

    async def _close_producer(self, partition: _Partition) -> None:
        producer, partition.producer = partition.producer, None
        if producer is not None:
            transaction_failure(producer)  # read: not reported when the producer is collected
            with contextlib.suppress(Exception):
                await producer.stop()

    def _drop(
        self, partition: _Partition, status: Status, retry_after: float, doubling: bool = True
    ) -> None:
        """Forget the partition's memory; it is rebuilt from Kafka before the next command,
        after ``retry_after``, doubled at each failure in a row unless not ``doubling``."""
        assert self._consumer is not None
        partition.status = status
        partition.store, partition.ends = None, None
        if doubling:
            doubled = retry_after * 2 ** min(partition.failures, MAX_DOUBLINGS)
            pause = min(doubled, max(retry_after, RETRY_AT_MOST_S))
            partition.failures += 1
        else:  # the broker away: the count of real failures is not touched
            pause = retry_after
            partition.away += 1
        partition.retry_at = time.monotonic() + pause
        if self._partitions.get(partition.number) is partition:
            # A partition revoked while it was being taken is no longer the consumer's to
            # pause (aiokafka raises IllegalStateError, which stopped the whole handler).
            self._consumer.pause(partition.tp)
        self._changed()

    def _changed(self) -> None:
        """Partitions changed hands or state: publish the gauges, wake ``wait_until``."""
        self._publish_gauges()
        change, self._change = self._change, asyncio.Event()
        change.set()

    def _publish_gauges(self) -> None:
        counts: dict[str, int] = dict.fromkeys(("pending", "ready", "failed", "fenced"), 0)
        streams = cold = largest_snapshot = 0
        for partition in self._partitions.values():
            if partition.status in counts:
                counts[partition.status] += 1
            if partition.store is not None:
                streams += partition.store.count()
                cold += len(partition.store.cold)
                largest_snapshot = max(largest_snapshot, partition.store.snapshot_bytes.largest())
        for status, count in counts.items():
            metrics.PARTITIONS.labels(status).set(count)
        metrics.STREAMS.set(streams)
        metrics.COLD_STREAMS.set(cold)
        metrics.SNAPSHOT_LARGEST_BYTES.set(largest_snapshot)
