"""A takeover that fails after the group took its partition away lets go quietly: the
partition is no longer the consumer's to pause (aiokafka raises ``IllegalStateError`` for a
partition not assigned), and that error once ended the whole handler, every partition it
held with it (review of the handler, session 34)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka.errors import IllegalStateError, ProducerFenced

from blackjack.command_handler import takeover
from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.partitions import _Partition
from blackjack.command_handler.service import CommandHandler
from blackjack.messages.sealing import ShoeSeal

TP = TopicPartition("unit.blackjack.commands", 0)


class Consumer:
    """``pause`` as aiokafka's subscription state has it: for assigned partitions only."""

    def __init__(self) -> None:
        self.assigned = {TP}
        self.paused: list[TopicPartition] = []

    def pause(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            if tp not in self.assigned:
                raise IllegalStateError(f"No current assignment for partition {tp}")
            self.paused.append(tp)


def _fenced(meanwhile: Callable[[], Awaitable[None]] | None = None) -> type:
    """A transactional producer that another instance's fences as this one takes the
    partition; ``meanwhile``: what happens while it starts (the group rebalancing)."""

    class Producer:
        def __init__(self, **_: Any) -> None:
            pass

        async def start(self) -> None:
            if meanwhile is not None:
                await meanwhile()

        async def begin_transaction(self) -> None:
            pass

        async def commit_transaction(self) -> None:
            raise ProducerFenced()

        async def stop(self) -> None:
            pass

    return Producer


def _taking_partition_0() -> tuple[CommandHandler, Consumer]:
    handler = CommandHandler(HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g"))
    consumer = Consumer()
    handler._consumer = consumer
    handler._reader = object()
    handler._partitions[0] = _Partition(0, TP)
    return handler, consumer


async def test_a_takeover_failing_after_its_revocation_does_not_stop_the_handler(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handler, consumer = _taking_partition_0()

    async def rebalanced() -> None:  # the partition goes to another instance meanwhile
        await handler._revoke({TP})
        consumer.assigned = set()
        handler._assign(set())

    monkeypatch.setattr(takeover, "AIOKafkaProducer", _fenced(rebalanced))
    assert await handler._prepare_due() is False  # nothing more due, and no error raised
    assert handler._partitions == {} and consumer.paused == []


async def test_a_takeover_failing_on_a_partition_still_held_pauses_it_for_the_retry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The other side: still assigned, the failed partition is paused until it is retried."""
    handler, consumer = _taking_partition_0()
    partition = handler._partitions[0]
    monkeypatch.setattr(takeover, "AIOKafkaProducer", _fenced())
    await handler._prepare_due()
    assert handler._partitions == {0: partition} and partition.status == "failed"
    assert consumer.paused == [TP]
