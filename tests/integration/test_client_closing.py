"""``BlackjackClient`` closes every aiokafka client it made, on the paths that fail too: a
consumer of ``events()`` whose start is cancelled (the caller's timeout), and the results
consumer when its producer's stop fails. Before, the first was never stopped (its client's
metadata task and connections left running), and the second was skipped.

A stop whose caller is cancelled goes to its end on its own, the client's and its
producer's: before, the producer's sender task and connections ran on for good, and the
client's stop took the cancel for its reader's and went on (the caller never cancelled)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from blackjack.bus.clients import ScopedConsumer, ScopedProducer
from blackjack.client import ReaderHealth
from blackjack.client import client as client_module
from blackjack.messages.envelope import CommandResult
from tests.integration.conftest import WAIT_S, KafkaSpace
from tests.integration.test_client_kept_answers import left_running

pytestmark = pytest.mark.integration


async def test_an_events_reader_whose_start_is_cancelled_is_closed(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)
    made: list[ScopedConsumer] = []
    starting = asyncio.Event()

    class Held(ScopedConsumer):
        async def start(self) -> None:
            made.append(self)
            starting.set()
            await asyncio.Future()  # the broker slow to answer: the caller gives up

    accepted = CommandResult(
        command_id="c",
        stream_id="t",
        status="accepted",
        handled_at=datetime.now(UTC),
        first_sequence=1,
        last_sequence=1,
    )
    async with space.client() as client:
        monkeypatch.setattr(client_module, "ScopedConsumer", Held)
        reading = asyncio.ensure_future(client.events(accepted))
        async with asyncio.timeout(WAIT_S):
            await starting.wait()
        reading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reading
    [consumer] = made
    assert consumer._closed


async def test_the_results_consumer_is_closed_when_the_producer_s_stop_fails(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)
    client = space.client()
    await client.start()
    assert client._producer is not None and client._results_reader.consumer is not None
    stop_producer = client._producer.stop

    async def failing() -> None:
        await stop_producer()
        raise RuntimeError("the producer's stop failed")

    monkeypatch.setattr(client._producer, "stop", failing)
    with pytest.raises(RuntimeError, match="stop failed"):
        await client.stop()
    assert client._results_reader.consumer._closed


async def test_a_producer_whose_stop_is_cancelled_still_delivers_and_closes(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)
    before = asyncio.all_tasks()
    producer = ScopedProducer(bootstrap_servers=space.bootstrap, linger_ms=100)
    await producer.start()
    delivery = await producer.send(space.topics.results, b"pending", key=b"t")  # (lingering)
    accumulator = producer._message_accumulator
    close, flushing = accumulator.close, asyncio.Event()

    async def close_and_say() -> None:
        flushing.set()
        await close()

    monkeypatch.setattr(accumulator, "close", close_and_say)
    stopping = asyncio.ensure_future(producer.stop())
    async with asyncio.timeout(WAIT_S):
        await flushing.wait()  # inside aiokafka's stop, sending what is pending
    stopping.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopping
    async with asyncio.timeout(WAIT_S):
        assert (await delivery).offset == 0
    assert await left_running(before) == []  # before: the sender, its connections


async def test_a_client_whose_stop_is_cancelled_still_stops_everything(kafka_space: Any) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)
    before = asyncio.all_tasks()
    client = space.client()
    stopped = asyncio.Event()

    def told(health: ReaderHealth) -> None:
        if health.state == "stopped":
            stopped.set()

    client.on_health = told
    await client.start()
    stopping = asyncio.ensure_future(client.stop())
    async with asyncio.timeout(WAIT_S):
        await stopped.wait()  # the stop began: its reader is ending
    stopping.cancel()
    with pytest.raises(asyncio.CancelledError):  # before: taken for the reader's, and lost
        await stopping
    await client.stop()  # waits for the first stop's end
    assert client._producer is not None and client._producer._closed
    assert client._results_reader.consumer is not None and client._results_reader.consumer._closed
    assert await left_running(before) == []
    await client.start()  # (stopped to its end: it starts again)
    await client.stop()
