"""The projection worker: a FastStream batch subscriber on ``blackjack.events``.

It joins a consumer group (``read_committed``, so events of an aborted handler transaction
are never seen) and, whenever the group gives it partitions, seeks each one to the position
stored in the read model: Kafka's committed offsets are only written afterwards, for lag
dashboards and for the other workers to see another store in the group (``split.py``), and
never read to fold. A batch that fails is rolled back and folded again partition by
partition, one transaction each, so that a record that cannot be folded holds back only its
own partition: that one is rewound to its stored position and paused for ``RETRY_SECONDS``,
so nothing is skipped; the failure is logged and counted, and a record that keeps failing
is reported stuck (``health.FoldHealth``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import structlog
from aiokafka import TopicPartition
from aiokafka.errors import ConsumerStoppedError
from faststream import AckPolicy
from faststream.kafka import KafkaBroker
from faststream.kafka.annotations import KafkaMessage

from blackjack.api.tokens import OPEN, ApiTokens
from blackjack.bus.clients import ScopedConsumer
from blackjack.bus.codecs import CodecMissing, require_codecs
from blackjack.bus.header_names import read_header_names_not_utf8
from blackjack.bus.reachable import wait_for_brokers
from blackjack.bus.settings import bootstrap_servers
from blackjack.observability.logging import faststream_logger
from blackjack.observability.roles import RoleView, declare_role, waiting_on
from blackjack.projection_worker.settings import ProjectionSettings
from blackjack.projections.batches import _Folder
from blackjack.projections.health import SCHEMA_REVISION, FoldHealth, probes
from blackjack.projections.metrics import store_answered, store_failed
from blackjack.projections.positions import LAG_EVERY_SECONDS, SeekToStoredPositions
from blackjack.projections.revision import SchemaMismatch, code_revision
from blackjack.projections.shown_url import shown_db_url
from blackjack.projections.split import SPLIT_AFTER_S
from blackjack.projections.store import ProjectionStore, is_store_outage
from blackjack.projections.writer import ProjectionWriter, Record
from blackjack.stopping import on_stop_signal, stopped_before_start, unless_stopped

if TYPE_CHECKING:
    from aiokafka import AIOKafkaConsumer

    from blackjack.api.routes import QueryApi
    from blackjack.http_server import Server

log = structlog.get_logger("blackjack.projections")


def register_projection(
    broker: KafkaBroker,
    topic: str,
    writer: ProjectionWriter,
    settings: ProjectionSettings,
    health: FoldHealth | None = None,
) -> FoldHealth:
    """Subscribe the projection to ``topic`` on ``broker`` (the topic name as the broker wants
    it: without the prefix if the broker adds one itself); returns what reports its progress."""
    require_codecs()  # a batch a producer compressed: read, or no start (bus.codecs)
    health = FoldHealth(settings.stuck_after) if health is None else health
    if not isinstance(broker, _FoldBroker):  # (its consumer does, alone: ``FoldConsumer``)
        # a record with a header name that is not UTF-8 is read, and stepped over
        # (``writer``): aiokafka raised at it, and nothing more of its partition was folded
        read_header_names_not_utf8()
    declare_role("projections")
    SCHEMA_REVISION.labels(code_revision()).set(1)
    subscriber = None

    def consumer() -> AIOKafkaConsumer | None:
        return None if subscriber is None else subscriber.consumer

    health.store_name = shown_db_url(settings.db_url)
    positions = SeekToStoredPositions(
        writer,
        consumer,
        health,
        lag_every=LAG_EVERY_SECONDS if settings.watch_every_s is None else settings.watch_every_s,
        split_after=SPLIT_AFTER_S if settings.split_after_s is None else settings.split_after_s,
    )
    if isinstance(broker, _FoldBroker):  # its watches end when it stops
        broker.fold_positions.append(positions)
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


class FoldConsumer(ScopedConsumer):
    """The worker's consumer (``bus.clients``): it reads a record whose header name is not
    UTF-8 (stepped over by ``writer``: aiokafka raised at it, and the worker folded nothing
    more of its partition), and a record batch it cannot decompress stops the worker
    (``FoldHealth.reader_failed``): FastStream's loop logged the error once and fetched the
    same batch again for good, the worker alive, its partition never folded further."""

    def __init__(self, health: FoldHealth, *topics: str, **options: Any) -> None:
        super().__init__(*topics, **options)
        self._health = health

    async def getmany(self, *partitions: TopicPartition, **options: Any) -> Any:
        try:
            return await super().getmany(*partitions, **options)
        except CodecMissing as error:
            self._health.reader_failed(error)
            raise ConsumerStoppedError from error  # FastStream's loop ends: the worker stops


class _FoldBroker(KafkaBroker):
    """FastStream's broker, its subscriber's consumer a ``FoldConsumer`` (the way FastStream's
    own test broker swaps it): the process's other aiokafka consumers are left as they are."""

    fold_health: FoldHealth
    fold_positions: list[SeekToStoredPositions]
    """its subscribers' listeners (``register_projection``)"""

    async def stop(self, *args: Any, **kwargs: Any) -> None:
        """Stop, and the listeners' watches with it, at once (``stop_watching``)."""
        try:
            await super().stop(*args, **kwargs)
        finally:
            for positions in self.fold_positions:
                await positions.stop_watching()

    async def _connect(self) -> Callable[..., AIOKafkaConsumer]:
        made = await super()._connect()
        options = made.keywords if isinstance(made, partial) else {}
        builder = partial(FoldConsumer, self.fold_health, **options)
        self.config.broker_config.builder = builder
        return builder


def build_broker(
    settings: ProjectionSettings, writer: ProjectionWriter, health: FoldHealth | None = None
) -> KafkaBroker:
    health = FoldHealth(settings.stuck_after) if health is None else health
    broker = _FoldBroker(
        bootstrap_servers(settings.bootstrap),
        client_id="blackjack-projections",
        security=settings.security.faststream(),
        allow_auto_create_topics=False,
        # JSON lines like every other log (FastStream's own logger prints coloured text)
        logger=faststream_logger(),
        log_level=logging.DEBUG,
    )
    broker.fold_health = health
    broker.fold_positions = []
    register_projection(broker, settings.events_topic, writer, settings, health)
    return broker


async def run_worker(settings: ProjectionSettings, http: tuple[str, int] | None = None) -> None:
    """Fold events until SIGINT or SIGTERM; with ``http``, serve the query API there too.

    HTTP is served from the start: a worker waiting for its database is alive (``/healthz``
    200) but not ready (``/readyz`` 503 ``starting``, the query API 503), so that a
    database outage at start-up does not get it restarted over and over by its probes. Once
    its store is migrated it is ready and its query API answers, from what is folded, while
    it waits for Kafka (``connecting``), as it does when Kafka goes away later: a worker
    restarted during a Kafka outage answered 503 where one running through it answered.

    What refuses to start without I/O (a codec missing, an aiokafka the fixes do not know)
    refuses first, before the database is touched (migrated) or HTTP served."""
    store = ProjectionStore(settings.db_url, bounded=True)
    health = FoldHealth(settings.stuck_after, starting=True)
    fold_broker = build_broker(settings, ProjectionWriter(store), health)  # refusals: no I/O
    queries = server = None
    if http is not None:
        queries = store.for_queries()
        server = _http_server(queries, health, settings, *http)
    # a SIGTERM while the process imported, before the signal handlers below: nothing to
    # undo (the stores connect on first use)
    if stopped_before_start():
        return
    serving = asyncio.create_task(_until_signalled() if server is None else server.serve())
    fault: BaseException | None = None  # what ends the start, if anything does
    # a fold that finds the store at another schema revision stops the worker, as does a
    # batch its consumer cannot decompress
    fatal = asyncio.create_task(health.stopped())
    broker = None

    async def step(name: str, running: Awaitable[Any]) -> bool:
        # each start-up step gives way to a stop (or a server that failed), at any point, and
        # is named on /metrics while it waits (the step names of ``serve``'s start)
        health.waiting_for = name
        with waiting_on(name):
            return await unless_stopped(running, serving)

    try:
        if not await step("read model", migrated(store, health)):
            return
        broker = fold_broker
        brokers = wait_for_brokers(settings.bootstrap, settings.security)  # started before them
        if not await step("kafka", brokers) or not await step("projections", broker.start()):
            return
        health.started()
        log.info("projection worker started", topic=settings.events_topic, group=settings.group_id)
        await asyncio.wait({serving, fatal}, return_when=asyncio.FIRST_COMPLETED)
    except BaseException as error:
        fault = error
        raise
    finally:
        fatal.cancel()
        if broker is not None:  # first: its partitions go to the other workers
            await broker.stop()
            log.info("projection worker stopped")
        # a fold's fault, or one raised while it started (a store at another revision, a
        # database that refuses it); not a stop
        if server is not None and (health.fatal is not None or isinstance(fault, Exception)):
            await _linger(serving, settings.fatal_linger_s)
        if not serving.done():
            if server is None:
                serving.cancel()
            else:
                server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await serving
        if queries is not None and queries is not store:
            await queries.close()
        await store.close()
    if health.fatal is not None:  # exit 3 (``revision.EXIT_SCHEMA_MISMATCH``), 2 (a codec)
        raise health.fatal


STORE_WAIT_SECONDS = 5.0


async def migrated(
    store: ProjectionStore, health: FoldHealth, wait: float = STORE_WAIT_SECONDS
) -> None:
    """Migrate the store, waiting for its database to answer: a worker started while it is
    down or starting (a fault drill) waits, with a reason on ``/readyz`` and the error in its
    log (the trace once, then a line every ``REPEAT_LOG_EVERY`` attempts), instead of exiting
    with a trace. Any other failure (a store a newer version migrated) ends the worker."""
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
            health.store_migrated()
            return


async def _linger(serving: asyncio.Task[Any], seconds: int) -> None:
    """Serve ``/metrics`` and ``/readyz`` a while before a fault's exit: a process that
    exits within a second of finding it is seldom scraped, so its alert
    (``BlackjackProjectionSchemaMismatch``) and its restarts (``BlackjackProcessRestarting``)
    went unseen (an operator's fault drill). A stop signal ends the wait."""
    if seconds <= 0 or serving.done():
        return
    log.warning("the worker stops on a fault; its metrics are served until then", seconds=seconds)
    # the server failing meanwhile changes nothing: the fault is the exit's
    with contextlib.suppress(Exception):
        await asyncio.wait_for(asyncio.shield(serving), seconds)


async def _until_signalled() -> None:
    stop = asyncio.Event()
    on_stop_signal(asyncio.get_running_loop(), lambda signum: stop.set())
    await stop.wait()


def _http_server(
    store: ProjectionStore,
    health: FoldHealth,
    settings: ProjectionSettings,
    host: str,
    port: int,
) -> Server:
    from blackjack.http_server import Server, http_config

    app = http_app(store, health, settings.api_tokens)
    # log_config None: uvicorn's lines go through the root's JSON handler (configure_logging)
    # instead of its own text handlers
    config = http_config(app, host, port, lifespan="off", log_level="warning", log_config=None)
    return Server(config)


def http_app(store: ProjectionStore, health: FoldHealth, tokens: ApiTokens = OPEN) -> QueryApi:
    """What a worker serves with ``--http``: the query API, with ``/healthz``, ``/readyz`` and
    ``/metrics`` (Prometheus) behind it."""
    from prometheus_client import make_asgi_app

    from blackjack.api.routes import only_at, query_api

    return query_api(
        store,
        # prometheus-client's app answers the metrics at any path and to any method
        fallback=probes(
            health,
            # the worker's own families (and the process's), not the handler's it imports
            only_at("/metrics", make_asgi_app(RoleView(("projections",)))),  # type: ignore[arg-type]
        ),
        tokens=tokens,
        # a worker stopping on a fault (its metrics served a while first) answers no query:
        # the store may be at another revision or folded from another log
        ready=lambda: health.store_ready and health.fatal is None,
        stopping=lambda: health.fatal_reason,
    )
