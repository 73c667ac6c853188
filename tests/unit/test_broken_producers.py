"""aiokafka's idempotent producer fails every send after an ``OutOfOrderSequenceNumber``
(aio-libs/aiokafka#1017; a fault review saw it after a broker outage of a minute) until it is
replaced: the client and the handler's clock replace theirs and carry on, instead of failing
every later command or timer."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka.errors import KafkaConnectionError, OutOfOrderSequenceNumber

from blackjack.client import BlackjackClient
from blackjack.command_handler import timers
from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.partitions import _Partition
from blackjack.command_handler.service import CommandHandler
from blackjack.command_handler.streams import PartitionStore
from blackjack.domain import commands as cmd
from blackjack.messages.envelope import CommandEnvelope
from blackjack.messages.sealing import ShoeSeal


class Producer:
    """Fails every send once ``broken``, as the real one does; ``unreachable`` fails its
    start (the broker still away)."""

    made: list[Producer] = []

    def __init__(self, broken: bool, unreachable: bool = False) -> None:
        self.broken, self.started, self.stopped, self.sent = broken, False, False, 0
        self.unreachable = unreachable
        self.took = asyncio.Event()
        Producer.made.append(self)

    async def start(self) -> None:
        if self.unreachable:
            raise KafkaConnectionError()
        assert not self.started, "started twice"
        self.started = True

    async def stop(self) -> None:
        self.stopped = True

    async def send_and_wait(self, topic: str, value: bytes, **_: Any) -> Any:
        if self.broken:
            raise OutOfOrderSequenceNumber()
        self.sent += 1
        self.took.set()
        return type("Metadata", (), {"offset": 41 + self.sent})()


@pytest.fixture(autouse=True)
def fresh() -> None:
    Producer.made = []


def started_offline(client: BlackjackClient) -> BlackjackClient:
    """``client`` as ``start()`` leaves it, without a broker: its producer and consumer are the
    test's (a send or ``result`` of a client never started raises ``ClientStopped``)."""
    loop = asyncio.get_running_loop()
    client._loop, client._ready = loop, loop.create_future()
    client._ready.set_result(None)
    return client


async def test_the_client_replaces_a_broken_producer_and_sends_again() -> None:
    client = started_offline(BlackjackClient("127.0.0.1:1"))
    client._new_producer = lambda: Producer(broken=False)  # type: ignore[method-assign]
    client._producer = Producer(broken=True)
    assert await client.send_raw(b"t", b"{}") == 42
    broken, fresh = Producer.made
    assert broken.stopped and fresh.started and fresh.sent == 1
    assert client._producer is fresh


async def test_sends_failing_together_replace_the_producer_once() -> None:
    client = started_offline(BlackjackClient("127.0.0.1:1"))
    client._new_producer = lambda: Producer(broken=False)  # type: ignore[method-assign]
    client._producer = Producer(broken=True)
    offsets = await asyncio.gather(*(client.send_raw(b"t", b"{}") for _ in range(3)))
    assert sorted(offsets) == [42, 43, 44]
    assert len(Producer.made) == 2  # the broken one and one replacement


async def test_a_replacement_that_cannot_start_leaves_the_next_send_to_try_again() -> None:
    client = started_offline(BlackjackClient("127.0.0.1:1"))
    broken = Producer(broken=True)
    client._producer = broken
    client._new_producer = lambda: Producer(broken=False, unreachable=True)  # type: ignore[method-assign]
    with pytest.raises(KafkaConnectionError):
        await client.send_raw(b"t", b"{}")
    assert client._producer is broken  # never an unstarted one in its place
    client._new_producer = lambda: Producer(broken=False)  # type: ignore[method-assign]
    assert await client.send_raw(b"t", b"{}") == 42


async def test_the_clock_replaces_a_broken_producer_and_its_timers_go_out_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    handler = CommandHandler(
        HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g", timer_tick_s=0.001)
    )
    timer = CommandEnvelope(
        command_id="expire-t1-1",
        stream_id="t1",
        sent_at=datetime(2026, 1, 1, tzinfo=UTC),
        command=cmd.ExpireTimers(),
    )
    monkeypatch.setattr(timers, "due_commands", lambda store, now, timeout: [timer])
    monkeypatch.setattr(timers, "REFIRE_AFTER_S", 0.0)  # fire again on the next tick
    tp = TopicPartition("unit.blackjack.commands", 0)
    handler._partitions[0] = _Partition(0, tp, status="ready", store=PartitionStore(0))
    handler._timers._producer = Producer(broken=True)
    replacement = Producer(broken=False)
    # the first replacement cannot start (the broker still away): the clock goes on ticking
    replacements = iter([Producer(broken=False, unreachable=True), replacement])
    handler._timers._new_producer = lambda: next(replacements)  # type: ignore[method-assign]
    ticking = asyncio.create_task(handler._tick())
    await asyncio.wait_for(replacement.took.wait(), 5)
    handler._stopping.set()
    await asyncio.wait_for(ticking, 5)
    assert Producer.made[0].stopped and replacement.started and handler.failure is None
