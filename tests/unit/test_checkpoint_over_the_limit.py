"""A snapshot too large for the snapshots topic (4 MiB) failed its batch's transaction: the
handler took the partition over again, refetched the batch, its checkpoint was due again and
failed again, for good, and every table and wallet of the partition answered no command. A
stranger could make one: 1,000 commands a shared table refuses, each with a 1,024-character
correlation id the JSON escapes, sealed the table's window at 5.6 MB. Now no checkpoint is
written while a snapshot is over the limit, and the batch commits without one."""

from __future__ import annotations

import asyncio
import os
import random
import types
from datetime import UTC, datetime
from typing import Any

import structlog

from blackjack.bus.topics import SNAPSHOT_MAX_BYTES
from blackjack.command_handler.checkpointing import Checkpointing
from blackjack.command_handler.partitions import _Partition
from blackjack.command_handler.reading import Inbound
from blackjack.command_handler.snapshots import CheckpointSigner, SnapshotCodec
from blackjack.command_handler.streams import PartitionStore
from blackjack.domain import commands as cmd
from blackjack.messages.envelope import CommandEnvelope
from tests.unit.processor_harness import new_processor

T0 = datetime(2026, 5, 1, tzinfo=UTC)
TABLE = "multi-1"


class _Producer:
    def __init__(self) -> None:
        self.keys: list[bytes] = []

    async def send(self, topic: str, value: bytes, *, key: bytes, **_: Any) -> Any:
        assert len(value) <= SNAPSHOT_MAX_BYTES, "the transaction would fail"
        self.keys.append(key)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


def _writer() -> Any:
    writer: Any = Checkpointing.__new__(Checkpointing)
    writer.topics = types.SimpleNamespace(snapshots="s", events="e", results="r")
    writer._checkpoints = CheckpointSigner(os.urandom(32), "s")
    writer.log = structlog.get_logger("test")
    writer._now = lambda: T0
    writer._publish_gauges = lambda: None
    return writer


async def test_a_snapshot_over_the_limit_writes_no_checkpoint_and_fails_no_batch() -> None:
    processor = new_processor(dedup_window=1_000)
    store = PartitionStore(0, codec=SnapshotCodec(os.urandom(32)))
    rng = random.Random(1)
    offset = 0

    def send(command: cmd.TableCommand, stream: str, correlation: str | None = None) -> Any:
        nonlocal offset
        offset += 1
        envelope = CommandEnvelope(
            command_id=f"c-{offset}", stream_id=stream, command=command, correlation_id=correlation
        )
        value = envelope.model_dump_json().encode()
        return processor.handle(store, Inbound(stream.encode(), value, [], 0, offset), T0)

    send(cmd.OpenTable(variant="atlantic-city-multi"), TABLE)
    send(cmd.OpenTable(variant="mini-h17"), "other")
    flood = cmd.PlaceBet(player_id="mallory", box=1, amount=100)  # not seated: refused
    for _ in range(1_000):
        correlation = "".join(chr(rng.randrange(0x10000, 0x10FFFF)) for _ in range(1_024))
        assert send(flood, TABLE, correlation).result.status == "rejected"
    assert len(store.sealed(TABLE)) > SNAPSHOT_MAX_BYTES
    partition, producer = _Partition(0, None), _Producer()
    store.since_checkpoint = 5_000
    await _writer()._checkpoint(partition, store, producer, [])
    assert producer.keys == []  # no snapshot, no checkpoint: the batch commits without one
    assert store.dirty == {TABLE, "other"}  # still to be snapshotted
    assert store.since_checkpoint == 0  # tried again after as many commands as ever
    assert store.snapshot_bytes[TABLE] > SNAPSHOT_MAX_BYTES  # the gauge's: the alert's
