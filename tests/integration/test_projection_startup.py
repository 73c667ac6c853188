"""A projection worker started while its database is down (a fault drill, a cluster coming
up in the wrong order) serves its probes from the start: alive, not ready, the query API 503,
until the database answers; then it migrates, joins its group and folds. SIGTERM stops it
cleanly at any point: it leaves its group and exits 0."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import certifi
import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from blackjack.messages.sealing import ShoeSeal
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import Position
from tests.integration.conftest_projections import (
    EventsTopic,
    StoreFactory,
    connect_directly,
    play_tables,
    publish,
    reached,
    to_wire,
    wait_until,
    worker_env,
)
from tests.integration.infra import TcpGate, free_port, postgres_cafile

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration

WAIT_S = 60.0
LOG = play_tables([("startup-table", "mini-h17")], rounds=5, seed=7)


@asynccontextmanager
async def gated_database(
    server_url: str, tmp_path: Path
) -> AsyncIterator[tuple[str, str, TcpGate]]:
    """A new database: its real URL, the URL through a closed gate, and the gate."""
    stores = StoreFactory("postgresql", tmp_path, server_url)
    try:
        url = await stores.url()
        parsed = make_url(url)
        assert parsed.port is not None
        gate = TcpGate(parsed.port)
        gated = parsed.set(port=gate.port).render_as_string(hide_password=False)
        try:
            yield url, gated, gate
        finally:
            await gate.close()
    finally:
        await stores.close()


def start_worker(env: dict[str, str], port: int, log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "blackjack.cli",
            "projections",
            "run",
            "--http",
            f"127.0.0.1:{port}",
        ],
        env=env,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )


async def answer(http: httpx.AsyncClient, path: str, status: int) -> httpx.Response:
    """Poll another process's HTTP endpoint until it answers ``status`` (nothing to await)."""
    async with asyncio.timeout(WAIT_S):
        while True:
            try:
                response = await http.get(path)
            except httpx.TransportError:  # not listening yet
                response = None
            if response is not None and response.status_code == status:
                return response
            await asyncio.sleep(0.1)


async def folded_up_to(url: str, ends: dict[Position, int]) -> None:
    store = ProjectionStore(url)
    try:
        await wait_until(lambda: reached(store, ends), "the end of the topic", WAIT_S)
    finally:
        await store.close()


async def stopped_cleanly(process: subprocess.Popen[bytes], log: Path) -> str:
    process.send_signal(signal.SIGTERM)
    # waited for off the loop: the gate's connections run on it until the process is gone
    status = await asyncio.to_thread(process.wait, WAIT_S)
    assert status == 0, log.read_text()[-3000:]
    return log.read_text()


async def test_a_worker_started_before_its_database_waits_ready_for_nothing_then_folds(
    events_topic: EventsTopic, postgres_server_url: str, shoe_seal: ShoeSeal, tmp_path: Path
) -> None:
    ends = await publish(events_topic, to_wire(LOG.envelopes, shoe_seal))
    port, log = free_port(), tmp_path / "worker.log"
    async with gated_database(postgres_server_url, tmp_path) as (url, gated, gate):
        process = start_worker(worker_env(events_topic, gated), port, log)
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
                alive = (await answer(http, "/healthz", 200)).json()
                assert alive == {"status": "starting", "waiting_for": "read model"}
                waiting = (await answer(http, "/readyz", 503)).json()
                assert waiting["status"] == "starting"
                assert waiting["projections"]["store"]["status"] == "unreachable"
                query = await http.get("/v1/tables/startup-table")
                assert query.status_code == 503
                assert query.json()["error"]["code"] == "store_unavailable"
                metrics = (await http.get("/metrics")).text
                assert "blackjack_projection_store_up 0.0" in metrics

                await gate.open()  # the database comes up
                ready = (await answer(http, "/readyz", 200)).json()
                assert ready["status"] == "ready"
                await answer(http, "/v1/tables/startup-table", 200)
                await folded_up_to(url, ends)
                assert (await answer(http, "/healthz", 200)).json() == {"status": "ok"}
            text = await stopped_cleanly(process, log)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert "LeaveGroup request succeeded" in text and '"projection worker stopped"' in text


async def test_a_worker_waiting_for_its_database_stops_at_once_on_sigterm(
    events_topic: EventsTopic, postgres_server_url: str, tmp_path: Path
) -> None:
    port, log = free_port(), tmp_path / "worker.log"
    async with gated_database(postgres_server_url, tmp_path) as (_, gated, _gate):
        process = start_worker(worker_env(events_topic, gated), port, log)
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
                await answer(http, "/readyz", 503)
            await stopped_cleanly(process, log)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


async def test_a_worker_joining_a_topic_not_there_yet_stops_at_once_on_sigterm(
    projection_bootstrap: str, tmp_path: Path
) -> None:
    """The diff review: the consumer's start (aiokafka waits about 40 s for a missing topic)
    was not given way to a stop, so Kubernetes would have killed the pod. Meanwhile the
    migrated worker is ready (its query API answers from what is folded), ``connecting``."""
    port, log = free_port(), tmp_path / "worker.log"
    missing = EventsTopic(projection_bootstrap, f"missing-{port}.")
    store = f"sqlite+aiosqlite:///{tmp_path / 'read.db'}"
    process = start_worker(worker_env(missing, store), port, log)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            joining = (await answer(http, "/readyz", 200)).json()
            assert joining["projections"]["status"] == "connecting", joining
            assert joining["projections"]["store"]["status"] == "ok", joining
            alive = (await http.get("/healthz")).json()
            assert alive["status"] == "starting" and alive["waiting_for"] != "read model", alive
        await stopped_cleanly(process, log)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def verify_full(url: str) -> str:
    """``url`` asking asyncpg to check the server's certificate and host name (the runbook's)."""
    verified = make_url(url).update_query_dict({"ssl": "verify-full"})
    return verified.render_as_string(hide_password=False)


async def test_a_worker_checks_the_database_certificate_against_the_ca_it_is_given(
    events_topic: EventsTopic, postgres_server_url: str, shoe_seal: ShoeSeal, tmp_path: Path
) -> None:
    """What the manifests set (``?ssl=verify-full``, ``PGSSLROOTCERT`` the CA mounted from
    the Secret ``blackjack-db-ca``): with the database's CA the worker folds over TLS, every
    connection of its encrypted; with another CA (a man in the middle's certificate would be
    one) it sends nothing, is not ready, names the error type on ``/readyz``, and retries."""
    ends = await publish(events_topic, to_wire(LOG.envelopes, shoe_seal))
    stores = StoreFactory("postgresql", tmp_path, postgres_server_url)
    try:
        url = await stores.url()
        database = make_url(url).database
        for name, ca in (("other", certifi.where()), ("right", postgres_cafile(url))):
            port, log = free_port(), tmp_path / f"worker-{name}-ca.log"
            env = worker_env(events_topic, verify_full(url), PGSSLROOTCERT=ca)
            process = start_worker(env, port, log)
            try:
                async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
                    if name == "other":
                        refused = await readyz_when(http, store_status("unreachable"))
                        outage = refused["projections"]["store"]
                        assert outage["error_type"] == "SSLCertVerificationError", refused
                    else:
                        await answer(http, "/readyz", 200)
                        await folded_up_to(url, ends)
                        assert await encrypted_connections(postgres_server_url, database)
                text_of_log = await stopped_cleanly(process, log)
            finally:
                if process.poll() is None:
                    process.kill()
                    process.wait()
            verify_failed = "certificate verify failed" in text_of_log
            assert verify_failed == (name == "other"), text_of_log[-3000:]
    finally:
        await stores.close()


async def encrypted_connections(server_url: str, database: str | None) -> bool:
    """Whether the database has connections (the worker's), every one of them over TLS."""
    admin = await connect_directly(server_url)
    try:
        ssl: list[bool] = [
            row["ssl"]
            for row in await admin.fetch(
                "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)"
                " WHERE a.datname = $1",
                database,
            )
        ]
    finally:
        await admin.close()
    return bool(ssl) and all(ssl)


async def newer_store(tmp_path: Path) -> str:
    """A read model a newer release migrated (a schema revision this code does not know)."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'newer.db'}"
    store = ProjectionStore(url)
    try:
        await store.migrate()
        async with store.writing() as connection:
            await connection.execute(text("UPDATE alembic_version SET version_num = '0999'"))
    finally:
        await store.close()
    return url


async def readyz_when(
    http: httpx.AsyncClient, holds: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """``/readyz``'s 503 answer once it ``holds``."""
    async with asyncio.timeout(WAIT_S):
        while True:
            ready: dict[str, Any] = (await answer(http, "/readyz", 503)).json()
            if holds(ready):
                return ready
            await asyncio.sleep(0.1)


def store_status(status: str) -> Callable[[dict[str, Any]], bool]:
    return lambda ready: bool(ready["projections"]["store"]["status"] == status)


async def found_mismatched(http: httpx.AsyncClient) -> dict[str, Any]:
    """``/readyz`` once the worker has found the store's revision (``starting`` before)."""
    return await readyz_when(http, lambda ready: ready["projections"]["status"] != "starting")


async def test_a_worker_stopping_on_a_newer_store_serves_its_metrics_first(
    events_topic: EventsTopic, tmp_path: Path
) -> None:
    """It exits 3 within a second of finding the store: a scrape every 15 s seldom saw its
    schema-mismatch series, and the alert seldom fired (an operator's fault drill). With
    ``--http`` it serves ``/metrics`` and ``/readyz`` for the linger first; a SIGTERM ends
    the wait at once; the exit stays 3."""
    url = await newer_store(tmp_path)
    for linger, stop in (("600", True), ("1", False)):
        port, log = free_port(), tmp_path / f"worker-{linger}.log"
        env = worker_env(events_topic, url, BLACKJACK_PROJECTION_FATAL_LINGER_S=linger)
        process = start_worker(env, port, log)
        try:
            if stop:
                async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
                    refused = await found_mismatched(http)
                    metrics = (await http.get("/metrics")).text
                    # no query answered meanwhile from a store at another revision
                    query = await http.get("/v1/tables/any-table")
                projections = refused["projections"]
                assert projections["status"] == "schema_mismatch", refused
                assert projections["schema_mismatch"] == "store_newer", refused
                assert 'blackjack_projection_schema_mismatch{direction="newer"' in metrics
                assert query.status_code == 503, query.text
                process.send_signal(signal.SIGTERM)
            status = await asyncio.to_thread(process.wait, WAIT_S)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
        text_of_log = log.read_text()
        assert status == 3, text_of_log[-3000:]
        assert "the worker stops on a fault; its metrics are served until then" in text_of_log
