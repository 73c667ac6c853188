"""Another store in the projection workers' consumer group, on the real broker
(``projections/split.py``): two workers of one group on two SQLite files are each reported;
two on one file are not, nor are workers restarted on a file restored from a backup (behind
what the group committed) while they catch up.

The workers run in this process, each with a ``FoldHealth`` of its own, their watch every
0.1 s and a partition reported after 3 s behind (60 s in service)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from structlog.testing import capture_logs

from blackjack.messages.sealing import ShoeSeal
from blackjack.projections.health import FoldHealth
from blackjack.projections.store import ProjectionStore
from tests.integration.conftest_projections import (
    EventsTopic,
    play_tables,
    projection_worker,
    publish,
    reached,
    to_wire,
    wait_until,
)

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration

WAIT_S = 60.0
FAST: dict[str, Any] = {"watch_every_s": 0.1, "split_after_s": 3.0}
CHECKS_PAST_GRACE = 40  # 4 s of checks: past the 3 s a partition must stay behind
LOG = play_tables([(f"table-{n}", "mini-h17") for n in range(6)], rounds=4, seed=7)
SPLIT_LOG = "another store in the consumer group"


def worker(topic: EventsTopic, store: ProjectionStore, health: FoldHealth) -> Any:
    return projection_worker(topic.bootstrap, topic.prefix, store, health=health, **FAST)


async def sqlite(path: Path) -> ProjectionStore:
    store = ProjectionStore(f"sqlite+aiosqlite:///{path}")
    await store.migrate()
    return store


async def compared_past_the_grace(*healths: FoldHealth) -> None:
    """Until each worker has compared partitions another worker owns (both in the group),
    then for longer than a partition must stay behind to be reported."""
    for health in healths:
        await _compared_others(health)
    for health in healths:
        await _checked(health, health.group_checks + CHECKS_PAST_GRACE)


async def _compared_others(health: FoldHealth) -> None:
    await health.wait_until(lambda: health.others_compared > 0, WAIT_S)


async def _checked(health: FoldHealth, count: int) -> None:
    await health.wait_until(lambda: health.group_checks >= count, WAIT_S)


def missed(health: FoldHealth) -> set[tuple[str, int]]:
    return {b.position for b in health.split}


async def test_two_workers_of_one_group_on_two_sqlite_files_are_each_reported(
    events_topic: EventsTopic, shoe_seal: ShoeSeal, tmp_path: Path
) -> None:
    """A forgotten BLACKJACK_DB_URL: each worker folds into a file of its own. Before,
    nothing said so: each query API answered the other's partitions stale."""
    envelopes = to_wire(LOG.envelopes, shoe_seal)
    ends = await publish(events_topic, envelopes)
    assert len(ends) > 1  # the tables are spread over several partitions
    x, y = await sqlite(tmp_path / "x.db"), await sqlite(tmp_path / "y.db")
    hx, hy = FoldHealth(), FoldHealth()
    try:
        async with worker(events_topic, x, hx) as wx:
            await wx.wait_for(ends, WAIT_S)  # x has every partition, committed to the group
            async with worker(events_topic, y, hy):
                # y takes some from x and folds them from 0 into its own file; the rest it
                # never sees, and the group has them committed past it
                await hy.wait_until(lambda: bool(hy.split), WAIT_S)
                assert all(b.stored is None and b.committed > 0 for b in hy.split)
                # x stays at the old ends of y's partitions, which y commits past
                more = await publish(events_topic, envelopes)
                every = set(ends)
                await hx.wait_until(lambda: missed(hx) | missed(hy) == every, WAIT_S)
                assert all(b.stored == ends[b.position] for b in hx.split)
                assert all(b.committed <= more[b.position] for b in hx.split)
                for health in (hx, hy):
                    status = health.status()
                    assert status["status"] == "split_store"
                    assert status["split_store"]["reason"] == "another_store_in_group"
                    assert health.store_name not in json.dumps(status)
        # each misses what the other folds, and nothing else
        assert missed(hx).isdisjoint(missed(hy))
    finally:
        await x.close()
        await y.close()


async def test_two_workers_of_one_group_on_one_sqlite_file_are_not_reported(
    events_topic: EventsTopic, shoe_seal: ShoeSeal, tmp_path: Path
) -> None:
    """Several ``serve`` started in one directory share ``var/projections.db``: right, and
    never reported, though the group's offsets and the file move on under both."""
    envelopes = to_wire(LOG.envelopes, shoe_seal)
    path = tmp_path / "projections.db"
    one, other, reader = await sqlite(path), await sqlite(path), await sqlite(path)
    h1, h2 = FoldHealth(), FoldHealth()
    try:
        with capture_logs() as logs:
            async with worker(events_topic, one, h1), worker(events_topic, other, h2):
                ends = await publish(events_topic, envelopes)
                await wait_until(lambda: reached(reader, ends), "the first events folded")
                await compared_past_the_grace(h1, h2)
                more = await publish(events_topic, envelopes)
                await wait_until(lambda: reached(reader, more), "the same again folded")
                await compared_past_the_grace(h1, h2)
        assert (h1.split, h2.split) == ([], [])
        assert not [e for e in logs if SPLIT_LOG in e["event"]]
    finally:
        for store in (one, other, reader):
            await store.close()


async def test_workers_restarted_on_a_file_restored_from_a_backup_catch_up_unreported(
    events_topic: EventsTopic, shoe_seal: ShoeSeal, tmp_path: Path
) -> None:
    """The group has committed past a file restored from a backup; the two workers
    restarted on it fold their partitions again from the file's positions, each commits the
    file's positions after its first batch, and neither ever reports another store."""
    envelopes = to_wire(LOG.envelopes, shoe_seal)
    path, backup = tmp_path / "projections.db", tmp_path / "backup.db"

    async def both_fold_to(ends: dict[tuple[str, int], int]) -> tuple[FoldHealth, FoldHealth]:
        one, other, reader = await sqlite(path), await sqlite(path), await sqlite(path)
        h1, h2 = FoldHealth(), FoldHealth()
        try:
            async with worker(events_topic, one, h1), worker(events_topic, other, h2):
                await wait_until(lambda: reached(reader, ends), "folded to the end")
                await compared_past_the_grace(h1, h2)
        finally:
            for store in (one, other, reader):
                await store.close()  # the last connection closed: the WAL is in the file
        return h1, h2

    first = await publish(events_topic, envelopes)
    await both_fold_to(first)
    copy_database(path, backup)
    second = await publish(events_topic, envelopes)
    await both_fold_to(second)  # the group has committed the second ends
    copy_database(backup, path)  # restored: at the first ends
    restored = ProjectionStore(f"sqlite+aiosqlite:///{path}")
    try:
        positions = await _positions(restored)
        assert positions == first and any(second[k] > first[k] for k in first)
    finally:
        await restored.close()
    third = await publish(events_topic, envelopes)
    with capture_logs() as logs:
        healths = await both_fold_to(third)
    assert [h.split for h in healths] == [[], []]
    assert not [e for e in logs if SPLIT_LOG in e["event"]]


def copy_database(source: Path, target: Path) -> None:
    """The SQLite file with its write-ahead log, if any (what a backup of the volume holds)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
        if Path(f"{source}{suffix}").exists():
            shutil.copyfile(f"{source}{suffix}", f"{target}{suffix}")


async def _positions(store: ProjectionStore) -> dict[tuple[str, int], int]:
    from blackjack.projections.writer import ProjectionWriter

    return await ProjectionWriter(store).stored_positions()
