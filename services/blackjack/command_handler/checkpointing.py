"""Checkpoints: every stream changed since the last one snapshotted, then the checkpoint that
says where a rebuild starts reading the events and results, in the partition's transaction."""

from __future__ import annotations

import asyncio
import time

from aiokafka import AIOKafkaProducer
from aiokafka.structs import RecordMetadata

from blackjack.bus.headers import COMMANDS_TO_HEADER
from blackjack.bus.topics import SNAPSHOT_MAX_BYTES
from blackjack.command_handler.partitions import _Partition
from blackjack.command_handler.replay import written_topics
from blackjack.command_handler.snapshots import (
    CHECKPOINT_AUTH_HEADER,
    Checkpoint,
    checkpoint_key,
)
from blackjack.command_handler.streams import PartitionStore
from blackjack.command_handler.takeover import Takeovers
from blackjack.observability import metrics

SNAPSHOT_RECORD_OVERHEAD = 1024
"""Room in a snapshot's record for what is not the snapshot: its key's bytes are counted
apart, its record batch's header is about 70 bytes."""


class Checkpointing(Takeovers):
    """Writes a partition's snapshots and checkpoint."""

    async def _advance(
        self, store: PartitionStore, sent: list[tuple[str, asyncio.Future[RecordMetadata]]]
    ) -> None:
        """Wait until every record sent is on the broker (raising the first failure), and
        note how far this partition's events and results now reach (for checkpoints)."""
        for topic, future in sent:
            metadata = await future
            if topic == self.topics.events:
                store.events_next = max(store.events_next, metadata.offset + 1)
            elif topic == self.topics.results:
                store.results_next = max(store.results_next, metadata.offset + 1)

    def _committed(
        self, partition: _Partition, sent: list[tuple[str, asyncio.Future[RecordMetadata]]]
    ) -> None:
        """Move ``partition.ends`` past a transaction that committed: each of the partition's
        topic partitions it wrote now ends after its last record and the commit's marker,
        which takes the offset after it (no producer but the partition's writes there)."""
        if partition.ends is None:
            return
        topics = written_topics(self.topics)
        ends = list(partition.ends)
        for topic, future in sent:
            if topic in topics:
                metadata = future.result()  # awaited by ``_advance`` before the commit
                if metadata.partition == partition.number:
                    i = topics.index(topic)
                    ends[i] = max(ends[i], metadata.offset + 2)
        partition.ends = tuple(ends)

    async def _checkpoint(
        self,
        partition: _Partition,
        store: PartitionStore,
        producer: AIOKafkaProducer,
        sent: list[tuple[str, asyncio.Future[RecordMetadata]]],
    ) -> None:
        """Snapshot every stream changed since the last checkpoint, then the checkpoint; their
        sends join ``sent``, which the transaction awaits before it commits.

        The event loop gets a turn after each snapshot: sealing a table with a full window of
        answers takes about 5 ms of CPU, and a checkpoint of a partition with hundreds of
        changed tables held the loop (every other partition's transactions, the consumer's
        fetches and heartbeats, the HTTP probes) for all of them at once, over a second of
        CPU for 200 (``tests/integration/measure_checkpoint_stall.py``). The partition's lock,
        held by the caller, keeps its own commands out meanwhile."""
        await self._advance(store, sent)
        topic = self.topics.snapshots
        snapshots: list[tuple[str, bytes]] = []
        for number, stream_id in enumerate(sorted(store.dirty)):
            if number:
                await asyncio.sleep(0)  # the rest of the loop first
            snapshots.append((stream_id, store.sealed(stream_id)))
        if self._over_the_limit(partition, store, snapshots):
            return
        for stream_id, sealed in snapshots:
            store.snapshot_bytes[stream_id] = len(sealed)
            store.snapshot_marks[stream_id] = self._checkpoints.element(stream_id, sealed)
            future = await producer.send(
                topic, sealed, key=stream_id.encode(), partition=store.partition
            )
            sent.append((topic, future))
            # A stream's snapshot grows with its counterparts (one number per wallet a table
            # took buy-ins from, per table a wallet was paid by) and its window; one over the
            # topic's limit stops its partition's checkpoints (``_over_the_limit``).
            if len(sealed) > SNAPSHOT_MAX_BYTES // 2:
                self.log.warning(
                    "snapshot over half the size limit",
                    stream_id=stream_id,
                    bytes=len(sealed),
                    limit=SNAPSHOT_MAX_BYTES,
                )
        checkpoint = Checkpoint(
            partition=store.partition,
            events_from=store.events_next,
            results_from=store.results_next,
            written_at=self._now(),
            streams=len(store.dirty),
        )
        value, commands_to = checkpoint.encode(), str(store.answered_to).encode()
        digest = store.snapshot_marks.digest
        future = await producer.send(
            topic,
            value,
            key=checkpoint_key(store.partition).encode(),
            partition=store.partition,
            # in headers, which older handlers ignore (the checkpoint's fields they refuse)
            headers=[
                (COMMANDS_TO_HEADER, commands_to),
                (
                    CHECKPOINT_AUTH_HEADER,
                    self._checkpoints.header(store.partition, value, commands_to, digest),
                ),
            ],
        )
        sent.append((topic, future))
        metrics.SNAPSHOTS.inc(len(store.dirty))
        self.log.info(
            "checkpoint",
            partition=store.partition,
            streams=len(store.dirty),
            events_from=store.events_next,
            results_from=store.results_next,
        )
        store.dirty.clear()
        self._checkpoint_tried(partition, store)

    def _checkpoint_tried(self, partition: _Partition, store: PartitionStore) -> None:
        """The next checkpoint after ``BLACKJACK_SNAPSHOT_EVERY`` more commands, or the hour."""
        store.since_checkpoint = 0
        store.checkpoint_due = False
        partition.checkpointed_at = time.monotonic()
        self._publish_gauges()

    def _over_the_limit(
        self, partition: _Partition, store: PartitionStore, snapshots: list[tuple[str, bytes]]
    ) -> bool:
        """Whether a snapshot is too large for the snapshots topic: then no checkpoint is
        written, and the batch commits without one. Sent, it failed the batch's transaction,
        and every batch after the takeover failed again the same way: the partition's tables
        and wallets answered no command for good (a stranger's 1,000 refused commands with
        1,024-character correlation ids sealed a table's window at 5.6 MB). Its streams stay
        to be snapshotted; a takeover reads the events and results from the checkpoint before.
        The largest snapshot's gauge says how large (``BlackjackSnapshotOverSizeLimit``)."""
        records = (
            (stream_id, len(sealed) + len(stream_id.encode()) + SNAPSHOT_RECORD_OVERHEAD)
            for stream_id, sealed in snapshots
        )
        over = [(stream_id, size) for stream_id, size in records if size > SNAPSHOT_MAX_BYTES]
        for stream_id, size in over:
            # its record's size, over the limit, so the gauge's alert fires for it too
            store.snapshot_bytes[stream_id] = size
            self.log.error(
                "snapshot over the size limit: no checkpoint written",
                partition=store.partition,
                stream_id=stream_id,
                bytes=size,
                limit=SNAPSHOT_MAX_BYTES,
            )
        if over:
            self._checkpoint_tried(partition, store)
        return bool(over)
