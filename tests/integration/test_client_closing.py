"""``BlackjackClient`` closes every aiokafka client it made, on the paths that fail too: a
consumer of ``events()`` whose start is cancelled (the caller's timeout), and the results
consumer when its producer's stop fails. Before, the first was never stopped (its client's
metadata task and connections left running), and the second was skipped.

A stop whose caller is cancelled goes to its end on its own, the client's and its
producer's: before, the producer's sender task and connections ran on for good, and the
client's stop took the cancel for its reader's and went on (the caller never cancelled)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any

import pytest

from blackjack.bus.clients import ScopedConsumer, ScopedProducer
from blackjack.client import ReaderHealth
from blackjack.client import client as client_module
from blackjack.client.errors import ClientStopped, SendTimedOut
from blackjack.domain.wallet import WalletDeposit, WalletEvent, fold_wallet, wallet_stream
from blackjack.messages.envelope import CommandResult
from tests.integration.conftest import WAIT_S, KafkaSpace, running_handler, stream_events
from tests.integration.test_client_kept_answers import left_running

pytestmark = pytest.mark.integration


def _accepted_unwritten() -> CommandResult:
    """An acceptance whose event (sequence 1 of ``t``) no handler wrote: ``events()`` of it
    waits."""
    return CommandResult(
        command_id="c",
        stream_id="t",
        status="accepted",
        handled_at=datetime.now(UTC),
        first_sequence=1,
        last_sequence=1,
    )


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

    accepted = _accepted_unwritten()
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


@pytest.mark.parametrize("sent_before", [True, False])
async def test_commands_cut_short_by_stop_name_what_to_resend_and_are_applied_once(
    kafka_space: Any, sent_before: bool
) -> None:
    """The client review: ``stop()`` during 50 ``execute`` deposits. Every one raised
    ``ClientStopped`` ("no command can be sent") with an id ``execute`` had made, yet all were
    applied: a platform retrying on a new client would pay each twice. And on a client that
    had sent nothing yet, the sends hung on the closed producer for the whole 30 s
    ``send_timeout_s`` (``SendTimedOut`` blaming the broker) or raised aiokafka's
    ``ProducerClosed``. Each now gets ``ClientStopped`` at once naming its ``command_id``,
    ``stream_id`` and ``sent_at``; resent under those, each is applied once."""
    space: KafkaSpace = await kafka_space(partitions=1)
    wallet = wallet_stream("pay")
    async with running_handler(space.config()):
        client = space.client()
        client.send_timeout_s = 30.0
        await client.start()
        if sent_before:
            await client.execute(wallet, WalletDeposit(player_id="pay", amount=1000))
        deposits = [
            asyncio.create_task(client.execute(wallet, WalletDeposit(player_id="pay", amount=1)))
            for _ in range(20)
        ]
        await asyncio.sleep(0)
        started = time.monotonic()
        await client.stop()
        outcomes = await asyncio.gather(*deposits, return_exceptions=True)
        assert time.monotonic() - started < 10.0  # not the 30 s send timeout
        assert all(isinstance(o, ClientStopped) for o in outcomes), outcomes
        stopped = [o for o in outcomes if isinstance(o, ClientStopped)]
        assert all(o.stream_id == wallet and o.sent_at is not None for o in stopped)
        assert len({o.command_id for o in stopped}) == 20
        async with space.client() as again:
            for error in stopped:
                assert error.command_id is not None
                resent = await again.execute(
                    wallet,
                    WalletDeposit(player_id="pay", amount=1),
                    command_id=error.command_id,
                    sent_at=error.sent_at,
                )
                assert resent.status == "accepted", resent
    state = fold_wallet(
        e.data for e in await stream_events(space, wallet) if isinstance(e.data, WalletEvent)
    )
    assert state.balance == (1000 if sent_before else 0) + 20


async def test_a_send_all_that_times_out_names_every_command_to_resend(kafka_space: Any) -> None:
    """The client review: ``send_all`` raised ``SendTimedOut`` naming no command, though the
    deposit was applied and the message said to resend under the same id: a resend was a new
    command. The error names each command's id, stream and ``sent_at``."""
    space: KafkaSpace = await kafka_space(partitions=1)
    wallet = wallet_stream("all")
    async with running_handler(space.config()), space.client() as client:
        await client.execute(wallet, WalletDeposit(player_id="all", amount=1))  # started, sent
        client.send_timeout_s = 0.0
        with pytest.raises(SendTimedOut) as timed_out:
            await client.send_all([(wallet, WalletDeposit(player_id="all", amount=5))] * 3)
        client.send_timeout_s = 30.0
        named = timed_out.value.commands
        assert len(named) == 3 and all(stream == wallet for _, stream, _ in named)
        for command_id, stream, sent_at in named:
            resent = await client.execute(
                stream,
                WalletDeposit(player_id="all", amount=5),
                command_id=command_id,
                sent_at=sent_at,
            )
            assert resent.status == "accepted", resent
    state = fold_wallet(
        e.data for e in await stream_events(space, wallet) if isinstance(e.data, WalletEvent)
    )
    assert state.balance == 1 + 15


async def test_a_stop_ends_an_events_read_at_once(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, ``events()`` waited on for its ``timeout`` (``TimeoutError``, blaming the
    broker) after the client's ``stop()`` had ended: events that never come while it waits.
    Its consumer is closed by the time it says so (a diff review: left closing, unawaited)."""
    space: KafkaSpace = await kafka_space(partitions=1)
    made: list[ScopedConsumer] = []
    reading_began = asyncio.Event()

    class Slow(ScopedConsumer):
        async def start(self) -> None:
            made.append(self)
            await super().start()
            reading_began.set()

        async def stop(self) -> None:
            await asyncio.sleep(0.3)
            await super().stop()

    never_written = _accepted_unwritten()
    before = asyncio.all_tasks()
    client = space.client()
    await client.start()
    monkeypatch.setattr(client_module, "ScopedConsumer", Slow)  # (the events' consumer)
    reading = asyncio.ensure_future(client.events(never_written, timeout=3 * WAIT_S))
    async with asyncio.timeout(WAIT_S):
        await reading_began.wait()
    began = time.monotonic()
    await client.stop()
    with pytest.raises(ClientStopped, match="stopped while the events were read"):
        async with asyncio.timeout(WAIT_S):
            await reading
    assert time.monotonic() - began < WAIT_S
    assert made and all(consumer._closed for consumer in made)
    assert await left_running(before) == []
