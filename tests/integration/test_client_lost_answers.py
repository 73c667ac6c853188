"""Answers ``BlackjackClient`` used to lose without a word, on the real broker.

* The results reader's position out of range (retention or ``delete_records`` deleted the
  records it was at, or the topic was recreated): aiokafka's ``auto_offset_reset`` "latest"
  jumped to the partition's end, over the answers between, and a caller waiting for one of
  them timed out. Now the reader moves to the earliest record still there (or, past the
  partition's end, to a minute before the last answer it read there), logs it and counts it.
* A results topic deleted and made again, already longer than the reader's positions: no
  error to see, and the reader read it on from those positions, over the answers before them;
  a topic made again with fewer partitions had the ones gone fetched for good. Now the reader
  knows the topic by its id (``bus.topic_ids``), reads a new one from its beginning in the
  partitions it has, and keeps its answers apart from the old one's.
* An answer deleted unread (by retention, or with its results topic deleted and made again)
  made its caller wait out its timeout. Now, once the reader has read the answer to a later
  command of that partition, the wait fails at once with ``AnswerLost``, and a resend under
  the same command id gets the original answer.
* A partition added to the results topic after ``start()`` was never read until a restart:
  its answers timed out. Now the reader refreshes the topic's metadata
  (``RESULTS_METADATA_MAX_AGE_MS``) and reads a new partition from its beginning.
* An answer the client cannot read as a ``CommandResult`` (a newer service's status) was
  logged by the reader and its caller timed out; the look-back skipped it in silence, and
  skipped too a ``malformed`` answer filed under the key its message came with when that is
  not the stream's. Now ``result()`` raises ``UnreadableResult`` for it at once, the
  look-back finds both, and a record that names no command id is logged and counted.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic, RecordsToDelete
from prometheus_client import REGISTRY

from blackjack.bus.clients import ScopedConsumer
from blackjack.bus.headers import command_headers
from blackjack.bus.topic_ids import TopicIdsUnsupported, TopicState, topic_state
from blackjack.bus.topics import delete_topics, ensure_topics, partition_for
from blackjack.client import AnswerLost, BlackjackClient, UnreadableResult
from blackjack.client import client as client_module
from blackjack.client import reader as reader_module
from blackjack.command_handler.service import CommandHandler
from blackjack.domain import commands as cmd
from blackjack.messages.envelope import CommandEnvelope, CommandResult
from tests.integration.conftest import WAIT_S, KafkaSpace, every_broker_s, running_handler

pytestmark = [pytest.mark.integration, pytest.mark.also_on_three_nodes]

TABLE = "t-lost"


def answer(command_id: str, status: str = "accepted", stream_id: str = TABLE) -> bytes:
    """A result as a handler writes one; ``status`` one this release may not know."""
    return (
        f'{{"command_id":"{command_id}","stream_id":"{stream_id}","status":"{status}",'
        f'"handled_at":"{datetime.now(UTC).isoformat()}"}}'
    ).encode()


async def write(
    bootstrap: str, topic: str, *values: bytes, key: bytes = TABLE.encode(), partition: int = 0
) -> None:
    """Records on the results topic, in order (read_committed sees them), each in every
    replica in sync when it returns (``acks="all"``): below the high watermark, so
    ``delete_records`` may delete up to after it (with aiokafka's default, the leader's write
    alone, a topic on three brokers refused: OffsetOutOfRangeError)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
    await producer.start()
    try:
        for value in values:
            await producer.send_and_wait(topic, value, key=key, partition=partition)
    finally:
        await producer.stop()


async def recreate(bootstrap: str, topic: str, partitions: int) -> None:
    """Delete ``topic`` and make it again, and return once the broker serves the new one: its
    metadata names the new id and its logs are the new, empty ones. A broker applies the
    controller's metadata after the admin's call returns, and a record written meanwhile goes
    to the old log (then deleted with it); there is no event to await, so the broker is asked
    again until it says so."""
    looking = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await looking.start()
    try:
        was = await topic_state(looking._client, topic)
        assert was is not None
        async with admin_of(bootstrap) as admin:
            await admin.delete_topics([topic])
            await admin.create_topics([NewTopic(topic, partitions, 1)])
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        async with asyncio.timeout(WAIT_S):
            while True:
                states = (await every_broker_s(looking, topic)).values()
                if all(s is not None and s.topic_id not in (None, was.topic_id) for s in states):
                    ends = await looking.end_offsets(tps)
                    if set(ends.values()) == {0}:
                        return
                await asyncio.sleep(0.05)  # the broker's metadata, applied asynchronously
    finally:
        await looking.stop()


async def partitions_everywhere(bootstrap: str, topic: str, partitions: int) -> None:
    """Return once every broker has ``topic`` with ``partitions`` partitions."""
    looking = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await looking.start()
    try:
        async with asyncio.timeout(WAIT_S):
            while not all(
                s is not None and s.partitions == frozenset(range(partitions))
                for s in (await every_broker_s(looking, topic)).values()
            ):
                await asyncio.sleep(0.05)  # the brokers' metadata, applied asynchronously
    finally:
        await looking.stop()


@asynccontextmanager
async def admin_of(bootstrap: str) -> AsyncIterator[AIOKafkaAdminClient]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        yield admin
    finally:
        await admin.close()


async def delete_before(bootstrap: str, tp: TopicPartition, offset: int) -> None:
    """``delete_records``: the records of ``tp`` before ``offset`` are gone (retention)."""
    async with admin_of(bootstrap) as admin:
        await admin.delete_records({tp: RecordsToDelete(before_offset=offset)})


async def answered(
    client: BlackjackClient, bootstrap: str, topic: str, *command_ids: str, partition: int = 0
) -> list[CommandResult]:
    """Answer each command id on the results topic's ``partition``, in order, and await each
    answer before the next is written: the reader's position is past them all."""
    results = []
    for command_id in command_ids:
        waiting = asyncio.ensure_future(client.result(command_id, WAIT_S))
        await write(bootstrap, topic, answer(command_id), partition=partition)
        results.append(await waiting)
    return results


def hold(client: BlackjackClient, tp: TopicPartition) -> None:
    """The results reader reads nothing more of ``tp`` until it is resumed: its consumer's
    ``pause`` (aiokafka's public API: ``getmany`` returns no record of a paused partition until
    ``resume``; what a fetch in flight brings meanwhile is dropped, and the position, moved
    only by records returned, stays where it is)."""
    consumer = client._results_reader.consumer
    assert consumer is not None
    consumer.pause(tp)


def release(client: BlackjackClient, tp: TopicPartition) -> None:
    """The results reader reads ``tp`` again (``hold`` undone)."""
    consumer = client._results_reader.consumer
    assert consumer is not None
    consumer.resume(tp)


async def read_after_recreating(
    client: BlackjackClient, bootstrap: str, tp: TopicPartition, *command_ids: str
) -> str:
    """The reader held, ``tp``'s topic deleted and made again with answers to
    ``command_ids``: the command id of the answer the first of them gets once it is let go."""
    hold(client, tp)
    await recreate(bootstrap, tp.topic, 1)
    await write(bootstrap, tp.topic, *(answer(command_id) for command_id in command_ids))
    waiting = asyncio.ensure_future(client.result(command_ids[0], WAIT_S))
    release(client, tp)
    return (await waiting).command_id


def counted(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


# ---- 1. a position out of range -----------------------------------------------------------------


async def test_answers_after_records_deleted_unread_are_read_and_the_loss_is_counted(
    kafka_space: Any,
) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)
    tp = TopicPartition(space.topics.results, 0)
    client = space.client()
    labels = {"client_id": client.client_id}
    resets = counted("blackjack_client_results_resets_total", **labels, cause="deleted")
    async with client:
        hold(client, tp)
        start = client._results_reader.pinned[0]
        # the reader is at `start`; the record there is deleted before it reads it
        await write(space.bootstrap, tp.topic, answer("deleted-1"), answer("kept-1"))
        await delete_before(space.bootstrap, tp, start + 1)
        waiting = asyncio.ensure_future(client.result("kept-1", WAIT_S))
        release(client, tp)
        # before: the reader jumped to the end, over kept-1, and the wait timed out
        assert (await waiting).command_id == "kept-1"
        assert client.health.healthy
        await answered(client, space.bootstrap, tp.topic, "later-1")
    assert client.results_for("deleted-1") == []
    assert counted("blackjack_client_results_resets_total", **labels, cause="deleted") == (
        resets + 1
    )
    assert counted("blackjack_client_results_deleted_unread_total", **labels) == 1


async def test_a_results_topic_recreated_under_the_reader_is_read_from_its_start(
    kafka_space: Any,
) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)
    tp = TopicPartition(space.topics.results, 0)
    client = space.client()
    labels = {"client_id": client.client_id, "cause": "recreated"}
    async with client:
        # the reader's position: 3 on
        await answered(client, space.bootstrap, tp.topic, "old-1", "old-2", "old-3")
        # the new topic ends before the reader's position
        # before: the reader jumped to the new topic's end, over new-1, and the wait timed out
        assert await read_after_recreating(client, space.bootstrap, tp, "new-1") == "new-1"
        assert (
            client._results_reader.pinned[0] == 0
        )  # a look-back reads no further than the reader's start
    assert counted("blackjack_client_results_resets_total", **labels) == 1


async def test_a_results_topic_recreated_longer_than_the_readers_position_is_read_from_its_start(
    kafka_space: Any,
) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)
    tp = TopicPartition(space.topics.results, 0)
    client = space.client()
    labels = {"client_id": client.client_id, "cause": "recreated"}
    async with client:
        # the reader's position: 2 on
        await answered(client, space.bootstrap, tp.topic, "was-1", "was-2")
        hold(client, tp)
        await recreate(space.bootstrap, tp.topic, 1)
        # the new topic is longer than the reader's position: no offset out of range; its
        # first record answers was-1 again (a resend), at the offset of was-1's first answer
        await write(
            space.bootstrap,
            tp.topic,
            answer("was-1"),
            answer("anew-1"),
            answer("anew-2"),
            answer("anew-3"),
        )
        waiting = asyncio.ensure_future(client.result("anew-1", WAIT_S))
        again = asyncio.ensure_future(client.result("was-1", WAIT_S, skip=1))
        later = [asyncio.ensure_future(client.result(c, WAIT_S)) for c in ("anew-2", "anew-3")]
        release(client, tp)
        # before: the reader read on from offset 2 (anew-2, anew-3): the waits timed out
        assert (await waiting).command_id == "anew-1"
        assert (await again).command_id == "was-1"  # not taken for the old topic's answer
        assert len(client.results_for("was-1")) == 2
        assert client._results_reader.pinned[0] == 0
        assert [(await wait).command_id for wait in later] == ["anew-2", "anew-3"]
        await answered(client, space.bootstrap, tp.topic, "anew-4")
        # read before the reader knew of the new topic, then again from its beginning: once
        assert [len(client.results_for(c)) for c in ("anew-2", "anew-3")] == [1, 1]
    assert counted("blackjack_client_results_resets_total", **labels) == 1


async def test_a_results_topic_the_broker_asked_first_does_not_know_yet_is_known_by_its_id(
    bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # On a cluster, a topic just created reaches each broker's metadata in its own time: the
    # client's start asked one that did not have the results topic yet, and the reader never
    # learnt its id (4 clients of 8 on cluster.sh's three nodes), nor noticed it made again.
    # Here the one broker is asked before the topic exists, and it is made right after.
    space = KafkaSpace(bootstrap, f"t{uuid.uuid4().hex[:10]}.", 1)
    first: list[TopicState | None] = []

    class Early(ScopedConsumer):
        async def topic_state(self, topic: str, node_id: int | None = None) -> Any:
            state = await super().topic_state(topic, node_id)
            if not first:
                first.append(state)
                await ensure_topics(space.settings, space.topics)
            return state

    monkeypatch.setattr(client_module, "ScopedConsumer", Early)
    tp = TopicPartition(space.topics.results, 0)
    client = space.client()
    labels = {"client_id": client.client_id, "cause": "recreated"}
    try:
        async with client:
            assert first == [None]  # asked before the topic existed
            made = await any_topic_state(bootstrap, tp.topic)
            # before: None, and a topic made again was never told by its id
            assert made is not None and client._results_reader.topic_id == made.topic_id
            await answered(client, space.bootstrap, tp.topic, "early-1", "early-2")
            late = [f"late-{n}" for n in range(3)]
            assert await read_after_recreating(client, space.bootstrap, tp, *late) == "late-0"
        assert counted("blackjack_client_results_resets_total", **labels) == 1
    finally:
        await delete_topics(space.settings, space.topics)


async def any_topic_state(bootstrap: str, topic: str) -> TopicState | None:
    """``topic`` as a broker of ``bootstrap`` has it now."""
    looking = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await looking.start()
    try:
        return await topic_state(looking._client, topic)
    finally:
        await looking.stop()


async def test_a_recreated_results_topic_is_told_within_the_check_interval_of_an_idle_reader(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a quarter of a second between checks of the topic's id: the reader's fetch waits no
    # longer than the next check (before: a fetch with no record waited a whole second, and the
    # check came only after it)
    monkeypatch.setattr(reader_module, "RESULTS_TOPIC_CHECK_S", 0.25)

    checked = asyncio.Event()
    waits: list[int] = []

    class Brief(ScopedConsumer):
        """The broker holds a fetch at the end of a partition 0.1 s (aiokafka's default 0.5 s;
        the new topic's first fetch waits for the one in flight): the check's delay is timed.
        ``checked`` at each check of the topic's id."""

        def __init__(self, *topics: str, **options: Any) -> None:
            super().__init__(*topics, **options, fetch_max_wait_ms=100)

        async def topic_state(self, topic: str, node_id: int | None = None) -> Any:
            state = await super().topic_state(topic, node_id)
            checked.set()
            return state

        async def getmany(self, *partitions: TopicPartition, **options: Any) -> Any:
            waits.append(options.get("timeout_ms", 0))
            return await super().getmany(*partitions, **options)

    monkeypatch.setattr(client_module, "ScopedConsumer", Brief)
    space: KafkaSpace = await kafka_space(partitions=1)
    tp = TopicPartition(space.topics.results, 0)
    async with space.client() as client:
        await answered(client, space.bootstrap, tp.topic, "idle-1", "idle-2")
        checked.clear()
        await asyncio.wait_for(checked.wait(), WAIT_S)  # made again just after a check
        # every fetch from here on (a check may find the new topic before the release: the
        # reader's assign() of it resumes the partition, and fresh-0 is read before the wait;
        # on three brokers the topic takes long enough to be made again everywhere)
        waits.clear()
        # longer than the reader's position (2): nothing out of range, the id alone tells
        fresh = [f"fresh-{n}" for n in range(4)]
        assert await read_after_recreating(client, space.bootstrap, tp, *fresh) == "fresh-0"
        # no fetch waited past the next check (before: a second, the fetch after fresh-2,
        # fresh-3 waited it out, then the check); a bound on the clock instead would fail
        # on a loaded machine, not on the code
        assert waits and max(waits) <= 250, waits


async def test_a_results_topic_recreated_with_fewer_partitions_is_read_in_those_it_has(
    kafka_space: Any,
) -> None:
    space: KafkaSpace = await kafka_space(partitions=2)
    topic = space.topics.results
    client = space.client()
    labels = {"client_id": client.client_id}
    async with client:
        for partition in (0, 1):  # the reader's position: 1 on, in both
            await answered(client, space.bootstrap, topic, f"two-{partition}", partition=partition)
        for partition in (0, 1):
            hold(client, TopicPartition(topic, partition))
        await recreate(space.bootstrap, topic, 1)
        await write(space.bootstrap, topic, answer("one-1"), answer("one-2"))
        waiting = asyncio.ensure_future(client.result("one-1", WAIT_S))
        release(client, TopicPartition(topic, 0))
        assert (await waiting).command_id == "one-1"
        # before: partition 1 was fetched for good (its fetches failed, unseen)
        assert client._results_reader.consumer is not None
        assert client._results_reader.consumer.assignment() == {TopicPartition(topic, 0)}
        assert set(client._results_reader.pinned) == {0}
        assert client.health.healthy
    assert (
        counted("blackjack_client_results_resets_total", **labels, cause="partition_removed") == 1
    )


async def test_without_topic_ids_a_partition_gone_is_no_longer_read(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    space: KafkaSpace = await kafka_space(partitions=2)
    topic = space.topics.results
    left = asyncio.Event()

    class NoIds(ScopedConsumer):
        """A consumer of a broker older than Kafka 2.8: no topic ids; ``left`` once the reader
        reads partition 0 alone."""

        async def topic_state(self, topic: str, node_id: int | None = None) -> Any:
            raise TopicIdsUnsupported("Support for MetadataRequest v10 has not yet been added")

        def assign(self, partitions: Any) -> None:
            super().assign(partitions)
            if set(partitions) == {TopicPartition(topic, 0)}:
                left.set()

    monkeypatch.setattr(client_module, "ScopedConsumer", NoIds)
    monkeypatch.setattr(client_module, "RESULTS_METADATA_MAX_AGE_MS", 500)
    client = space.client()
    labels = {"client_id": client.client_id, "cause": "partition_removed"}
    async with client:
        await recreate(space.bootstrap, topic, 1)
        # before: partition 1 was fetched for good, unseen
        await asyncio.wait_for(left.wait(), WAIT_S)
        assert set(client._results_reader.pinned) == {0}
        await answered(client, space.bootstrap, topic, "one-left-1")
    assert counted("blackjack_client_results_resets_total", **labels) == 1


# ---- 2. a partition added -----------------------------------------------------------------------


async def test_a_results_partition_added_after_start_is_read_from_its_beginning(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)
    shown = asyncio.Event()

    class Hiding(ScopedConsumer):
        """Its metadata shows the results topic's partition 1 only once ``shown``: the
        answer there is written before the reader can know of the partition."""

        def partitions_for_topic(self, topic: str) -> Any:
            known = super().partitions_for_topic(topic)
            if known is None or shown.is_set():
                return known
            return {p for p in known if p < 1}

    monkeypatch.setattr(client_module, "ScopedConsumer", Hiding)
    monkeypatch.setattr(client_module, "RESULTS_METADATA_MAX_AGE_MS", 500)
    async with space.client() as client:
        assert set(client._results_reader.pinned) == {0}
        async with admin_of(space.bootstrap) as admin:
            await admin.create_partitions({space.topics.results: NewPartitions(2)})
        await partitions_everywhere(space.bootstrap, space.topics.results, 2)
        await write(space.bootstrap, space.topics.results, answer("on-new-1"), partition=1)
        waiting = asyncio.ensure_future(client.result("on-new-1", WAIT_S))
        shown.set()
        started = time.monotonic()
        # before: the reader never read partition 1 (until a restart): the wait timed out
        assert (await waiting).command_id == "on-new-1"
        assert time.monotonic() - started < WAIT_S / 2
        await answered(client, space.bootstrap, space.topics.results, "on-new-2", partition=1)
        # partition 0 read on from where it stood
        await answered(client, space.bootstrap, space.topics.results, "on-old-1", partition=0)
        assert client._results_reader.pinned == {0: client._results_reader.pinned[0], 1: 0}


# ---- 3. answers the client cannot read ----------------------------------------------------------


async def test_an_answer_the_client_cannot_read_fails_its_wait_typed_at_once(
    kafka_space: Any,
) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)
    client = space.client()
    labels = {"client_id": client.client_id}
    nameless = counted("blackjack_client_unreadable_results_total", **labels, kind="nameless")
    async with client:
        waiting = asyncio.ensure_future(client.result("newer-1", WAIT_S, stream_id=TABLE))
        started = time.monotonic()
        await write(space.bootstrap, space.topics.results, answer("newer-1", status="deferred"))
        # before: logged, and the wait ran out (TimeoutError)
        with pytest.raises(UnreadableResult) as raised:
            await waiting
        assert time.monotonic() - started < WAIT_S / 2
        assert (raised.value.command_id, raised.value.stream_id) == ("newer-1", TABLE)
        assert raised.value.partition == 0 and "status" in raised.value.error
        with pytest.raises(UnreadableResult):  # and for a later call, from what was kept
            await client.result("newer-1", WAIT_S)
        assert client.results_for("newer-1") == []
        # a record naming no command id: no caller to tell, logged and counted
        after = asyncio.ensure_future(client.result("after-1", WAIT_S))
        await write(space.bootstrap, space.topics.results, b"not JSON", answer("after-1"))
        assert (await after).status == "accepted"
    assert counted("blackjack_client_unreadable_results_total", **labels, kind="named") == 1
    assert counted("blackjack_client_unreadable_results_total", **labels, kind="nameless") == (
        nameless + 1
    )


async def test_the_look_back_raises_an_answer_it_cannot_read_typed(kafka_space: Any) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)
    sent_at = datetime.now(UTC)
    await write(space.bootstrap, space.topics.results, answer("newer-2", status="deferred"))
    async with space.client() as client:  # a platform's process restarted after the answer
        started = time.monotonic()
        # before: the look-back skipped it without a word, and the wait ran out
        with pytest.raises(UnreadableResult) as raised:
            await client.result("newer-2", WAIT_S, stream_id=TABLE, sent_at=sent_at)
        assert time.monotonic() - started < WAIT_S / 2
        assert raised.value.command_id == "newer-2"


async def test_the_look_back_asks_the_topic_s_id_of_the_broker_it_read_from(
    kafka_space: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Whether the topic was made again while the look-back read it is asked of the partition's
    # leader, whose metadata is no older than the records it served; before, of any broker,
    # and on a cluster one that had not applied the new topic yet said nothing new.
    space: KafkaSpace = await kafka_space(partitions=1)
    asked: list[int | None] = []

    class Recording(ScopedConsumer):
        async def topic_state(self, topic: str, node_id: int | None = None) -> Any:
            if self._client._client_id.endswith("-look-back"):
                asked.append(node_id)
            return await super().topic_state(topic, node_id)

    monkeypatch.setattr(client_module, "ScopedConsumer", Recording)
    sent_at = datetime.now(UTC)
    await write(space.bootstrap, space.topics.results, answer("back-1"))
    async with space.client() as client:  # a platform's process restarted after the answer
        found = await client.result("back-1", WAIT_S, stream_id=TABLE, sent_at=sent_at)
    assert found.command_id == "back-1"
    leader = (await any_leaders(space.bootstrap, space.topics.results))[0]
    assert asked == [leader]  # before: [None]


async def any_leaders(bootstrap: str, topic: str) -> list[int]:
    """The leader of each partition of ``topic``, as a broker of ``bootstrap`` has them."""
    async with admin_of(bootstrap) as admin:
        (described,) = await admin.describe_topics([topic])
    return [p["leader"] for p in sorted(described["partitions"], key=lambda p: p["partition"])]


async def test_the_look_back_finds_a_malformed_answer_under_another_key(
    space: KafkaSpace, handler: CommandHandler
) -> None:
    stream = "lost-key-1"
    home = partition_for(stream, space.partitions)
    # a key that is not the stream's, on the stream's partition (the answer goes where the
    # message came in, under its key)
    key = next(
        k
        for k in (f"another-key-{n}" for n in range(1000))
        if partition_for(k, space.partitions) == home
    )
    sent_at = datetime.now(UTC)
    envelope = CommandEnvelope(
        command_id="wrong-key-1",
        stream_id=stream,
        sent_at=sent_at,
        command=cmd.OpenTable(variant="mini-h17"),
    )
    value = envelope.model_dump_json().encode()
    async with space.client() as before:
        await before.send_raw(key.encode(), value, command_headers(envelope, "/test", None))
        answered = await before.result("wrong-key-1", WAIT_S)  # the reader: any key
    assert answered.rejection is not None and answered.rejection.code == "malformed", answered
    assert answered.stream_id == stream
    async with space.client() as after:  # the platform's process, restarted
        # before: the look-back read the stream's key only, and the wait ran out
        found = await after.result("wrong-key-1", WAIT_S, stream_id=stream, sent_at=sent_at)
    assert found == answered


# ---- 4. an answer deleted unread ----------------------------------------------------------------


async def lost_once_the_next_is_answered(
    client: BlackjackClient, tp: TopicPartition, waiting: asyncio.Future[Any], second: str
) -> AnswerLost:
    """The reader let go of ``tp``: the answer to ``second`` comes, and the wait for the
    command whose answer went unread fails with ``AnswerLost`` long before its timeout."""
    started = time.monotonic()
    release(client, tp)
    assert (await client.result(second, WAIT_S)).command_id == second
    with pytest.raises(TimeoutError) as raised:
        await waiting
    assert time.monotonic() - started < WAIT_S / 2
    lost = raised.value
    assert isinstance(lost, AnswerLost), lost
    return lost


async def test_an_answer_deleted_unread_fails_its_wait_at_once_and_a_resend_gets_it(
    space: KafkaSpace, handler: CommandHandler
) -> None:
    stream = "lost-unread-1"
    tp = TopicPartition(space.topics.results, partition_for(stream, space.partitions))
    async with space.client() as client:
        hold(client, tp)  # the reader reads nothing of the stream's partition
        sent_at = datetime.now(UTC)
        first = await client.send(stream, cmd.OpenTable(variant="mini-h17"), sent_at=sent_at)
        async with space.client() as other:  # the handler's answer, on the topic
            answered = await other.result(first, WAIT_S, stream_id=stream, sent_at=sent_at)
        assert answered.status == "accepted", answered
        # retention takes it before the client read it
        reader = ScopedConsumer(bootstrap_servers=space.bootstrap)
        await reader.start()
        try:
            end = (await reader.end_offsets([tp]))[tp]
        finally:
            await reader.stop()
        await delete_before(space.bootstrap, tp, end)
        second = await client.send(stream, cmd.OpenTable(variant="mini-h17"))  # answered after
        waiting = asyncio.ensure_future(client.result(first, WAIT_S))
        # before: the wait ran out (TimeoutError after WAIT_S)
        lost = await lost_once_the_next_is_answered(client, tp, waiting, second)
        assert (lost.command_id, lost.stream_id, lost.partition) == (first, stream, tp.partition)
        assert f"same command_id {first}" in str(lost)
        with pytest.raises(AnswerLost):  # a later wait is told at once too
            await client.result(first, WAIT_S)
        # as it says: sent again under the same id, the handler answers with the original
        again = await client.execute(
            stream, cmd.OpenTable(variant="mini-h17"), command_id=first, sent_at=sent_at
        )
        assert again == answered


async def test_an_answer_lost_with_its_recreated_results_topic_fails_its_wait_at_once(
    kafka_space: Any,
) -> None:
    # a space and a handler of its own: the module's share their results topic
    space: KafkaSpace = await kafka_space(partitions=1)
    tp = TopicPartition(space.topics.results, 0)
    stream = "lost-recreated-1"
    client = space.client()
    labels = {"client_id": client.client_id, "cause": "recreated"}
    async with running_handler(space.config()), client:
        hold(client, tp)  # the reader reads nothing of the results
        sent_at = datetime.now(UTC)
        first = await client.send(stream, cmd.OpenTable(variant="mini-h17"), sent_at=sent_at)
        waiting = asyncio.ensure_future(client.result(first, WAIT_S))
        async with space.client() as other:  # the handler's answer, on the topic
            answered_first = await other.result(first, WAIT_S, stream_id=stream, sent_at=sent_at)
        assert answered_first.status == "accepted", answered_first
        # the results topic deleted and made again: the answer to `first` goes with it, unread
        await recreate(space.bootstrap, tp.topic, 1)
        second = await client.send(stream, cmd.OpenTable(variant="mini-h17"))  # answered after
        lost = await lost_once_the_next_is_answered(client, tp, waiting, second)
        assert (lost.command_id, lost.stream_id, lost.partition) == (first, stream, 0)
        assert client.results_for(first) == []  # no answer taken for it
        with pytest.raises(AnswerLost):  # a later wait is told at once too
            await client.result(first, WAIT_S)
        # sent again under the same id, the handler answers with the original
        again = await client.execute(
            stream, cmd.OpenTable(variant="mini-h17"), command_id=first, sent_at=sent_at
        )
        assert again == answered_first
    assert counted("blackjack_client_results_resets_total", **labels) == 1
