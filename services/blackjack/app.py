"""The service as one ASGI app: FastStream's Kafka broker and AsyncAPI docs, the command
handler, and the operational endpoints.

    /healthz          200 while the handler's tasks run or the service still starts (liveness;
                      ``waiting_for`` names what the start waits for: Kafka, the database)
    /readyz           200 once the handler has joined its group and rebuilt every partition
                      (with the projection worker's progress: records it is stuck at)
    /metrics          Prometheus text format
    /docs/asyncapi    the AsyncAPI document rendered (``/docs/asyncapi.json`` as JSON)
    /v1/...           the query API over the projections (wallets, game history, tables)

``blackjack serve`` runs it under uvicorn; the HTTP endpoints answer from the first moment,
while the service starts beside them (``ServiceStart``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from faststream.asgi import AsgiFastStream, AsgiResponse, get
from faststream.asgi.types import ASGIApp, Scope
from faststream.kafka import KafkaBroker
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from blackjack.api.routes import query_api, typed_refusals
from blackjack.asyncapi.contract import documentation_broker, specification
from blackjack.asyncapi.page import asyncapi_routes
from blackjack.bus.reachable import wait_for_brokers
from blackjack.bus.settings import bootstrap_servers
from blackjack.bus.topics import ensure_topics
from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.key_check import NotTheDeploymentsKey
from blackjack.command_handler.service import CommandHandler
from blackjack.observability.logging import faststream_logger
from blackjack.observability.roles import Role, RoleView, waiting_on
from blackjack.projection_worker.settings import ProjectionSettings
from blackjack.projections.health import FoldHealth
from blackjack.projections.store import ProjectionStore, StoreRefused
from blackjack.projections.writer import ProjectionWriter

log = structlog.get_logger("blackjack.app")


class _AppBroker(KafkaBroker):
    """The broker FastStream's app needs (the handler and the projection worker have clients
    of their own). FastStream starts it right after the start-up hooks, which return at once
    here; it connects in the service's start instead, once the brokers answer."""

    _may_start = False

    async def start(self) -> None:
        if self._may_start:
            await super().start()

    async def start_now(self) -> None:
        self._may_start = True
        await self.start()


class ServiceStart:
    """The service's start (brokers, topics, the read model's database, the handler, the
    projection worker), run beside the HTTP server: a process started before Kafka or its
    database answers its probes and ``/metrics`` while it waits (alive, not ready, and what
    it waits for) instead of serving nothing until then. A step that fails (not a wait: a
    store a newer version migrated, topics that cannot be made) ends the start; ``failed`` is
    set and the process should exit."""

    def __init__(self, steps: list[tuple[str, Callable[[], Awaitable[Any]]]]) -> None:
        self.steps = steps
        self.step: str | None = None
        """The step running now (``None`` before and after)."""
        self.done = False
        self.failure: BaseException | None = None
        self.failed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._passed: set[str] = set()
        self._halted = False

    def launch(self) -> None:
        self._task = asyncio.create_task(self._run(), name="service-start")

    def passed(self, step: str) -> bool:
        return step in self._passed

    def halt(self) -> None:
        """Start nothing more (SIGTERM, from the server's signal handler): the step running is
        cancelled now, not when the app's shutdown comes (uvicorn closes its connections
        first), and no later step begins. What was started is stopped by the shutdown."""
        self._halted = True
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def cancel(self) -> None:
        """Stop a start still running (the server is stopping): its step is cancelled."""
        self.halt()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def ended(self) -> None:
        """Wait for the start to end by itself (done, failed or halted); cancels nothing."""
        if self._task is not None:
            await asyncio.wait({self._task})

    async def _run(self) -> None:
        try:
            for name, step in self.steps:
                if self._halted:
                    return
                self.step = name
                with waiting_on(name):  # /metrics says it too: an alert for a start stalled
                    await step()
                self._passed.add(name)
        except Exception as error:
            self.failure = error
            if isinstance(error, StoreRefused | NotTheDeploymentsKey):  # its line says all
                log.error("start failed", step=self.step, error=str(error))
            else:
                log.exception("start failed", step=self.step)
            self.failed.set()
        else:
            self.done = True
            self.step = None


@dataclasses.dataclass(frozen=True)
class Service:
    """What ``blackjack serve`` runs: the ASGI app, the handler, and the start in progress."""

    app: ASGIApp
    handler: CommandHandler
    start: ServiceStart
    folding: FoldHealth | None = None
    """the projection worker's health, when it runs: a store at another schema revision
    stops the process (``FoldHealth.stopped``)"""


def each_in_turn(stops: list[Callable[[], Awaitable[Any]]]) -> Callable[[], Awaitable[None]]:
    """One shutdown hook running every stop, whatever the one before did: FastStream skips the
    hooks after one that raises, so a handler whose consumer failed to leave its group kept
    the projection worker in its group and the read model's store open."""

    async def stop_each() -> None:
        for stop in stops:
            try:
                await stop()
            except asyncio.CancelledError:
                # the shutdown itself cancelled ends here; a stop that ended in a cancellation
                # of its own (a task it awaited was cancelled) is a stop that failed
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise
                log.exception("stopping failed", part=getattr(stop, "__qualname__", repr(stop)))
            except Exception:
                log.exception("stopping failed", part=getattr(stop, "__qualname__", repr(stop)))

    return stop_each


def _json(status: int, body: str) -> AsgiResponse:
    return AsgiResponse(body.encode(), status, {"content-type": "application/json"})


def build_app(config: HandlerConfig, projections: ProjectionSettings | None = None) -> Service:
    """The handler's app; with ``projections``, also the projection worker (its own consumer
    group and broker) and the query API over its store, as ``make run`` serves them."""
    logger = faststream_logger()  # JSON lines like every other log
    broker = _AppBroker(
        bootstrap_servers(config.kafka.bootstrap),  # FastStream takes a string as one host
        client_id=f"{config.instance_id}-faststream",
        security=config.kafka.security.faststream(),
        logger=logger,
    )
    handler = CommandHandler(config)
    # "starting" until the worker has started: /readyz answers during the start, and the
    # worker's part said "folding" (store "ok") while the start still waited for Kafka
    health = None if projections is None else FoldHealth(projections.stuck_after, starting=True)
    # /metrics: the handler's families, the worker's when it runs here, and the shared ones
    roles: tuple[Role, ...] = ("handler",) if projections is None else ("handler", "projections")
    exported = RoleView(roles)

    async def brokers_reachable() -> None:  # started before them: waits
        await wait_for_brokers(config.kafka.bootstrap, config.kafka.security)

    steps: list[tuple[str, Callable[[], Awaitable[Any]]]] = [("kafka", brokers_reachable)]
    on_shutdown: list[Callable[[], Awaitable[Any]]] = [handler.stop]
    store = None
    if projections is not None:
        # Imported here: a handler-only process must not export the worker's metrics.
        from blackjack.projection_worker.worker import build_broker, migrated

        store = ProjectionStore(projections.db_url, bounded=True)
        worker = build_broker(projections, ProjectionWriter(store), health)

        async def ensure_events_topic() -> None:  # the worker subscribes before the handler runs
            await ensure_topics(config.kafka, config.topics)

        async def stop_worker() -> None:
            # a hook of its own: FastStream resolves a hook's signature, and the broker's
            # stop(exc_type, exc_val, exc_tb) cannot be resolved, which failed the shutdown
            await worker.stop()

        async def migrate() -> None:  # waits for a database that is starting or down
            assert store is not None and health is not None
            await migrated(store, health)

        queries = store.for_queries()
        # the read model's database first: its gauge (blackjack_projection_store_up) reads 0
        # until it is reached, so a start waiting for Kafka paged the on-call about the
        # database (BlackjackProjectionStoreUnreachable) beside BlackjackStartStalled{kafka}
        steps = [("read model", migrate), *steps, ("topics", ensure_events_topic)]
        on_shutdown += [stop_worker, store.close]
        if queries is not store:
            on_shutdown.append(queries.close)
    steps += [("app broker", broker.start_now), ("handler", handler.start)]
    if projections is not None:

        async def start_worker() -> None:
            assert health is not None
            await worker.start()
            health.started()

        steps.append(("projections", start_worker))
    start = ServiceStart(steps)

    # the committed document's development server, not this deployment's brokers: the page
    # is open to anyone, and the brokers' addresses are the platform's to hand out (the app's
    # own broker is not added to it either: contract._Document.add_broker)
    spec = specification(documentation_broker(config.topics))

    async def launch() -> None:
        handler.export_metrics()
        start.launch()

    app = AsgiFastStream(
        broker,
        asgi_routes=[
            *_probe_routes(start, handler, health, exported),
            # not FastStream's page: it loads AsyncAPI's script without integrity checks
            *asyncapi_routes(spec),
        ],
        logger=logger,
        specification=spec,
        on_startup=[launch],
        # a start still running is cancelled before anything it started is stopped
        on_shutdown=[each_in_turn([start.cancel, *on_shutdown])],
    )
    typed = typed_refusals(app)  # its own 404 and 405 are text
    if store is None or projections is None:
        return Service(typed, handler, start)

    def migrated_already() -> bool:  # the queries answer 503 "starting" until then
        return start.passed("read model")

    served = query_api(
        queries, fallback=typed, tokens=projections.api_tokens, ready=migrated_already
    )
    return Service(served, handler, start, health)


def _probe_routes(
    start: ServiceStart, handler: CommandHandler, health: FoldHealth | None, exported: RoleView
) -> list[tuple[str, Any]]:
    """``/healthz`` (alive: the start not failed, the handler's loop running), ``/readyz``
    (serving: every step started, the handler's partitions ready, no other store in the
    projections' group) and ``/metrics`` (the families of this process's roles)."""

    @get(include_in_schema=False)
    async def healthz(scope: Scope) -> AsgiResponse:
        if start.failure is not None or not handler.alive:
            return _json(503, '{"status": "failed"}')
        if not start.done:
            return _json(200, json.dumps({"status": "starting", "waiting_for": start.step}))
        return _json(200, '{"status": "ok"}')

    @get(include_in_schema=False)
    async def readyz(scope: Scope) -> AsgiResponse:
        # a stuck projection is reported, not a reason; another store in the projections'
        # group is (its query API answers wrong: docs/operations.md)
        ready = start.done and handler.ready and not (health is not None and health.split)
        body: dict[str, Any] = {
            "status": "ready" if ready else "not ready",
            "partitions": sorted(handler.owned_partitions()),
            "states": {str(n): state for n, state in handler.partition_states().items()},
        }
        if not start.done:
            body["starting"] = {"waiting_for": start.step, "failed": start.failure is not None}
        if health is not None:
            body["projections"] = health.status()
        return _json(200 if ready else 503, json.dumps(body))

    @get(include_in_schema=False)
    async def prometheus(scope: Scope) -> AsgiResponse:
        body = generate_latest(exported)
        return AsgiResponse(body, 200, {"content-type": CONTENT_TYPE_LATEST})

    return [("/healthz", healthz), ("/readyz", readyz), ("/metrics", prometheus)]


def projection_settings(config: HandlerConfig) -> ProjectionSettings:
    """The projections of ``blackjack serve``: the handler's broker and prefix, and a consumer
    group under the same prefix unless ``BLACKJACK_PROJECTION_GROUP`` names one."""
    env = {**os.environ, "BLACKJACK_TOPIC_PREFIX": config.kafka.topic_prefix}
    return dataclasses.replace(
        ProjectionSettings.from_env(env),
        bootstrap=config.kafka.bootstrap,
        security=config.kafka.security,
    )
