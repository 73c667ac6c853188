"""``blackjack serve``, ``blackjack handler`` and ``blackjack asyncapi``.

    blackjack serve     the handler plus the HTTP app (health, readiness, metrics, AsyncAPI),
                        a projection worker and the query API (not with --no-projections)
    blackjack handler   the handler alone, until SIGTERM or SIGINT
    blackjack asyncapi  check (or --write) schemas/asyncapi.json

Configuration comes from the environment (see ``docs/kafka.md``); the HTTP address from
``--host``/``--port`` or ``BLACKJACK_HTTP_HOST``/``BLACKJACK_HTTP_PORT`` (127.0.0.1:8080).
"""

from __future__ import annotations

import argparse
import asyncio
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from blackjack.app import Service


LOG_LEVEL_HELP = "DEBUG, INFO, WARNING, ... (default: BLACKJACK_LOG_LEVEL, else INFO)"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = sub.add_parser(
        "serve",
        help="the service: command handler, projection worker, query API, health and metrics "
        "(what make run starts)",
    )
    serve.add_argument(
        "--host",
        default=os.environ.get("BLACKJACK_HTTP_HOST", "127.0.0.1"),
        help="HTTP address (default: BLACKJACK_HTTP_HOST, else 127.0.0.1)",
    )
    # A string default is converted by ``type`` only when ``serve`` is parsed, so a wrong
    # BLACKJACK_HTTP_PORT is one line from ``blackjack serve``, not a traceback from every
    # other command (the parser of each is built for all).
    serve.add_argument(
        "--port",
        type=tcp_port,
        default=os.environ.get("BLACKJACK_HTTP_PORT", "").strip() or "8080",
        help="HTTP port (default: BLACKJACK_HTTP_PORT, else 8080)",
    )
    serve.add_argument(
        "--log-level", default=os.environ.get("BLACKJACK_LOG_LEVEL", "INFO"), help=LOG_LEVEL_HELP
    )
    serve.add_argument(
        "--no-projections",
        action="store_true",
        help="no projection worker or query API in this process (where those run on their own: "
        "`blackjack projections run --http`)",
    )
    # both stop cleanly on a SIGTERM that came while they were importing (blackjack.stopping)
    serve.set_defaults(handler=_serve)
    handler = sub.add_parser("handler", help="run the command handler alone (no HTTP)")
    handler.add_argument(
        "--log-level", default=os.environ.get("BLACKJACK_LOG_LEVEL", "INFO"), help=LOG_LEVEL_HELP
    )
    handler.set_defaults(handler=_handler)
    asyncapi = sub.add_parser("asyncapi", help="check (or --write) schemas/asyncapi.json")
    asyncapi.add_argument(
        "--write",
        action="store_true",
        help="write it from the code (without it: check it, exit 1 when it is out of date)",
    )
    asyncapi.add_argument("--path", default="schemas/asyncapi.json", help="default: %(default)s")
    asyncapi.set_defaults(handler=_asyncapi)


def tcp_port(text: str) -> int:
    """``--port`` or ``BLACKJACK_HTTP_PORT``: a whole number from 1 to 65535."""
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a TCP port (1-65535; from --port or BLACKJACK_HTTP_PORT)"
        )
    return port


def _serve(args: argparse.Namespace) -> int:
    from blackjack.app import build_app, projection_settings
    from blackjack.bus.cut_short import close_clients_cut_short
    from blackjack.bus.metadata_backoff import back_off_failed_metadata_updates
    from blackjack.command_handler.config import HandlerConfig
    from blackjack.http_server import Server, http_config
    from blackjack.observability.logging import configure_logging
    from blackjack.stopping import stopped_before_start

    configure_logging(args.log_level)  # first: reading the settings may log (a key file made)
    handler_config = HandlerConfig.from_env()
    projections = None if args.no_projections else projection_settings(handler_config)
    if stopped_before_start():
        return 0
    close_clients_cut_short()  # a SIGTERM during a client's start leaves nothing open
    back_off_failed_metadata_updates()  # no busy retry while a broker is away
    service = build_app(handler_config, projections)
    config = http_config(
        service.app, args.host, args.port, log_config=None, lifespan="on", access_log=False
    )
    server = Server(config, on_exit=service.start.halt)  # a SIGTERM starts nothing more
    return asyncio.run(serve_while_the_service_lives(server, service))


class _Server(Protocol):
    started: bool
    should_exit: bool

    async def serve(self) -> None: ...


async def serve_while_the_service_lives(server: _Server, service: Service) -> int:
    """Serve until stopped, or until the service's start fails or its handler's loop dies:
    such a handler would hold its partitions in the group without serving them, so the
    process stops (leaving the group, the others take them) and exits 1, for whatever
    supervises it to start it again."""

    async def stop_when_the_service_fails() -> None:
        died = asyncio.ensure_future(service.handler.died.wait())
        failed = asyncio.ensure_future(service.start.failed.wait())
        watched: set[asyncio.Future[Any]] = {died, failed}
        if service.folding is not None:  # its store another release's, a batch unreadable
            watched.add(asyncio.ensure_future(service.folding.stopped()))
        try:
            await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in watched:
                task.cancel()
        server.should_exit = True

    watch = asyncio.create_task(stop_when_the_service_fails())
    try:
        await server.serve()
    finally:
        watch.cancel()
    from blackjack.command_handler.key_check import NotTheDeploymentsKey
    from blackjack.projections.store import StoreRefused  # loaded with the app already

    # one line and its exit code (4; 2 for the key)
    if isinstance(service.start.failure, StoreRefused | NotTheDeploymentsKey):
        raise service.start.failure
    failed = (
        service.handler.failure is not None
        or service.start.failure is not None
        or (service.folding is not None and service.folding.fatal is not None)
    )
    return 0 if server.started and not failed else 1


def _handler(args: argparse.Namespace) -> int:
    from blackjack.bus.cut_short import close_clients_cut_short
    from blackjack.bus.metadata_backoff import back_off_failed_metadata_updates
    from blackjack.command_handler.config import HandlerConfig
    from blackjack.command_handler.service import CommandHandler
    from blackjack.observability.logging import configure_logging
    from blackjack.stopping import on_stop_signal, stopped_before_start, unless_stopped

    configure_logging(args.log_level)  # first: reading the settings may log (a key file made)
    config = HandlerConfig.from_env()  # a wrong setting is named before anything starts
    if stopped_before_start():
        return 0
    close_clients_cut_short()  # a SIGTERM during a client's start leaves nothing open
    back_off_failed_metadata_updates()  # no busy retry while a broker is away

    async def run() -> int:
        handler = CommandHandler(config)
        stop = asyncio.Event()
        on_stop_signal(asyncio.get_running_loop(), lambda signum: stop.set())
        stopped = asyncio.create_task(stop.wait())
        try:
            # a start that waits for the brokers gives way to a signal
            if await unless_stopped(handler.start(), stopped):
                died = asyncio.create_task(handler.join())
                await asyncio.wait({died, stopped}, return_when=asyncio.FIRST_COMPLETED)
                died.cancel()
        finally:
            stopped.cancel()
            await handler.stop()
        return 1 if handler.failure is not None else 0

    return asyncio.run(run())


def _asyncapi(args: argparse.Namespace) -> int:
    from blackjack.asyncapi.contract import drifted, write
    from blackjack.documents import check_or_write

    return check_or_write(Path(args.path), args.write, drifted, write)
