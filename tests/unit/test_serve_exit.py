"""``blackjack serve`` ends when its command handler's loop dies or its start fails (exit 1),
so that the partitions it holds go to another instance and a supervisor starts it again; a
normal stop exits 0."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any
from unittest.mock import patch

import httpx
import pytest
import uvicorn
from faststream.kafka import KafkaBroker
from structlog.testing import capture_logs

from blackjack.app import Service, build_app, each_in_turn
from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.service import CommandHandler
from blackjack.http_server import Server as HttpServer
from blackjack.messages.sealing import ShoeSeal
from blackjack.projection_worker.settings import ProjectionSettings
from blackjack.projections.revision import SchemaMismatch
from blackjack.service_cli import serve_while_the_service_lives
from tests.unit.polling import until


class Server:
    """What uvicorn's server does here: serve until ``should_exit``."""

    def __init__(self) -> None:
        self.started = False
        self.should_exit = False
        self.serving = asyncio.Event()

    async def serve(self) -> None:
        self.started = True
        self.serving.set()
        while not self.should_exit:
            await asyncio.sleep(0.01)  # uvicorn's main loop checks the flag every 0.1 s


def config() -> HandlerConfig:
    return HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), group_id="g")


def handler() -> CommandHandler:
    return CommandHandler(config())


def service() -> Service:
    return build_app(config())  # nothing connects until its start is launched


async def test_the_service_exits_1_when_the_handlers_loop_dies() -> None:
    server, serving_service = Server(), service()
    dying = serving_service.handler
    serving = asyncio.create_task(serve_while_the_service_lives(server, serving_service))
    await asyncio.wait_for(server.serving.wait(), 5)

    async def broken() -> None:
        raise RuntimeError("the loop failed")

    loop = asyncio.create_task(dying._guard(broken()))
    assert await asyncio.wait_for(serving, 5) == 1
    assert server.should_exit and isinstance(dying.failure, RuntimeError)
    assert loop.done()


async def test_the_service_exits_1_when_its_start_fails() -> None:
    """A step that fails rather than waits (a read model a newer version migrated): the
    process ends, as it did when the start ran before the server answered anything."""
    server, failing = Server(), service()
    passed: list[str] = []

    async def ok() -> None:
        passed.append("kafka")

    async def broken() -> None:
        raise RuntimeError("the store is newer than this code")

    failing.start.steps = [("kafka", ok), ("read model", broken), ("handler", ok)]
    serving = asyncio.create_task(serve_while_the_service_lives(server, failing))
    await asyncio.wait_for(server.serving.wait(), 5)
    with capture_logs() as logs:
        failing.start.launch()
        assert await asyncio.wait_for(serving, 5) == 1
    assert server.should_exit and passed == ["kafka"]
    assert failing.start.passed("kafka") and not failing.start.passed("read model")
    assert not failing.start.done and isinstance(failing.start.failure, RuntimeError)
    assert [e["step"] for e in logs if e["event"] == "start failed"] == ["read model"]


async def test_the_service_exits_1_when_its_projection_worker_finds_another_schema(
    tmp_path: Path,
) -> None:
    """``serve`` folds too: a newer release's migration must stop its worker, and so the
    process (a worker left running would hold its partitions without folding them)."""
    settings = ProjectionSettings(db_url=f"sqlite+aiosqlite:///{tmp_path / 'p.db'}")
    server, folding = Server(), build_app(config(), settings)
    assert folding.folding is not None
    serving = asyncio.create_task(serve_while_the_service_lives(server, folding))
    await asyncio.wait_for(server.serving.wait(), 5)
    folding.folding.schema_mismatched(SchemaMismatch("0006", ["0007"], newer=True))
    assert await asyncio.wait_for(serving, 5) == 1
    assert server.should_exit


async def test_a_stopped_service_exits_0() -> None:
    server = Server()
    serving = asyncio.create_task(serve_while_the_service_lives(server, service()))
    await asyncio.wait_for(server.serving.wait(), 5)
    server.should_exit = True  # SIGTERM
    assert await asyncio.wait_for(serving, 5) == 0


async def test_a_stop_cancels_a_start_still_waiting() -> None:
    waiting = service()
    entered, never = asyncio.Event(), asyncio.Event()

    async def kafka_down() -> None:
        entered.set()
        await never.wait()

    waiting.start.steps = [("kafka", kafka_down)]
    waiting.start.launch()
    await asyncio.wait_for(entered.wait(), 5)
    assert waiting.start.step == "kafka" and not waiting.start.done
    await asyncio.wait_for(waiting.start.cancel(), 5)
    assert waiting.start.failure is None and not waiting.start.failed.is_set()


async def test_a_second_stop_waits_for_the_first_to_end() -> None:
    """Callers stop a handler more than once (the takeover drill's clean-up after a restart
    that stopped it): the second call must not return while the first still closes."""
    stopping, closing = handler(), asyncio.Event()

    async def slow_close() -> None:
        await closing.wait()

    stopping._timers.stop = slow_close  # type: ignore[method-assign]
    first = asyncio.create_task(stopping.stop())
    second = asyncio.create_task(stopping.stop())
    await asyncio.sleep(0)  # both are waiting now (nothing to await: the close is held)
    await asyncio.sleep(0)
    assert not first.done() and not second.done()
    closing.set()
    await asyncio.wait_for(asyncio.gather(first, second), 5)


async def test_a_stop_goes_on_when_its_caller_is_cancelled_and_past_a_failing_close() -> None:
    """The second review: a cancelled stop (Ctrl-C, an outer timeout) or one whose consumer
    failed to close left the reader and the clock's producer open for good, and every later
    stop did nothing."""
    stopping, closing = handler(), asyncio.Event()
    closed: list[str] = []

    class Client:
        def __init__(self, name: str, fails: bool = False) -> None:
            self.name, self.fails = name, fails

        async def stop(self) -> None:
            await closing.wait()
            closed.append(self.name)
            if self.fails:
                raise RuntimeError(f"{self.name} could not leave the group")

    async def timers_stop() -> None:
        closed.append("clock")

    stopping._consumer = Client("consumer", fails=True)
    stopping._reader = Client("reader")
    stopping._timers.stop = timers_stop  # type: ignore[method-assign]
    cancelled = asyncio.create_task(stopping.stop())
    await asyncio.sleep(0)
    cancelled.cancel()
    closing.set()
    with pytest.raises(RuntimeError, match="could not leave the group"):
        await asyncio.wait_for(stopping.stop(), 5)  # the same stop, seen through
    assert closed == ["consumer", "reader", "clock"]
    assert cancelled.cancelled()


async def test_readiness_says_the_projection_worker_starts_until_it_has_started(
    tmp_path: Path,
) -> None:
    """/readyz answers during the start now: the worker's part said "folding" with its store
    "ok" while the start still waited for Kafka (nothing folded, the store not even asked)."""
    projections = ProjectionSettings(db_url=f"sqlite+aiosqlite:///{tmp_path / 'read.db'}")
    served = build_app(config(), projections)
    started: list[str] = []

    async def step() -> None:
        started.append("step")

    worker_started = served.start.steps[-1][1]
    served.start.steps = [("kafka", step), ("projections", worker_started)]
    transport = httpx.ASGITransport(app=served.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://serve") as http:
        waiting = (await http.get("/readyz")).json()
        assert waiting["starting"] == {"waiting_for": None, "failed": False}
        assert waiting["projections"]["status"] == "starting"
        with patch.object(KafkaBroker, "start", _nothing):
            served.start.launch()
            await asyncio.wait_for(until(lambda: served.start.done), 5)
        assert (await http.get("/readyz")).json()["projections"]["status"] == "folding"
    assert started == ["step"]


async def _nothing(*_: object) -> None:
    return None


async def test_a_sigterm_during_a_step_starts_nothing_more() -> None:
    """uvicorn runs the app's shutdown (which cancels the start) only after it has closed its
    connections: meanwhile a step that ended (the database came back) went on to the next,
    and a pod told to stop joined the handler's and the projections' groups to leave them
    again at once. The signal itself halts the start."""
    served = service()
    server = HttpServer(uvicorn.Config(served.app), on_exit=served.start.halt)
    gate, entered, later = asyncio.Event(), asyncio.Event(), []

    async def read_model() -> None:
        entered.set()
        await gate.wait()

    async def handler_start() -> None:
        later.append("handler")

    served.start.steps = [("read model", read_model), ("handler", handler_start)]
    served.start.launch()
    await asyncio.wait_for(entered.wait(), 5)
    server.handle_exit(signal.SIGTERM, None)
    gate.set()  # the database answers right after the signal
    await asyncio.wait_for(served.start.ended(), 5)  # before uvicorn's shutdown cancels it
    assert server.should_exit and later == []
    assert served.start.failure is None and not served.start.done
    await asyncio.wait_for(served.start.cancel(), 5)  # the shutdown's hook: nothing left


async def test_a_stop_that_fails_does_not_skip_the_ones_after_it(tmp_path: Path) -> None:
    """FastStream runs the shutdown hooks one after the other and gives up at the first that
    raises: a handler whose consumer could not leave its group left the projection worker in
    its group and the read model's store open."""
    settings = ProjectionSettings(db_url=f"sqlite+aiosqlite:///{tmp_path / 'read.db'}")
    stopped: list[str] = []

    async def failing_stop(handler: CommandHandler, timeout: float = 10.0) -> None:
        stopped.append("handler")
        raise RuntimeError("the consumer could not leave the group")

    async def close(store: object) -> None:
        stopped.append("store")

    received: asyncio.Queue[dict[str, str]] = asyncio.Queue()
    sent: list[MutableMapping[str, Any]] = []

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    with (
        patch.object(CommandHandler, "stop", failing_stop),
        patch("blackjack.projections.store.ProjectionStore.close", close),
        capture_logs() as logs,
    ):
        serving = build_app(config(), settings)
        serving.start.steps = []  # nothing to start: the shutdown alone is under test
        scope = {"type": "lifespan", "asgi": {"version": "3.0"}}
        lifespan = asyncio.ensure_future(serving.app(scope, received.get, send))
        await received.put({"type": "lifespan.startup"})
        await received.put({"type": "lifespan.shutdown"})
        await asyncio.wait_for(lifespan, 10)
    assert stopped == ["handler", "store"]
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    failed = [e for e in logs if e["event"] == "stopping failed"]
    assert len(failed) == 1 and failed[0]["part"].endswith("failing_stop")


async def test_a_stop_that_ends_cancelled_does_not_skip_the_ones_after_it() -> None:
    """A stop may end in a ``CancelledError`` that is not the shutdown's own cancellation (the
    handler's stop awaits its commands task, which ends cancelled if a cancellation escaped
    the client it awaited): ``except Exception`` let it through, and the projection worker
    stayed in its group and the store open, as before the hook ran every stop."""
    stopped: list[str] = []

    async def ends_cancelled() -> None:
        stopped.append("handler")
        task = asyncio.ensure_future(asyncio.sleep(10))
        task.cancel()
        await task  # a task of its own, cancelled: not the shutdown being cancelled

    async def close() -> None:
        stopped.append("store")

    with capture_logs() as logs:
        await asyncio.wait_for(each_in_turn([ends_cancelled, close])(), 5)
    assert stopped == ["handler", "store"]
    assert [e["event"] for e in logs] == ["stopping failed"]


async def test_the_shutdown_cancelled_is_cancelled_not_continued() -> None:
    """The shutdown's own cancellation still ends it: the stops after it do not run."""
    stopped: list[str] = []
    entered = asyncio.Event()

    async def slow() -> None:
        entered.set()
        await asyncio.sleep(10)

    async def close() -> None:
        stopped.append("store")

    shutdown = asyncio.ensure_future(each_in_turn([slow, close])())
    await entered.wait()
    shutdown.cancel()
    with pytest.raises(asyncio.CancelledError):
        await shutdown
    assert stopped == []


async def test_a_port_it_cannot_listen_on_is_a_setting_not_uvicorn_s_exit_3() -> None:
    """uvicorn exits 3 when it cannot bind, which the service's exit codes read as a store at
    another schema revision (docs/operations.md; `BlackjackProcessRestarting`'s causes): a
    second handler started without its own BLACKJACK_HTTP_PORT crash-looped pointing at the
    migrations. It is a setting refused (exit 2, one line)."""
    import socket

    from blackjack.configuration import ConfigurationError

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = HttpServer(uvicorn.Config(service().app, host="127.0.0.1", port=port))
        with pytest.raises(ConfigurationError, match=f"cannot listen on 127.0.0.1:{port}"):
            await server.serve()
