"""A partition's topics as ``command_handler.replay.rebuild`` reads them, without a broker:
every record the handled commands' transactions wrote (``Handled.outgoing``), each followed by
a commit marker that takes an offset, as on the broker. It offers the part of
``AIOKafkaConsumer`` that the rebuild uses; tests/integration rebuild from the real broker."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import cast

from aiokafka import AIOKafkaConsumer, TopicPartition

from blackjack.bus.headers import COMMANDS_TO_HEADER
from blackjack.command_handler.processor import Handled, Processor
from blackjack.command_handler.replay import rebuild
from blackjack.command_handler.snapshots import (
    CHECKPOINT_AUTH_HEADER,
    Checkpoint,
    CheckpointSigner,
    SnapshotCodec,
    checkpoint_key,
    snapshots_digest,
)
from blackjack.command_handler.streams import PartitionStore, Stream
from tests.unit.processor_harness import TOPICS

CODEC = SnapshotCodec(b"s" * 32)
CHECKPOINTS = CheckpointSigner(b"c" * 32, TOPICS.snapshots)


@dataclass(frozen=True)
class _Record:
    offset: int
    key: bytes
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...] = ()


class CommittedLog:
    def __init__(self) -> None:
        self._records: dict[TopicPartition, list[_Record]] = {}
        self._ends: dict[TopicPartition, int] = {}
        self._positions: dict[TopicPartition, int] = {}

    def commit(self, handled: Handled) -> Handled:
        for record in handled.outgoing:
            tp = TopicPartition(record.topic, record.partition)
            offset = self._ends.get(tp, 0)
            self._records.setdefault(tp, []).append(
                _Record(offset, record.key, record.value, tuple(record.headers))
            )
            self._ends[tp] = offset + 2  # the record, then its transaction's commit marker
        return handled

    def put(
        self,
        topic: str,
        key: bytes,
        value: bytes | None,
        headers: tuple[tuple[str, bytes], ...] = (),
    ) -> None:
        """One record committed on partition 0 of ``topic`` (a snapshot, a checkpoint)."""
        tp = TopicPartition(topic, 0)
        offset = self._ends.get(tp, 0)
        self._records.setdefault(tp, []).append(_Record(offset, key, value, headers))
        self._ends[tp] = offset + 2

    def records(self, topic: str) -> list[tuple[bytes, bytes]]:
        """The key and value of every record committed to ``topic``, partition by partition."""
        return [
            (record.key, record.value or b"")
            for tp, records in sorted(self._records.items())
            if tp.topic == topic
            for record in records
        ]

    def expire(self, topic: str) -> None:
        """Every record of ``topic`` deleted (past its retention); its offsets go on."""
        self._records.pop(TopicPartition(topic, 0), None)

    def end(self, topic: str) -> int:
        return self._ends.get(TopicPartition(topic, 0), 0)

    async def rebuild(self, processor: Processor, window: int) -> PartitionStore:
        store, _ = await rebuild(
            cast(AIOKafkaConsumer, self),
            TOPICS,
            0,
            codec=CODEC,  # no checkpoint is written here unless a test ``put``s one
            checkpoints=CHECKPOINTS,
            seal=processor.seal,
            dedup_window=window,
            now=datetime(2026, 5, 2, tzinfo=UTC),
            timeout=5.0,
        )
        return store

    # ---- what the rebuild calls on its reader ---------------------------------------

    async def end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self._ends.get(tp, 0) for tp in tps}

    def assignment(self) -> set[TopicPartition]:
        return set(self._ends)

    def pause(self, *tps: TopicPartition) -> None:
        pass

    def resume(self, *tps: TopicPartition) -> None:
        pass

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._positions[tp] = offset

    async def position(self, tp: TopicPartition) -> int:
        return self._positions[tp]

    async def getmany(
        self, tp: TopicPartition, timeout_ms: int = 0
    ) -> dict[TopicPartition, list[_Record]]:
        start = self._positions[tp]
        batch = [record for record in self._records.get(tp, []) if record.offset >= start][:3]
        self._positions[tp] = batch[-1].offset + 2 if batch else self._ends.get(tp, 0)
        return {tp: batch}


def checkpointed(
    log: CommittedLog, stream: Stream, results_from: int, events_from: int = 0
) -> None:
    """``stream``'s snapshot on the snapshots topic and a signed checkpoint of partition 0
    that holds it, as the release before wrote them."""
    raw = CODEC.encode(stream)
    log.put(TOPICS.snapshots, stream.stream_id.encode(), raw)
    checkpoint = Checkpoint(
        partition=0,
        events_from=events_from,
        results_from=results_from,
        written_at=datetime(2026, 5, 1, 12, 0, tzinfo=UTC),
        streams=1,
    ).encode()
    digest = snapshots_digest([CHECKPOINTS.element(stream.stream_id, raw)])
    auth = CHECKPOINTS.header(0, checkpoint, b"0", digest)
    log.put(
        TOPICS.snapshots,
        checkpoint_key(0).encode(),
        checkpoint,
        ((COMMANDS_TO_HEADER, b"0"), (CHECKPOINT_AUTH_HEADER, auth)),
    )
