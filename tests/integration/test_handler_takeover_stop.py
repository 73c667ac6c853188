"""A handler stopped while it takes a partition over (a long rebuild, a broker away) closes
the transactional producer that takeover made. Before, the cancellation went past the
takeover's ``except Exception``: the producer, not yet the partition's, was never stopped, its
sender task and connections left for the garbage collector (``Unclosed AIOKafkaProducer``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from blackjack.command_handler import takeover
from blackjack.command_handler.service import CommandHandler
from tests.integration.conftest import WAIT_S, KafkaSpace

pytestmark = pytest.mark.integration


async def test_a_takeover_the_stop_cuts_short_closes_its_producer(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)
    made: list[AIOKafkaProducer] = []

    class Seen(AIOKafkaProducer):  # type: ignore[misc]
        def __init__(self, **options: Any) -> None:
            super().__init__(**options)
            made.append(self)

    rebuilding = asyncio.Event()

    async def rebuild_held(*args: Any, **kwargs: Any) -> Any:
        rebuilding.set()
        await asyncio.Future()  # longer than the stop waits for it

    monkeypatch.setattr(takeover, "AIOKafkaProducer", Seen)
    monkeypatch.setattr(takeover, "rebuild", rebuild_held)
    handler = CommandHandler(space.config())
    await handler.start()
    try:
        async with asyncio.timeout(WAIT_S):
            await rebuilding.wait()
    finally:
        await handler.stop(timeout=0.1)
    assert made and all(producer._closed for producer in made)
