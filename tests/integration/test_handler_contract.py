"""The service's published contract and its HTTP face.

* ``schemas/asyncapi.json`` is what FastStream generates from the channel declarations.
* ``blackjack serve`` (a real process) serves health, readiness, Prometheus metrics and the
  AsyncAPI document of its own topics, handles commands, and stops cleanly on SIGTERM.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from blackjack.asyncapi.contract import asyncapi_document, drifted, render
from blackjack.domain import commands as cmd
from tests.integration.cli_runs import lines_until
from tests.integration.conftest import WAIT_S, KafkaSpace
from tests.integration.infra import free_port

ASYNCAPI = Path(__file__).parents[2] / "schemas" / "asyncapi.json"
BLACKJACK = Path(sys.executable).parent / "blackjack"


def test_the_committed_asyncapi_document_matches_the_channels() -> None:
    assert not drifted(ASYNCAPI), "run `blackjack asyncapi --write` and commit the result"
    document = json.loads(ASYNCAPI.read_text())
    addresses = {channel["address"] for channel in document["channels"].values()}
    assert addresses == {
        "blackjack.commands",
        "blackjack.events",
        "blackjack.command-results",
        "blackjack.snapshots",
    }
    # The service receives the platforms' commands, and sends its own steps to the same topic.
    actions = {name: operation["action"] for name, operation in document["operations"].items()}
    assert actions == {
        "commands": "receive",
        "service-commands": "send",
        "events": "send",
        "command-results": "send",
        "snapshots": "send",
    }
    # A message's correlation id is where the records carry it, never FastStream's header: an
    # event's CloudEvents header; a command's body (the handler reads no header of a command);
    # a result's body (its header is absent when the id is null)
    correlations = {
        name: (message.get("correlationId") or {}).get("location")
        for name, message in document["components"]["messages"].items()
    }
    assert correlations == {
        "commands:SubscribeMessage": "$message.payload#/correlation_id",
        "service-commands:Message": "$message.payload#/correlation_id",
        "command-results:Message": "$message.payload#/correlation_id",
        "events:Message": "$message.header#/ce_correlationid",
        "snapshots:Message": None,
    }


@pytest.mark.integration
async def test_blackjack_serve_answers_health_readiness_metrics_and_docs(
    kafka_space: Any, tmp_path: Path
) -> None:
    space: KafkaSpace = await kafka_space(partitions=2)
    port = free_port()
    store = f"sqlite+aiosqlite:///{tmp_path}/projections.db"
    process = await asyncio.create_subprocess_exec(
        str(BLACKJACK),
        "serve",
        "--port",
        str(port),
        env={**os.environ, **space.env(), "BLACKJACK_DB_URL": store},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert process.stdout is not None
    try:
        log = await lines_until(process.stdout, '"partition ready"', space.partitions)
        assert all(json.loads(line) for line in log if line.startswith("{"))  # JSON lines
        async with (
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http,
            space.client() as client,
        ):
            assert (await http.get("/healthz")).status_code == 200
            ready = await http.get("/readyz")
            assert ready.status_code == 200 and ready.json()["partitions"] == [0, 1]
            result = await client.execute("served-1", cmd.OpenTable(variant="surrender"))
            assert result.status == "accepted"
            # Metrics are counted once the transaction commits, just after its result shows;
            # the next command of the same stream is handled after that count.
            await client.execute("served-1", cmd.SitDown(player_id="p"))
            metrics = (await http.get("/metrics")).text
            assert 'blackjack_commands_total{code="",status="accepted",type="OpenTable"} 1.0' in (
                metrics
            )
            assert "blackjack_transaction_seconds_bucket" in metrics
            served = (await http.get("/docs/asyncapi.json")).json()
            # the committed development server, never this deployment's brokers (an open page)
            assert served == json.loads(render(asyncapi_document(space.topics)))
            page = await http.get("/docs/asyncapi")
            assert page.status_code == 200 and "text/html" in page.headers["content-type"]
            # The projections run in the same process: the query API catches up with the log.
            async with asyncio.timeout(WAIT_S):
                while (table := await http.get("/v1/tables/served-1")).status_code != 200:
                    await asyncio.sleep(0.1)  # polling an HTTP read model: nothing to await
            assert table.json()["variant"] == "surrender"
            assert (await http.get("/v1/players/nobody/wallet")).status_code == 404
        # A graceful stop: the handler leaves its group and the process exits 0 (uvicorn on
        # its own would raise the SIGTERM again once shut down: status 143).
        process.send_signal(signal.SIGTERM)
        rest = await lines_until(process.stdout, '"handler stopped"', 1)
        assert any("LeaveGroup request succeeded" in line for line in rest)
        assert await asyncio.wait_for(process.wait(), WAIT_S) == 0
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@pytest.mark.integration
async def test_blackjack_serve_waiting_for_its_database_stops_at_once_on_sigterm(
    kafka_space: Any,
) -> None:
    """uvicorn waits for the app's start-up before it looks at a signal: `serve` started
    while its read model's database was down answered SIGTERM only once the database did.
    Its HTTP endpoints answer meanwhile: alive and starting, the query API 503."""
    space: KafkaSpace = await kafka_space(partitions=1)
    nothing_listens = f"postgresql+asyncpg://blackjack:x@127.0.0.1:{free_port()}/blackjack"
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        str(BLACKJACK),
        "serve",
        "--port",
        str(port),
        env={**os.environ, **space.env(), "BLACKJACK_DB_URL": nothing_listens},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert process.stdout is not None
    try:
        await lines_until(process.stdout, '"read model unreachable; folding waits for it"', 1)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            alive = await http.get("/healthz")
            assert alive.json() == {"status": "starting", "waiting_for": "read model"}
            assert (await http.get("/readyz")).status_code == 503
            table = await http.get("/v1/tables/any")
            assert table.status_code == 503
            assert table.json()["error"]["code"] == "store_unavailable"
        process.send_signal(signal.SIGTERM)
        status = await asyncio.wait_for(process.wait(), 10)
        rest = (await process.stdout.read()).decode()
        assert status == 0, rest[-3000:]
        assert "Traceback" not in rest, rest[-3000:]
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
