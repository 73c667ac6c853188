"""A partition revoked while it was being taken over: the store its rebuild made is not
used, and its cold streams' file (``SpilledStreams``) is removed at once, not left open until
the store is collected. No broker: the Kafka-facing parts are stood in for."""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka import TopicPartition

from blackjack.command_handler import takeover
from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.partitions import _Partition
from blackjack.command_handler.replay import RebuildStats
from blackjack.command_handler.service import CommandHandler
from blackjack.command_handler.spill import SpilledStreams
from blackjack.command_handler.streams import PartitionStore
from blackjack.messages.sealing import ShoeSeal


class _Producer:
    def __init__(self, **_: Any) -> None:
        self.stopped = False

    async def start(self) -> None: ...
    async def begin_transaction(self) -> None: ...
    async def commit_transaction(self) -> None: ...

    async def stop(self) -> None:
        self.stopped = True


class _Consumer:
    async def committed(self, _: TopicPartition) -> int:
        return 0


async def test_a_store_rebuilt_for_a_partition_revoked_meanwhile_is_closed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handler = CommandHandler(HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g"))
    partition = _Partition(0, TopicPartition("c", 0))
    handler._partitions[0] = partition
    handler._consumer = handler._reader = _Consumer()
    rebuilt = PartitionStore(0, cold=SpilledStreams())
    producers: list[_Producer] = []

    def producer(**options: Any) -> _Producer:
        producers.append(_Producer(**options))
        return producers[-1]

    async def ends(*_: Any) -> tuple[int, ...]:
        return (0, 0, 0, 0)

    async def rebuild(*_: Any, **__: Any) -> tuple[PartitionStore, RebuildStats]:
        # revoked while it reads the log, and taken by no one here since
        handler._partitions[0] = _Partition(0, TopicPartition("c", 0), "revoked")
        return rebuilt, RebuildStats(0, False, 0, 0, 0, 0.0)

    async def unsigned(*_: Any) -> str:
        return "accept"

    monkeypatch.setattr(takeover, "AIOKafkaProducer", producer)
    monkeypatch.setattr(takeover, "end_offsets", ends)
    monkeypatch.setattr(takeover, "rebuild", rebuild)
    monkeypatch.setattr(handler, "_unsigned_checkpoints", unsigned)
    cold = rebuilt.cold
    assert isinstance(cold, SpilledStreams) and cold.open
    await handler._prepare(partition)
    assert partition.store is None and producers[0].stopped
    assert not cold.open  # before: open until the store was collected
