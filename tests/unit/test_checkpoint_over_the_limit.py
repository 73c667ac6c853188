"""A snapshot too large for the snapshots topic (4 MiB) failed its batch's transaction: the
handler took the partition over again, refetched the batch, its checkpoint was due again and
failed again, for good, and every table and wallet of the partition answered no command. A
stranger could make one: 1,000 commands a shared table refuses, each with a 1,024-character
correlation id the JSON escapes, sealed the table's window at 5.6 MB. Now no checkpoint is
written while a snapshot is over the limit, and the batch commits without one."""

from __future__ import annotations

import os
import random
from datetime import UTC, datetime
from typing import Any

from blackjack.bus.topics import SNAPSHOT_MAX_BYTES
from blackjack.command_handler.partitions import _Partition
from blackjack.command_handler.reading import Inbound
from blackjack.command_handler.snapshots import SnapshotCodec
from blackjack.command_handler.streams import PartitionStore
from blackjack.domain import commands as cmd
from blackjack.messages.envelope import CommandEnvelope
from tests.unit.processor_harness import new_processor
from tests.unit.test_checkpoint_turns import _Producer, checkpoint_writer

T0 = datetime(2026, 5, 1, tzinfo=UTC)
TABLE = "multi-1"


class _Partition0:
    """One partition's processor and store, commands sent to it as the service reads them."""

    def __init__(self) -> None:
        self.processor = new_processor(dedup_window=1_000)
        self.store = PartitionStore(0, codec=SnapshotCodec(os.urandom(32)))
        self.offset = 0

    def send(self, command: cmd.TableCommand, stream: str, correlation: str | None = None) -> Any:
        self.offset += 1
        envelope = CommandEnvelope(
            command_id=f"c-{self.offset}",
            stream_id=stream,
            command=command,
            correlation_id=correlation,
        )
        value = envelope.model_dump_json().encode()
        inbound = Inbound(stream.encode(), value, [], 0, self.offset)
        return self.processor.handle(self.store, inbound, T0)


def _long_correlation_id(rng: random.Random) -> str:
    """1,024 characters outside the BMP, each 12 bytes of escaped JSON."""
    return "".join(chr(rng.randrange(0x10000, 0x10FFFF)) for _ in range(1_024))


async def test_a_snapshot_over_the_limit_writes_no_checkpoint_and_fails_no_batch() -> None:
    handler = _Partition0()
    handler.send(cmd.OpenTable(variant="atlantic-city-multi"), TABLE)
    handler.send(cmd.OpenTable(variant="mini-h17"), "other")
    store, sealed = handler.store, handler.store.sealed

    def too_large(stream_id: str) -> bytes:  # under the limit, but not with its record's room
        return b"x" * (SNAPSHOT_MAX_BYTES - 100) if stream_id == TABLE else sealed(stream_id)

    store.sealed = too_large  # type: ignore[method-assign]
    partition, producer = _Partition(0, None), _Producer()
    store.since_checkpoint = 5_000
    await checkpoint_writer()._checkpoint(partition, store, producer, [])
    assert producer.keys == []  # no snapshot, no checkpoint: the batch commits without one
    assert store.dirty == {TABLE, "other"}  # still to be snapshotted
    assert store.since_checkpoint == 0  # tried again after as many commands as ever
    assert store.snapshot_bytes[TABLE] > SNAPSHOT_MAX_BYTES  # its record's: the alert fires
    store.sealed = sealed  # type: ignore[method-assign]
    await checkpoint_writer()._checkpoint(partition, store, producer, [])
    assert [key.decode() for key in producer.keys] == ["multi-1", "other", "#checkpoint/0"]


async def test_a_stranger_s_long_correlation_ids_keep_the_snapshots_under_the_limit() -> None:
    """1,000 refusals at a table and 1,000 commands at tables that do not exist (kept with
    the partition's stray answers), each with a 1,024-character correlation id: a window
    keeps ``ANSWER_BYTES_KEPT`` of them, the newest, and the snapshots stay under half the
    limit (before: 5.6 MB and 5.6 MB)."""
    handler = _Partition0()
    handler.send(cmd.OpenTable(variant="atlantic-city-multi"), TABLE)
    rng = random.Random(1)
    flood = cmd.PlaceBet(player_id="mallory", box=1, amount=100)  # not seated: refused
    for number in range(1_000):
        correlation = _long_correlation_id(rng)
        refused = handler.send(flood, TABLE, correlation)
        assert refused.result.status == "rejected"
        stray = handler.send(cmd.SitDown(player_id="mallory"), f"none-{number}", correlation)
        assert stray.result.rejection.code == "table_not_open"
    store = handler.store
    for key in (TABLE, store.strays_key):
        assert len(store.sealed(key)) < SNAPSHOT_MAX_BYTES // 2, key
    window = store.streams[TABLE].results
    assert 50 < len(window) < 1_000 and refused.result.command_id in window  # the newest kept
    assert stray.result.command_id in [key[1] for key in store.strays._answers]
