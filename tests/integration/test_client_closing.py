"""``BlackjackClient`` closes every aiokafka client it made, on the paths that fail too: a
consumer of ``events()`` whose start is cancelled (the caller's timeout), and the results
consumer when its producer's stop fails. Before, the first was never stopped (its client's
metadata task and connections left running), and the second was skipped."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from blackjack import client as client_module
from blackjack.bus.clients import ScopedConsumer
from blackjack.messages.envelope import CommandResult
from tests.integration.conftest import WAIT_S, KafkaSpace

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
    assert client._producer is not None and client._consumer is not None
    stop_producer = client._producer.stop

    async def failing() -> None:
        await stop_producer()
        raise RuntimeError("the producer's stop failed")

    monkeypatch.setattr(client._producer, "stop", failing)
    with pytest.raises(RuntimeError, match="stop failed"):
        await client.stop()
    assert client._consumer._closed
