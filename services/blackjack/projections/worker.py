"""The projection worker: a FastStream batch subscriber on ``blackjack.events``.

It joins a consumer group (``read_committed``, so events of an aborted handler transaction
are never seen) and, whenever the group gives it partitions, seeks each one to the position
stored in the read model: Kafka's committed offsets are only written afterwards, for lag
dashboards, and never read. A batch that fails is rolled back and folded again partition by
partition, one transaction each, so that a record that cannot be folded holds back only its
own partition: that one is rewound to its stored position and paused for ``RETRY_SECONDS``,
so nothing is skipped; the failure is logged and counted, and a record that keeps failing
is reported stuck (``health.FoldHealth``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable
from typing import TYPE_CHECKING

import structlog
from aiokafka import ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError
from faststream import AckPolicy
from faststream.kafka import KafkaBroker
from faststream.kafka.annotations import KafkaMessage
from prometheus_client import Counter, Gauge

from blackjack.api.tokens import OPEN, ApiTokens
from blackjack.bus.reachable import wait_for_brokers
from blackjack.domain.rules import PRESETS
from blackjack.observability.logging import faststream_logger
from blackjack.observability.roles import declare_role
from blackjack.projections.health import REPEAT_LOG_EVERY, SCHEMA_REVISION, FoldHealth, probes
from blackjack.projections.revision import SchemaMismatch, check_schema, code_revision
from blackjack.projections.settings import ProjectionSettings
from blackjack.projections.store import ProjectionStore, is_store_outage
from blackjack.projections.writer import BatchResult, ProjectionWriter, Record
from blackjack.stopping import unless_stopped

if TYPE_CHECKING:
    from aiokafka import AIOKafkaConsumer

    from blackjack.api.routes import QueryApi
    from blackjack.http_server import Server

log = structlog.get_logger("blackjack.projections")

EVENTS_FOLDED = Counter(
    "blackjack_projection_events_total", "Events folded into the read model", ["type"]
)
REDELIVERED = Counter(
    "blackjack_projection_redelivered_total",
    "Records skipped because the read model already holds them (a redelivery after a crash)",
)
DUPLICATES = Counter(
    "blackjack_projection_duplicate_events_total",
    "The same event (stream, sequence, id) met again at a later offset",
)
FAILED_BATCHES = Counter(
    "blackjack_projection_failed_batches_total",
    "Batches rolled back (then folded again partition by partition; a failing one is rewound "
    "to retry)",
)
ROUNDS_CLOSED = Counter(
    "blackjack_rounds_closed_total",
    "Rounds settled, or cancelled (closed with no box dealt, every bet returned: no player "
    "ready when betting closed, or an operator closing an interrupted round before its deal), "
    "as folded into the read model, by game and currency",
    ["variant", "currency", "outcome"],
)
WAGERED = Counter(
    "blackjack_wagered_minor_units_total",
    "Money staked in the rounds settled (initial bets, doubles, splits, insurance), in minor "
    "units of the currency (exact up to 2^53 per series, as Prometheus keeps floats)",
    ["variant", "currency"],
)
PAID = Counter(
    "blackjack_paid_minor_units_total",
    "Money paid out in the rounds settled (stakes returned with wins and pushes included), "
    "in minor units; 1 - paid / wagered over a window is the hold",
    ["variant", "currency"],
)
POSITION = Gauge(
    "blackjack_projection_position",
    "Next offset to fold in, as stored with the read model",
    ["topic", "partition"],
)
LAG = Gauge(
    "blackjack_projection_lag",
    "Offsets from where the worker reads on (past what it has folded or is folding, and the "
    "transaction markers after it) to the partition's last stable offset, after every batch "
    "and every LAG_EVERY_SECONDS from the broker, so that it grows while nothing is fetched "
    "(0 when caught up)",
    ["topic", "partition"],
)

STORE_UP = Gauge(
    "blackjack_projection_store_up",
    "1 while the read model's database answers this worker; 0 from a failure to reach it "
    "(down, starting, refusing connections, read-only, timing out) until it answers again",
)

RETRY_SECONDS = 2.0
PROBE_AFTER_SECONDS = 30.0
READ_ON_TIMEOUT_S = 1.0
"""How long the lag waits for a partition's consumer position: at once unless the partition
was sought meanwhile."""


def store_failed(health: FoldHealth, error: BaseException) -> None:
    STORE_UP.set(0)
    health.store_failed(error)


def store_answered(health: FoldHealth) -> None:
    STORE_UP.set(1)
    health.store_answered()


LAG_EVERY_SECONDS = 15.0


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
    ) -> None:
        self.writer = writer
        self.lag_every = lag_every  # None: the lag is measured after batches only
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
        self.assigned: set[TopicPartition] = set()
        """What the group gave this worker, as the rebalance callbacks said: the consumer's
        own assignment still lists revoked partitions in the middle of a rebalance."""

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.unsynced -= revoked
        self.assigned -= revoked
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
        await self.sync()
        watching = self._lag_watch is not None and not self._lag_watch.done()
        if self.lag_every is not None and not watching:
            self._lag_watch = asyncio.create_task(
                self.watch_lag(self.lag_every), name="projection-lag"
            )

    async def watch_lag(self, every: float) -> None:
        """Measure each assigned partition's lag from the broker's end offsets and the stored
        positions, whether or not batches arrive: a worker whose fetching stopped (a consumer
        that died, a partition no batch comes from) shows a lag that grows with the log, which
        the lag alert sees; after a batch alone it would freeze. Ends with the consumer."""
        while True:
            await asyncio.sleep(every)
            consumer = self.consumer()
            if consumer is None or getattr(consumer, "_closed", False):
                return  # stopped: a new consumer's assignment starts a new watch
            # first: a worker left without partitions (or without the broker) must still see
            # its store come back
            await self._probe_if_quiet()
            await self._check_schema()
            if not self.assigned:
                continue
            try:
                ends = await consumer.end_offsets(sorted(self.assigned))
            except Exception as error:  # the broker: next time
                log.info("lag not measured", error=f"{type(error).__name__}: {error}")
                continue
            try:
                self.known.update(await self.writer.stored_positions())
            except Exception as error:  # the store: the lag grows from the last positions known
                if self.health is not None and is_store_outage(error):
                    store_failed(self.health, error)
                else:
                    log.info("positions not read", error=f"{type(error).__name__}: {error}"[:300])
            for tp, end in ends.items():
                position = self.known.get((tp.topic, tp.partition))
                if tp in self.assigned and position is not None:  # revoked: its owner reports
                    position = max(position, await self.handed_out(consumer, tp))
                    LAG.labels(tp.topic, str(tp.partition)).set(max(end - position, 0))

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
            log.debug("schema revision not read", error=f"{type(error).__name__}: {error}")

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


def register_projection(
    broker: KafkaBroker,
    topic: str,
    writer: ProjectionWriter,
    settings: ProjectionSettings,
    health: FoldHealth | None = None,
) -> FoldHealth:
    """Subscribe the projection to ``topic`` on ``broker`` (the topic name as the broker wants
    it: without the prefix if the broker adds one itself); returns what reports its progress."""
    health = FoldHealth(settings.stuck_after) if health is None else health
    declare_role("projections")
    SCHEMA_REVISION.labels(code_revision()).set(1)
    subscriber = None

    def consumer() -> AIOKafkaConsumer | None:
        return None if subscriber is None else subscriber.consumer

    positions = SeekToStoredPositions(writer, consumer, health)
    subscriber = broker.subscriber(
        topic,
        batch=True,
        max_records=settings.batch,
        group_id=settings.group_id,
        group_instance_id=settings.instance_id,
        session_timeout_ms=settings.session_timeout_ms,
        heartbeat_interval_ms=max(settings.session_timeout_ms // 10, 100),
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        ack_policy=AckPolicy.MANUAL,
        listener=positions,
        title="projections",
        description="Folds every event into wallets and game history",
    )
    folder = _Folder(writer, positions, health, consumer)

    @subscriber
    async def fold_events(message: KafkaMessage) -> None:
        raw = message.raw_message
        await folder.fold([Record.of(r) for r in (raw if isinstance(raw, tuple) else (raw,))])

    return health


class _Folder:
    """Folds each batch the subscriber gets; a batch that fails is folded again partition by
    partition, up to the record that failed, and the rest held back to be read again."""

    def __init__(
        self,
        writer: ProjectionWriter,
        positions: SeekToStoredPositions,
        health: FoldHealth,
        consumer: Callable[[], AIOKafkaConsumer | None],
    ) -> None:
        self.writer = writer
        self.positions = positions
        self.health = health
        self.consumer = consumer
        count_games_from_zero()

    async def fold(self, records: list[Record]) -> None:
        """Fold a batch; a store at another schema revision stops the worker (``health``),
        nothing of the batch written, nothing more folded."""
        if self.health.mismatch is not None:  # stopping: nothing more is folded
            return
        try:
            await self._fold(records)
        except SchemaMismatch as error:
            self.health.schema_mismatched(error)

    async def _fold(self, records: list[Record]) -> None:
        if self.positions.unsynced:  # fetched before the partitions were sought: read again
            await self.positions.put_back(records)
            return
        try:
            result = await self.writer.apply(records)
        except SchemaMismatch:
            raise
        except Exception as error:
            FAILED_BATCHES.inc()
            parts = _by_partition(records)
            if len(parts) == 1:
                await self._fold_up_to(records, error)
                return
            # A batch mixes partitions, and one record (a poison event) must not stop the
            # others: fold each partition in a transaction of its own (its position with it),
            # so those that fold advance and only a failing one is held back. Not reported to
            # ``health`` yet: the attempt per partition tells which one is to blame.
            log.debug(  # counted in FAILED_BATCHES; a failing partition logs for itself
                "batch rolled back; folding it again partition by partition",
                records=len(records),
                error=f"{type(error).__name__}: {error}",
            )
            for part in parts:
                try:
                    result = await self.writer.apply(part)
                except SchemaMismatch:
                    raise
                except Exception as failure:
                    await self._fold_up_to(part, failure)
                else:
                    await self._folded(result)
            return
        await self._folded(result)

    async def _folded(self, result: BatchResult) -> None:
        count_folded(result)
        store_answered(self.health)
        self.positions.known.update(result.positions)
        # the partitions revoked meanwhile: their new owner reports them
        owned = self.positions.still_assigned(result.positions)
        for (name, partition), offset in owned.items():
            POSITION.labels(name, str(partition)).set(offset)
        self.health.folded(owned)
        kafka = self.consumer()
        await _lag(kafka, owned, self.positions)
        if kafka is not None:
            await _commit_for_dashboards(kafka, result)

    async def _hold_back(self, part: list[Record], error: Exception) -> None:
        """Nothing of ``part`` (one partition's records) was folded: read that partition again
        from its stored position after ``RETRY_SECONDS``, by pausing it rather than sleeping
        here, which would hold back the worker's other partitions too."""
        tp = TopicPartition(part[0].topic, part[0].partition)
        if is_store_outage(error):  # the database, not this record: nothing is stuck on it
            store_failed(self.health, error)
        elif tp in self.positions.assigned:
            self.health.failed(part, self.writer.failed_at, error)
            _log_rollback(self.health.failures_of(part[0].position), len(part), error)
        else:  # revoked meanwhile: its new owner folds it, and reports how that goes
            log.info("not folded; partition revoked meanwhile", error=str(error)[:300])
        kafka = self.consumer()
        await _lag(kafka, self.positions.still_assigned(_first_offsets(part)))
        await self.positions.put_back(part, failure_recorded=True)
        if kafka is not None:
            _pause(kafka, tp, RETRY_SECONDS)

    async def _fold_up_to(self, part: list[Record], error: Exception) -> None:
        """``part`` (one partition's records) failed: fold the records before the one that
        failed in a transaction of their own, so the stored position stops exactly at that
        record (what ``docs/operations.md`` tells an operator to step over), then hold the
        rest back."""
        at = self.writer.failed_at
        before = [r for r in part if at is not None and r.offset < at.offset]
        if at is None or at.position != part[0].position or not before:
            await self._hold_back(part, error)
            return
        try:
            result = await self.writer.apply(before)
        except SchemaMismatch:
            raise
        except Exception as failure:
            await self._hold_back(part, failure)
            return
        await self._folded(result)
        self.writer.failed_at = at  # the record that failed, for ``health``
        await self._hold_back([r for r in part if r.offset >= at.offset], error)


def _log_rollback(failures: int, records: int, error: Exception) -> None:
    event = "records rolled back; their partition is read again"
    if failures <= 1:
        log.error(event, records=records, exc_info=error)
    elif failures % REPEAT_LOG_EVERY == 0:
        log.warning(
            event,
            records=records,
            failures=failures,
            error=f"{type(error).__name__}: {error}"[:500],
        )


def _by_partition(records: list[Record]) -> list[list[Record]]:
    """The records of each partition, in their order."""
    parts: dict[tuple[str, int], list[Record]] = {}
    for record in records:
        parts.setdefault(record.position, []).append(record)
    return list(parts.values())


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


async def _lag(
    consumer: AIOKafkaConsumer | None,
    positions: dict[tuple[str, int], int],
    reading: SeekToStoredPositions | None = None,
) -> None:
    """The lag from ``positions``, or from where the consumer reads on when ``reading`` is
    given and that is further (past the commit markers of a folded batch)."""
    if consumer is None:
        return
    for (topic, partition), stored in positions.items():
        tp = TopicPartition(topic, partition)
        try:
            end = consumer.last_stable_offset(tp)
        except AssertionError:  # revoked meanwhile: its new owner reports it
            continue
        read = 0 if reading is None else await reading.handed_out(consumer, tp)
        if end is not None:
            LAG.labels(topic, str(partition)).set(max(end - max(stored, read), 0))


def _rewind(consumer: AIOKafkaConsumer, records: list[Record]) -> None:
    for (topic, partition), offset in _first_offsets(records).items():
        try:
            consumer.seek(TopicPartition(topic, partition), offset)
        except Exception:  # the partition went to another worker, which seeks for itself
            log.info("not rewound: partition no longer assigned", topic=topic, partition=partition)


def count_games_from_zero() -> None:
    """Each preset's game series exist at 0 from the start: ``increase()`` over a window
    misses the first value of a series born at it, so a worker's first round of a game after
    a restart (the finance drill: an operator's close, the only round of its game that day)
    would not show on the dashboard. A table opened in another currency adds its series
    with its first round."""
    for rules in PRESETS.values():
        labels = (rules.name, rules.currency)
        for outcome in ("settled", "cancelled"):
            ROUNDS_CLOSED.labels(*labels, outcome)
        WAGERED.labels(*labels)
        PAID.labels(*labels)


def count_folded(result: BatchResult) -> None:
    """The batch's figures, once its transaction has committed."""
    for kind, count in result.types.items():
        EVENTS_FOLDED.labels(kind).inc(count)
    REDELIVERED.inc(result.skipped)
    DUPLICATES.inc(result.duplicates)
    for (variant, currency), game in result.games.items():
        ROUNDS_CLOSED.labels(variant, currency, "settled").inc(game.rounds)
        ROUNDS_CLOSED.labels(variant, currency, "cancelled").inc(game.cancelled)
        WAGERED.labels(variant, currency).inc(game.wagered)
        PAID.labels(variant, currency).inc(game.paid)


async def _commit_for_dashboards(consumer: AIOKafkaConsumer, result: BatchResult) -> None:
    offsets = {TopicPartition(t, p): offset for (t, p), offset in result.positions.items()}
    try:
        await consumer.commit(offsets)
    except KafkaError as error:  # a rebalance in between: harmless, the store is the truth
        log.debug("group offsets not committed", error=str(error))


def build_broker(
    settings: ProjectionSettings, writer: ProjectionWriter, health: FoldHealth | None = None
) -> KafkaBroker:
    broker = KafkaBroker(
        settings.bootstrap,
        client_id="blackjack-projections",
        security=settings.security.faststream(),
        allow_auto_create_topics=False,
        # JSON lines like every other log (FastStream's own logger prints coloured text)
        logger=faststream_logger(),
        log_level=logging.DEBUG,
    )
    register_projection(broker, settings.events_topic, writer, settings, health)
    return broker


async def run_worker(settings: ProjectionSettings, http: tuple[str, int] | None = None) -> None:
    """Fold events until SIGINT or SIGTERM; with ``http``, serve the query API there too.

    HTTP is served from the start: a worker waiting for its database is alive (``/healthz``
    200) but not ready (``/readyz`` 503 ``starting``, the query API 503), so that a
    database outage at start-up does not get it restarted over and over by its probes."""
    store = ProjectionStore(settings.db_url, bounded=True)
    health = FoldHealth(settings.stuck_after, starting=True)
    queries = server = None
    if http is not None:
        queries = store.for_queries()
        server = _http_server(queries, health, settings, *http)
    serving = asyncio.create_task(_until_signalled() if server is None else server.serve())
    # a fold that finds the store at another schema revision stops the worker
    mismatch = asyncio.create_task(health.stopped())
    broker = None
    try:
        # each start-up step gives way to a stop (or a server that failed), at any point
        if not await unless_stopped(migrated(store, health), serving):
            return
        broker = build_broker(settings, ProjectionWriter(store), health)
        brokers = wait_for_brokers(settings.bootstrap, settings.security)  # started before them
        if not await unless_stopped(brokers, serving) or not await unless_stopped(
            broker.start(), serving
        ):
            return
        health.started()
        log.info("projection worker started", topic=settings.events_topic, group=settings.group_id)
        await asyncio.wait({serving, mismatch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        mismatch.cancel()
        if not serving.done():
            if server is None:
                serving.cancel()
            else:
                server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await serving
        if broker is not None:
            await broker.stop()
            log.info("projection worker stopped")
        if queries is not None and queries is not store:
            await queries.close()
        await store.close()
    if health.mismatch is not None:  # exit 3 (``revision.EXIT_SCHEMA_MISMATCH``)
        raise health.mismatch


STORE_WAIT_SECONDS = 5.0


async def migrated(
    store: ProjectionStore, health: FoldHealth, wait: float = STORE_WAIT_SECONDS
) -> None:
    """Migrate the store, waiting for its database to answer: a worker started while it is
    down or starting (a fault drill) waits, with the error on ``/readyz`` and in its log (the
    trace once, then a line every ``REPEAT_LOG_EVERY`` attempts), instead of exiting with a
    trace. Any other failure (a store a newer version migrated) ends the worker."""
    while True:
        try:
            await store.migrate()
        except SchemaMismatch as error:  # a newer release's store
            health.schema_mismatched(error)
            raise
        except Exception as error:
            if not is_store_outage(error):
                raise
            store_failed(health, error)
            await asyncio.sleep(wait)
        else:
            store_answered(health)
            return


async def _until_signalled() -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()


def _http_server(
    store: ProjectionStore,
    health: FoldHealth,
    settings: ProjectionSettings,
    host: str,
    port: int,
) -> Server:
    import uvicorn

    from blackjack.http_server import Server

    app = http_app(store, health, settings.api_tokens)
    config = uvicorn.Config(app, host=host, port=port, lifespan="off", log_level="warning")
    return Server(config)


def http_app(store: ProjectionStore, health: FoldHealth, tokens: ApiTokens = OPEN) -> QueryApi:
    """What a worker serves with ``--http``: the query API, with ``/healthz``, ``/readyz`` and
    ``/metrics`` (Prometheus) behind it."""
    from prometheus_client import make_asgi_app

    from blackjack.api.routes import query_api

    return query_api(
        store,
        fallback=probes(health, make_asgi_app()),
        tokens=tokens,
        ready=lambda: not health.starting,
    )
