"""A projection worker stuck at a record it cannot fold (a poison event) says so.

It keeps retrying (it never skips a record by itself), but once the same record has failed
``stuck_after`` times in a row, ``/readyz`` names the record's topic, partition and offset
(and stays 200: the worker still serves the rest of the read model), and
``blackjack_projection_stuck_offset`` exports it; both clear once the worker folds past it.
Only the record's partition is held back: the worker's other partitions fold on, even those
that came in the same batches. On the real broker, in process and as
``blackjack projections run --http`` and ``blackjack serve`` processes.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiokafka import AIOKafkaProducer
from prometheus_client import REGISTRY
from sqlalchemy import update

from blackjack.audit.audit import run_audit
from blackjack.messages import wire
from blackjack.messages.sealing import ShoeSeal
from blackjack.projection_worker.settings import ProjectionSettings
from blackjack.projection_worker.worker import build_broker
from blackjack.projections import batches, positions, schema
from blackjack.projections.dump import dump
from blackjack.projections.health import FoldHealth, probes
from blackjack.projections.rebuild import rebuild
from blackjack.projections.store import ProjectionStore
from blackjack.projections.views import ProjectionError
from blackjack.projections.writer import BatchResult, Position, ProjectionWriter, Record
from tests.integration.cli_runs import lines_until
from tests.integration.conftest_projections import (
    EventsTopic,
    StoreFactory,
    play_tables,
    publish,
    to_wire,
    worker_env,
)
from tests.integration.infra import free_port

pytest_plugins = ["tests.integration.conftest_projections"]

WAIT_S = 60.0
POISON = b"this is not an event envelope"
LOG = play_tables([("table-poison", "mini-h17")], rounds=4, seed=11)
BLACKJACK = Path(sys.executable).parent / "blackjack"


async def produce(topic: str, bootstrap: str, partition: int, values: Iterable[bytes]) -> int:
    """Write the values to one partition, in order; the offset of the first."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    await producer.start()
    try:
        sent = [await producer.send(topic, value, partition=partition) for value in values]
        offsets: list[int] = [m.offset for m in await asyncio.gather(*sent)]
    finally:
        await producer.stop()
    return offsets[0]


def sample(name: str, topic: str, partition: int) -> float | None:
    return REGISTRY.get_sample_value(name, {"topic": topic, "partition": str(partition)})


@asynccontextmanager
async def running_worker(
    topic: EventsTopic,
    store: ProjectionStore,
    health: FoldHealth,
    writer: ProjectionWriter | None = None,
    batch: int = 50,
) -> AsyncIterator[ProjectionWriter]:
    settings = ProjectionSettings(
        db_url=store.url,
        bootstrap=topic.bootstrap,
        topic_prefix=topic.prefix,
        group_id=f"{topic.prefix}projections",
        batch=batch,
    )
    writer = ProjectionWriter(store) if writer is None else writer
    broker = build_broker(settings, writer, health)
    await broker.start()
    try:
        yield writer
    finally:
        await broker.stop()


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The test's patience, not 2 s: a partition held back (``batches``) and a batch put back
    (``positions``) are read again after ``RETRY_SECONDS``."""
    monkeypatch.setattr(batches, "RETRY_SECONDS", 0.05)
    monkeypatch.setattr(positions, "RETRY_SECONDS", 0.05)


@pytest.mark.integration
async def test_a_worker_stuck_at_a_poison_record_is_not_ready_until_it_is_past_it(
    events_topic: EventsTopic,
    stores: StoreFactory,
    shoe_seal: ShoeSeal,
    quick_retries: None,
) -> None:
    envelopes = to_wire(LOG.envelopes, shoe_seal)
    half = len(envelopes) // 2
    store = await stores.store()
    health = FoldHealth(stuck_after=3)
    http = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=probes(health, _not_found)), base_url="http://worker"
    )
    async with http, running_worker(events_topic, store, health) as writer:
        before = await publish(events_topic, envelopes[:half])
        await writer.wait_for(before, WAIT_S)
        [(name, partition)] = before  # one table: one partition
        key: Position = (name, partition)
        # junk on the table's partition, then the rest of the table's events behind it
        offset = await produce(name, events_topic.bootstrap, partition, [POISON])
        rest = [wire.encode(e) for e in envelopes[half:]]
        await produce(name, events_topic.bootstrap, partition, rest)

        await health.wait_until(lambda: not health.folding, WAIT_S)
        [stuck] = health.stuck
        assert (stuck.topic, stuck.partition, stuck.offset) == (*key, offset)
        assert stuck.failures >= 3 and "is not an event envelope" in stuck.error
        # everything before the poison is folded in (a transaction marker sits between)
        assert (await writer.stored_positions())[key] == before[key] < offset
        assert sample("blackjack_projection_stuck_offset", name, partition) == offset
        assert sample("blackjack_projection_consecutive_failures", name, partition) >= 3  # type: ignore[operator]
        ready = await http.get("/readyz")
        assert ready.status_code == 200  # still serving queries
        assert ready.json()["projections"]["status"] == "stuck"
        [reported] = ready.json()["projections"]["stuck"]
        assert (reported["topic"], reported["partition"], reported["offset"]) == (*key, offset)
        assert (await http.get("/healthz")).status_code == 200  # alive: restarting cannot help

        # The operator's remedy for junk that is no event: move the stored position past it.
        async with store.writing() as connection:
            await connection.execute(
                update(schema.positions)
                .where(
                    schema.positions.c.topic == name,
                    schema.positions.c.kafka_partition == partition,
                )
                .values(next_offset=offset + 1)
            )
        await health.wait_until(lambda: health.folding, WAIT_S)
        await writer.wait_for({key: offset + 1 + len(rest)}, WAIT_S)
        assert (await http.get("/readyz")).status_code == 200
        assert sample("blackjack_projection_stuck_offset", name, partition) is None
        assert sample("blackjack_projection_consecutive_failures", name, partition) == 0
    async with store.reading() as connection:
        folded = (await connection.execute(schema.events.select())).all()
    assert len(folded) == len(envelopes)  # the table's events after the junk, too


async def _not_found(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b""})


# ---- a poison record holds back its own partition only ---------------------------------------

TWO = play_tables([("table-held", "mini-h17"), ("table-free", "mini-h17")], rounds=4, seed=12)


class WatchedWriter(ProjectionWriter):
    """Notes the partitions of every transaction the worker asks for, and whether it failed."""

    def __init__(self, store: ProjectionStore) -> None:
        super().__init__(store)
        self.attempts: list[tuple[frozenset[int], bool]] = []

    async def apply(self, records: Sequence[Record]) -> BatchResult:
        partitions = frozenset(r.partition for r in records)
        try:
            result = await super().apply(records)
        except Exception:
            self.attempts.append((partitions, False))
            raise
        self.attempts.append((partitions, True))
        return result


@pytest.mark.integration
async def test_a_stuck_worker_has_folded_every_record_before_the_poison(
    events_topic: EventsTopic,
    stores: StoreFactory,
    shoe_seal: ShoeSeal,
    quick_retries: None,
) -> None:
    """Records ahead of the poison in the batch it fails in are folded all the same, so the
    stored position stops right at the poison: the operator's step over it
    (docs/operations.md) skips that record and nothing else."""
    envelopes = to_wire(LOG.envelopes, shoe_seal)
    half = len(envelopes) // 2
    store = await stores.store()
    health = FoldHealth(stuck_after=2)
    # No worker yet: the good records and the poison wait in the log, so one batch holds both.
    non_transactional = await publish(events_topic, envelopes[:half], transactional=False)
    [((name, partition), end)] = non_transactional.items()
    offset = await produce(name, events_topic.bootstrap, partition, [POISON])
    assert offset == end  # nothing between the last good record and the poison
    async with running_worker(events_topic, store, health, batch=500) as writer:
        await health.wait_until(lambda: not health.folding, WAIT_S)
        [stuck] = health.stuck
        assert (stuck.topic, stuck.partition, stuck.offset) == (name, partition, offset)
        assert (await writer.stored_positions())[(name, partition)] == offset


@pytest.mark.integration
async def test_a_poison_record_holds_back_only_its_own_partition(
    events_topic: EventsTopic,
    stores: StoreFactory,
    shoe_seal: ShoeSeal,
    quick_retries: None,
) -> None:
    name, bootstrap = events_topic.name, events_topic.bootstrap
    held, free = (name, 0), (name, 1)
    held_events = [wire.encode(e) for e in to_wire(TWO.of("table-held"), shoe_seal)]
    free_events = [wire.encode(e) for e in to_wire(TWO.of("table-free"), shoe_seal)]
    h, (f1, f2) = len(held_events) // 2, (len(free_events) // 3, 2 * len(free_events) // 3)
    store = await stores.store()
    health = FoldHealth(stuck_after=3)
    # A table in each partition, partly folded: both partitions have stored positions now.
    async with running_worker(events_topic, store, health) as writer:
        ends = {
            held: await produce(name, bootstrap, 0, held_events[:h]) + h,
            free: await produce(name, bootstrap, 1, free_events[:f1]) + f1,
        }
        await writer.wait_for(ends, WAIT_S)
    # While no worker runs: the junk, then the rest of the table, in one partition; more of the
    # other table in the other. The next worker seeks both partitions to their stored positions
    # at once, so its first fetch brings both and its batches (up to 500 records) mix them.
    poison = await produce(name, bootstrap, 0, [POISON])
    await produce(name, bootstrap, 0, held_events[h:])
    await produce(name, bootstrap, 1, free_events[f1:f2])
    writer = WatchedWriter(store)
    http = httpx.AsyncClient(
        transport=httpx.ASGITransport(app=probes(health, _not_found)), base_url="http://worker"
    )
    async with http, running_worker(events_topic, store, health, writer, batch=500):
        await health.wait_until(lambda: not health.folding, WAIT_S)
        await writer.wait_for({free: ends[free] + f2 - f1}, WAIT_S)
        # a batch of both partitions was rolled back, then folded again partition by partition
        mixed = writer.attempts.index((frozenset({0, 1}), False))
        assert set(writer.attempts[mixed + 1 : mixed + 3]) == {
            (frozenset({0}), False),
            (frozenset({1}), True),
        }
        # and it goes on while the other one is stuck
        rest = await produce(name, bootstrap, 1, free_events[f2:])
        await writer.wait_for({free: rest + len(free_events) - f2}, WAIT_S)

        [stuck] = health.stuck
        assert (stuck.topic, stuck.partition, stuck.offset) == (*held, poison)
        assert "is not an event envelope" in stuck.error
        assert [(f.partition, f.offset) for f in health.failing] == [(0, poison)]
        stored = await writer.stored_positions()
        assert stored[held] == ends[held] == poison  # nothing after the junk folded, or skipped
        assert stored[free] == rest + len(free_events) - f2
        assert sample("blackjack_projection_stuck_offset", *held) == poison
        assert sample("blackjack_projection_stuck_offset", *free) is None
        assert not sample("blackjack_projection_consecutive_failures", *free)
        ready = await http.get("/readyz")
        assert ready.status_code == 200
        report = ready.json()["projections"]
        assert [(f["partition"], f["offset"]) for f in report["stuck"]] == [(0, poison)]
        assert [f["partition"] for f in report["failing"]] == [0]
    async with store.reading() as connection:
        folded = (await connection.execute(schema.events.select())).all()
    # all of the free table, each event once; the held one up to the junk
    expected = TWO.of("table-free") + TWO.of("table-held")[:h]
    assert sorted((r.stream_id, r.sequence) for r in folded) == sorted(
        (e.stream_id, e.sequence) for e in expected
    )


# ---- the same through the processes an operator runs ----------------------------------------


@asynccontextmanager
async def process(*args: str, env: dict[str, str]) -> AsyncIterator[asyncio.StreamReader]:
    started = await asyncio.create_subprocess_exec(
        str(BLACKJACK),
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    assert started.stdout is not None
    try:
        yield started.stdout
        started.send_signal(signal.SIGTERM)
        # a clean stop: every shutdown hook ran (a failing one used to leave the projection
        # consumer in its group and the store open, logged as "Application shutdown failed")
        rest = (await asyncio.wait_for(started.stdout.read(), WAIT_S)).decode()
        assert "shutdown failed" not in rest, rest[-3000:]
        assert await asyncio.wait_for(started.wait(), WAIT_S) == 0
    finally:
        if started.returncode is None:
            started.kill()
            await started.wait()


def stuck_line(log: list[str]) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(log[-1])
    return found


@pytest.mark.integration
async def test_blackjack_projections_run_reports_the_poison_on_readyz_and_metrics(
    events_topic: EventsTopic, tmp_path: Path
) -> None:
    offset = await produce(events_topic.name, events_topic.bootstrap, 2, [POISON])
    port = free_port()
    env = worker_env(
        events_topic,
        f"sqlite+aiosqlite:///{tmp_path}/projections.db",
        BLACKJACK_PROJECTION_STUCK_AFTER="2",
    )
    args = ("projections", "run", "--http", f"127.0.0.1:{port}")
    async with process(*args, env=env) as stdout:
        line = stuck_line(await lines_until(stdout, '"projection worker stuck"'))
        assert (line["topic"], line["partition"], line["offset"]) == (events_topic.name, 2, offset)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            assert (await http.get("/healthz")).status_code == 200
            ready = await http.get("/readyz")
            assert ready.status_code == 200, ready.text  # the query API is still served
            [stuck] = ready.json()["projections"]["stuck"]
            assert (stuck["topic"], stuck["partition"], stuck["offset"]) == line_key(line)
            metrics = (await http.get("/metrics")).text
            series = (
                f'blackjack_projection_stuck_offset{{partition="2",topic="{events_topic.name}"}}'
            )
            assert f"{series} {float(offset)}" in metrics
            # each preset's game series are there at 0 before any round is folded, so the
            # first round of a game after a start is an increase the dashboard sees
            for variant in ("mini-h17", "atlantic-city-multi", "surrender"):
                labels = f'currency="USD",variant="{variant}"'
                assert f"blackjack_wagered_minor_units_total{{{labels}}} 0.0" in metrics
                assert (
                    f'blackjack_rounds_closed_total{{currency="USD",outcome="settled",'
                    f'variant="{variant}"}} 0.0'
                ) in metrics


def line_key(line: dict[str, Any]) -> tuple[str, int, int]:
    return (line["topic"], line["partition"], line["offset"])


@pytest.mark.integration
async def test_blackjack_serve_reports_its_stuck_projections_on_readyz(
    kafka_space: Any, tmp_path: Path
) -> None:
    space = await kafka_space(partitions=2)
    offset = await produce(space.topics.events, space.bootstrap, 1, [POISON])
    port = free_port()
    env = {
        **os.environ,
        **space.env(),
        "BLACKJACK_DB_URL": f"sqlite+aiosqlite:///{tmp_path}/projections.db",
        "BLACKJACK_PROJECTION_STUCK_AFTER": "2",
    }
    async with process("serve", "--port", str(port), env=env) as stdout:
        line = stuck_line(await lines_until(stdout, '"projection worker stuck"'))
        assert line_key(line) == (space.topics.events, 1, offset)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            ready = await http.get("/readyz")
            body = ready.json()
            # Ready: a stuck projection alone leaves readiness alone, and the handler's
            # partition 1, rebuilt from the events topic the junk sits on, steps over it (a
            # record the service did not write: no ce_type, not an event).
            assert ready.status_code == 200, ready.text
            assert body["status"] == "ready" and body["states"]["1"] == "ready"
            assert body["projections"]["status"] == "stuck"
            [stuck] = body["projections"]["stuck"]
            assert line_key(stuck) == (space.topics.events, 1, offset)
            assert (await http.get("/healthz")).status_code == 200


# ---- the bookkeeping, without a broker -------------------------------------------------------

T = "t.blackjack.events"


def record(partition: int, offset: int) -> Record:
    return Record(T, partition, offset, b"")


def test_failures_count_per_partition_at_the_same_record_only() -> None:
    health = FoldHealth(stuck_after=2)
    health.failed([record(0, 5), record(1, 9)], record(1, 9), ValueError("bad"))
    assert health.folding and [f.offset for f in health.failing] == [9]
    health.failed([record(1, 9)], record(1, 9), ValueError("bad"))
    assert not health.folding and [(f.partition, f.offset, f.failures) for f in health.stuck] == [
        (1, 9, 2)
    ]
    health.folded({(T, 0): 20, (T, 1): 9})  # partition 0 moves on; 1 is still at 9
    assert not health.folding
    health.folded({(T, 1): 10})
    assert health.folding and health.failing == []


def test_a_failure_outside_any_fold_is_put_on_each_partitions_first_record() -> None:
    health = FoldHealth(stuck_after=1)
    health.failed([record(0, 7), record(0, 8), record(2, 3)], None, ConnectionError("db"))
    assert [(f.partition, f.offset) for f in health.stuck] == [(0, 7), (2, 3)]
    health.failed([record(0, 8)], None, ConnectionError("db"))  # another record: counts anew
    assert [(f.partition, f.offset, f.failures) for f in health.failing] == [(0, 8, 1), (2, 3, 1)]


def test_revoked_partitions_are_forgotten() -> None:
    health = FoldHealth(stuck_after=1)
    health.failed([record(0, 1)], record(0, 1), ValueError("bad"))
    health.forget([(T, 0)])
    assert health.folding and sample("blackjack_projection_stuck_offset", T, 0) is None
    with pytest.raises(ValueError, match="at least 1"):
        FoldHealth(stuck_after=0)


# ---- after the operator's step over a record that is not the service's ------------------------


@pytest.mark.integration
async def test_the_audit_and_a_rebuild_step_over_a_record_that_is_not_the_service_s(
    events_topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal
) -> None:
    """docs/operations.md: junk with no ``ce_*`` headers is skipped by moving the stored
    position past it, "then ``blackjack audit`` confirms the read model against the log". The
    audit's rebuild from offset 0 (and ``blackjack projections rebuild`` into an empty store,
    the re-fold of "Upgrading the read model") met the same junk and stopped with a trace, so
    no audit could pass again. They now step over such a record, and only such a one, and
    name it; a record the service wrote (its ``ce_type`` header) that cannot be folded still
    stops them."""
    envelopes = to_wire(LOG.envelopes, shoe_seal)
    half = len(envelopes) // 2
    before = await publish(events_topic, envelopes[:half])
    [(name, partition)] = before
    key: Position = (name, partition)
    offset = await produce(name, events_topic.bootstrap, partition, [POISON])
    await publish(events_topic, envelopes[half:])

    # the live store, as a worker left it: folded up to the junk, the operator's step, the rest
    live = await stores.store()
    writer = ProjectionWriter(live)
    await rebuild(writer, events_topic.bootstrap, name, stop={key: offset})
    async with live.writing() as connection:
        await connection.execute(
            update(schema.positions)
            .where(
                schema.positions.c.topic == name,
                schema.positions.c.kafka_partition == partition,
                schema.positions.c.next_offset <= offset,
            )
            .values(next_offset=offset + 1)
        )
    await rebuild(writer, events_topic.bootstrap, name)

    report = await run_audit(live, await stores.store(), events_topic.bootstrap, name, shoe_seal)
    assert report.ok, report.render()
    assert report.events == len(envelopes)
    assert report.foreign == [(name, partition, offset)]
    assert f"{name}[{partition}] offset {offset}" in report.render()

    refolded = await stores.store()
    skipped: list[Record] = []
    await rebuild(ProjectionWriter(refolded), events_topic.bootstrap, name, foreign=skipped)
    assert [(r.topic, r.partition, r.offset) for r in skipped] == [(name, partition, offset)]
    async with live.reading() as connection:
        expected = await dump(connection)
    async with refolded.reading() as connection:
        assert await dump(connection) == expected

    # a record with the service's header is the service's: never stepped over
    producer = AIOKafkaProducer(bootstrap_servers=events_topic.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(
            name, POISON, partition=partition, headers=[("ce_type", b"blackjack.BetPlaced.v1")]
        )
    finally:
        await producer.stop()
    with pytest.raises(ProjectionError, match="is not an event envelope"):
        await rebuild(ProjectionWriter(refolded), events_topic.bootstrap, name, foreign=[])
