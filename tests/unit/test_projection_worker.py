"""Where the worker reads from: always the positions in the read model, whatever the group's
committed offsets say and even when the store does not answer during a rebalance."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from aiokafka import TopicPartition
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from blackjack.projection_worker import worker
from blackjack.projection_worker.settings import ProjectionSettings
from blackjack.projections import batches, health
from blackjack.projections.health import FoldHealth
from blackjack.projections.positions import SeekToStoredPositions
from blackjack.projections.transit import InTransit
from blackjack.projections.writer import Record
from tests.unit.polling import until

TOPIC = "blackjack.events"
P0, P1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)


class Consumer:
    def __init__(self) -> None:
        self.sought: dict[TopicPartition, int | str] = {}
        self.ends: dict[TopicPartition, int] = {}
        """the partitions' end offsets (default: far past any stored position)"""

    async def end_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.ends.get(tp, 10**9) for tp in partitions}

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.sought[tp] = offset

    async def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        for tp in partitions:
            self.sought[tp] = "beginning"


class Store:
    """The writer's view of the store; ``down`` makes it fail like a lost connection."""

    def __init__(self, positions: dict[tuple[str, int], int]) -> None:
        self.positions = positions
        self.down = False

    async def stored_positions(self) -> dict[tuple[str, int], int]:
        if self.down:
            raise ConnectionError("the database is not answering")
        return self.positions


def listener(store: Store, consumer: Consumer) -> SeekToStoredPositions:
    return SeekToStoredPositions(store, lambda: consumer, lag_every=None)  # type: ignore[arg-type]


async def test_assigned_partitions_continue_from_the_stored_positions() -> None:
    consumer = Consumer()
    positions = listener(Store({(TOPIC, 0): 42}), consumer)
    await positions.on_partitions_assigned({P0, P1})
    assert consumer.sought == {P0: 42, P1: "beginning"}
    assert positions.unsynced == set()


async def test_while_the_store_is_down_a_batch_is_put_back_not_folded() -> None:
    consumer, store = Consumer(), Store({(TOPIC, 0): 42})
    store.down = True
    positions = listener(store, consumer)
    await positions.on_partitions_assigned({P0})
    assert consumer.sought == {} and positions.unsynced == {P0}

    batch: list[Any] = [Record(TOPIC, 0, 50, b"{}"), Record(TOPIC, 0, 51, b"{}")]
    await positions.put_back(batch)
    assert consumer.sought == {P0: 50}  # at least nothing of the batch is lost
    assert positions.unsynced == {P0}

    store.down = False
    await positions.put_back(batch)
    assert consumer.sought == {P0: 42}  # the store's word, once it answers
    assert positions.unsynced == set()


async def test_a_revoked_partition_is_not_sought_any_more() -> None:
    consumer, store = Consumer(), Store({})
    store.down = True
    positions = listener(store, consumer)
    await positions.on_partitions_assigned({P0, P1})
    await positions.on_partitions_revoked({P1})
    store.down = False
    assert await positions.sync()
    assert consumer.sought == {P0: "beginning"}


def test_a_partition_failing_again_and_again_logs_its_trace_once_then_a_line_a_minute() -> None:
    """A stuck record is retried every 2 s for as long as it takes: a 7 KB trace each time
    filled the log by hundreds of megabytes a day."""
    error = ValueError("cannot fold")
    with capture_logs() as logs:
        for failures in range(1, 2 * health.REPEAT_LOG_EVERY + 1):
            batches._log_rollback(failures, 3, error)
    assert [(e["log_level"], e.get("failures")) for e in logs] == [
        ("error", None),
        ("warning", health.REPEAT_LOG_EVERY),
        ("warning", 2 * health.REPEAT_LOG_EVERY),
    ]
    assert logs[0]["exc_info"] is error
    assert logs[1]["error"] == "ValueError: cannot fold"


class Watched(Consumer):
    """A consumer that fetches nothing while the topic grows; it may also stop."""

    def __init__(self) -> None:
        super().__init__()
        self.ends = {P0: 100}
        self._closed = False

        self.answer: asyncio.Event | None = None  # set: the broker answers only once it is
        self.asked = asyncio.Event()

    async def end_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        asked = {tp: self.ends[tp] for tp in partitions}
        self.asked.set()
        if self.answer is not None:
            await self.answer.wait()
        return asked


class AskedStore(Store):
    """Says when the watch has asked it: the gauge is set before the watch waits again."""

    def __init__(self, positions: dict[tuple[str, int], int]) -> None:
        super().__init__(positions)
        self.asked = asyncio.Event()

    async def stored_positions(self) -> dict[tuple[str, int], int]:
        self.asked.set()
        return await super().stored_positions()


async def test_the_lag_is_measured_from_the_broker_even_when_no_batch_comes() -> None:
    """A worker whose fetching stopped showed the lag of its last batch for ever; measured
    from the broker's end offsets and the stored positions, it grows with the log."""
    consumer, store = Watched(), AskedStore({(TOPIC, 0): 40})
    positions = SeekToStoredPositions(store, lambda: consumer, lag_every=0.01)  # type: ignore[arg-type]
    await positions.on_partitions_assigned({P0})
    for end in (100, 250):
        consumer.ends[P0] = end
        store.asked.clear()
        await asyncio.wait_for(store.asked.wait(), 5)
        assert lag(P0) == end - 40
    consumer._closed = True  # stopped: the watch ends with it
    assert positions._lag_watch is not None
    await asyncio.wait_for(positions._lag_watch, 5)


class Reading(Watched):
    """A consumer that has read up to ``read``: past the last record it handed out and past
    the transaction markers after it."""

    def __init__(self, read: int) -> None:
        super().__init__()
        self.read = read

    async def position(self, tp: TopicPartition) -> int:
        return self.read


async def test_the_lag_counts_from_where_the_consumer_reads_on_past_the_markers() -> None:
    """The last record of a transaction at offset 98, its commit marker at 99: the store
    holds 99 and the end is 100. A consumer that has read the marker (alone in a fetch, so no
    batch came) is caught up: lag 0, not 1 for ever. While the partition is being sought to
    its stored position, where the consumer stands is no news (the group's committed offset
    may be ahead of the store)."""
    consumer, store = Reading(read=100), AskedStore({(TOPIC, 0): 99})
    positions = SeekToStoredPositions(store, lambda: consumer, lag_every=0.01)  # type: ignore[arg-type]
    await positions.on_partitions_assigned({P0})
    store.asked.clear()  # the assignment's own read
    await asyncio.wait_for(store.asked.wait(), 5)
    measured = {"topic": TOPIC, "partition": "0"}
    assert REGISTRY.get_sample_value("blackjack_projection_lag", measured) == 0  # not absent

    positions.unsynced.add(P0)
    consumer.ends[P0], consumer.read = 150, 150
    store.asked.clear()
    await asyncio.wait_for(store.asked.wait(), 5)
    assert lag(P0) == 150 - 99
    consumer._closed = True
    assert positions._lag_watch is not None
    await asyncio.wait_for(positions._lag_watch, 5)


class Begun(Watched):
    """A consumer of a log whose first records were deleted: it begins at ``start``."""

    def __init__(self, start: int) -> None:
        super().__init__()
        self.start = start

    async def beginning_offsets(self, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        return dict.fromkeys(tps, self.start)


async def test_a_partition_with_no_stored_position_lags_by_its_whole_log() -> None:
    """No position stored yet (nothing folded from it: a new partition, a worker failing at
    its first record): the partition is folded from the log's start, and all of it is behind.
    It had no lag series at all, which no alert sees."""
    consumer, store = Begun(start=10), AskedStore({})
    positions = SeekToStoredPositions(store, lambda: consumer, lag_every=0.01)  # type: ignore[arg-type]
    await positions.on_partitions_assigned({P0})
    store.asked.clear()  # the assignment's own read
    await asyncio.wait_for(store.asked.wait(), 5)
    store.asked.clear()  # a whole turn of the watch, its figure set
    await asyncio.wait_for(store.asked.wait(), 5)
    assert lag(P0) == 100 - 10
    assert (TOPIC, 0) not in positions.known  # none stored: none made up
    consumer._closed = True
    assert positions._lag_watch is not None
    await asyncio.wait_for(positions._lag_watch, 5)


def lag(tp: TopicPartition) -> float:
    return (
        REGISTRY.get_sample_value(
            "blackjack_projection_lag", {"topic": tp.topic, "partition": str(tp.partition)}
        )
        or 0.0
    )


async def test_a_partition_revoked_while_its_lag_is_measured_gets_no_figure_back() -> None:
    """Revoked mid-measurement, a partition's lag series came back and stayed, a stale figure
    the lag alert's max() would take over its new owner's."""
    consumer, store = Watched(), AskedStore({(TOPIC, 0): 40})
    positions = SeekToStoredPositions(store, lambda: consumer, lag_every=0.01)  # type: ignore[arg-type]
    await positions.on_partitions_assigned({P0})  # its ends read before the seek, answered
    consumer.answer = asyncio.Event()
    consumer.asked.clear()
    await asyncio.wait_for(consumer.asked.wait(), 5)  # the watch awaits the broker's answer
    await positions.on_partitions_revoked({P0})
    store.asked.clear()
    consumer.answer.set()
    await asyncio.wait_for(store.asked.wait(), 5)
    assert (
        REGISTRY.get_sample_value("blackjack_projection_lag", {"topic": TOPIC, "partition": "0"})
        is None
    )
    consumer._closed = True  # stopped: the watch ends with it (not left on the session's loop)
    assert positions._lag_watch is not None
    await asyncio.wait_for(positions._lag_watch, 5)


async def test_a_batch_of_a_revoked_partition_reports_no_position_for_it() -> None:
    """The figures of a batch that was folding when its partition was revoked go only to the
    partitions still here: its new owner reports the others."""
    positions = listener(Store({}), Consumer())
    await positions.on_partitions_assigned({P0, P1})
    assert positions.still_assigned({(TOPIC, 0): 50, (TOPIC, 1): 9}) == {
        (TOPIC, 0): 50,
        (TOPIC, 1): 9,
    }
    await positions.on_partitions_revoked({P1})
    assert positions.still_assigned({(TOPIC, 0): 51, (TOPIC, 1): 10}) == {(TOPIC, 0): 51}


async def test_a_batch_that_fails_after_its_partition_was_revoked_reports_no_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch folding when its partition is revoked, then failing, must not bring the
    partition back to /readyz as failing (nothing would clear it on this worker)."""
    made: list[SeekToStoredPositions] = []

    class Listener(SeekToStoredPositions):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **{**kwargs, "lag_every": None})
            made.append(self)

    monkeypatch.setattr(worker, "SeekToStoredPositions", Listener)

    class Writer:
        failed_at = None

        def __init__(self) -> None:
            self.folding, self.fail = asyncio.Event(), asyncio.Event()

        async def stored_positions(self) -> dict[tuple[str, int], int]:
            return {(TOPIC, 0): 10}

        async def apply(self, records: Any) -> Any:
            self.folding.set()
            await self.fail.wait()
            raise RuntimeError("the database went away mid-batch")

    class Quiet(Consumer):
        _closed = True

        def pause(self, *tps: TopicPartition) -> None:
            pass

        def last_stable_offset(self, tp: TopicPartition) -> None:
            return None

    handlers: list[Any] = []

    class Subscriber:
        consumer = Quiet()

        def __call__(self, handler: Any) -> Any:
            handlers.append(handler)
            return handler

    class Broker:
        def subscriber(self, *args: Any, **kwargs: Any) -> Subscriber:
            return Subscriber()

    class Raw:
        topic, partition, value, key, timestamp, headers = TOPIC, 0, b"{}", b"t", 0, ()

        def __init__(self, offset: int) -> None:
            self.offset = offset

    class Message:
        def __init__(self, *raw: Raw) -> None:
            self.raw_message = raw

    writer, health = Writer(), FoldHealth(stuck_after=1)
    settings = ProjectionSettings.from_env({})
    worker.register_projection(Broker(), TOPIC, writer, settings, health)  # type: ignore[arg-type]
    [listener], [handle] = made, handlers
    await listener.on_partitions_assigned({P0})
    batch = asyncio.create_task(handle(Message(Raw(10), Raw(11))))
    await writer.folding.wait()
    await listener.on_partitions_revoked({P0})
    writer.fail.set()
    await batch
    assert health.status()["failing"] == []
    labels = {"topic": TOPIC, "partition": "0"}
    assert REGISTRY.get_sample_value("blackjack_projection_stuck_offset", labels) is None


async def test_a_store_behind_what_the_worker_folded_is_read_again_from_its_positions() -> None:
    """The store lost batches the worker had committed (``StoreBehind``): the batch is put
    back and its partitions sought to the store's positions, with a warning; no record is
    blamed (the partition is not reported failing or stuck)."""
    from blackjack.projections.writer import StoreBehind

    class Writer:
        failed_at = None

        async def stored_positions(self) -> dict[tuple[str, int], int]:
            return {(TOPIC, 0): 40}

        async def apply(self, records: Any) -> Any:
            raise StoreBehind("the read model is behind what this worker folded into it")

    consumer = Consumer()
    positions = SeekToStoredPositions(Writer(), lambda: consumer, lag_every=None)  # type: ignore[arg-type]
    await positions.on_partitions_assigned({P0})
    consumer.sought.clear()
    fold_health = FoldHealth(10)
    folder = batches._Folder(Writer(), positions, fold_health, lambda: None)  # type: ignore[arg-type]
    with capture_logs() as logs:
        await folder.fold([Record(TOPIC, 0, 45, b"{}"), Record(TOPIC, 0, 46, b"{}")])
    assert consumer.sought == {P0: 40}
    assert fold_health.failing == [] and fold_health.failures_of((TOPIC, 0)) == 0
    assert [e["log_level"] for e in logs if "behind" in e["event"]] == ["warning"]


class TransitStore(Store):
    """A store whose money in transit is read: 7.00 USD since ``SINCE``, until it is down."""

    def __init__(self) -> None:
        super().__init__({(TOPIC, 0): 40})
        self.reads = 0

    async def money_in_transit(self) -> list[InTransit]:
        self.reads += 1
        if self.down:
            raise ConnectionError("the database is not answering")
        return [InTransit("to_table", "USD", 700, 1, SINCE)]


SINCE = datetime(2026, 3, 1, 12, tzinfo=UTC)


def transit(name: str) -> float | None:
    labels = {"direction": "to_table", "currency": "USD"}
    return REGISTRY.get_sample_value(f"blackjack_money_in_transit_{name}", labels)


async def test_money_in_transit_the_store_cannot_tell_is_not_shown_stale() -> None:
    """A diff review: a worker whose store stopped answering kept the last time read, which
    grew old and would page (BlackjackMoneyInTransit) for money no longer stuck. Another: a
    blip of one failed read must not drop it (a page firing would resolve)."""
    consumer, store = Watched(), TransitStore()
    positions = SeekToStoredPositions(
        store,  # type: ignore[arg-type]
        lambda: consumer,
        FoldHealth(),
        lag_every=0.01,
    )
    await positions.on_partitions_assigned({P0})
    try:
        await asyncio.wait_for(until(lambda: transit("minor_units") == 700), 5)
        assert transit("since_timestamp_seconds") == SINCE.timestamp()
        store.down = True
        failed_from = store.reads
        await asyncio.wait_for(until(lambda: transit("since_timestamp_seconds") is None), 5)
        assert store.reads - failed_from >= 3  # kept through the first failed reads
        assert transit("minor_units") is None
        store.down = False
        await asyncio.wait_for(until(lambda: transit("minor_units") == 700), 5)
    finally:
        await positions.stop_watching()
    assert transit("since_timestamp_seconds") is None  # the watch stopped: nothing kept


async def test_money_in_transit_is_read_when_the_watch_starts() -> None:
    """A chaos review: a restarted worker showed nothing for its first minute (the watch slept
    before its first read), and most of the restarted processes never read at all."""
    consumer, store = Watched(), TransitStore()
    positions = SeekToStoredPositions(
        store,  # type: ignore[arg-type]
        lambda: consumer,
        FoldHealth(),
        lag_every=60.0,  # the next read four minutes on: none within the test
    )
    await positions.on_partitions_assigned({P0})
    try:
        await asyncio.wait_for(until(lambda: store.reads == 1), 5)
        assert transit("minor_units") == 700
    finally:
        await positions.stop_watching()
