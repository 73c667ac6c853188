"""Where the projection worker reads: every partition the group gives it is sought to the
position stored with the read model (never to Kafka's committed offset), a batch that cannot be
folded is put back to be read again from there, and each partition's lag is measured from the
broker even while no batch arrives (``SeekToStoredPositions``). While idle it also probes a
store that was down, checks the store's schema revision, and compares the store's positions
with the group's committed offsets (another store in the group: ``split.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import structlog
from aiokafka import ConsumerRebalanceListener, TopicPartition

from blackjack.error_text import error_text
from blackjack.observability.roles import kafka_answered
from blackjack.projections.health import REPEAT_LOG_EVERY, FoldHealth
from blackjack.projections.metrics import (
    FAILED_BATCHES,
    LAG,
    POSITION,
    group_checked,
    store_answered,
    store_failed,
    transit_read,
    transit_unread,
)
from blackjack.projections.other_log import (
    PastTheEnd,
    StoreOfAnotherLog,
    confirmed_past_the_end,
    folded_from_other_topics,
)
from blackjack.projections.revision import SchemaMismatch, check_schema
from blackjack.projections.split import SPLIT_AFTER_S, SplitWatch, behind_the_group
from blackjack.projections.store import is_store_outage
from blackjack.projections.writer import ProjectionWriter, Record

if TYPE_CHECKING:
    from aiokafka import AIOKafkaConsumer


log = structlog.get_logger("blackjack.projections")

RETRY_SECONDS = 2.0
PROBE_AFTER_SECONDS = 30.0
READ_ON_TIMEOUT_S = 1.0
"""How long the lag waits for a partition's consumer position: at once unless the partition
was sought meanwhile."""

LAG_EVERY_SECONDS = 15.0
END_OFFSETS_TIMEOUT_S = 10.0
"""How long the partitions' ends are waited for before they are sought (next time, else)"""
GROUP_OFFSETS_TIMEOUT_S = 10.0
"""aiokafka retries a fetch of committed offsets for ever on retriable errors: next time."""
TRANSIT_EVERY = 4
"""The money in transit is read every this many ``lag_every`` (a minute by default): a scan of
the wallets (``transit.py``)."""
TRANSIT_KEPT_FAILURES = 3
"""Reads of the money in transit that may fail in a row (a database blip) before its series
are dropped: dropped at once, a page already firing resolved while the money stayed; kept
for ever, a time kept would grow old and page for money no longer stuck. Three minutes
cannot make a fresh time 15 minutes old."""


def _running(
    task: asyncio.Task[None] | None, watch: Callable[[], Coroutine[Any, Any, None]], name: str
) -> asyncio.Task[None]:
    """``task`` if it still runs, else a new one of ``watch`` (``projection-<name>``)."""
    if task is not None and not task.done():
        return task
    return asyncio.create_task(watch(), name=f"projection-{name}")


class SeekToStoredPositions(ConsumerRebalanceListener):  # type: ignore[misc]
    """Every partition given to this worker continues from the position in the read model.

    An assigned partition is *unsynced* until it has been sought to its stored position. If
    the store cannot be read during the rebalance, the partition stays unsynced and the next
    batch seeks it (and rewinds the rest of the batch) instead of folding anything, so no
    record is ever folded from a position the store did not give.
    """

    def __init__(
        self,
        writer: ProjectionWriter,
        consumer: Callable[[], AIOKafkaConsumer | None],
        health: FoldHealth | None = None,
        lag_every: float | None = LAG_EVERY_SECONDS,
        split_after: float = SPLIT_AFTER_S,
    ) -> None:
        self.writer = writer
        self.lag_every = lag_every  # None: the lag is measured after batches only
        self.split = SplitWatch(split_after)
        self._rebalances = 1
        """odd while a rebalance is under way (revoked, not yet assigned): 1 until the first
        assignment"""
        self.consumer = consumer
        self.health = health
        self.unsynced: set[TopicPartition] = set()
        self._put_back: set[TopicPartition] = set()
        self._sync_failures = 0
        self.known: dict[tuple[str, int], int] = {}
        """The last positions read from or written to the store: the lag goes on growing from
        them while the store cannot be read."""
        self._syncing = asyncio.Lock()
        self._lag_watch: asyncio.Task[None] | None = None
        self._group_watch: asyncio.Task[None] | None = None
        self._transit_watch: asyncio.Task[None] | None = None
        self._notes: set[asyncio.Task[None]] = set()
        self.assigned: set[TopicPartition] = set()
        """What the group gave this worker, as the rebalance callbacks said: the consumer's
        own assignment still lists revoked partitions in the middle of a rebalance."""

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.unsynced -= revoked
        self.assigned -= revoked
        self._rebalances |= 1  # under way; a comparison begun before it counts for nothing
        if self.health is not None:
            self.health.forget((tp.topic, tp.partition) for tp in revoked)
        for tp in revoked:  # its new owner exports them; a stale copy here would mislead
            self.known.pop((tp.topic, tp.partition), None)
            for gauge in (POSITION, LAG):
                with contextlib.suppress(KeyError):
                    gauge.remove(tp.topic, str(tp.partition))
        log.info("partitions revoked", partitions=sorted(str(tp) for tp in revoked))

    def still_assigned(self, positions: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
        """The positions of the partitions this worker still has: a batch still folding when
        its partition was revoked must not bring back the series the revocation removed (a
        fault review found a revoked worker showing its old position for hours)."""
        return {
            (topic, partition): offset
            for (topic, partition), offset in positions.items()
            if TopicPartition(topic, partition) in self.assigned
        }

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.assigned |= assigned
        self.unsynced |= assigned
        self._rebalances = (self._rebalances | 1) + 1  # over (even)
        self.split.restart()  # the time behind counts from here: its new owner commits after
        await self.sync()
        sought = [tp for tp in sorted(assigned) if tp not in self.unsynced]
        if sought and self.health is not None and self.lag_every is not None:
            stored = {
                (tp.topic, tp.partition): self.known.get((tp.topic, tp.partition), 0)
                for tp in sought
            }
            note = asyncio.create_task(self._note_taken_behind(stored), name="projection-taken")
            self._notes.add(note)  # a reference, until it ends
            note.add_done_callback(self._notes.discard)
        every = self.lag_every
        if every is None:
            return
        self._lag_watch = _running(self._lag_watch, lambda: self.watch_lag(every), "lag")
        if self.health is not None:
            self._group_watch = _running(
                self._group_watch, lambda: self.watch_group(every), "group"
            )
            self._transit_watch = _running(
                self._transit_watch, lambda: self.watch_transit(every * TRANSIT_EVERY), "transit"
            )

    def _open_consumer(self) -> AIOKafkaConsumer | None:
        """The consumer, unless it has stopped (a watch then ends: a new consumer's
        assignment starts a new one)."""
        consumer = self.consumer()
        return None if consumer is None or getattr(consumer, "_closed", False) else consumer

    async def stop_watching(self) -> None:
        """End the watches (the lag's, the group's, the money in transit's, the notes of
        partitions taken behind) now, with the worker that stops: by themselves they end at
        their next wake-up after the consumer closed, up to ``lag_every`` seconds later, on a
        loop that may be running something else by then (a process serving on, a test
        suite's next tests)."""
        watches = (self._lag_watch, self._group_watch, self._transit_watch, *self._notes)
        tasks = [t for t in watches if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self._transit_watch is not None:
            transit_unread()  # a process serving on would show the last read for ever

    async def watch_lag(self, every: float) -> None:
        """Measure each assigned partition's lag from the broker's end offsets and the stored
        positions, whether or not batches arrive: a worker whose fetching stopped (a consumer
        that died, a partition no batch comes from) shows a lag that grows with the log, which
        the lag alert sees; after a batch alone it would freeze. Ends with the consumer."""
        while True:
            await asyncio.sleep(every)
            consumer = self._open_consumer()
            if consumer is None:
                return
            # first: a worker left without partitions (or without the broker) must still see
            # its store come back
            await self._probe_if_quiet()
            await self._check_schema()
            if not self.assigned:
                continue
            try:
                ends = await consumer.end_offsets(sorted(self.assigned))
            except Exception as error:  # the broker: next time
                log.info("lag not measured", error=error_text(error))
                continue
            starts: dict[tuple[str, int], int] = {}
            try:
                stored = await self.writer.stored_positions()
            except Exception as error:  # the store: the lag grows from the last positions known
                if self.health is not None and is_store_outage(error):
                    store_failed(self.health, error)
                else:
                    log.info("positions not read", error=error_text(error)[:300])
            else:
                self.known.update(stored)
                # None stored: folded from the log's start (``sync``), all of it behind (a
                # worker failing at a partition's first record showed no lag at all)
                unstored = [tp for tp in ends if (tp.topic, tp.partition) not in self.known]
                starts = await _log_starts(consumer, unstored)
            for tp, end in ends.items():
                key = (tp.topic, tp.partition)
                position = self.known.get(key, starts.get(key))
                if tp in self.assigned and position is not None:  # revoked: its owner reports
                    position = max(position, await self.handed_out(consumer, tp))
                    LAG.labels(tp.topic, str(tp.partition)).set(max(end - position, 0))

    async def watch_group(self, every: float) -> None:
        """Compare the store's positions with the group's committed offsets (another store in
        the group: ``split.py``), a worker without partitions included: its query API answers
        for every one. A task of its own: a lag read the broker is slow to answer (up to its
        40 s request timeout, seen with two workers in one process) must not hold it back.
        Ends with the consumer."""
        while True:
            await asyncio.sleep(every)
            consumer = self._open_consumer()
            if consumer is None:
                return
            rebalances = self._rebalances
            if rebalances % 2:  # under way: who owns what is about to change
                continue
            # the group's offsets before the store's positions: split.py says why
            committed = await self._group_offsets(consumer)
            if committed is None:
                continue
            try:
                stored = await self.writer.stored_positions()
            except Exception as error:  # the store: the lag's watch and the batches report it
                log.debug("positions not read", error=error_text(error)[:300])
                continue
            if rebalances == self._rebalances:
                self._compare(committed, stored)

    async def watch_transit(self, every: float) -> None:
        """Export the money in transit between wallets and tables that the store holds
        (``transit.py``), a worker without partitions included: at once, then every
        ``every`` seconds. Ends with the consumer."""
        failures = 0
        while True:
            if self._open_consumer() is None:
                return
            try:
                found = await self.writer.money_in_transit()
            except Exception as error:  # the store: the lag's watch and the batches report it
                log.debug("money in transit not read", error=error_text(error)[:300])
                failures += 1
                if failures == TRANSIT_KEPT_FAILURES:
                    transit_unread()  # no stale time left to page on
            else:
                failures = 0
                transit_read(found)
            await asyncio.sleep(every)

    async def _note_taken_behind(self, stored: dict[tuple[str, int], int]) -> None:
        """Partitions just given to this worker and sought to its store's positions, which the
        group has committed past: a store restored from a backup or rebuilt, or partitions
        that another store's worker folded (``split.py``) are folded again from here. Said
        once, not a fault by itself: the worker catches up, and its first batch commits the
        store's position to the group."""
        consumer = self.consumer()
        if consumer is None:
            return
        committed = await self._group_offsets(consumer, [TopicPartition(*key) for key in stored])
        behind = [
            {"partition": f"{topic}[{partition}]", "stored": offset, "committed": ahead}
            for (topic, partition), offset in sorted(stored.items())
            if (ahead := (committed or {}).get((topic, partition), 0)) > offset
        ]
        if behind:
            log.info(
                "partitions taken behind the group's committed offsets; folded again from "
                "this store's positions",
                partitions=behind,
            )

    async def _group_offsets(
        self, consumer: AIOKafkaConsumer, partitions: list[TopicPartition] | None = None
    ) -> dict[tuple[str, int], int] | None:
        """The group's committed offset of ``partitions`` (default: every partition of the
        subscribed topic), in one OffsetFetch request (aiokafka's ``committed`` asks for one
        partition a request); ``None`` when they cannot be read now."""
        if self.health is None:
            return None
        try:
            partitions = partitions or [
                TopicPartition(topic, partition)
                for topic in sorted(consumer.subscription())
                for partition in sorted(consumer.partitions_for_topic(topic) or ())
            ]
            if not partitions:
                return None
            async with asyncio.timeout(GROUP_OFFSETS_TIMEOUT_S):
                offsets = await consumer._coordinator.fetch_committed_offsets(partitions)
        except Exception as error:  # the broker, or stopping: next time
            log.info("group offsets not read", error=error_text(error)[:300])
            return None
        kafka_answered("projections")  # every LAG_EVERY_SECONDS, with or without partitions
        return {
            (tp.topic, tp.partition): meta.offset
            for tp, meta in offsets.items()
            if meta.offset >= 0
        }

    def _compare(
        self, committed: dict[tuple[str, int], int], stored: dict[tuple[str, int], int]
    ) -> None:
        """Another store in the group? Reported once a partition has stayed behind for the
        ``SplitWatch``'s time (``split.py``)."""
        if self.health is None:
            return
        owned = {(tp.topic, tp.partition) for tp in self.assigned}
        behind = behind_the_group(committed, stored, owned)
        others = len(set(committed) - owned)
        group_checked(self.health, self.split.observe(time.monotonic(), behind), others)

    async def handed_out(self, consumer: AIOKafkaConsumer, tp: TopicPartition) -> int:
        """Where ``consumer`` reads on in ``tp``: past the records it has handed out to be
        folded, and past the transaction markers and aborted records it read after them,
        which take offsets but are never handed out. A caught-up partition's stored position
        is its last record + 1, and its end offset one more (the commit marker): measured
        from the stored position alone, its lag stayed at 1 for ever. Counts the batch being
        folded as read (at most one batch less lag while it folds); 0 (no news) while the
        partition is being sought to its stored position, whose consumer position may be the
        group's committed offset, or when it has none yet."""
        if tp in self.unsynced or tp not in self.assigned:
            return 0
        try:  # at once, unless the partition was sought or revoked meanwhile
            async with asyncio.timeout(READ_ON_TIMEOUT_S):
                return int(await consumer.position(tp))
        except Exception:  # revoked, stopped, or no position yet
            return 0

    async def _check_schema(self) -> None:
        """A worker with nothing to fold stops too, within ``LAG_EVERY_SECONDS`` of a migration
        by another release (a fold checks for itself: ``ProjectionWriter.apply``)."""
        if self.health is None:
            return
        try:
            async with self.writer.store.reading() as connection:
                await check_schema(connection, lock=False)
        except SchemaMismatch as error:
            self.health.schema_mismatched(error)
        except Exception as error:  # the store: the batches and the probe report on it
            log.debug("schema revision not read", error=error_text(error))

    async def _probe_if_quiet(self) -> None:
        """No batch has tried the store for a while during an outage (no events came): write
        nothing to learn whether it is back, so that an idle worker does not report an outage
        that is over."""
        health = self.health
        if health is None or not health.store_quiet_for(PROBE_AFTER_SECONDS):
            return
        try:
            await self.writer.probe()
        except Exception as error:
            store_failed(health, error)
        else:
            store_answered(health)

    async def sync(self, failure_recorded: bool = False) -> bool:
        """Seek every unsynced partition to its stored position (the beginning when the
        store has none); False when the store could not be read (recorded, unless the caller
        has recorded the failure that brought it here)."""
        async with self._syncing:  # the rebalance callback and the handler may both call it
            consumer = self.consumer()
            if consumer is None or not self.unsynced:
                return consumer is not None
            pending, self._put_back = set(self.unsynced), set()
            try:
                stored = await self.writer.stored_positions()
            except Exception as error:
                self._sync_failures += 1
                if failure_recorded:
                    return False
                if self.health is not None and is_store_outage(error):
                    store_failed(self.health, error)
                elif self._sync_failures % REPEAT_LOG_EVERY == 1:
                    log.error("positions unreadable; partitions wait", exc_info=error)
                return False
            # Not the store's recovery: a read-only database answers reads (a batch that
            # commits, or a probe's write, says it is back).
            self._sync_failures = 0
            self.known.update(stored)
            # before any seek: a position past the end would be reset to the partition's start
            # by the broker, and the rest of another log folded on top (``other_log``)
            past = await self._past_the_end(consumer, pending, stored)
            if past is None:  # the broker did not say: the partitions wait, as for the store
                return False
            if past:
                self._another_log(consumer, past)
                pending -= {TopicPartition(found.topic, found.partition) for found in past}
                if any(found.other_topic for found in past):
                    for tp in pending:  # the whole store is another topic's: nothing sought
                        with contextlib.suppress(Exception):
                            consumer.pause(tp)
                    pending = set()
            sought = {}
            for tp in sorted(pending):
                offset = stored.get((tp.topic, tp.partition))
                try:
                    if offset is None:
                        await consumer.seek_to_beginning(tp)
                    else:
                        consumer.seek(tp, offset)
                except Exception:  # no longer assigned: whoever has it now seeks it itself
                    log.info("not sought: partition no longer assigned", partition=str(tp))
                    continue
                sought[f"{tp.topic}[{tp.partition}]"] = offset or 0
                # shown from the assignment on, not only once a new event is folded
                POSITION.labels(tp.topic, str(tp.partition)).set(offset or 0)
            # A batch put back meanwhile may have been fetched after its partition's seek here
            # and then dropped: its partition must be sought again, or those records are lost.
            self.unsynced -= pending - self._put_back
            log.info("partitions sought to the stored positions", positions=sought)
            return True

    async def _past_the_end(
        self,
        consumer: AIOKafkaConsumer,
        pending: set[TopicPartition],
        stored: dict[tuple[str, int], int],
    ) -> list[PastTheEnd] | None:
        """The partitions of ``pending`` whose stored position (read before) lies past their
        end on the broker (an end of 0 read again first: ``other_log``); None when the broker
        could not say. Asks nothing of a partition stored at 0 or not at all."""
        others = folded_from_other_topics(stored, next(iter(pending)).topic) if pending else []
        if others:  # folded from another topic: none of this one's is to be folded on it
            return others
        mine = {
            (tp.topic, tp.partition): stored[(tp.topic, tp.partition)]
            for tp in pending
            if stored.get((tp.topic, tp.partition), 0) > 0
        }
        if not mine:
            return []
        asked = sorted(TopicPartition(*key) for key in mine)

        async def read_ends() -> dict[tuple[str, int], int]:
            async with asyncio.timeout(END_OFFSETS_TIMEOUT_S):
                ends = await consumer.end_offsets(asked)
            return {(tp.topic, tp.partition): end for tp, end in ends.items()}

        try:
            return await confirmed_past_the_end(mine, read_ends)
        except Exception as error:  # the broker, or the partitions revoked meanwhile
            log.info("partition ends not read; partitions wait", error=f"{error!r}"[:300])
            return None

    def _another_log(self, consumer: AIOKafkaConsumer, past: list[PastTheEnd]) -> None:
        """The store was folded from another log: these partitions are never sought nor
        folded (paused, left unsynced) and the worker stops (``FoldHealth.log_mismatched``)."""
        for found in past:
            with contextlib.suppress(Exception):  # revoked meanwhile: nothing to fetch
                consumer.pause(TopicPartition(found.topic, found.partition))
        error = StoreOfAnotherLog(past, self.health.store_name if self.health else "")
        if self.health is not None:
            self.health.log_mismatched(error)
        else:
            log.critical(
                "the read model was folded from another log; its partitions are not folded",
                partitions=[found.fields() for found in past],
            )

    async def put_back(self, records: list[Record], failure_recorded: bool = False) -> None:
        """Nothing of this batch was folded: have its partitions read again from the store's
        positions, or at least from the batch's first records until the store answers.
        ``failure_recorded``: the caller has counted the failure and paused the partitions."""
        partitions = {TopicPartition(t, p) for t, p in {r.position for r in records}}
        self.unsynced |= partitions
        self._put_back |= partitions
        if await self.sync(failure_recorded):
            return
        consumer = self.consumer()
        if consumer is not None:
            _rewind(consumer, records)
        if failure_recorded:
            return
        # The store does not answer: read these records again, after a pause, not at once
        # (a fault drill saw a worker fetch, fail and log a trace 11 times a second).
        FAILED_BATCHES.inc()
        if consumer is not None:
            for tp in sorted(partitions):
                _pause(consumer, tp, RETRY_SECONDS)


def _pause(consumer: AIOKafkaConsumer, tp: TopicPartition, seconds: float) -> None:
    """Fetch nothing of this partition for ``seconds``; the others go on."""
    try:
        consumer.pause(tp)
    except Exception:  # revoked meanwhile: whoever has it now reads it
        log.info("not paused: partition no longer assigned", partition=str(tp))
        return
    asyncio.get_running_loop().call_later(seconds, _resume, consumer, tp)


def _resume(consumer: AIOKafkaConsumer, tp: TopicPartition) -> None:
    # revoked meanwhile (assigned again, it is not paused), or the consumer has stopped
    with contextlib.suppress(Exception):
        consumer.resume(tp)


def _first_offsets(records: list[Record]) -> dict[tuple[str, int], int]:
    first: dict[tuple[str, int], int] = {}
    for record in records:
        first[record.position] = min(first.get(record.position, record.offset), record.offset)
    return first


def _rewind(consumer: AIOKafkaConsumer, records: list[Record]) -> None:
    for (topic, partition), offset in _first_offsets(records).items():
        try:
            consumer.seek(TopicPartition(topic, partition), offset)
        except Exception:  # the partition went to another worker, which seeks for itself
            log.info("not rewound: partition no longer assigned", topic=topic, partition=partition)


async def _log_starts(
    consumer: AIOKafkaConsumer, partitions: list[TopicPartition]
) -> dict[tuple[str, int], int]:
    """Where ``partitions`` begin (a partition with no stored position is sought there)."""
    if not partitions:
        return {}
    try:
        begins = await consumer.beginning_offsets(partitions)
    except Exception as error:  # the broker: next time
        log.info("lag not measured", error=error_text(error)[:300])
        return {}
    return {(tp.topic, tp.partition): offset for tp, offset in begins.items()}
