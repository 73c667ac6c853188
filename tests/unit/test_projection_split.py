"""Another store in the projection workers' consumer group (``projections/split.py``): the
decision over positions, and how the worker reports it (metric, log, ``/readyz``)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest.mock import PropertyMock, patch

import httpx
import pytest
from aiokafka import TopicPartition
from prometheus_client import REGISTRY
from structlog.testing import capture_logs

from blackjack.app import build_app
from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.service import CommandHandler
from blackjack.messages.sealing import ShoeSeal
from blackjack.observability.roles import KAFKA_ANSWERED
from blackjack.projection_worker.settings import ProjectionSettings
from blackjack.projections.health import FoldHealth, probes
from blackjack.projections.positions import SeekToStoredPositions
from blackjack.projections.split import Behind, SplitWatch, behind_the_group
from tests.unit.test_projection_worker import TOPIC, Consumer, Store

P0, P1, P2 = ((TOPIC, n) for n in range(3))


# ---- the decision ------------------------------------------------------------------------


def test_a_partition_another_worker_folds_past_this_store_is_behind() -> None:
    """P1 is folded elsewhere to 90, this store holds 40 of it; P2 was never folded here;
    P0 is this worker's own (a store behind the group there is caught up: lag, not this)."""
    behind = behind_the_group(
        committed={P0: 500, P1: 90, P2: 7}, stored={P0: 100, P1: 40}, owned={P0}
    )
    assert behind == {P1: Behind(TOPIC, 1, 40, 90), P2: Behind(TOPIC, 2, None, 7)}
    assert [b.missing for b in behind.values()] == [50, 7]


def test_on_one_shared_store_the_group_is_never_past_it() -> None:
    """The group's offsets read first, the store's after: the store is at or past them,
    whoever owns what (another worker folding meanwhile only moves the store further)."""
    committed = {P0: 100, P1: 90, P2: 0}
    assert behind_the_group(committed, {P0: 100, P1: 95, P2: 0}, owned=set()) == {}
    assert behind_the_group(committed, {P0: 120, P1: 90}, owned={P2}) == {}


def test_no_committed_offset_is_nothing_behind() -> None:
    """A group that never committed a partition (nothing folded anywhere yet) says nothing."""
    assert behind_the_group({}, {P0: 3}, owned=set()) == {}


def test_a_partition_is_reported_only_after_staying_behind_for_the_whole_time() -> None:
    """A store behind for a moment (its owner has not committed its first batch since a
    restore or a rebuild) is not reported; one behind for ``after`` seconds is, until it
    catches up or is given to this worker, when the time starts again."""
    watch = SplitWatch(after=60)
    behind = {P1: Behind(TOPIC, 1, 40, 90)}
    assert watch.observe(0, behind) == []
    assert watch.observe(59, behind) == []
    assert watch.observe(60, behind) == [behind[P1]]
    assert watch.observe(75, {}) == []  # caught up (or this worker's now)
    assert watch.observe(90, behind) == []  # behind again: from zero
    assert watch.observe(150, behind) == [behind[P1]]
    both = {**behind, P2: Behind(TOPIC, 2, None, 7)}
    assert watch.observe(160, both) == [behind[P1]]  # P2 only from 160
    assert watch.observe(220, both) == list(both.values())


# ---- how it is reported ------------------------------------------------------------------


def missing(partition: int) -> float | None:
    return REGISTRY.get_sample_value(
        "blackjack_projection_split_missing_offsets",
        {"topic": TOPIC, "partition": str(partition)},
    )


async def readyz(health: FoldHealth) -> httpx.Response:
    async def nothing(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("not the probes")

    transport = httpx.ASGITransport(app=probes(health, nothing))
    async with httpx.AsyncClient(transport=transport, base_url="http://worker") as http:
        return await http.get("/readyz")


async def test_another_store_in_the_group_makes_the_worker_unready_and_says_what_to_do() -> None:
    from blackjack.projections.metrics import group_checked

    health = FoldHealth()
    health.store_name = "postgresql+asyncpg://reader:***@db-7.internal:5432/blackjack_eu"
    reported = [Behind(TOPIC, 1, 40, 90), Behind(TOPIC, 2, None, 7)]
    with capture_logs() as logs:
        group_checked(health, reported)
        group_checked(health, reported)  # the same again: one line, not one per check
    assert [(e["log_level"], e["partitions"]) for e in logs] == [
        ("error", [b.describe() for b in reported])
    ]
    assert logs[0]["store"] == health.store_name  # the detail is the log's
    assert REGISTRY.get_sample_value("blackjack_projection_split_partitions") == 2
    assert (missing(1), missing(2)) == (50, 7)

    answer = await readyz(health)
    assert answer.status_code == 503
    body = answer.json()
    assert body["status"] == "split_store"
    detail = body["projections"]["split_store"]
    assert body["projections"]["status"] == "split_store"
    # /readyz needs no token: a reason code, never the store's host, user or database
    assert detail["reason"] == "another_store_in_group" and "store" not in detail
    for secret in ("db-7.internal", "reader", "blackjack_eu", "5432"):
        assert secret not in answer.text
    assert detail["partitions"][0] == {
        "topic": TOPIC,
        "partition": 1,
        "stored": 40,
        "committed": 90,
        "missing": 50,
    }
    assert "BLACKJACK_DB_URL" in detail["action"]

    with capture_logs() as logs:
        group_checked(health, [reported[0]])  # P2 given to this worker, say
        group_checked(health, [])
    assert [e["log_level"] for e in logs] == ["error", "info"]
    assert REGISTRY.get_sample_value("blackjack_projection_split_partitions") == 0
    assert (missing(1), missing(2)) == (None, None)
    answer = await readyz(health)
    assert (answer.status_code, answer.json()["projections"]["status"]) == (200, "folding")


# ---- the worker's watch --------------------------------------------------------------------


class Group(Consumer):
    """A consumer in a group of three partitions, one of them this worker's; ``calls`` tells
    in which order the group's offsets and the store's positions were read."""

    def __init__(self, committed: dict[tuple[str, int], int], calls: list[str]) -> None:
        super().__init__()
        self.committed = committed
        self.calls = calls
        self._closed = False
        self.fetched = asyncio.Event()
        self._coordinator = SimpleNamespace(fetch_committed_offsets=self._fetch)

    def subscription(self) -> set[str]:
        return {TOPIC}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return {0, 1, 2}

    async def _fetch(self, partitions: list[TopicPartition]) -> dict[TopicPartition, Any]:
        self.calls.append(f"group of {len(partitions)} in {_task()}")
        self.fetched.set()
        return {
            tp: SimpleNamespace(offset=self.committed.get((tp.topic, tp.partition), -1))
            for tp in partitions
        }

    async def end_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        return dict.fromkeys(partitions, 100)

    async def position(self, tp: TopicPartition) -> int:
        return 0


class Ordered(Store):
    def __init__(self, positions: dict[tuple[str, int], int], calls: list[str]) -> None:
        super().__init__(positions)
        self.calls = calls
        self.asked = asyncio.Event()

    async def stored_positions(self) -> dict[tuple[str, int], int]:
        self.calls.append(f"store in {_task()}")
        self.asked.set()
        return await super().stored_positions()

    async def read(self, times: int) -> None:
        """Until the watch has read the positions ``times`` more times."""
        for _ in range(times):
            self.asked.clear()
            await asyncio.wait_for(self.asked.wait(), 5)


def _task() -> str:
    task = asyncio.current_task()
    return "" if task is None else task.get_name()


async def checks(health: FoldHealth, count: int) -> None:
    start = health.group_checks
    await health.wait_until(lambda: health.group_checks >= start + count, 5)


async def test_the_watch_reads_the_group_before_the_store_and_reports_another_store() -> None:
    calls: list[str] = []
    consumer = Group({P0: 100, P1: 90, P2: 7}, calls)
    health = FoldHealth()
    positions = SeekToStoredPositions(
        Ordered({P0: 100, P1: 40}, calls),  # type: ignore[arg-type]
        lambda: consumer,
        health,
        lag_every=0.01,
        split_after=0,
    )
    await positions.on_partitions_assigned({TopicPartition(*P0)})
    try:
        await checks(health, 1)
        assert [b.position for b in health.split] == [P1, P2]
        comparing = [c for c in calls if c.endswith("projection-group")]
        # one request for every partition, then the store
        assert comparing[:2] == ["group of 3 in projection-group", "store in projection-group"]
    finally:
        consumer._closed = True


async def test_no_comparison_counts_while_a_rebalance_is_under_way() -> None:
    """Between a revocation and the next assignment this worker owns nothing, and the
    partitions it is about to be given may stand anywhere: nothing is compared then."""
    calls: list[str] = []
    consumer = Group({P0: 100, P1: 90, P2: 7}, calls)
    health = FoldHealth()
    store = Ordered({P0: 100, P1: 40}, calls)
    positions = SeekToStoredPositions(
        store,  # type: ignore[arg-type]
        lambda: consumer,
        health,
        lag_every=0.01,
        split_after=0,
    )
    every = {TopicPartition(TOPIC, n) for n in range(3)}
    await positions.on_partitions_assigned(every)  # all three: nothing not owned
    try:
        await checks(health, 2)
        assert health.split == []
        # P1 and P2 revoked, the new assignment not come yet: P0's lag is still measured
        await positions.on_partitions_revoked(every - {TopicPartition(*P0)})
        calls.clear()
        await store.read(3)
        assert not [c for c in calls if c.startswith("group")]
        assert health.split == []
        await positions.on_partitions_assigned(set())  # over: P0 kept, P1 and P2 elsewhere
        await checks(health, 1)
        assert [b.position for b in health.split] == [P1, P2]
    finally:
        consumer._closed = True


async def test_a_rebalance_starts_every_partitions_time_behind_again() -> None:
    """A store behind the group on P1 (restored from a backup: P1's owner has not committed
    its first batch yet) is seen at 0; a rebalance from 30 to 59 gives P1 to another worker,
    which commits only after it. Before, P1's time ran on through the rebalance, and the
    first comparison after it (61) reported another store that does not exist: 503
    ``split_store``, pods out of service. Now it counts from the first comparison after the
    rebalance, so a store that really is another one is reported 60 s after that."""
    calls: list[str] = []
    consumer = Group({P0: 100, P1: 90}, calls)
    health = FoldHealth()
    now = [0.0]
    positions = SeekToStoredPositions(
        Ordered({P0: 100, P1: 40}, calls),  # type: ignore[arg-type]
        lambda: consumer,
        health,
        lag_every=0.01,
        split_after=60,
    )
    given = {TopicPartition(*P0)}

    async def compared_at(seconds: float) -> list[tuple[str, int]]:
        now[0] = seconds  # a comparison that ends after this has read this time
        await checks(health, 1)
        return [b.position for b in health.split]

    with patch("blackjack.projections.positions.time", SimpleNamespace(monotonic=lambda: now[0])):
        await positions.on_partitions_assigned(given)
        try:
            assert await compared_at(0) == []
            assert await compared_at(30) == []
            await positions.on_partitions_revoked(given)  # a long rebalance
            now[0] = 59
            await positions.on_partitions_assigned(given)
            assert await compared_at(61) == []
            assert await compared_at(120) == []
            assert await compared_at(121) == [P1]  # still behind: another store after all
        finally:
            consumer._closed = True


async def test_partitions_taken_behind_the_group_are_told_once_and_folded_from_the_store() -> None:
    """A store restored from a backup: the group has committed P0 past it. The worker seeks
    P0 to the store's position all the same, and says so once (not a fault: it is P0's
    owner, and catches up)."""
    calls: list[str] = []
    consumer = Group({P0: 90, P1: 90}, calls)
    health = FoldHealth()
    positions = SeekToStoredPositions(
        Ordered({P0: 40, P1: 90}, calls),  # type: ignore[arg-type]
        lambda: consumer,
        health,
        lag_every=60,  # no watch within the test
    )
    given = {TopicPartition(*P0), TopicPartition(*P1)}
    try:
        with capture_logs() as logs:
            await positions.on_partitions_assigned(given)
            await asyncio.wait_for(asyncio.gather(*list(positions._notes)), 5)
    finally:
        assert positions._lag_watch is not None and positions._group_watch is not None
        await positions.stop_watching()  # every watch, the money in transit's too
    assert consumer.sought == {TopicPartition(*P0): 40, TopicPartition(*P1): 90}
    told = [e for e in logs if e["event"].startswith("partitions taken behind the group")]
    assert [(e["log_level"], e["partitions"]) for e in told] == [
        ("info", [{"partition": f"{TOPIC}[0]", "stored": 40, "committed": 90}])
    ]
    assert "group of 2 in projection-taken" in calls  # the partitions given, in one request
    assert health.split == []


@pytest.mark.parametrize("offsets", ["broken", "empty"])
async def test_group_offsets_that_cannot_be_read_are_no_finding(offsets: str) -> None:
    calls: list[str] = []
    consumer = Group({}, calls)
    if offsets == "broken":

        async def fail(partitions: list[TopicPartition]) -> None:
            raise ConnectionError("coordinator gone")

        consumer._coordinator = SimpleNamespace(fetch_committed_offsets=fail)
    health = FoldHealth()
    store = Ordered({P0: 100}, calls)
    positions = SeekToStoredPositions(
        store,  # type: ignore[arg-type]
        lambda: consumer,
        health,
        lag_every=0.01,
        split_after=0,
    )
    KAFKA_ANSWERED.clear()
    started = time.time()
    await positions.on_partitions_assigned({TopicPartition(*P0)})
    try:
        if offsets == "empty":  # the group has committed nothing yet: compared, all right
            await checks(health, 2)
        else:  # not compared, and the lag's reads go on
            await store.read(3)
            assert health.group_checks == 0
        assert health.split == []
    finally:
        consumer._closed = True
    # the brokers' answer is what BlackjackKafkaUnreachable watches: none, no series
    answered = REGISTRY.get_sample_value(
        "blackjack_kafka_answered_timestamp_seconds", {"role": "projections"}
    )
    if offsets == "empty":
        assert answered is not None and started <= answered <= time.time()
    else:
        assert answered is None


async def test_blackjack_serve_is_not_ready_while_its_store_is_split(tmp_path: Path) -> None:
    """``serve``'s /readyz is the handler's and the worker's: ready handler, split store, 503
    (a stuck partition alone leaves it 200)."""
    projections = ProjectionSettings(db_url=f"sqlite+aiosqlite:///{tmp_path / 'read.db'}")
    served = build_app(HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex()), projections)
    assert served.folding is not None
    served.folding.started()
    served.start.done = True
    transport = httpx.ASGITransport(app=served.app)
    with patch.object(CommandHandler, "ready", new_callable=PropertyMock, return_value=True):
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as http:
            assert (await http.get("/readyz")).status_code == 200
            served.folding.group_checked([Behind(TOPIC, 1, 40, 90)])
            answer = await http.get("/readyz")
            assert answer.status_code == 503
            body = answer.json()
            assert body["status"] == "not ready"
            assert body["projections"]["split_store"]["partitions"][0]["missing"] == 50
            served.folding.group_checked([])
            assert (await http.get("/readyz")).status_code == 200
