"""``BlackjackClient``'s results reader on a real broker that fails for a moment: a broker
restarted, a leader that moved. Before, the reader's task ended at the first ``KafkaError``
its ``getmany`` raised and every later ``result()`` failed at once with it, for the life of
the client. Now a passing error is retried after a backoff (``client.health``: ``retrying``,
then ``reading``) and only a fatal one (authorization, a codec) fails the waits."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import (
    NotLeaderForPartitionError,
    RecordTooLargeError,
    TopicAuthorizationFailedError,
)

from blackjack.bus.topics import Topics
from blackjack.client import (
    BlackjackClient,
    ClientStopped,
    ReaderHealth,
    SendTimedOut,
    WrongEventLoop,
)
from tests.integration.conftest import WAIT_S, KafkaSpace
from tests.integration.infra import PrivateBroker

pytestmark = [pytest.mark.integration, pytest.mark.also_on_three_nodes]

TABLE = "t-faults"


def answer(command_id: str) -> bytes:
    return (
        f'{{"command_id":"{command_id}","stream_id":"{TABLE}","status":"accepted",'
        f'"handled_at":"{datetime.now(UTC).isoformat()}"}}'
    ).encode()


async def write_answer(bootstrap: str, topic: str, command_id: str) -> None:
    """A result on the results topic, as the handler writes one (read_committed sees it)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, request_timeout_ms=60_000)
    await producer.start()
    try:
        await producer.send_and_wait(topic, answer(command_id), key=TABLE.encode())
    finally:
        await producer.stop()


def fail_fetches(client: BlackjackClient, *errors: Exception) -> None:
    """The client's consumer's next fetches raise ``errors``, one each, as aiokafka's
    fetcher raises a partition's error out of ``getmany``; then it fetches again."""
    consumer = client._results_reader.consumer
    assert consumer is not None
    getmany = consumer.getmany
    pending = list(errors)

    async def failing(*args: Any, **kwargs: Any) -> Any:
        if pending:
            raise pending.pop(0)
        return await getmany(*args, **kwargs)

    consumer.getmany = failing


def polls_of(client: BlackjackClient) -> Callable[[int], Awaitable[None]]:
    """Waits until the client's reader has polled its consumer so many more times."""
    consumer = client._results_reader.consumer
    assert consumer is not None
    getmany = consumer.getmany
    polls, polled = 0, asyncio.Event()

    async def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal polls
        try:
            return await getmany(*args, **kwargs)
        finally:
            polls += 1
            polled.set()

    consumer.getmany = counted

    async def until(more: int) -> None:
        wanted = polls + more
        async with asyncio.timeout(WAIT_S):
            while polls < wanted:
                polled.clear()
                await polled.wait()

    return until


@pytest.mark.parametrize(
    "error",
    [NotLeaderForPartitionError(), RecordTooLargeError("a record too large")],
    ids=["leader-moved", "record-too-large"],
)
async def test_a_passing_fetch_error_is_retried_and_later_results_come(
    kafka_space: Any, error: Exception
) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)
    seen: list[ReaderHealth] = []
    client = BlackjackClient(space.bootstrap, space.topics, on_health=seen.append)
    async with client:
        assert client.health.state == "reading"
        fail_fetches(client, error, error)  # two in a row: the backoff doubles
        waiting = asyncio.ensure_future(client.result("after", timeout=WAIT_S))
        await write_answer(space.bootstrap, space.topics.results, "after")
        result = await waiting
        assert result.command_id == "after"
        assert client.health.healthy
        again = asyncio.ensure_future(client.result("later", timeout=WAIT_S))
        await write_answer(space.bootstrap, space.topics.results, "later")
        assert (await again).command_id == "later"
    states = [h.state for h in seen]
    assert states == ["reading", "retrying", "reading", "stopped"], states
    assert seen[1].error is not None and type(error).__name__ in seen[1].error


async def test_a_fatal_fetch_error_fails_every_wait_at_once(kafka_space: Any) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)
    async with space.client() as client:
        fail_fetches(client, TopicAuthorizationFailedError(space.topics.results))
        started = time.monotonic()
        with pytest.raises(TopicAuthorizationFailedError):
            await client.result("never", timeout=WAIT_S)
        with pytest.raises(TopicAuthorizationFailedError):
            await client.result("nor-this", timeout=WAIT_S)
        assert time.monotonic() - started < WAIT_S / 2
        assert client.health.state == "failed"
        assert "TopicAuthorizationFailedError" in (client.health.error or "")


async def test_a_broker_restarted_while_a_result_is_awaited_breaks_no_result(
    private_broker: PrivateBroker,
) -> None:
    topics = Topics(f"restart-{uuid.uuid4().hex[:8]}.")
    admin = AIOKafkaAdminClient(bootstrap_servers=private_broker.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(t, 2, 1) for t in (topics.commands, topics.results)])
    finally:
        await admin.close()
    async with BlackjackClient(private_broker.bootstrap, topics) as client:
        waiting = asyncio.ensure_future(client.result("across", timeout=4 * WAIT_S))
        polled = polls_of(client)
        await asyncio.to_thread(private_broker.down)
        await polled(3)  # the reader's fetches go on, and fail, meanwhile
        await asyncio.to_thread(private_broker.up)
        await write_answer(private_broker.bootstrap, topics.results, "across")
        assert (await waiting).command_id == "across"
        later = asyncio.ensure_future(client.result("later", timeout=WAIT_S))
        await write_answer(private_broker.bootstrap, topics.results, "later")
        assert (await later).command_id == "later"
        assert client.health.healthy


async def test_stop_from_another_task_ends_the_waits_typed_and_a_second_stop_is_a_no_op(
    kafka_space: Any,
) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)
    client = space.client()
    await client.start()
    waiting = asyncio.ensure_future(client.result("never", timeout=WAIT_S))
    await asyncio.sleep(0)
    started = time.monotonic()
    await asyncio.gather(asyncio.create_task(client.stop()), client.stop())
    with pytest.raises(ClientStopped):
        await waiting
    assert time.monotonic() - started < WAIT_S / 2
    await client.stop()
    with pytest.raises(ClientStopped):
        await client.result("after-stop", timeout=WAIT_S)
    with pytest.raises(ClientStopped):
        await client.send_raw(b"t", b"{}")
    assert client.health.state == "stopped"


async def test_a_client_used_from_another_event_loop_says_so(kafka_space: Any) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)
    async with space.client() as client:
        raised: list[BaseException] = []

        def elsewhere() -> None:
            try:
                asyncio.run(client.result("x", timeout=WAIT_S))
            except BaseException as error:  # what the other loop met
                raised.append(error)

        thread = threading.Thread(target=elsewhere)
        started = time.monotonic()
        thread.start()
        await asyncio.to_thread(thread.join)
        assert time.monotonic() - started < WAIT_S / 2
        [error] = raised
        assert isinstance(error, WrongEventLoop), error


async def test_a_send_while_the_broker_is_away_fails_typed_within_its_timeout(
    private_broker: PrivateBroker,
) -> None:
    topics = Topics(f"away-{uuid.uuid4().hex[:8]}.")
    admin = AIOKafkaAdminClient(bootstrap_servers=private_broker.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(t, 1, 1) for t in (topics.commands, topics.results)])
    finally:
        await admin.close()
    client = BlackjackClient(private_broker.bootstrap, topics, send_timeout_s=3.0)
    async with client:
        await client.send_raw(b"t", b"{}")
        await asyncio.to_thread(private_broker.down)
        try:
            started = time.monotonic()
            with pytest.raises(SendTimedOut):
                await client.send_raw(b"t", b"{}")
            assert time.monotonic() - started < WAIT_S / 2
        finally:
            await asyncio.to_thread(private_broker.up)
