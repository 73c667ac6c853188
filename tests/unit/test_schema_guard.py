"""Every fold checks, in its own transaction, that the store is at the schema revision its code
was built for (``projections/revision.py``): a store another release migrated gets nothing of
the batch, the stored positions stay, and the worker stops (exit 3). On SQLite."""

from __future__ import annotations

import argparse
import asyncio
import io
import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from alembic import command
from alembic.config import Config
from alembic.config import main as alembic_main
from prometheus_client import REGISTRY
from sqlalchemy import text
from structlog.testing import capture_logs

from blackjack.cli import main
from blackjack.messages.sealing import ShoeSeal
from blackjack.projections.batches import _Folder
from blackjack.projections.dump import dump
from blackjack.projections.health import FoldHealth
from blackjack.projections.positions import SeekToStoredPositions
from blackjack.projections.revision import NotRenderable, SchemaMismatch, code_revision
from blackjack.projections.store import MIGRATIONS, ProjectionStore
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
    assert code_revision() == "0012"


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
        "0012",
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
    labels = {"expected": "0012", "found": "0099", "direction": direction}
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
    script = io.StringIO()
    config = _offline_config(script, "postgresql+asyncpg://u:p@db/blackjack")
    command.upgrade(config, "0004:0005", sql=True)  # 0006 reads rows: no script
    statements = [line for line in script.getvalue().splitlines() if line.strip()]
    assert statements[:3] == [
        "BEGIN;",
        "LOCK TABLE alembic_version IN EXCLUSIVE MODE;",
        "-- Running upgrade 0004 -> 0005",
    ]


def _offline_config(script: io.StringIO, url: str) -> Config:
    config = Config(output_buffer=script)
    config.set_main_option("script_location", str(MIGRATIONS))
    config.cmd_opts = argparse.Namespace(x=[f"url={url}"])
    return config


@pytest.mark.parametrize(
    "url", ["postgresql+asyncpg://u:p@db/blackjack", "sqlite+aiosqlite:///projections.db"]
)
def test_a_dba_s_script_through_0006_is_refused_before_a_line_is_rendered(url: str) -> None:
    """0006 reads the stored events in Python to fill its columns (docs/projections.md): an
    upgrade script through it is refused with ``NotRenderable``, naming what to do instead,
    before anything is written (it stopped halfway with ``TypeError: 'NoneType' object is not
    iterable``); a script from 0006 on still renders."""
    for revisions, why, instead in [
        (
            "0005:0006",
            "revision 0006 cannot be rendered as a SQL script (--sql): its upgrade reads",
            "Instead: run 0006 online (`alembic ... upgrade 0006`, without --sql);",
        ),
        (
            "0004:0010",
            "revision 0006 cannot be rendered as a SQL script (--sql): its upgrade reads",
            "Instead: render up to 0005 (`upgrade 0004:0005 --sql`), then run 0006 online "
            "(`alembic ... upgrade 0006`, without --sql), then render the rest from it "
            "(`upgrade 0006:0010 --sql`);",
        ),
        (
            "0004:head",  # 0012 reads the events too
            "revisions 0006 and 0012 cannot be rendered as a SQL script (--sql): their upgrades",
            "Instead: render up to 0005 (`upgrade 0004:0005 --sql`), then run 0006 online "
            "(`alembic ... upgrade 0006`, without --sql), then render up to 0011 (`upgrade "
            "0006:0011 --sql`), then run 0012 online (`alembic ... upgrade 0012`, without "
            "--sql);",
        ),
    ]:
        script = io.StringIO()
        with pytest.raises(NotRenderable) as refused:
            command.upgrade(_offline_config(script, url), revisions, sql=True)
        assert refused.value.revision == "0006"
        assert why in str(refused.value)
        assert instead in str(refused.value)
        assert script.getvalue() == ""
    script = io.StringIO()
    command.upgrade(_offline_config(script, url), "0006:0007", sql=True)
    assert "UPDATE alembic_version SET version_num='0007'" in script.getvalue()


def test_the_alembic_command_line_says_why_it_renders_no_script_through_0006(
    capsys: pytest.CaptureFixture[str], logging_left_as_it_was: None
) -> None:
    """``alembic ... upgrade 0005:0006 --sql``: FAILED with the reason, a non-zero exit, no
    traceback."""
    argv = ["-c", str(MIGRATIONS / "alembic.ini"), "-x", "url=postgresql+asyncpg://u:p@db/b"]
    with pytest.raises(SystemExit) as exited:
        alembic_main(argv=[*argv, "upgrade", "0005:0006", "--sql"])
    assert exited.value.code not in (0, None)
    said = capsys.readouterr()
    assert "FAILED: revision 0006 cannot be rendered as a SQL script" in said.out + said.err
    assert "Traceback" not in said.out + said.err


SQLITE_URL = "sqlite+aiosqlite:///projections.db"
PG_URL = "postgresql+asyncpg://u:p@db/blackjack"


@pytest.mark.parametrize(
    ("revisions", "refused_at", "instead"),
    [
        (
            "0007:0005",
            "0007",
            "Instead: downgrade online (`alembic ... downgrade 0005`, without --sql)",
        ),
        (
            "0004:0001",
            "0003",
            "Instead: render down to 0003 (`downgrade 0004:0003 --sql`), then downgrade online "
            "(`alembic ... downgrade 0001`, without --sql)",
        ),
        ("0007:base", "0007", "(`alembic ... downgrade base`, without --sql)"),
    ],
)
def test_a_sqlite_downgrade_script_through_a_dropped_column_is_refused_before_a_line(
    revisions: str, refused_at: str, instead: str
) -> None:
    """On SQLite a downgrade that drops a column copies the table as the live database has it
    (alembic's batch mode), which a script cannot see: ``downgrade 0007:0005 --sql`` stopped at
    0007 with alembic's "batch mode with dialect sqlite requires a live database connection",
    and ``downgrade 0004:0001 --sql`` did so at 0003 after writing 0004's part of the script.
    Now refused as an upgrade through 0006 is (``NotRenderable``), nothing written."""
    script = io.StringIO()
    with pytest.raises(NotRenderable) as refused:
        command.downgrade(_offline_config(script, SQLITE_URL), revisions, sql=True)
    assert refused.value.revision == refused_at
    said = str(refused.value)
    assert said.startswith(
        f"the downgrade of revision {refused_at} cannot be rendered as a SQL script (--sql) on "
        "SQLite: it drops a column"
    ), said
    assert instead in said, said
    assert script.getvalue() == ""


def test_every_downgrade_step_renders_whole_or_is_refused_before_a_line() -> None:
    """Each migration's downgrade, alone, on both dialects: a script of it, or (SQLite, a
    dropped column) ``NotRenderable`` and nothing written; never a half script or alembic's
    own failure. PostgreSQL renders every one, and the whole way down to base."""
    revisions = [
        "base",
        "0001",
        "0002",
        "0003",
        "0004",
        "0005",
        "0006",
        "0007",
        "0008",
        "0009",
        "0010",
        "0011",
        "0012",
    ]
    assert revisions[-1] == code_revision()
    refused = []
    for below, above in itertools.pairwise(revisions):
        for url in (SQLITE_URL, PG_URL):
            script = io.StringIO()
            try:
                command.downgrade(_offline_config(script, url), f"{above}:{below}", sql=True)
            except NotRenderable as error:
                assert url == SQLITE_URL and error.revision == above
                assert script.getvalue() == ""
                refused.append(above)
                continue
            named = "" if below == "base" else below  # alembic names base so
            assert f"-- Running downgrade {above} -> {named}\n" in script.getvalue()
            assert "alembic_version" in script.getvalue().rsplit("-- Running", 1)[1]
    assert refused == ["0002", "0003", "0006", "0007", "0008", "0012"]
    script = io.StringIO()
    command.downgrade(_offline_config(script, PG_URL), "0007:base", sql=True)
    rendered = script.getvalue()
    assert rendered.count("-- Running downgrade") == 7, rendered
    assert rendered.endswith("version_num = '0001';\n\nCOMMIT;\n\n"), rendered


def test_the_alembic_command_line_says_why_it_renders_no_sqlite_downgrade_script(
    capsys: pytest.CaptureFixture[str], logging_left_as_it_was: None
) -> None:
    """``alembic ... downgrade 0007:0005 --sql`` on SQLite: FAILED with the reason and what to
    run instead, a non-zero exit, no traceback, no part of a script."""
    argv = ["-c", str(MIGRATIONS / "alembic.ini"), "-x", f"url={SQLITE_URL}"]
    with pytest.raises(SystemExit) as exited:
        alembic_main(argv=[*argv, "downgrade", "0007:0005", "--sql"])
    assert exited.value.code not in (0, None)
    said = capsys.readouterr()
    assert said.out.strip().startswith(
        "FAILED: the downgrade of revision 0007 cannot be rendered as a SQL script (--sql) on "
        "SQLite"
    ), said
    assert "-- Running" not in said.out + said.err
    assert "Traceback" not in said.out + said.err
