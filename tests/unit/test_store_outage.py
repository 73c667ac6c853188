"""The read model's database failing (a fault drill on PostgreSQL): told from a broken query or
a poison record, answered 503 by the query API, waited for (not spun on) by the worker, shown
on /readyz and blackjack_projection_store_up, never reported as a record it is stuck at."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiokafka import TopicPartition
from prometheus_client import REGISTRY
from sqlalchemy import exc as sql_errors
from structlog.testing import capture_logs

from blackjack.api.routes import query_api
from blackjack.projection_worker import worker
from blackjack.projections import batches, metrics, positions, queries
from blackjack.projections.health import REPEAT_LOG_EVERY, FoldHealth
from blackjack.projections.store import ProjectionStore, is_lock_wait, is_store_outage
from blackjack.projections.writer import Record
from tests.unit.test_projection_worker import TOPIC, Consumer, Store

P0 = TopicPartition(TOPIC, 0)


class _PgError(Exception):
    """What SQLAlchemy's asyncpg adapter wraps: the server's SQLSTATE on ``sqlstate``."""

    def __init__(self, sqlstate: str) -> None:
        super().__init__(f"SQLSTATE {sqlstate}")
        self.sqlstate = sqlstate


def pg_error(sqlstate: str) -> sql_errors.DBAPIError:
    return sql_errors.DBAPIError("SELECT 1", None, _PgError(sqlstate))


@pytest.mark.parametrize(
    ("sqlstate", "outage"),
    [
        ("57P03", True),  # the database system is starting up / not yet accepting connections
        ("57P01", True),  # terminating connection due to administrator command
        ("53300", True),  # too many connections for role
        ("57014", True),  # canceling statement due to statement timeout
        ("55P03", True),  # lock timeout
        ("25006", True),  # cannot execute INSERT in a read-only transaction
        ("08006", True),  # connection failure
        ("42P01", False),  # undefined table: a wrong query, not an outage
        ("23505", False),  # unique violation: a record the fold refuses
    ],
)
def test_outages_are_told_from_wrong_queries_by_their_sqlstate(sqlstate: str, outage: bool) -> None:
    assert is_store_outage(pg_error(sqlstate)) is outage


def test_unreachable_hosts_and_timeouts_are_outages() -> None:
    assert is_store_outage(ConnectionRefusedError())
    assert is_store_outage(TimeoutError())
    assert not is_store_outage(ValueError("a bug"))


@pytest.mark.parametrize(("sqlstate", "status"), [("57P03", 503), ("53300", 503), ("42P01", 500)])
async def test_the_query_api_answers_503_while_the_database_cannot_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sqlstate: str, status: int
) -> None:
    """The drill: a PostgreSQL starting, at its connection limit or timing out answered 500
    internal_error with a logged trace, as if the query were wrong."""

    async def failing(*_: object) -> None:
        raise pg_error(sqlstate)

    monkeypatch.setattr(queries, "wallet", failing)
    counted = {"status": str(status)}
    before = REGISTRY.get_sample_value("blackjack_projection_api_requests_total", counted) or 0
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path}/read.db")
    transport = httpx.ASGITransport(app=query_api(store))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
            answer = await http.get("/v1/players/alice/wallet")
    finally:
        await store.close()
    assert answer.status_code == status
    code = "store_unavailable" if status == 503 else "internal_error"
    assert answer.json()["error"]["code"] == code
    after = REGISTRY.get_sample_value("blackjack_projection_api_requests_total", counted)
    assert after == before + 1  # what BlackjackQueryApiFailing alerts on


def store_up() -> float | None:
    return REGISTRY.get_sample_value("blackjack_projection_store_up")


def listening(
    writer: object, consumer: Consumer, health: FoldHealth
) -> positions.SeekToStoredPositions:
    """The worker's rebalance listener over a fake writer and consumer, lag measured by hand."""
    return positions.SeekToStoredPositions(
        writer,  # type: ignore[arg-type]
        lambda: consumer,
        health,
        lag_every=None,
    )


class Paused(Consumer):
    def __init__(self) -> None:
        super().__init__()
        self.paused: list[TopicPartition] = []

    def pause(self, *partitions: TopicPartition) -> None:
        self.paused += partitions

    def resume(self, *partitions: TopicPartition) -> None:
        pass

    def last_stable_offset(self, tp: TopicPartition) -> int | None:
        return None


class Probed(Store):
    def __init__(self, positions: dict[tuple[str, int], int]) -> None:
        super().__init__(positions)
        self.probes = 0

    async def probe(self) -> None:
        if self.down:
            raise ConnectionError("the database is not answering")
        self.probes += 1


LONG_AGO = timedelta(seconds=positions.PROBE_AFTER_SECONDS + 1)


async def test_a_batch_the_store_cannot_place_waits_before_it_is_read_again() -> None:
    """The drill: with the positions unreadable, each batch was put back and fetched again at
    once, 11 traces a second (14 MB in 3 minutes), and the outage counted as one failure."""
    consumer, store, health = Paused(), Probed({(TOPIC, 0): 40}), FoldHealth()
    store.down = True
    positions = listening(store, consumer, health)
    batch: list[Any] = [Record(TOPIC, 0, 50, b"{}")]
    failed = REGISTRY.get_sample_value("blackjack_projection_failed_batches_total") or 0.0
    with capture_logs() as logs:
        await positions.on_partitions_assigned({P0})  # the first failure
        for _ in range(2 * REPEAT_LOG_EVERY - 1):
            await positions.put_back(batch)
    assert consumer.paused == [P0] * (2 * REPEAT_LOG_EVERY - 1)  # a pause each, not a spin
    failed_now = REGISTRY.get_sample_value("blackjack_projection_failed_batches_total")
    assert failed_now == failed + 2 * REPEAT_LOG_EVERY - 1
    levels = [entry["log_level"] for entry in logs]
    assert levels == ["error", "warning", "warning"]  # one trace, then a line a minute
    assert store_up() == 0
    status = health.status()
    assert status["store"]["status"] == "unreachable"
    assert json.loads(json.dumps(status))["store"]["last"]  # what /readyz serves
    assert health.stuck == []

    assert health.status()["status"] == "waiting_for_store"

    store.down = False
    await positions.put_back(batch)
    assert consumer.sought[P0] == 40
    # a read is no recovery (a read-only database answers reads): a write that commits is
    assert store_up() == 0 and health.store_outage is not None
    await positions._probe_if_quiet()  # a failure a moment ago: not quiet yet
    assert store.probes == 0
    health.store_outage = replace(health.store_outage, last=health.store_outage.last - LONG_AGO)
    await positions._probe_if_quiet()
    assert store.probes == 1 and store_up() == 1
    assert health.status()["store"] == {"status": "ok"}
    assert health.status()["status"] == "folding"


class Failing:
    """A writer whose database refuses every write (read-only, say)."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.failed_at = None

    async def apply(self, records: list[Record]) -> None:
        raise self.error

    async def stored_positions(self) -> dict[tuple[str, int], int]:
        raise self.error


class ReadOnly(Failing):
    """Reads answer, writes fail: what ``default_transaction_read_only`` does."""

    async def stored_positions(self) -> dict[tuple[str, int], int]:
        return {(TOPIC, 0): 100}


async def test_a_read_only_database_stays_an_outage_while_batches_fail() -> None:
    """The second drill: after each failed write the worker read the positions, took the
    answer for the store's recovery and logged 'reachable again', so the outage never showed
    (store_up 1 in 47 of 48 samples) and a trace came every 2 s."""
    consumer, health = Paused(), FoldHealth()
    writer = ReadOnly(pg_error("25006"))
    positions = listening(writer, consumer, health)
    await positions.on_partitions_assigned({P0})
    folder = batches._Folder(writer, positions, health, lambda: consumer)  # type: ignore[arg-type]
    with capture_logs() as logs:
        for _ in range(20):
            await folder.fold([Record(TOPIC, 0, 100, b"{}")])
    assert [e["log_level"] for e in logs if e["log_level"] != "info"] == ["error"]
    assert not [e for e in logs if e["event"] == "read model reachable again"]
    assert store_up() == 0 and health.status()["status"] == "waiting_for_store"
    assert health.stuck == []
    health.store_answered()  # leave the process's gauges as found
    metrics.STORE_UP.set(1)


async def test_a_database_that_refuses_writes_is_no_record_the_worker_is_stuck_at() -> None:
    """The drill: a read-only database made every partition 'stuck' on an innocent record
    within 20 s, the critical alert that sends on-call to read that Kafka record."""
    consumer, health = Paused(), FoldHealth(stuck_after=3)
    writer = Failing(pg_error("25006"))
    positions = listening(writer, consumer, health)
    positions.assigned = {P0}
    folder = batches._Folder(writer, positions, health, lambda: consumer)  # type: ignore[arg-type]
    for offset in range(10):
        await folder.fold([Record(TOPIC, 0, 100 + offset, b"{}")])
    assert health.stuck == [] and health.failing == []
    assert health.store_outage is not None and store_up() == 0
    # a record the fold refuses is still one, once the store answers
    refusing = Refusing(ValueError("not an event"))
    positions = listening(refusing, consumer, health)
    await positions.on_partitions_assigned({P0})
    folder = batches._Folder(refusing, positions, health, lambda: consumer)  # type: ignore[arg-type]
    for _ in range(3):
        await folder.fold([Record(TOPIC, 0, 100, b"{}")])
    assert [f.offset for f in health.stuck] == [100]
    health.forget([(TOPIC, 0)])  # the gauges are the process's: leave none behind
    metrics.store_answered(health)


class Refusing(Failing):
    async def stored_positions(self) -> dict[tuple[str, int], int]:
        return {}


async def test_a_worker_started_while_the_database_is_down_waits_for_it() -> None:
    class Starting:
        def __init__(self) -> None:
            self.attempts = 0

        async def migrate(self) -> None:
            self.attempts += 1
            if self.attempts < 3:
                raise pg_error("57P03")

    store, health = Starting(), FoldHealth(starting=True)
    with capture_logs() as logs:
        waiting = asyncio.create_task(worker.migrated(store, health, wait=0.05))  # type: ignore[arg-type]
        await health.wait_until(lambda: health.store_outage is not None, 5)
        assert health.status()["status"] == "starting"  # /readyz: 503, why without the text
        assert health.status()["store"]["reason"] == "store_unreachable"
        outage = health.store_outage  # the text is the log's
        assert outage is not None and "57P03" in outage.error
        assert store_up() == 0
        await waiting
    assert store.attempts == 3 and store_up() == 1 and health.store_outage is None
    # the trace once, then a line every REPEAT_LOG_EVERY attempts; and one when it answers
    assert [e["event"] for e in logs] == [
        "read model unreachable; folding waits for it",
        "read model reachable again",
    ]

    class Newer(Starting):
        async def migrate(self) -> None:
            raise RuntimeError("Can't locate revision 0011")

    with pytest.raises(RuntimeError):
        await asyncio.wait_for(worker.migrated(Newer(), FoldHealth(), wait=0), 5)  # type: ignore[arg-type]


async def test_the_query_api_logs_an_outage_once_in_a_while_not_per_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def failing(*_: object) -> None:
        raise pg_error("57P01")

    monkeypatch.setattr(queries, "wallet", failing)
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path}/read.db")
    transport = httpx.ASGITransport(app=query_api(store))
    try:
        with capture_logs() as logs:
            async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
                for _ in range(50):
                    assert (await http.get("/v1/players/a/wallet")).status_code == 503
    finally:
        await store.close()
    warned = [e for e in logs if e["log_level"] == "warning"]
    assert len(warned) == 1 and warned[0]["event"] == "query failed: the store cannot serve now"


async def test_a_starting_worker_is_alive_but_not_ready_and_its_query_api_waits(
    tmp_path: Path,
) -> None:
    """Served before the store is migrated (the database may be down): the probes answer,
    the query API does not read tables that may not exist yet."""
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path}/read.db")  # not migrated
    health = FoldHealth(starting=True)
    transport = httpx.ASGITransport(app=worker.http_app(store, health))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://worker") as http:
            assert (await http.get("/healthz")).status_code == 200
            starting = await http.get("/readyz")
            assert starting.status_code == 503 and starting.json()["status"] == "starting"
            query = await http.get("/v1/players/a/wallet")
            assert query.status_code == 503
            assert query.json()["error"]["code"] == "store_unavailable"
            await store.migrate()
            health.store_migrated()  # as ``worker.migrated`` says once it has
            # Its query API answers from here, while the worker waits for Kafka, as it does
            # when Kafka goes away later (503 before: a worker restarted during a Kafka
            # outage was out of its service where one running through it stayed in).
            connecting = await http.get("/readyz")
            assert connecting.status_code == 200 and connecting.json()["status"] == "ready"
            assert connecting.json()["projections"]["status"] == "connecting"
            assert (await http.get("/v1/players/a/wallet")).status_code == 404
            health.waiting_for = "kafka"
            alive = (await http.get("/healthz")).json()
            assert alive == {"status": "starting", "waiting_for": "kafka"}
            health.started()
            ready = (await http.get("/readyz")).json()
            assert ready["status"] == "ready" and ready["projections"]["status"] == "folding"
            assert (await http.get("/healthz")).json() == {"status": "ok"}
    finally:
        await store.close()


def test_the_query_api_has_a_pool_of_its_own_on_postgresql(tmp_path: Path) -> None:
    pg = ProjectionStore("postgresql+asyncpg://u:p@127.0.0.1:9/db", bounded=True)
    assert pg.for_queries() is not pg and pg.for_queries().bounded
    sqlite = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path}/read.db")
    assert sqlite.for_queries() is sqlite


@pytest.mark.parametrize(
    ("message", "outage"),
    [
        ("database is locked", True),
        ("unable to open database file", True),
        ("attempt to write a readonly database", True),
        ("no such table: accounts", False),  # the code's, not the file's: retried for ever else
        ('near "SELEC": syntax error', False),
    ],
)
def test_sqlite_failures_are_told_apart_by_what_sqlite_says(message: str, outage: bool) -> None:
    """The review: every SQLite OperationalError counted as an outage, so a broken migration
    looped for ever 'waiting for the database' and a code bug answered 503 without a trace."""
    error = sql_errors.OperationalError("SELECT 1", None, sqlite3.OperationalError(message))
    assert is_store_outage(error) is outage


def test_a_lock_another_session_holds_is_logged_as_such_not_as_the_database_away() -> None:
    """A pause drill: a worker frozen in the middle of a fold held the positions' locks, and
    the other worker logged "read model unreachable", sending the on-call to the database."""
    locked = sql_errors.OperationalError(
        "UPDATE positions", None, sqlite3.OperationalError("database is locked")
    )
    away = sql_errors.OperationalError(
        "SELECT 1", None, sqlite3.OperationalError("unable to open database file")
    )
    assert is_lock_wait(locked) and not is_lock_wait(away)
    for error, said in ((locked, "read model locked by another session"), (away, "unreachable")):
        health = FoldHealth()
        with capture_logs() as logs:
            health.store_failed(error)
        assert said in logs[0]["event"] and logs[0]["log_level"] == "error"
        assert health.status()["status"] == "waiting_for_store"  # an outage all the same


async def test_one_failed_batch_is_one_failure_and_one_pause() -> None:
    """The review: a batch failing on the database was counted (and paused) twice, once by
    the fold and once by the re-read of the positions that followed it."""
    consumer, health = Paused(), FoldHealth()
    writer = Failing(pg_error("57P01"))
    positions = listening(writer, consumer, health)
    positions.assigned = {P0}
    folder = batches._Folder(writer, positions, health, lambda: consumer)  # type: ignore[arg-type]
    failed = REGISTRY.get_sample_value("blackjack_projection_failed_batches_total") or 0.0
    await folder.fold([Record(TOPIC, 0, 100, b"{}")])
    assert REGISTRY.get_sample_value("blackjack_projection_failed_batches_total") == failed + 1
    assert health.store_outage is not None and health.store_outage.failures == 1
    assert consumer.paused == [P0]
    metrics.store_answered(health)


async def test_a_worker_left_without_partitions_still_sees_its_store_come_back() -> None:
    """The review: the probe ran only for a worker with partitions, so one that a rebalance
    left with none kept store_up at 0 (and the critical alert firing) after the recovery."""
    consumer, store, health = Paused(), Probed({}), FoldHealth()
    consumer._closed = False  # type: ignore[attr-defined]
    positions = listening(store, consumer, health)
    metrics.store_failed(health, pg_error("57P01"))
    assert health.store_outage is not None
    health.store_outage = replace(health.store_outage, last=health.store_outage.last - LONG_AGO)
    assert positions.assigned == set()
    watch = asyncio.create_task(positions.watch_lag(0.01))
    try:
        await health.wait_until(lambda: health.store_outage is None, timeout=5)
    finally:
        watch.cancel()
    assert store.probes >= 1 and store_up() == 1
