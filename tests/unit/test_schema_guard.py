"""Every fold checks, in its own transaction, that the store is at the schema revision its code
was built for (``projections/revision.py``): a store another release migrated gets nothing of
the batch, the stored positions stay, and the worker stops (exit 3). On SQLite."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import REGISTRY
from sqlalchemy import text
from structlog.testing import capture_logs

from blackjack.cli import main
from blackjack.messages.sealing import ShoeSeal
from blackjack.projections.batches import _Folder
from blackjack.projections.dump import dump
from blackjack.projections.health import FoldHealth
from blackjack.projections.positions import SeekToStoredPositions
from blackjack.projections.revision import SchemaMismatch, code_revision
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter
from tests.integration.conftest_projections import event_records, play_tables
from tests.unit.migrations import migrate

TOPIC = "blackjack.events"
SEAL = ShoeSeal(bytes(range(32)))
LOG = play_tables([("t-1", "mini-h17"), ("t-2", "atlantic-city-multi")], rounds=4, seed=11)
RECORDS = event_records(LOG.envelopes, SEAL, TOPIC)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[ProjectionStore]:
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path / 'projections.db'}")
    await store.migrate()
    await ProjectionWriter(store).apply(RECORDS[:100])
    yield store
    await store.close()


async def text_of(store: ProjectionStore) -> str:
    async with store.reading() as connection:
        return (await dump(connection)).text()


async def rows_of(store: ProjectionStore) -> dict[str, int]:
    tables = ("events", "table_views", "accounts", "rounds", "round_players", "game_days")
    async with store.reading() as connection:
        return {
            table: (await connection.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one()
            for table in tables
        }


async def a_newer_release_migrates(store: ProjectionStore, revision: str = "0099") -> None:
    async with store.writing() as connection:
        await connection.execute(text(f"UPDATE alembic_version SET version_num = '{revision}'"))


def test_the_code_s_revision_is_the_migrations_head() -> None:
    assert code_revision() == "0007"


async def test_a_fold_into_a_store_a_newer_release_migrated_writes_nothing(
    store: ProjectionStore,
) -> None:
    before = await text_of(store)
    await a_newer_release_migrates(store)
    writer = ProjectionWriter(store)
    with pytest.raises(SchemaMismatch, match="a newer release migrated this database") as raised:
        await writer.apply(RECORDS[100:200])
    assert "this worker must be replaced" in str(raised.value)
    assert (raised.value.expected, raised.value.found, raised.value.newer) == (
        "0007",
        ("0099",),
        True,
    )
    assert await text_of(store) == before
    assert await writer.stored_positions() == {(TOPIC, 0): 100}


async def test_a_fold_into_a_store_not_yet_migrated_to_its_revision_writes_nothing(
    store: ProjectionStore,
) -> None:
    """An older revision (an operator's downgrade while the worker runs): this code's fold
    would write columns 0005 lacks; it says to migrate first instead."""
    async with store.writing() as connection:
        await connection.run_sync(migrate, "0005", True)
    before = await rows_of(store)  # the dump reads 0006's columns
    writer = ProjectionWriter(store)
    with pytest.raises(SchemaMismatch, match="run `blackjack projections migrate` first") as raised:
        await writer.apply(RECORDS[100:200])
    assert (raised.value.found, raised.value.newer) == (("0005",), False)
    assert await rows_of(store) == before
    assert await writer.stored_positions() == {(TOPIC, 0): 100}


async def test_a_fold_into_a_store_never_migrated_creates_nothing(tmp_path: Path) -> None:
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}")
    try:
        with pytest.raises(SchemaMismatch, match="none \\(not migrated\\)") as raised:
            await ProjectionWriter(store).apply(RECORDS[:10])
        assert (raised.value.found, raised.value.newer) == ((), False)
        async with store.reading() as connection:
            tables = "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
            assert (await connection.execute(text(tables))).scalar_one() == 0
    finally:
        await store.close()


def mismatches(direction: str) -> float | None:
    labels = {"expected": "0007", "found": "0099", "direction": direction}
    return REGISTRY.get_sample_value("blackjack_projection_schema_mismatch", labels)


async def test_the_worker_stops_folding_at_a_mismatch_and_says_why(store: ProjectionStore) -> None:
    """The worker's fold: not a failed batch to retry (that would fold again once the store is
    back at its revision, behind the migration's back), but a stop: ``stopped`` returns the
    error for ``run_worker`` to end with; /readyz and a metric say so meanwhile."""
    health = FoldHealth()
    writer = ProjectionWriter(store)
    positions = SeekToStoredPositions(writer, lambda: None, health, lag_every=None)
    folder = _Folder(writer, positions, health, lambda: None)
    failed = REGISTRY.get_sample_value("blackjack_projection_failed_batches_total")
    await a_newer_release_migrates(store)
    with capture_logs() as logs:
        await folder.fold(RECORDS[100:200])
    assert health.mismatch is not None and health.mismatch.newer
    assert await health.stopped() is health.mismatch
    assert health.status()["status"] == "schema_mismatch"
    assert mismatches("newer") == 1.0
    assert REGISTRY.get_sample_value("blackjack_projection_failed_batches_total") == failed
    stop = [e for e in logs if e["event"] == "read model schema mismatch; the worker stops"]
    assert [(e["log_level"], e["found"], e["direction"]) for e in stop] == [
        ("critical", "0099", "newer")
    ]

    await a_newer_release_migrates(store, code_revision())  # even back at its revision
    await folder.fold(RECORDS[100:200])
    assert await writer.stored_positions() == {(TOPIC, 0): 100}


async def test_an_idle_worker_stops_too(store: ProjectionStore) -> None:
    """No batch comes: the lag watch's look at the revision stops it all the same."""
    health = FoldHealth()
    positions = SeekToStoredPositions(ProjectionWriter(store), lambda: None, health, None)
    await positions._check_schema()
    assert health.mismatch is None
    await a_newer_release_migrates(store)
    await positions._check_schema()
    assert health.mismatch is not None and health.mismatch.found == ("0099",)


async def test_the_command_line_exits_3_naming_the_mismatch(
    store: ProjectionStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """``projections migrate`` (and ``run``, ``rebuild``, which migrate first) on a store a
    newer release migrated."""
    await a_newer_release_migrates(store)
    command = ["projections", "migrate", "--db-url", store.url]
    assert await asyncio.to_thread(main, command) == 3
    assert "a newer release migrated this database (schema revision 0099" in capsys.readouterr().err


def test_a_dba_s_migration_script_holds_the_folds_before_its_first_statement() -> None:
    """``alembic ... upgrade 0004:0005 --sql`` (docs/projections.md): the lock is taken right
    after BEGIN, before 0005 reads the rounds."""
    import argparse
    import io

    from alembic import command
    from alembic.config import Config

    from blackjack.projections.store import MIGRATIONS

    script = io.StringIO()
    config = Config(output_buffer=script)
    config.set_main_option("script_location", str(MIGRATIONS))
    config.cmd_opts = argparse.Namespace(x=["url=postgresql+asyncpg://u:p@db/blackjack"])
    command.upgrade(config, "0004:0005", sql=True)  # 0006 reads rows: no script
    statements = [line for line in script.getvalue().splitlines() if line.strip()]
    assert statements[:3] == [
        "BEGIN;",
        "LOCK TABLE alembic_version IN EXCLUSIVE MODE;",
        "-- Running upgrade 0004 -> 0005",
    ]
