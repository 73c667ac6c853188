"""A SIGTERM in a process's first seconds, before its start has got anywhere.

Kubernetes sends SIGTERM whenever it likes (a rollout cancelled right after it began). The
first seconds of ``serve``, ``handler`` and ``projections run`` are Python importing the
code; their signal handlers came only after, and a SIGTERM before them ended Python itself,
status 143. Now a stop signal is held from the start of ``main`` and the process stops
cleanly: exit 0, nothing started (not even the read model's file).

The signal is sent when the process says, in Python's verbose import trace
(``PYTHONVERBOSE``), that it has imported a module: in ``main``'s imports, in the command's,
or inside the event loop before the handlers are in place.

And a SIGTERM while one of its Kafka clients bootstraps (it waits for the metadata it asked
a broker for; held here by a port in front of the broker): aiokafka left that connection
open, and FastStream its producer, until the garbage collector logged them unclosed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest

from blackjack.messages.sealing import ShoeSeal
from tests.integration.conftest import WAIT_S, KafkaSpace
from tests.integration.infra import _pipe, free_port
from tests.integration.test_broker_wait import start, stopped_cleanly

pytestmark = pytest.mark.integration

BLACKJACK = Path(sys.executable).parent / "blackjack"
STOPPED_BEFORE = '"stopped before its start"'


async def terminated_after_import(args: list[str], module: str, tmp_path: Path) -> tuple[int, str]:
    """Start ``blackjack ARGS``, send SIGTERM once it has imported ``module``: its exit
    status and its log (stdout)."""
    env = {
        **os.environ,
        "PYTHONVERBOSE": "1",  # a line on stderr for every module imported
        "BLACKJACK_KAFKA_BOOTSTRAP": f"127.0.0.1:{free_port()}",  # nothing listens
        "BLACKJACK_SHOE_KEY": ShoeSeal.new_key_hex(),
        "BLACKJACK_DB_URL": f"sqlite+aiosqlite:///{tmp_path / 'read.db'}",
    }
    process = await asyncio.create_subprocess_exec(
        str(BLACKJACK),
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    try:
        async with asyncio.timeout(WAIT_S):
            while not (line := await process.stderr.readline()).startswith(
                f"import '{module}' ".encode()
            ):
                assert line, f"the process ended before it imported {module}"
        process.send_signal(signal.SIGTERM)
        # both pipes read to their end: the verbose trace would fill stderr's and block it
        out, _ = await asyncio.wait_for(process.communicate(), 10)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, out.decode()


@pytest.mark.parametrize(
    ("args", "module"),
    [
        (["serve"], "blackjack.client_cli"),  # main's own imports
        (["serve"], "blackjack.app"),  # the command's
        (["handler"], "blackjack.command_handler.service"),
        (["projections", "run"], "blackjack.projection_worker.worker"),
    ],
    ids=["serve-main", "serve", "handler", "projections"],
)
async def test_a_sigterm_before_the_signal_handlers_stops_the_process_cleanly(
    args: list[str], module: str, tmp_path: Path
) -> None:
    port = ["--port", str(free_port())] if args[0] == "serve" else []
    status, log = await terminated_after_import([*args, *port], module, tmp_path)
    assert status == 0, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    assert STOPPED_BEFORE in log, log[-3000:]
    assert not (tmp_path / "read.db").exists()  # nothing started, nothing half-written


async def test_a_sigterm_inside_the_loop_before_the_handlers_stops_the_worker_cleanly(
    tmp_path: Path,
) -> None:
    """``projections run --http`` builds its HTTP server in the event loop, before the
    server puts its signal handlers in place: a signal held until then is taken by them."""
    status, log = await terminated_after_import(
        ["projections", "run", "--http", f"127.0.0.1:{free_port()}"],
        "blackjack.http_server",
        tmp_path,
    )
    assert status == 0, log[-3000:]
    assert "Traceback" not in log, log[-3000:]


class MetadataHold:
    """A port in front of the broker that forwards every request but the metadata request
    (api key 3) on its ``hold_on``-th connection, which it keeps (``held`` set): a client's
    bootstrap waits there for its answer. A client bootstraps through this port only: it
    reaches the brokers at the addresses the metadata gives."""

    def __init__(self, broker: str, hold_on: int) -> None:
        self.host, port = broker.rsplit(":", 1)
        self.broker_port = int(port)
        self.hold_on = hold_on
        self.port = free_port()
        self.held = asyncio.Event()
        self._connections = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> MetadataHold:
        self._server = await asyncio.start_server(self._forward, "127.0.0.1", self.port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _forward(
        self, client_in: asyncio.StreamReader, client_out: asyncio.StreamWriter
    ) -> None:
        self._connections += 1
        holding = self._connections == self.hold_on
        server_in, server_out = await asyncio.open_connection(self.host, self.broker_port)
        answers = asyncio.create_task(_pipe(server_in, client_out))
        try:
            while True:
                size = await client_in.readexactly(4)
                request = await client_in.readexactly(int.from_bytes(size, "big"))
                if holding and int.from_bytes(request[:2], "big") == METADATA:
                    self.held.set()
                    continue  # never answered: the client waits for it
                server_out.write(size + request)
                await server_out.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            server_out.close()
            answers.cancel()


METADATA = 3
"""The api key of Kafka's MetadataRequest."""


@pytest.mark.parametrize(
    ("args", "hold_on"),
    [
        (["projections", "run"], 1),  # the wait for the brokers' probe
        (["projections", "run"], 2),  # FastStream's producer, the broker up
        (["handler"], 2),  # the topics' admin client
    ],
    ids=["probe", "worker-producer", "handler-admin"],
)
async def test_a_sigterm_during_a_clients_bootstrap_leaves_no_connection_open(
    args: list[str], hold_on: int, kafka_space: Any, tmp_path: Path
) -> None:
    """aiokafka's bootstrap, cancelled while it waits for the metadata it asked its
    connection for, did not close that connection: ``Unclosed AIOKafkaConnection`` in the
    log of a clean stop, once the garbage collector found it."""
    space: KafkaSpace = await kafka_space(partitions=1)
    async with MetadataHold(space.bootstrap, hold_on) as hold:
        env = space.env(
            BLACKJACK_KAFKA_BOOTSTRAP=f"127.0.0.1:{hold.port}",
            BLACKJACK_DB_URL=f"sqlite+aiosqlite:///{tmp_path / 'read.db'}",
        )
        process = await start(args, env)
        try:
            await asyncio.wait_for(hold.held.wait(), WAIT_S)
            await stopped_cleanly(process)
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
