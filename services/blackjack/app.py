"""The service as one ASGI app: FastStream's Kafka broker and AsyncAPI docs, the command
handler, and the operational endpoints.

    /healthz          200 while the handler's tasks run (liveness)
    /readyz           200 once the handler has joined its group and rebuilt every partition
                      (with the projection worker's progress: records it is stuck at)
    /metrics          Prometheus text format
    /docs/asyncapi    the AsyncAPI document rendered (``/docs/asyncapi.json`` as JSON)
    /v1/...           the query API over the projections (wallets, game history, tables)

``blackjack serve`` runs it under uvicorn. Other parts of the service add their FastStream
subscribers to ``broker`` (a ``KafkaRouter`` included before start-up).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
from collections.abc import Awaitable, Callable
from typing import Any

from faststream.asgi import AsgiFastStream, AsgiResponse, AsyncAPIRoute, get
from faststream.asgi.types import ASGIApp, Scope
from faststream.kafka import KafkaBroker
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from blackjack.api.routes import query_api
from blackjack.bus.contract import documentation_broker, specification
from blackjack.bus.reachable import wait_for_brokers
from blackjack.bus.topics import ensure_topics
from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.service import CommandHandler
from blackjack.observability.logging import faststream_logger
from blackjack.projections.health import FoldHealth
from blackjack.projections.settings import ProjectionSettings
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter
from blackjack.stopping import unless_stopped


class _AppBroker(KafkaBroker):
    """The broker FastStream's app needs (the handler and the projection worker have clients
    of their own): not started once the server was asked to exit during the start-up hooks,
    which it runs right after them (its connection would fail against brokers that never
    came, with a trace)."""

    exit_requested: asyncio.Event | None = None

    async def start(self) -> None:
        if self.exit_requested is None or not self.exit_requested.is_set():
            await super().start()


def _json(status: int, body: str) -> AsgiResponse:
    return AsgiResponse(body.encode(), status, {"content-type": "application/json"})


def build_app(
    config: HandlerConfig,
    projections: ProjectionSettings | None = None,
    exit_requested: asyncio.Event | None = None,
) -> tuple[ASGIApp, CommandHandler]:
    """The handler's app; with ``projections``, also the projection worker (its own consumer
    group and broker) and the query API over its store, as ``make run`` serves them.

    ``exit_requested`` (a signal, set by the server) ends the wait for the read model's
    database at start: nothing more is started, and the server stops as it would have."""
    exit_requested = exit_requested or asyncio.Event()
    logger = faststream_logger()  # JSON lines like every other log
    broker = _AppBroker(
        config.kafka.bootstrap,
        client_id=f"{config.instance_id}-faststream",
        security=config.kafka.security.faststream(),
        logger=logger,
    )
    broker.exit_requested = exit_requested
    handler = CommandHandler(config)
    health = None if projections is None else FoldHealth(projections.stuck_after)

    @get(include_in_schema=False)
    async def healthz(scope: Scope) -> AsgiResponse:
        if handler.alive:
            return _json(200, '{"status": "ok"}')
        return _json(503, '{"status": "failed"}')

    @get(include_in_schema=False)
    async def readyz(scope: Scope) -> AsgiResponse:
        ready = handler.ready  # a stuck projection is reported, not a reason to stop serving
        body: dict[str, Any] = {
            "status": "ready" if ready else "not ready",
            "partitions": sorted(handler.owned_partitions()),
            "states": {str(n): state for n, state in handler.partition_states().items()},
        }
        if health is not None:
            body["projections"] = health.status()
        return _json(200 if ready else 503, json.dumps(body))

    @get(include_in_schema=False)
    async def prometheus(scope: Scope) -> AsgiResponse:
        return AsgiResponse(generate_latest(), 200, {"content-type": CONTENT_TYPE_LATEST})

    def unless_exiting(start: Callable[[], Awaitable[Any]]) -> Callable[[], Awaitable[None]]:
        """``start``, unless the server is asked to exit first or meanwhile (a start that
        waits for the brokers or the database gives way to a SIGTERM)."""

        async def started() -> None:
            if exit_requested.is_set():
                return
            exiting = asyncio.ensure_future(exit_requested.wait())
            try:
                await unless_stopped(start(), exiting)
            finally:
                exiting.cancel()

        return started

    async def brokers_reachable() -> None:  # started before them: waits (the app's broker
        # connects as soon as the start-up hooks have run)
        await wait_for_brokers(config.kafka.bootstrap, config.kafka.security)

    on_startup: list[Callable[[], Awaitable[Any]]] = [unless_exiting(brokers_reachable)]
    after_startup: list[Callable[[], Awaitable[Any]]] = [unless_exiting(handler.start)]
    on_shutdown: list[Callable[[], Awaitable[Any]]] = [handler.stop]
    store = None
    if projections is not None:
        # Imported here: a handler-only process must not export the worker's metrics.
        from blackjack.projections.worker import build_broker, migrated

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
        on_startup += [unless_exiting(ensure_events_topic), unless_exiting(migrate)]
        after_startup.append(unless_exiting(worker.start))
        on_shutdown += [stop_worker, store.close]
        if queries is not store:
            on_shutdown.append(queries.close)

    app = AsgiFastStream(
        broker,
        asgi_routes=[("/healthz", healthz), ("/readyz", readyz), ("/metrics", prometheus)],
        asyncapi_path=AsyncAPIRoute("/docs/asyncapi", try_it_out_path=None),
        logger=logger,
        specification=specification(documentation_broker(config.topics, config.kafka.bootstrap)),
        on_startup=on_startup,
        after_startup=after_startup,
        on_shutdown=on_shutdown,
    )
    if store is None or projections is None:
        return app, handler
    return query_api(queries, fallback=app, tokens=projections.api_tokens), handler


def projection_settings(config: HandlerConfig) -> ProjectionSettings:
    """The projections of ``blackjack serve``: the handler's broker and prefix, and a consumer
    group under the same prefix unless ``BLACKJACK_PROJECTION_GROUP`` names one."""
    env = {**os.environ, "BLACKJACK_TOPIC_PREFIX": config.kafka.topic_prefix}
    return dataclasses.replace(
        ProjectionSettings.from_env(env),
        bootstrap=config.kafka.bootstrap,
        security=config.kafka.security,
    )
