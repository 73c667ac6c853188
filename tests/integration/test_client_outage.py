"""A platform's process (``BlackjackClient`` sending without pause) while its broker is
stopped: its clients retry the metadata at most about 10 times a second each
(``retry_backoff_ms``), not in a busy loop (``bus.metadata_backoff``). Before, the
controlled shutdown left every partition leaderless in the producer's metadata and its
sender asked again at once, thousands of times a second, as long as the broker was away."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.client import AIOKafkaClient

from blackjack.bus.topics import Topics
from blackjack.client import BlackjackClient
from tests.integration.infra import PrivateBroker

pytestmark = pytest.mark.integration

DOWN_S = 5.0
CLIENTS = 2  # the commands producer and the results consumer
RETRIES_A_SECOND = 10  # aiokafka's retry_backoff_ms, 100 ms


class Updates:
    """Counts aiokafka's metadata updates (each client's, any outcome)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        update = AIOKafkaClient._metadata_update

        async def counted(client: AIOKafkaClient, *args: Any) -> Any:
            self.count += 1
            return await update(client, *args)

        monkeypatch.setattr(AIOKafkaClient, "_metadata_update", counted)


async def sending(client: BlackjackClient, first: asyncio.Event) -> None:
    """Commands' bytes written one after another, as a busy platform does; failures (the
    broker away) are retried at once."""
    while True:
        with contextlib.suppress(Exception):
            await client.send_raw(b"t", b"{}")
            first.set()


async def test_a_stopped_broker_is_retried_with_backoff_not_in_a_busy_loop(
    private_broker: PrivateBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    topics = Topics(f"outage-{uuid.uuid4().hex[:8]}.")
    admin = AIOKafkaAdminClient(bootstrap_servers=private_broker.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(t, 4, 1) for t in (topics.commands, topics.results)])
    finally:
        await admin.close()
    updates = Updates(monkeypatch)
    async with BlackjackClient(private_broker.bootstrap, topics) as client:
        first = asyncio.Event()
        sender = asyncio.create_task(sending(client, first))
        try:
            await first.wait()
            await asyncio.to_thread(private_broker.down)
            updates.count = 0
            await asyncio.sleep(DOWN_S)  # the outage itself
            retried = updates.count
        finally:
            sender.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await sender
            await asyncio.to_thread(private_broker.up)  # the client stops cleanly
    # twice the backoff's rate: slack for the loop's own time; and it did go on trying (a
    # client that gave up would pass the bound alone)
    assert DOWN_S <= retried <= 2 * CLIENTS * RETRIES_A_SECOND * DOWN_S, retried
