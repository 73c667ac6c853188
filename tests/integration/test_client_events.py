"""``BlackjackClient.events(result)``: the events of an accepted command, read as soon as its
result is.

The result can be read before its events can: a Kafka transaction's commit marker reaches each
of its partitions in its own time (on a cluster the results' leader and the events' are
brokers apart), and a ``read_committed`` reader sees no record of a partition past a
transaction still open there, whoever writes it. The client asked the events partition for the
first record since the result was handled, which the broker answers only below that stable
end: it found none, and ``events`` raised ``LookupError`` ("no events of ... since") for
events that were there. Met on three nodes, where ``blackjack play``'s follower read the
table's history a moment before its last command's events. Here a transaction held open on
the partition holds them back on any broker."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from blackjack.bus.clients import ScopedConsumer
from blackjack.bus.topics import partition_for
from blackjack.client import client as client_module
from blackjack.command_handler.service import CommandHandler
from blackjack.domain import commands as cmd
from tests.integration.conftest import WAIT_S, KafkaSpace, accept

pytestmark = [pytest.mark.integration, pytest.mark.also_on_three_nodes]


async def test_the_events_of_a_result_read_before_them_are_waited_for(
    space: KafkaSpace, handler: CommandHandler, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = f"events-{uuid.uuid4().hex[:6]}"
    asked = asyncio.Event()

    class Told(ScopedConsumer):
        async def offsets_for_times(self, *args: Any, **kwargs: Any) -> Any:
            found = await super().offsets_for_times(*args, **kwargs)
            asked.set()
            return found

    # (the client made after: its own consumers are of the class its asserts name)
    monkeypatch.setattr(client_module, "ScopedConsumer", Told)
    # another writer's transaction, open on the table's partition of the events topic, before
    # anything else is written there: no record since the command, below the stable end
    holding = AIOKafkaProducer(
        bootstrap_servers=space.bootstrap, transactional_id=f"{space.prefix}holding", acks="all"
    )
    await holding.start()
    try:
        await holding.begin_transaction()
        partition = partition_for(table, space.partitions)
        await holding.send_and_wait(space.topics.events, b"{}", key=b"x", partition=partition)
        async with space.client() as client:
            [opened] = await accept(client, table, cmd.OpenTable(variant="mini-h17"))
            reading = asyncio.create_task(client.events(opened, timeout=WAIT_S))
            await asyncio.wait_for(asked.wait(), WAIT_S)  # asked while they are held back
            assert not reading.done()  # before: LookupError, no events of the table since
            await holding.abort_transaction()
            events = await reading
    finally:
        await holding.stop()
    assert [e.sequence for e in events] == list(
        range(opened.first_sequence or 0, (opened.last_sequence or 0) + 1)
    )
    assert events[0].type == "TableOpened"
