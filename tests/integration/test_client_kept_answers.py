"""Which answers ``BlackjackClient`` keeps, on the real broker.

A client reads every answer on the results topic. It kept them all in one store of 100,000,
about 1.7 KB each (168 MB), so at a platform's 850 commands a second the answer to a
client's own command was let go of after two minutes, and its ``result`` asked later timed
out although the command was taken. Now the answers to the commands a client sent, or was
asked the result of, are kept apart from the others' (``KEEP_OTHERS_RESULTS`` of those), and
an answer let go of with the others' is looked back for on its stream's partition.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from aiokafka import TopicPartition

from blackjack.bus.clients import ScopedConsumer
from blackjack.client import answers as answers_module
from blackjack.client import client as client_module
from blackjack.client import reader as reader_module
from blackjack.client import sendings as sendings_module
from blackjack.domain import commands as cmd
from tests.integration.conftest import WAIT_S, KafkaSpace
from tests.integration.test_client_lost_answers import (
    TABLE,
    answer,
    answered,
    delete_before,
    write,
)
from tests.unit.polling import until

pytestmark = pytest.mark.integration

OTHERS = 3


def _bound(monkeypatch: pytest.MonkeyPatch, name: str, value: int) -> None:
    """One of the client's bounds made small, in each module that reads it (the answers kept,
    and the sendings remembered)."""
    for module in (answers_module, client_module, reader_module, sendings_module):
        if hasattr(module, name):
            monkeypatch.setattr(module, name, value)


async def test_the_answer_to_its_own_command_outlives_the_others_traffic(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _bound(monkeypatch, "KEEP_OTHERS_RESULTS", OTHERS)
    space: KafkaSpace = await kafka_space(partitions=1)
    async with space.client() as client:
        mine = await client.send(TABLE, cmd.OpenTable(variant="mini-h17"))
        # no handler runs: the answer is written as one would
        await write(space.bootstrap, space.topics.results, answer(mine))
        others = [f"other-{n}" for n in range(4 * OTHERS)]
        for command_id in others:  # other clients' answers, read but not asked for
            await write(space.bootstrap, space.topics.results, answer(command_id))
        # the last one asked for: once it is here, the reader has read every one before it
        await answered(client, space.bootstrap, space.topics.results, "last")
        # before: one store of all answers let go of the own one first
        assert [r.command_id for r in client.results_for(mine)] == [mine]
        assert (await client.result(mine, timeout=0.001)).command_id == mine
        assert len(client._book.others) == OTHERS  # the others' last ones only
        assert client.results_for(others[0]) == []
        assert [r.command_id for r in client.results_for(others[-1])] == [others[-1]]


async def test_an_answer_let_go_of_with_the_others_is_looked_back_for_on_its_stream(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A handler's signed step, say: another's command, whose answer came before the caller
    asked for it. Given its stream, it is looked for from the reader's start."""
    _bound(monkeypatch, "KEEP_OTHERS_RESULTS", OTHERS)
    space: KafkaSpace = await kafka_space(partitions=1)
    async with space.client() as client:
        await write(space.bootstrap, space.topics.results, answer("step-1"))
        for n in range(2 * OTHERS):
            await write(space.bootstrap, space.topics.results, answer(f"other-{n}"))
        await answered(client, space.bootstrap, space.topics.results, "last")
        assert client.results_for("step-1") == []  # let go of
        found = await client.result("step-1", WAIT_S, stream_id=TABLE)
        assert found.command_id == "step-1" and found.stream_id == TABLE
        assert (TABLE, None) in client._book.asked["step-1"]  # from the reader's start
        # asked for: kept with the client's own from now on
        await write(space.bootstrap, space.topics.results, answer("step-1"))
        again = await client.result("step-1", WAIT_S, skip=1, stream_id=TABLE)
        assert again.command_id == "step-1"
        assert len(client.results_for("step-1")) == 2


async def test_a_look_back_from_the_reader_s_start_reads_what_retention_left(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records deleted (retention) since the reader started: the look-back reads from the
    earliest one left (before: its consumer jumped to the partition's end, over the answer)."""
    _bound(monkeypatch, "KEEP_OTHERS_RESULTS", OTHERS)
    space: KafkaSpace = await kafka_space(partitions=1)
    tp = TopicPartition(space.topics.results, 0)
    async with space.client() as client:
        assert client._results_reader.pinned == {0: 0}
        await write(space.bootstrap, tp.topic, *(answer(f"gone-{n}") for n in range(5)))
        await write(space.bootstrap, tp.topic, answer("step-1"))  # at offset 5
        for n in range(2 * OTHERS):
            await write(space.bootstrap, tp.topic, answer(f"other-{n}"))
        await answered(client, space.bootstrap, tp.topic, "last")
        assert client.results_for("step-1") == []  # let go of with the others'
        await delete_before(space.bootstrap, tp, 5)
        found = await client.result("step-1", WAIT_S, stream_id=TABLE)
        assert found.command_id == "step-1"


async def test_an_answer_the_reader_keeps_does_not_wait_for_the_look_back(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A look-back from a long run's start may read for longer than the answer takes to come:
    the answer is returned as the reader keeps it (before: after the look-back, or never
    within the timeout)."""
    space: KafkaSpace = await kafka_space(partitions=1)
    async with space.client() as client:
        looking, never = asyncio.Event(), asyncio.Event()

        async def reading_for_long(command_id: str, stream_id: str, since: Any) -> None:
            looking.set()
            await never.wait()

        monkeypatch.setattr(client, "_look_back", reading_for_long)
        waiting = asyncio.ensure_future(client.result("step-2", WAIT_S, stream_id=TABLE))
        await looking.wait()
        await write(space.bootstrap, space.topics.results, answer("step-2"))
        assert (await waiting).command_id == "step-2"


async def test_a_command_sent_again_keeps_its_answers_while_its_answer_is_awaited(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``execute`` of a command sent again waits for one answer more than it has: its first
    answer is kept meanwhile, whatever else comes (review: it was the oldest kept, let go of
    by the next own answer, and the wait for a second one never ended)."""
    _bound(monkeypatch, "KEEP_RESULTS", 2)
    space: KafkaSpace = await kafka_space(partitions=1)
    results = space.topics.results
    opening = cmd.OpenTable(variant="mini-h17")
    async with space.client() as client:

        async def sent_and_answered(command_id: str) -> None:
            await client.send(TABLE, opening, command_id=command_id)
            await answered(client, space.bootstrap, results, command_id)

        await sent_and_answered("x")
        await sent_and_answered("y")  # as many as it keeps
        again = asyncio.ensure_future(client.execute(TABLE, opening, command_id="x"))
        # (sent again; its wait for a second answer begun)
        await until(lambda: len(client._sendings.sent["x"]) >= 2, WAIT_S)
        await sent_and_answered("z")  # before: let go of x's first answer
        await write(space.bootstrap, results, answer("x"))
        assert (await again).command_id == "x"
        assert len(client.results_for("x")) == 2


async def test_an_answer_named_without_its_sent_at_then_with_it_is_looked_back_for_again(
    kafka_space: Any,
) -> None:
    """Asked without its ``sent_at``, an answer is looked for from the reader's start only;
    asked again with it, from before that (review: the stream was noted as looked back for,
    and the second call never read before the start)."""
    space: KafkaSpace = await kafka_space(partitions=1)
    sent_at = datetime.now(UTC) - timedelta(seconds=5)
    await write(space.bootstrap, space.topics.results, answer("before-start"))
    async with space.client() as client:
        with pytest.raises(TimeoutError):  # before the reader's start: not read
            await client.result("before-start", 1.0, stream_id=TABLE)
        found = await client.result("before-start", WAIT_S, stream_id=TABLE, sent_at=sent_at)
        assert found.command_id == "before-start"


async def test_an_answer_looked_back_for_and_let_go_of_is_looked_back_for_again(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A handler's step found by a look-back, then let go of with this client's own answers:
    asked again, it is looked back for again (review: it was still noted as looked back for,
    and the wait ran out)."""
    _bound(monkeypatch, "KEEP_OTHERS_RESULTS", OTHERS)
    _bound(monkeypatch, "KEEP_RESULTS", 2)
    space: KafkaSpace = await kafka_space(partitions=1)
    results = space.topics.results
    async with space.client() as client:
        await write(space.bootstrap, results, answer("step-1"))
        for n in range(2 * OTHERS):
            await write(space.bootstrap, results, answer(f"other-{n}"))
        await answered(client, space.bootstrap, results, "last")
        assert (await client.result("step-1", WAIT_S, stream_id=TABLE)).command_id == "step-1"
        for command_id in ("a", "b"):  # the client's own answers (not asked for)
            await client.send(TABLE, cmd.OpenTable(variant="mini-h17"), command_id=command_id)
            await write(space.bootstrap, results, answer(command_id))
        await answered(client, space.bootstrap, results, "c")  # (read after a and b)
        assert client.results_for("step-1") == []  # let go of: it keeps two
        again = await client.result("step-1", WAIT_S, stream_id=TABLE)
        assert again.command_id == "step-1"


async def test_execute_keeps_the_answers_it_counted_while_the_broker_takes_its_command(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``execute`` of a command sent again counts its answers, then sends: its own answers
    coming in before the broker's ack do not let go of those it counted (review: its wait for
    one answer more then never ended)."""
    _bound(monkeypatch, "KEEP_RESULTS", 2)
    space: KafkaSpace = await kafka_space(partitions=1)
    results = space.topics.results
    opening = cmd.OpenTable(variant="mini-h17")
    async with space.client() as client:
        await client.send(TABLE, opening, command_id="x")
        await answered(client, space.bootstrap, results, "x")
        release, held = asyncio.Event(), asyncio.Event()
        send_record = client._send_record

        async def slow_ack(key: Any, value: bytes, headers: Any) -> Any:
            if b'"command_id":"x"' in value:  # x sent again: its ack held back
                held.set()
                await release.wait()
            return await send_record(key, value, headers)

        monkeypatch.setattr(client, "_send_record", slow_ack)
        again = asyncio.ensure_future(client.execute(TABLE, opening, command_id="x"))
        await held.wait()
        await answered(client, space.bootstrap, results, "y", "z")  # as many as it keeps
        release.set()
        # (its wait begun once the broker took it)
        await until(lambda: "x" in client._book.waiters, WAIT_S)
        await write(space.bootstrap, results, answer("x"))
        assert (await again).command_id == "x"
        assert len(client.results_for("x")) == 2


class StopWatched(ScopedConsumer):
    """The client's consumer, whose stop says it began (``stopping``) and goes on once
    ``stop_now`` is set."""

    stopping: asyncio.Event
    stop_now: asyncio.Event

    async def stop(self) -> None:
        StopWatched.stopping.set()
        await StopWatched.stop_now.wait()
        await super().stop()


async def left_running(before: set[asyncio.Task[Any]]) -> list[str]:
    """The tasks started since ``before`` still running once the ones ending have ended."""
    started = asyncio.all_tasks() - before - {asyncio.current_task()}
    if started:
        await asyncio.wait(started, timeout=5)
    return sorted(getattr(t.get_coro(), "__qualname__", "?") for t in started if not t.done())


async def test_a_look_back_given_up_once_it_has_read_stops_its_consumer(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader's answer gives up the look-back (``_looking_back`` cancels it), whatever it
    is doing. Given up once it had read, before its consumer's stop, that consumer's fetcher,
    coordinator and connections ran on for good (CI, after ``blackjack play``'s buy-in looked
    back: "tasks left running on the session's event loop after the module: Fetcher...,
    AIOKafkaClient..., NoGroupCoordinator...")."""
    space: KafkaSpace = await kafka_space(partitions=1)
    async with space.client() as client:
        await answered(client, space.bootstrap, space.topics.results, "first")
        read_back, read = client._read_back, asyncio.Event()

        async def read_back_and_say(*args: Any) -> list[Any]:
            found = await read_back(*args)
            read.set()
            return found

        monkeypatch.setattr(client, "_read_back", read_back_and_say)
        before = asyncio.all_tasks()
        # at a stream of the partition with nothing found: its stop is next, nothing between
        looking = asyncio.ensure_future(client._look_back("step-1", "elsewhere", None))
        await read.wait()
        looking.cancel()
        with pytest.raises(asyncio.CancelledError):
            await looking
        assert await left_running(before) == []


async def test_an_answer_in_hand_is_not_held_up_by_the_look_back_s_stop(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The reader's answer gives up the look-back, whose consumer then stops: ``result``
    waited for that stop (seconds, closing a TLS connection to a broker gone silent), and its
    timeout running out meanwhile raised TimeoutError for an answer it had. The look-back
    stops on its own, and ``stop()`` waits for it: nothing is left running."""
    space: KafkaSpace = await kafka_space(partitions=1)
    before = asyncio.all_tasks()
    async with space.client() as client:
        await answered(client, space.bootstrap, space.topics.results, "first")
        StopWatched.stopping, StopWatched.stop_now = asyncio.Event(), asyncio.Event()
        monkeypatch.setattr(client_module, "ScopedConsumer", StopWatched)

        async def read_back_until_given_up(*args: Any) -> list[Any]:
            await asyncio.Event().wait()
            raise AssertionError("never")

        monkeypatch.setattr(client, "_read_back", read_back_until_given_up)
        asking = asyncio.ensure_future(client.result("step-1", WAIT_S, stream_id=TABLE))
        await write(space.bootstrap, space.topics.results, answer("step-1"))
        await StopWatched.stopping.wait()  # the reader has it: the look-back is given up
        await asyncio.wait({asking}, timeout=WAIT_S)
        assert asking.done() and (await asking).command_id == "step-1"
        assert client._look_backs  # still stopping
        StopWatched.stop_now.set()
    assert not client._look_backs
    assert await left_running(before) == []
