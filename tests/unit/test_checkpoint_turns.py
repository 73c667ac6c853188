"""A checkpoint gives the event loop a turn after each snapshot it seals, and a sweep of idle
streams after each stream it keeps cold: sealing a table with a full window of answers takes
about 5 ms of CPU, and a partition's checkpoint of 200 such tables held the handler's loop
(the other partitions' transactions, the consumer, the HTTP probes) for about a second
(``tests/integration/measure_checkpoint_stall.py``), a sweep 10 tables' worth at a time."""

from __future__ import annotations

import asyncio
import itertools
import os
import types
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from aiokafka import TopicPartition

from blackjack.command_handler.checkpointing import Checkpointing
from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.partitions import _Partition
from blackjack.command_handler.service import CommandHandler
from blackjack.command_handler.snapshots import CheckpointSigner
from blackjack.command_handler.streams import PartitionStore
from blackjack.domain import commands as cmd
from blackjack.messages.sealing import ShoeSeal
from tests.unit.test_cold_streams import Handler

T0 = datetime(2026, 5, 1, tzinfo=UTC)


class _Producer:
    def __init__(self) -> None:
        self.keys: list[bytes] = []

    async def send(self, topic: str, value: bytes, *, key: bytes, **_: Any) -> Any:
        self.keys.append(key)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        done.set_result(None)
        return done


def checkpoint_writer() -> Any:
    """The checkpoint writer of a handler, without its Kafka clients (``_Producer`` sends)."""
    writer: Any = Checkpointing.__new__(Checkpointing)
    writer.topics = types.SimpleNamespace(snapshots="s", events="e", results="r")
    writer._checkpoints = CheckpointSigner(os.urandom(32), "s")
    writer.log = structlog.get_logger("test")
    writer._now = lambda: T0
    writer._publish_gauges = lambda: None
    return writer


async def test_the_loop_gets_a_turn_between_the_snapshots_of_a_checkpoint() -> None:
    handler = Handler(5, freeze=False)
    tables = [f"t{number}" for number in range(6)]
    for number, table in enumerate(tables):
        at = T0 + timedelta(seconds=number)
        handler.send(table, cmd.OpenTable(variant="mini-h17"), at, f"open-{table}")
    store = handler.store
    assert store.dirty == set(tables)
    turns = 0
    turns_at_seal: list[int] = []
    sealed = store.sealed

    def counted(stream_id: str) -> bytes:
        turns_at_seal.append(turns)
        return sealed(stream_id)

    store.sealed = counted  # type: ignore[method-assign]
    writer = checkpoint_writer()
    stop = asyncio.Event()

    async def other_work() -> None:  # another partition, the consumer, a probe
        nonlocal turns
        while not stop.is_set():
            turns += 1
            await asyncio.sleep(0)

    working = asyncio.create_task(other_work())
    producer = _Producer()
    await writer._checkpoint(_Partition(0, None), store, producer, [])
    stop.set()
    await working
    assert [key.decode() for key in producer.keys[:-1]] == sorted(tables)
    assert not store.dirty
    # before: all six sealed in one turn of the loop ([0, 0, 0, 0, 0, 0])
    assert all(b > a for a, b in itertools.pairwise(turns_at_seal)), turns_at_seal


async def test_a_sweep_of_idle_streams_gives_the_loop_a_turn_after_each() -> None:
    handler = CommandHandler(HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g"))
    played = Handler(5, freeze=False)
    tables = [f"t{number}" for number in range(6)]
    for number, table in enumerate(tables):
        at = T0 + timedelta(seconds=number)
        played.send(table, cmd.OpenTable(variant="mini-h17"), at, f"open-{table}")
    store: PartitionStore = played.store
    for stream in store.streams.values():
        stream.used_at = -1e9  # idle for ages
    handler._partitions[0] = _Partition(0, TopicPartition("c", 0), "ready", store)
    turns = 0
    turns_at_freeze: list[int] = []
    freeze = store.freeze

    def counted(stream_id: str, *args: Any, **kwargs: Any) -> bool:
        turns_at_freeze.append(turns)
        return freeze(stream_id, *args, **kwargs)

    store.freeze = counted  # type: ignore[method-assign]
    stop = asyncio.Event()

    async def other_work() -> None:
        nonlocal turns
        while not stop.is_set():
            turns += 1
            await asyncio.sleep(0)

    working = asyncio.create_task(other_work())
    await handler._freeze_idle_streams()
    stop.set()
    await working
    assert sorted(store.cold) == tables
    # before: ten at a time ([0, 0, 0, 0, 0, 0] here)
    assert all(b > a for a, b in itertools.pairwise(turns_at_freeze)), turns_at_freeze
