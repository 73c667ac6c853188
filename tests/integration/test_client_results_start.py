"""Where ``BlackjackClient`` starts reading the results topic, and the answers written before
it, on the real broker with a handler.

The results reader reads from the topic's end as of ``start()`` (``auto_offset_reset``
latest, its position pinned before ``start()`` returns): never the topic's history. Before,
an answer written before that position was never read and its ``result()`` timed out:

* a command sent from another task while the client was starting: its producer was in place
  before the reader's start was pinned, so the send went out at once and the handler's
  answer could be written before that position (measured: it was, and ``execute`` timed
  out). A send now waits for the start to end;
* a client stopped between a send and its read: it could not be started again ("a client is
  started once"), and a new one read from its own start. A stopped client is now started
  again, and the answer of a command it (or, given ``stream_id`` and ``sent_at``, a client
  before it: a platform's process that restarted) sent before is looked back for on the
  stream's partition, from a minute before its ``sent_at`` up to where the reader starts.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest

from blackjack.bus.clients import ScopedConsumer, ScopedProducer
from blackjack.bus.topics import Topics
from blackjack.client import BlackjackClient, ClientAlreadyStarted, ClientStopped, TopicNotFound
from blackjack.client import client as client_module
from blackjack.command_handler.service import CommandHandler
from blackjack.domain import commands as cmd
from tests.integration.conftest import WAIT_S, KafkaSpace

pytestmark = [pytest.mark.integration, pytest.mark.also_on_three_nodes]

ABSENT_S = 5.0  # how long an answer that never comes is waited for


async def test_a_command_sent_while_the_client_starts_gets_its_answer(
    space: KafkaSpace, handler: CommandHandler, monkeypatch: pytest.MonkeyPatch
) -> None:
    go = asyncio.Event()
    holding = asyncio.Event()
    sent_while_starting: list[str] = []

    class Held(ScopedConsumer):
        async def start(self) -> None:
            if not go.is_set():  # the results reader's start: its broker slow to answer
                holding.set()
                await go.wait()
            await super().start()

    class Watched(ScopedProducer):
        async def send(self, topic: str, *args: Any, **kwargs: Any) -> Any:
            if not go.is_set():
                sent_while_starting.append(topic)
            return await super().send(topic, *args, **kwargs)

    async with space.client() as observer:  # reads every answer from before the send on
        monkeypatch.setattr(client_module, "ScopedConsumer", Held)
        monkeypatch.setattr(client_module, "ScopedProducer", Watched)
        client = space.client()
        starting = asyncio.ensure_future(client.start())
        async with asyncio.timeout(WAIT_S):
            await holding.wait()  # its producer started, its results reader not yet
        executing = asyncio.ensure_future(
            client.execute(
                "starting-1",
                cmd.OpenTable(variant="mini-h17"),
                command_id="sent-while-starting",
                timeout=WAIT_S,
            )
        )
        for _ in range(20):  # the send goes as far as it can go meanwhile (no I/O needed)
            await asyncio.sleep(0)
        if sent_while_starting:  # (before: sent, and answered before the reader's start)
            await observer.result("sent-while-starting", WAIT_S, stream_id="starting-1")
        go.set()
        try:
            await starting
            result = await executing
        finally:
            await client.stop()
    assert result.status == "accepted", result
    assert sent_while_starting == []


async def test_a_stopped_client_started_again_reads_the_answer_written_meanwhile(
    space: KafkaSpace, handler: CommandHandler
) -> None:
    table = "restarted-1"
    client = space.client()
    async with space.client() as observer:
        await client.start()
        first_producer = client._producer
        command_id = await client.send(table, cmd.OpenTable(variant="mini-h17"))
        await client.stop()
        # answered while the client is stopped: before where it reads from once restarted
        await observer.result(command_id, WAIT_S, stream_id=table)
        await client.start()  # before: ClientStopped("a client is started once")
        try:
            with pytest.raises(ClientAlreadyStarted):
                await client.start()
            assert client._producer is not first_producer  # new producer and consumers
            result = await client.result(command_id, WAIT_S)
            sat = await client.execute(table, cmd.SitDown(player_id="ann"), timeout=WAIT_S)
        finally:
            await client.stop()
        # started once more: a second answer is looked back for, and the first, read again
        # there, is kept once (no second answer comes: the wait runs out)
        await client.start()
        try:
            with pytest.raises(TimeoutError):
                await client.result(command_id, ABSENT_S, skip=1)
            # looked back for in this run
            assert table in {stream for stream, _ in client._book.asked[command_id]}
            assert client.results_for(command_id) == [result]
        finally:
            await client.stop()
    assert result.status == "accepted" and result.command_id == command_id, result
    assert sat.status == "accepted", sat
    assert client.health.state == "stopped"


async def test_a_platform_restarted_between_send_and_read_finds_the_answer(
    space: KafkaSpace, handler: CommandHandler
) -> None:
    table = "platform-restart-1"
    sent_at = datetime.now(UTC)  # kept by the platform with the command id, for resends too
    async with space.client() as before:
        command_id = await before.send(
            table, cmd.OpenTable(variant="mini-h17"), command_id="kept-1", sent_at=sent_at
        )
        other = await before.execute("platform-restart-2", cmd.OpenTable(variant="mini-h17"))
        await before.result(command_id, WAIT_S, stream_id=table)  # answered, unread after
    async with space.client() as after:  # the platform's process, restarted
        found = await after.result(command_id, WAIT_S, stream_id=table, sent_at=sent_at)
        # only that answer was looked back for, not the topic's history
        assert after.results_for(other.command_id) == []
    assert found.status == "accepted" and found.command_id == command_id, found


async def test_a_client_whose_start_failed_refuses_sends_typed(space: KafkaSpace) -> None:
    client = BlackjackClient("127.0.0.1:1", space.topics, send_timeout_s=1.0)
    with pytest.raises(Exception):  # noqa: B017 (no broker there: aiokafka's own error)
        await client.start()
    with pytest.raises(ClientStopped):
        await client.send_raw(b"t", b"{}")


async def test_a_client_under_a_wrong_topic_prefix_is_told_the_topic_it_did_not_find(
    space: KafkaSpace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, ``start()`` raised aiokafka's ``UnknownTopicOrPartitionError`` naming nothing
    (after its 40 s wait for the metadata: here 2 s), read as the broker's failure."""

    class Impatient(ScopedProducer):
        def __init__(self, **options: Any) -> None:
            super().__init__(request_timeout_ms=2000, **options)

    monkeypatch.setattr(client_module, "ScopedProducer", Impatient)
    wrong = Topics(f"{space.prefix}typo.")
    client = BlackjackClient(space.bootstrap, wrong)
    with pytest.raises(TopicNotFound) as raised:
        await client.start()
    assert wrong.results in str(raised.value) and space.bootstrap in str(raised.value)
    assert "BLACKJACK_TOPIC_PREFIX" in str(raised.value)
    with pytest.raises(ClientStopped):  # and nothing is left half started
        await client.send_raw(b"t", b"{}")


async def test_a_client_stopped_while_it_starts_leaves_nothing_open(
    space: KafkaSpace, monkeypatch: pytest.MonkeyPatch
) -> None:
    go = asyncio.Event()
    holding = asyncio.Event()
    made: list[ScopedConsumer] = []

    class Held(ScopedConsumer):
        async def start(self) -> None:
            made.append(self)
            holding.set()
            await go.wait()
            await super().start()

    monkeypatch.setattr(client_module, "ScopedConsumer", Held)
    client = space.client()
    starting = asyncio.ensure_future(client.start())
    async with asyncio.timeout(WAIT_S):
        await holding.wait()
    await client.stop()  # from another task, the start still under way
    go.set()  # (before: the start went on with the closed producer and hung, for good)
    with pytest.raises(ClientStopped):
        async with asyncio.timeout(WAIT_S):
            await starting
    [consumer] = made
    assert consumer._closed and client._producer is not None and client._producer._closed
    assert client._reading is None or client._reading.done()
    with pytest.raises(ClientStopped):
        await client.send_raw(b"t", b"{}")
