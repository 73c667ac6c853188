"""The handler's loop runs the transactions of one fetch's partitions concurrently; one that
fails still lets the others end before the loop stops, and a stop that cannot wait for them
aborts them rather than leaving them open. The real loop, with Kafka clients faked (the real
broker's behaviour is covered by tests/integration)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.errors import (
    IllegalOperation,
    KafkaConnectionError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    NotEnoughReplicasError,
    ProducerFenced,
    UnknownTopicOrPartitionError,
)
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from blackjack.bus.topics import RECORD_MAX_BYTES
from blackjack.command_handler import takeover, ticker
from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.partitions import _Partition, ignore_unread_fences
from blackjack.command_handler.service import CommandHandler
from blackjack.command_handler.snapshots import SnapshotCodec
from blackjack.command_handler.spill import SpilledStreams
from blackjack.command_handler.streams import PartitionStore, Stream
from blackjack.command_handler.transactions import receipt_time
from blackjack.domain.state import INITIAL_STATE
from blackjack.messages.sealing import ShoeSeal
from blackjack.observability.roles import KAFKA_ANSWERED

TOPIC = "unit.blackjack.commands"


class FakeProducer:
    """A transactional producer whose commit waits for ``release``."""

    def __init__(self) -> None:
        self.state = "idle"
        self.release = asyncio.Event()
        self.committing = asyncio.Event()
        self.committed = asyncio.Event()

    async def begin_transaction(self) -> None:
        self.state = "open"

    async def send(self, topic: str, value: bytes, **_: Any) -> asyncio.Future[Any]:
        sent: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        sent.set_result(type("Metadata", (), {"offset": 0})())
        return sent

    async def send_offsets_to_transaction(self, offsets: Any, group_id: str) -> None:
        pass

    async def commit_transaction(self) -> None:
        self.committing.set()
        await self.release.wait()
        self.state = "committed"
        self.committed.set()

    async def abort_transaction(self) -> None:
        self.state = "aborted"

    async def stop(self) -> None:
        pass


class FakeConsumer:
    """Hands out one fetch, then nothing until the loop stops."""

    def __init__(self, fetch: dict[TopicPartition, list[ConsumerRecord[bytes, bytes]]]) -> None:
        self.fetches = [fetch]
        self.nothing_more = asyncio.Event()

    async def getmany(self, timeout_ms: int, max_records: int) -> dict[Any, Any]:
        if self.fetches:
            return self.fetches.pop()
        with contextlib.suppress(TimeoutError):  # a poll that found nothing
            await asyncio.wait_for(self.nothing_more.wait(), timeout_ms / 1000)
        return {}

    def pause(self, *partitions: TopicPartition) -> None:
        pass

    async def stop(self) -> None:
        pass


def running(partitions: int) -> tuple[CommandHandler, list[FakeProducer]]:
    """A handler owning ``partitions`` ready partitions, each fetched one unreadable command
    (answered ``malformed``: a result record in the transaction), its loop started."""
    handler = CommandHandler(HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g"))
    producers = [FakeProducer() for _ in range(partitions)]
    fetch = {}
    for number, producer in enumerate(producers):
        tp = TopicPartition(TOPIC, number)
        record = ConsumerRecord(TOPIC, number, 0, 0, 0, b"t", b"not json", None, 0, 8, [])
        fetch[tp] = [record]
        handler._partitions[number] = _Partition(
            number, tp, status="ready", store=PartitionStore(number), producer=producer
        )
    handler._consumer = FakeConsumer(fetch)
    handler._tasks = [asyncio.create_task(handler._guard(handler._consume()))]
    return handler, producers


async def test_the_partitions_of_one_fetch_commit_at_the_same_time() -> None:
    handler, (first, second) = running(2)
    # Both commits are under way before either is allowed to finish.
    await asyncio.wait_for(asyncio.gather(first.committing.wait(), second.committing.wait()), 5)
    second.release.set()
    first.release.set()
    await handler.stop(timeout=5)
    assert (first.state, second.state) == ("committed", "committed")


async def test_a_failing_partition_lets_the_others_finish_and_every_failure_is_logged() -> None:
    handler, (first, second) = running(2)
    reported = asyncio.Event()

    def broken_report(handled: Any, records: list[ConsumerRecord[bytes, bytes]]) -> None:
        reported.set()
        raise RuntimeError(f"report of partition {records[0].partition}")

    handler._report = broken_report  # type: ignore[method-assign]
    first.release.set()
    with capture_logs() as logs:
        await asyncio.wait_for(reported.wait(), 5)  # partition 0 committed, then failed
        for _ in range(200):
            await asyncio.sleep(0)  # let the loop run: it must still wait for partition 1
        assert not handler._tasks[0].done() and second.state == "open"
        second.release.set()
        await asyncio.wait_for(handler.join(), 5)
    assert (first.state, second.state) == ("committed", "committed")
    assert isinstance(handler.failure, RuntimeError)
    assert str(handler.failure) == "report of partition 0"
    [also] = [entry for entry in logs if entry["event"] == "partition transaction failed"]
    assert str(also["exc_info"]) == "report of partition 1"
    await handler.stop(timeout=5)


async def test_a_stop_that_cannot_wait_aborts_the_transactions_in_progress() -> None:
    handler, producers = running(3)
    await asyncio.wait_for(asyncio.gather(*(p.committing.wait() for p in producers)), 5)
    await handler.stop(timeout=0.05)  # the commits never finish
    assert [p.state for p in producers] == ["aborted"] * 3


async def test_partitions_are_taken_over_one_per_poll_so_the_group_keeps_the_instance() -> None:
    """A poll must come within max.poll.interval.ms or the group drops the instance: with
    several partitions to rebuild, the loop polls between two rebuilds (at once, without
    waiting for records, while more are due) instead of after all of them."""
    handler = CommandHandler(HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g"))
    steps: list[str] = []
    consumer = FakeConsumer({})
    polled = consumer.getmany

    async def poll(timeout_ms: int, max_records: int) -> dict[Any, Any]:
        steps.append(f"poll {timeout_ms}")
        if len(steps) > 8:
            handler._stopping.set()
        return await polled(0, max_records)

    async def prepare(partition: _Partition) -> None:
        steps.append(f"take {partition.number}")
        partition.status = "ready"

    consumer.getmany = poll  # type: ignore[method-assign]
    handler._consumer = consumer
    handler._prepare = prepare  # type: ignore[method-assign]
    for number in range(3):
        tp = TopicPartition(TOPIC, number)
        handler._partitions[number] = _Partition(number, tp, status="pending")
    await asyncio.wait_for(handler._consume(), 5)
    assert steps[:6] == ["take 0", "poll 0", "take 1", "poll 0", "take 2", "poll 200"]
    assert set(steps[6:]) == {"poll 200"}


async def test_the_backlog_of_each_ready_partition_is_measured_from_the_broker() -> None:
    """The command lag histogram only sees commands that were handled: a partition whose
    commands are no longer taken shows up as a backlog that does not go down."""
    handler = CommandHandler(HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g"))
    ends = {0: 120, 1: 7, 2: 50}
    taken = {0: 20, 1: 7}

    class Measured(FakeConsumer):
        async def end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
            return {tp: ends[tp.partition] for tp in tps}

        async def position(self, tp: TopicPartition) -> int:
            return taken[tp.partition]

    handler._consumer = Measured({})
    for number, status in ((0, "ready"), (1, "ready"), (2, "pending")):
        tp = TopicPartition(TOPIC, number)
        handler._partitions[number] = _Partition(number, tp, status=status)  # type: ignore[arg-type]
    await handler._measure_backlog()
    assert backlog("0") == 100 and backlog("1") == 0 and backlog("2") is None
    handler._partitions[0].status = "failed"  # no longer served here: no stale figure
    await handler._measure_backlog()
    assert backlog("0") is None and backlog("1") == 0
    await handler.stop()  # nor once the handler has stopped (another may serve it now)
    assert backlog("1") is None


@pytest.mark.parametrize("ready", [True, False])
async def test_each_measurement_the_brokers_answer_is_the_handlers_proof_of_kafka(
    ready: bool,
) -> None:
    """While the brokers are away the partitions stay ready and the backlog keeps its last
    figure: only the time of the brokers' last answer (to the backlog's request, or to a
    metadata request when no partition is ready) shows the outage to an alert."""
    handler = CommandHandler(HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g"))
    away = False
    asked: list[str] = []

    class Brokers(FakeConsumer):
        async def end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
            asked.append("end offsets")
            if away:
                raise KafkaConnectionError("Unable to bootstrap")
            return dict.fromkeys(tps, 5)

        async def position(self, tp: TopicPartition) -> int:
            return 5

        async def topics(self) -> set[str]:
            asked.append("metadata")
            if away:
                raise KafkaConnectionError("Unable to bootstrap")
            return {TOPIC}

    handler._consumer = Brokers({})
    tp = TopicPartition(TOPIC, 0)
    handler._partitions[0] = _Partition(0, tp, status="ready" if ready else "pending")
    KAFKA_ANSWERED.clear()
    started = time.time()
    await handler._measure_backlog()
    first = answered()
    assert first is not None and started <= first <= time.time()
    away = True
    await handler._measure_backlog()
    assert answered() == first  # not moved on: its age is the outage's
    assert asked == ["end offsets"] * 2 if ready else ["metadata"] * 2
    await handler.stop()


def answered() -> float | None:
    return REGISTRY.get_sample_value(
        "blackjack_kafka_answered_timestamp_seconds", {"role": "handler"}
    )


def backlog(partition: str) -> float | None:
    return REGISTRY.get_sample_value("blackjack_command_backlog", {"partition": partition})


async def test_a_record_the_broker_never_took_aborts_the_transaction_instead_of_committing() -> (
    None
):
    """aiokafka fails a batch that outlives its delivery timeout (no partition leader during a
    broker outage) without failing the transaction: committing then would commit the consumed
    offsets without the events and results. The handler waits for every send first, aborts,
    and rebuilds the partition; its loop goes on."""
    handler, (producer,) = running(1)

    async def expired(topic: str, value: bytes, **_: Any) -> asyncio.Future[Any]:
        sent: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        sent.set_exception(LeaderNotAvailableError())
        return sent

    producer.send = expired  # type: ignore[method-assign]
    producer.release.set()
    await handler.wait_until(lambda: handler._partitions[0].status != "ready", 5)
    assert producer.state == "aborted" and not producer.committing.is_set()
    assert handler._partitions[0].status == "failed" and handler.alive
    await handler.stop(timeout=5)


def test_a_command_is_received_when_the_broker_stamped_it_never_when_its_producer_says() -> None:
    stamp = 1_767_225_600_250  # 2026-01-01T00:00:00.250Z
    by_broker = ConsumerRecord(TOPIC, 0, 0, stamp, 1, b"t", b"{}", None, 1, 2, [])
    by_producer = ConsumerRecord(TOPIC, 0, 0, stamp, 0, b"t", b"{}", None, 1, 2, [])
    assert receipt_time(by_broker) == datetime(2026, 1, 1, 0, 0, 0, 250_000, tzinfo=UTC)
    assert receipt_time(by_producer) is None  # CreateTime: the handler's clock decides


async def test_a_failed_partition_shows_failed_while_its_abort_waits_for_the_broker() -> None:
    """The abort of a failed transaction waits for the broker (gone, in an outage): the
    partition must not look ready meanwhile."""
    handler, (producer,) = running(1)
    aborting, broker_back = asyncio.Event(), asyncio.Event()

    async def expired(topic: str, value: bytes, **_: Any) -> asyncio.Future[Any]:
        sent: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        sent.set_exception(LeaderNotAvailableError())
        return sent

    async def abort() -> None:
        aborting.set()
        await broker_back.wait()
        producer.state = "aborted"

    producer.send = expired  # type: ignore[method-assign]
    producer.abort_transaction = abort  # type: ignore[method-assign]
    await asyncio.wait_for(aborting.wait(), 5)
    assert handler._partitions[0].status == "failed" and not handler.owned_partitions()
    broker_back.set()
    await handler.stop(timeout=5)


class _Unstartable:
    """A partition's producer whose start fails as ``error`` says (the broker away, or the
    partition itself unreadable)."""

    error: Exception = RuntimeError("unset")

    def __init__(self, **_: Any) -> None:
        pass

    async def start(self) -> None:
        raise self.error

    async def stop(self) -> None:
        pass


@pytest.mark.parametrize(
    ("error", "pauses", "traces"),
    [
        (KafkaConnectionError("Unable to bootstrap"), [1.0] * 6, 1),
        (KafkaTimeoutError(), [1.0] * 6, 1),
        (RuntimeError("a corrupt log"), [1.0, 2.0, 4.0, 8.0, 16.0, 30.0], 6),
    ],
    ids=["unreachable", "timed-out", "corrupt"],
)
async def test_a_takeover_failing_while_the_broker_is_away_is_retried_every_second(
    monkeypatch: pytest.MonkeyPatch, error: Exception, pauses: list[float], traces: int
) -> None:
    """Retried after a pause doubled at each failure (up to 30 s), a partition whose takeover
    failed while the broker was away waited up to that long once it was back: the outage
    drill saw tables unanswered 6.4 s after a 25 s outage. A broker away is retried every
    second, its trace logged once; a partition that cannot be read keeps doubling."""
    monkeypatch.setattr(takeover, "AIOKafkaProducer", _Unstartable)
    _Unstartable.error = error
    handler = CommandHandler(HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g"))
    handler._consumer = FakeConsumer({})
    handler._reader = FakeConsumer({})
    partition = _Partition(0, TopicPartition(TOPIC, 0))
    seen = []
    with capture_logs() as logs:
        for _ in pauses:
            before = time.monotonic()
            await handler._prepare(partition)
            seen.append(round(partition.retry_at - before))
    assert seen == pauses and partition.status == "failed"
    assert sum(1 for entry in logs if "exc_info" in entry) == traces


async def test_a_failure_after_a_long_outage_starts_its_own_doubling_and_keeps_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The review: every second of a broker away counted as a failure, so after about 17
    minutes the next real failure's pause (1 s x 2^failures) overflowed a float and killed
    the handler's loop; after five, it waited 30 s. Its pauses now start at 1 s."""
    monkeypatch.setattr(takeover, "AIOKafkaProducer", _Unstartable)
    handler = CommandHandler(HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g"))
    handler._consumer = FakeConsumer({})
    handler._reader = FakeConsumer({})
    partition = _Partition(0, TopicPartition(TOPIC, 0))
    _Unstartable.error = KafkaConnectionError("Unable to bootstrap")
    with capture_logs() as logs:
        for _ in range(1100):  # about 18 minutes of a broker away
            await handler._prepare(partition)
    assert [e["attempts"] for e in logs if "attempts" in e] == list(range(60, 1100, 60))
    _Unstartable.error = RuntimeError("the broker is back; this takeover fails otherwise")
    before = time.monotonic()
    with capture_logs():
        await handler._prepare(partition)
    assert round(partition.retry_at - before) == 1 and partition.status == "failed"
    with capture_logs():  # a partition that never reads: the pause stays at its cap
        for _ in range(40):
            await handler._prepare(partition)
    assert round(partition.retry_at - time.monotonic()) == 30 and partition.failures == 41


async def test_a_lasting_kafka_fault_is_not_taken_for_the_broker_away(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """aiokafka calls a deleted topic or an unmet min.insync.replicas ``retriable``, but they
    do not pass by themselves: their takeovers keep doubling their pause, each traced."""
    monkeypatch.setattr(takeover, "AIOKafkaProducer", _Unstartable)
    handler = CommandHandler(HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g"))
    handler._consumer = FakeConsumer({})
    handler._reader = FakeConsumer({})
    partition = _Partition(0, TopicPartition(TOPIC, 0))
    for error in (UnknownTopicOrPartitionError(), NotEnoughReplicasError()):
        assert error.retriable and not takeover.broker_away(error)
    _Unstartable.error = UnknownTopicOrPartitionError()
    pauses = []
    with capture_logs():
        for _ in range(4):
            before = time.monotonic()
            await handler._prepare(partition)
            pauses.append(round(partition.retry_at - before))
    assert pauses == [1, 2, 4, 8]


class _RefusingWrites(_Unstartable):
    """A producer that starts and fences, but whose every record the brokers refuse
    (min.insync.replicas unmet: only a produce meets it)."""

    async def start(self) -> None:
        pass

    async def begin_transaction(self) -> None:
        pass

    async def commit_transaction(self) -> None:
        pass

    async def abort_transaction(self) -> None:
        pass

    async def send_offsets_to_transaction(self, offsets: Any, group_id: str) -> None:
        pass

    async def send(self, topic: str, value: bytes, **_: Any) -> asyncio.Future[Any]:
        refused: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        refused.set_exception(NotEnoughReplicasError())
        return refused


async def test_a_partition_whose_writes_fail_after_each_takeover_backs_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The second review: every takeover succeeded (it only fences and reads), so its
    success reset the failures and each failing transaction was retried after 1 s, a rebuild
    and a trace every second for ever. The failures now end with a commit."""

    class Reader(FakeConsumer):
        def resume(self, *_: Any) -> None:
            pass

        def seek(self, *_: Any) -> None:
            pass

        async def committed(self, tp: Any) -> int:
            return 0

        class _coordinator:  # noqa: N801 (aiokafka's, which has the offsets' metadata)
            @staticmethod
            async def fetch_committed_offsets(tps: Any) -> dict[Any, Any]:
                return {}

    async def no_ends(*_: Any) -> dict[Any, int]:
        return {}

    async def rebuilt(reader: Any, topics: Any, number: int, **_: Any) -> Any:
        stats = SimpleNamespace(
            checkpoint=None,
            snapshots=0,
            events=0,
            results=0,
            seconds=0.0,
            foreign=(),
            unreadable=(),
            unopened=(),
            distrusted=None,
            unsigned=False,
            older_key=False,
            resealed=0,
        )
        return PartitionStore(number), stats

    monkeypatch.setattr(takeover, "AIOKafkaProducer", _RefusingWrites)
    monkeypatch.setattr(takeover, "end_offsets", no_ends)
    monkeypatch.setattr(takeover, "rebuild", rebuilt)
    handler = CommandHandler(HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g"))
    handler._consumer = Reader({})
    handler._reader = Reader({})
    partition = _Partition(0, TopicPartition(TOPIC, 0))
    handler._partitions[0] = partition
    record = ConsumerRecord(TOPIC, 0, 0, 0, 0, b"t", b"not json", None, 0, 8, [])
    pauses: list[int] = []
    statuses: list[str] = []
    with capture_logs():
        for _ in range(7):
            await handler._prepare(partition)
            statuses.append(partition.status)
            before = time.monotonic()
            await handler._transaction(partition, [record])
            statuses.append(partition.status)
            pauses.append(round(partition.retry_at - before))
    assert statuses == ["ready", "failed"] * 7
    assert pauses == [1, 2, 4, 8, 16, 30, 30]


async def test_the_doubling_is_capped_however_many_failures(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """2**failures overflowed a float past about 1,024 failures in a row (the loop died)."""
    monkeypatch.setattr(takeover, "AIOKafkaProducer", _Unstartable)
    _Unstartable.error = RuntimeError("a corrupt log")
    handler = CommandHandler(HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g"))
    handler._consumer = FakeConsumer({})
    handler._reader = FakeConsumer({})
    partition = _Partition(0, TopicPartition(TOPIC, 0), failures=5000)
    before = time.monotonic()
    with capture_logs():
        await handler._prepare(partition)
    assert round(partition.retry_at - before) == 30 and partition.failures == 5001


async def test_a_partition_producer_gathers_a_transaction_in_one_batch_under_the_topic_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """aiokafka's 16 KiB batches split a fetch's events and results into several produce
    requests, and a send that found its batch full waited for the one before to be sent (a
    round trip in the middle of deciding a fetch). The partition's producer batches up to a
    record's limit; a batch of several records never grows past it (aiokafka's builder
    refuses the record that would), so it stays under the broker's default
    max.message.bytes as a single record does."""
    options: dict[str, Any] = {}

    class Recorded(_Unstartable):
        def __init__(self, **given: Any) -> None:
            options.update(given)

    monkeypatch.setattr(takeover, "AIOKafkaProducer", Recorded)
    Recorded.error = KafkaConnectionError("not needed")
    handler = CommandHandler(HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g"))
    handler._consumer = FakeConsumer({})
    handler._reader = FakeConsumer({})
    with capture_logs():
        await handler._prepare(_Partition(0, TopicPartition(TOPIC, 0)))
    assert options["max_batch_size"] == takeover.TRANSACTION_BATCH_BYTES == RECORD_MAX_BYTES
    assert options["transactional_id"] and options["max_request_size"] > RECORD_MAX_BYTES

    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=1, producer_id=1,
        producer_epoch=0, base_sequence=0, batch_size=takeover.TRANSACTION_BATCH_BYTES,
    )  # fmt: skip
    record = b"e" * 9_000  # an event with its headers, more or less
    taken = 0
    while taken < 1000 and builder.append(
        taken, timestamp=None, key=b"table-1", value=record, headers=[]
    ):
        taken += 1
    assert 100 < taken < 1000  # refused the record that would have gone past the size
    assert builder.size() <= takeover.TRANSACTION_BATCH_BYTES < BROKER_MAX_MESSAGE_BYTES


BROKER_MAX_MESSAGE_BYTES = 1_048_588
"""Kafka's default ``message.max.bytes``: what the events, results and commands topics take."""


async def test_a_partition_given_to_another_instance_lets_its_cold_streams_go() -> None:
    """A revoked partition's memory is kept in case the rebalance gives it back; one it gives
    to another instance is let go, its cold streams' file with it. It was kept until the
    partition came back, for good if it never did: every partition an instance ever held
    kept its spill file (and descriptor) on the pod's disk."""
    handler = CommandHandler(HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g"))
    handler._consumer = FakeConsumer({})
    spills, tps = [], []
    for number in range(2):
        spill = SpilledStreams()
        spill["table-1"] = b"sealed"
        spills.append(spill)
        tps.append(TopicPartition(TOPIC, number))
        store = PartitionStore(number, cold=spill)
        handler._partitions[number] = _Partition(number, tps[number], "ready", store, ends=(5,))
    await handler._revoke(set(tps))
    assert sorted(handler._retained) == [0, 1]
    handler._assign({tps[0]})  # partition 1 went to another instance
    assert sorted(handler._retained) == [0]
    assert handler._retained[0].store.cold is spills[0] and spills[0]["table-1"] == b"sealed"
    assert not spills[1].open


def _written(topic: str, partition: int, offset: int) -> tuple[str, asyncio.Future[Any]]:
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    future.set_result(SimpleNamespace(topic=topic, partition=partition, offset=offset))
    return topic, future


async def test_a_partition_ends_after_its_commits_marker() -> None:
    """What a partition's memory has seen: each of its topic partitions a committed
    transaction wrote ends after its last record and the commit's marker; the commands it
    sent to other streams, and what another partition holds, move nothing."""
    handler = CommandHandler(HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g"))
    topics = handler.topics
    partition = _Partition(1, TopicPartition(TOPIC, 1), "ready", PartitionStore(1), ends=(7, 3, 0))
    handler._committed(
        partition,
        [
            _written(topics.events, 1, 7),
            _written(topics.events, 1, 8),
            _written(topics.results, 1, 3),
            _written(topics.commands, 0, 40),
            _written(topics.snapshots, 0, 12),
        ],
    )
    assert partition.ends == (10, 5, 0)
    unknown = _Partition(1, TopicPartition(TOPIC, 1), "ready", PartitionStore(1))
    handler._committed(unknown, [_written(topics.events, 1, 7)])
    assert unknown.ends is None  # not known where it ended before: never kept


class _MovedOn:
    """A replay reader whose partitions end past where this instance's last commit left
    them: another instance wrote there while this one was frozen."""

    async def end_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return dict.fromkeys(tps, 9)


async def test_a_woken_instance_keeps_its_memory_against_its_own_last_commit() -> None:
    """Revoked as it wakes from a freeze, an instance kept its memory against where the log
    ended then (another's writes included): given the partition back, it found the log
    unchanged and decided from streams hundreds of events old."""
    handler = CommandHandler(HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g"))
    handler._consumer = FakeConsumer({})
    handler._reader = cast(AIOKafkaConsumer, _MovedOn())
    tp = TopicPartition(TOPIC, 0)
    store = PartitionStore(0, cold=SpilledStreams())
    handler._partitions[0] = _Partition(0, tp, "ready", store, ends=(5, 3, 1))
    await handler._revoke({tp})
    assert handler._retained[0].ends == (5, 3, 1)  # not where the log ends now: rebuilt


async def test_a_partition_whose_ends_are_not_known_is_not_kept_when_revoked() -> None:
    handler = CommandHandler(HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g"))
    handler._consumer = FakeConsumer({})
    tp = TopicPartition(TOPIC, 0)
    handler._partitions[0] = _Partition(0, tp, "ready", PartitionStore(0, cold=SpilledStreams()))
    await handler._revoke({tp})
    assert not handler._retained


async def test_a_fence_the_sender_met_is_counted_a_fence_not_an_abort() -> None:
    """The background sender met the fence (aiokafka put the transaction in its fatal state);
    the loop's next ``send`` raised ``IllegalOperation`` ("not in transaction"), which was
    logged as a failed transaction with its trace, counted ``aborted`` (what
    ``BlackjackTransactionsAborted`` pages on) and retried after 1 s (a pause drill). The
    fence is read from the transaction (so it is no "Future exception was never retrieved"
    at the producer's end either)."""
    handler = CommandHandler(HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g"))
    handler._consumer = FakeConsumer({})
    producer = AIOKafkaProducer(bootstrap_servers="127.0.0.1:9", transactional_id="t-0")
    manager = producer._txn_manager
    manager.set_pid_and_epoch(1, 0)
    manager.begin_transaction()
    manager.fatal_error(ProducerFenced())  # what the sender does on the broker's answer
    partition = _Partition(0, TopicPartition(TOPIC, 0), "ready", PartitionStore(0))
    handler._partitions[0] = partition
    counted = (
        REGISTRY.get_sample_value("blackjack_transactions_total", {"outcome": "fenced"}) or 0.0
    )
    with capture_logs() as logs:
        refused = IllegalOperation("Can't send messages while not in transaction")
        await handler._failed(partition, producer, refused)
    assert partition.status == "fenced"
    assert (
        REGISTRY.get_sample_value("blackjack_transactions_total", {"outcome": "fenced"})
        == counted + 1
    )
    assert [e["log_level"] for e in logs] == ["warning"]
    assert manager.wait_for_transaction_end()._log_traceback is False  # read


async def test_a_fence_no_one_read_is_not_reported_when_collected_other_errors_are() -> None:
    loop = asyncio.get_running_loop()
    before = loop.get_exception_handler()
    seen: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: seen.append(context))
    try:
        ignore_unread_fences(loop)
        ignore_unread_fences(loop)  # once, however many handlers the process starts
        for error in (ProducerFenced(), KafkaConnectionError()):
            future: asyncio.Future[None] = loop.create_future()
            future.set_exception(error)
            del future  # collected unread: asyncio reports it to the loop's handler
            gc.collect()
        assert [type(c["exception"]) for c in seen] == [KafkaConnectionError]
        assert seen[0]["message"].startswith("Future exception was never retrieved")
    finally:
        loop.set_exception_handler(before)


async def test_a_sweep_under_way_stops_at_a_partition_revoked_meanwhile() -> None:
    """Idle streams are frozen a few at a time, yielding between: a partition revoked
    meanwhile may have had its store closed (given to another instance), and a sweep that
    went on writing to it raised in the clock's task, which ends the handler."""
    handler = CommandHandler(HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g"))
    store = PartitionStore(0, cold=SpilledStreams(), codec=SnapshotCodec(b"s" * 32))
    for n in range(3 * ticker.FREEZE_AT_ONCE):
        store.streams[f"t-{n}"] = Stream(f"t-{n}", INITIAL_STATE, used_at=-1e9)
    partition = _Partition(0, TopicPartition(TOPIC, 0), "ready", store)
    handler._partitions[0] = partition
    sweep = asyncio.create_task(handler._freeze_idle_streams())
    await asyncio.sleep(0)  # the sweep froze its first few and yields
    assert len(store.cold) == ticker.FREEZE_AT_ONCE
    partition.status = "revoked"  # as _revoke leaves it
    store.close()  # as _assign does, the partition gone to another instance
    await sweep
    assert handler.failure is None


async def test_a_stop_during_a_quiet_checkpoint_aborts_its_transaction() -> None:
    """The clock's checkpoint of a quiet partition is a transaction of its own: stopped
    before its commit, it was left open, holding back every read_committed reader of the
    snapshots topic until the next owner or the transaction timeout (review, session 34)."""
    handler, (producer,) = running(1)
    await asyncio.wait_for(producer.committing.wait(), 5)
    producer.release.set()  # the command's own transaction commits
    partition = handler._partitions[0]
    await asyncio.wait_for(producer.committed.wait(), 5)
    assert partition.store is not None
    partition.store.since_checkpoint = 1  # as after an accepted command: one to checkpoint
    producer.release, producer.committing = asyncio.Event(), asyncio.Event()
    checkpoint = asyncio.create_task(handler._checkpoint_if_quiet(partition))
    await asyncio.wait_for(producer.committing.wait(), 5)
    checkpoint.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await checkpoint
    assert producer.state == "aborted"
    await handler.stop(timeout=5)
