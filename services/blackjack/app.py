"""The service as one ASGI app: FastStream's Kafka broker and AsyncAPI docs, the command
handler, and the operational endpoints.

    /healthz          200 while the handler's tasks run (liveness)
    /readyz           200 once the handler has joined its group and rebuilt every partition
    /metrics          Prometheus text format
    /docs/asyncapi    the AsyncAPI document rendered (``/docs/asyncapi.json`` as JSON)

``blackjack serve`` runs it under uvicorn. Other parts of the service add their FastStream
subscribers to ``broker`` (a ``KafkaRouter`` included before start-up).
"""

from __future__ import annotations

import json
import logging

from faststream.asgi import AsgiFastStream, AsgiResponse, AsyncAPIRoute, get
from faststream.asgi.types import Scope
from faststream.kafka import KafkaBroker
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from blackjack.bus.contract import declare_channels, specification
from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.service import CommandHandler


def _json(status: int, body: str) -> AsgiResponse:
    return AsgiResponse(body.encode(), status, {"content-type": "application/json"})


def build_app(config: HandlerConfig) -> tuple[AsgiFastStream, CommandHandler]:
    logger = logging.getLogger("blackjack.faststream")  # JSON lines like every other log
    broker = KafkaBroker(
        config.kafka.bootstrap, client_id=f"{config.instance_id}-faststream", logger=logger
    )
    declare_channels(broker, config.topics)
    handler = CommandHandler(config)

    @get(include_in_schema=False)
    async def healthz(scope: Scope) -> AsgiResponse:
        if handler.alive:
            return _json(200, '{"status": "ok"}')
        return _json(503, '{"status": "failed"}')

    @get(include_in_schema=False)
    async def readyz(scope: Scope) -> AsgiResponse:
        body = {
            "status": "ready" if handler.ready else "not ready",
            "partitions": sorted(handler.owned_partitions()),
            "states": {str(n): state for n, state in handler.partition_states().items()},
        }
        return _json(200 if handler.ready else 503, json.dumps(body))

    @get(include_in_schema=False)
    async def prometheus(scope: Scope) -> AsgiResponse:
        return AsgiResponse(generate_latest(), 200, {"content-type": CONTENT_TYPE_LATEST})

    app = AsgiFastStream(
        broker,
        asgi_routes=[("/healthz", healthz), ("/readyz", readyz), ("/metrics", prometheus)],
        asyncapi_path=AsyncAPIRoute("/docs/asyncapi", try_it_out_path=None),
        logger=logger,
        specification=specification(broker),
        after_startup=[handler.start],
        on_shutdown=[handler.stop],
    )
    return app, handler
