"""A process started before its brokers answer waits for them, and a SIGTERM ends that wait.

Each of them (``serve``, ``serve --no-projections``, ``handler``, ``projections run``) exited
with a trace within two seconds when no broker answered at its start (a cluster coming up in
another order, a broker restarting), and was restarted again and again by whatever
supervises it. Now each logs that it waits, waits, and stops at once and cleanly (exit 0)
on SIGTERM; a handler whose broker comes up later takes commands as usual. ``serve`` answers
HTTP meanwhile: alive and starting, not ready, what it waits for, its metrics.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from blackjack.domain import commands as cmd
from tests.integration import cli_runs
from tests.integration.conftest import WAIT_S, KafkaSpace
from tests.integration.infra import TcpGate, free_port

pytestmark = [pytest.mark.integration, pytest.mark.also_on_three_nodes]

BLACKJACK = Path(sys.executable).parent / "blackjack"
WAITING = '"Kafka unreachable; waiting for it"'


async def start(args: list[str], env: dict[str, str]) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        str(BLACKJACK),
        *args,
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )


async def lines_until(process: asyncio.subprocess.Process, wanted: str) -> list[str]:
    """The process's log lines up to the first one with ``wanted``."""
    assert process.stdout is not None
    return await cli_runs.lines_until(process.stdout, wanted)


async def stopped_cleanly(process: asyncio.subprocess.Process) -> str:
    """SIGTERM: exit 0 within 10 s, no trace; the rest of its log."""
    assert process.stdout is not None
    process.send_signal(signal.SIGTERM)
    status = await asyncio.wait_for(process.wait(), 10)
    rest = (await process.stdout.read()).decode()
    assert status == 0, rest[-3000:]
    assert "Traceback" not in rest and "Unclosed" not in rest, rest[-3000:]
    return rest


@pytest.mark.parametrize(
    "args",
    [["serve"], ["serve", "--no-projections"], ["handler"], ["projections", "run"]],
    ids=["serve", "serve-no-projections", "handler", "projections"],
)
async def test_a_process_waiting_for_its_brokers_stops_at_once_on_sigterm(
    args: list[str], kafka_space: Any, tmp_path: Path
) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)
    nothing_listens = f"127.0.0.1:{free_port()}"
    port = ["--port", str(free_port())] if args[0] == "serve" else []
    env = space.env(
        BLACKJACK_KAFKA_BOOTSTRAP=nothing_listens,
        BLACKJACK_DB_URL=f"sqlite+aiosqlite:///{tmp_path / 'read.db'}",
    )
    process = await start([*args, *port], env)
    try:
        waiting = await lines_until(process, WAITING)
        assert nothing_listens in waiting[-1]
        if port:
            await answers_while_waiting(f"http://127.0.0.1:{port[1]}")
        await stopped_cleanly(process)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def answers_while_waiting(base: str) -> None:
    """Liveness 200 (a restart would not help: Kafka is away), readiness 503 naming what the
    start waits for, the metrics served (the handler's gauges, 0 partitions ready)."""
    async with httpx.AsyncClient(base_url=base, timeout=5) as http:
        async with asyncio.timeout(WAIT_S):
            while True:  # the log line may come before the server listens
                try:
                    alive = await http.get("/healthz")
                    break
                except httpx.ConnectError:
                    await asyncio.sleep(0.05)
        assert alive.status_code == 200, alive.text
        assert alive.json() == {"status": "starting", "waiting_for": "kafka"}
        ready = await http.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["starting"] == {"waiting_for": "kafka", "failed": False}
        metrics = await http.get("/metrics")
        assert metrics.status_code == 200
        assert "blackjack_command_partitions 1.0" in metrics.text
        assert 'blackjack_partitions{status="ready"} 0.0' in metrics.text


async def test_a_worker_waiting_for_its_brokers_answers_queries_from_its_store(
    kafka_space: Any, tmp_path: Path
) -> None:
    """Its store migrated, a projection worker answers its query API while it waits for
    Kafka (from what it has folded), as one running through a Kafka outage does: ready, its
    projections ``connecting``, alive and saying what it waits for. It answered 503 (an SRE
    review: a worker restarted during a Kafka outage left its service, where one running
    through it stayed in)."""
    space: KafkaSpace = await kafka_space(partitions=1)
    port = free_port()
    env = space.env(
        BLACKJACK_KAFKA_BOOTSTRAP=f"127.0.0.1:{free_port()}",  # nothing listens
        BLACKJACK_DB_URL=f"sqlite+aiosqlite:///{tmp_path / 'read.db'}",
    )
    process = await start(["projections", "run", "--http", f"127.0.0.1:{port}"], env)
    try:
        await lines_until(process, WAITING)  # (the store migrated before)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
            alive = await http.get("/healthz")
            assert alive.json() == {"status": "starting", "waiting_for": "kafka"}
            ready = await http.get("/readyz")
            assert ready.status_code == 200, ready.text
            assert ready.json()["projections"]["status"] == "connecting"
            table = await http.get("/v1/tables/no-such-table")
            assert table.status_code == 404 and table.json()["error"]["code"] == "unknown_table"
        await stopped_cleanly(process)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_a_handler_started_before_its_broker_takes_commands_once_it_answers(
    kafka_space: Any,
) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)
    gate = TcpGate(int(space.bootstrap.rsplit(":", 1)[1]))  # the broker, down until opened
    gated = space.env(BLACKJACK_KAFKA_BOOTSTRAP=f"127.0.0.1:{gate.port}")
    process = await start(["handler"], gated)
    try:
        await lines_until(process, WAITING)
        await gate.open()
        started = await lines_until(process, '"partition ready"')
        assert any('"Kafka reachable"' in line for line in started)
        async with space.client() as client:
            result = await client.execute("late-broker", cmd.OpenTable(variant="mini-h17"))
        assert result.status == "accepted"
        await stopped_cleanly(process)
    finally:
        await gate.close()
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_serve_given_a_cluster_s_addresses_plays_and_folds(
    kafka_space: Any, tmp_path: Path
) -> None:
    """BLACKJACK_KAFKA_BOOTSTRAP as a cluster's is written, ``host:port,host:port`` (the first
    a port nothing listens on, the second the broker): FastStream took the string whole as one
    host, so `serve` failed its start ("app broker": "Name or service not known") and exited;
    found on deploy/kafka/cluster.sh's three nodes. Now it takes commands and is ready."""
    space: KafkaSpace = await kafka_space(partitions=1)
    port = free_port()
    env = space.env(
        BLACKJACK_KAFKA_BOOTSTRAP=f"127.0.0.1:{free_port()},{space.bootstrap}",
        BLACKJACK_DB_URL=f"sqlite+aiosqlite:///{tmp_path / 'read.db'}",
    )
    process = await start(["serve", "--port", str(port)], env)
    try:
        await lines_until(process, '"partition ready"')
        async with space.client() as client:
            result = await client.execute("cluster-table", cmd.OpenTable(variant="mini-h17"))
        assert result.status == "accepted"
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
            async with asyncio.timeout(WAIT_S):
                while (await http.get("/readyz")).status_code != 200:
                    await asyncio.sleep(0.1)  # the worker's first assignment: no event to await
        await stopped_cleanly(process)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
