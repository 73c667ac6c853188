"""A migration run while workers fold, on the real broker, on SQLite and on PostgreSQL.

A newer release's migration reads the folded data to derive its tables (0005 summed the rounds
into ``game_days``); a worker of the release before must not commit a fold after that read (a
drill before this check: 40 of 60 rounds left out of ``game_days`` for good). The stand-in
migration here takes the migration transaction every migration takes
(``ProjectionStore.migrating`` and ``hold_folds``, as ``migrations/env.py`` does), reads what
is folded (the positions and the events, what a derived table is computed from) and moves the
store to a revision this code does not know, ``0013`` (0012 is this release's own head). A "new
release" is this code believing its head is ``0013`` (``new_release``).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import encode, to_wire
from blackjack.projection_worker import worker
from blackjack.projections import revision, schema
from blackjack.projections.dump import dump
from blackjack.projections.health import FoldHealth
from blackjack.projections.positions import SeekToStoredPositions
from blackjack.projections.rebuild import rebuild
from blackjack.projections.revision import SchemaMismatch, hold_folds
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import Position, ProjectionWriter, Record, read_positions
from tests.integration.conftest_projections import (
    EventsTopic,
    StoreFactory,
    connect_directly,
    play_tables,
    projection_worker,
    publish,
    reached,
    start_worker,
    wait_until,
    worker_env,
)
from tests.unit.migrations import migrate

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration

WAIT_S = 60.0
NEWER = "0013"  # the revision after this code's head (``code_revision``), which none knows
LOG = play_tables(
    [("g-1", "mini-h17"), ("g-2", "atlantic-city-multi"), ("g-3", "surrender")],
    rounds=12,
    seed=24,
)


def test_the_newer_revision_is_one_this_code_does_not_know() -> None:
    """The stand-in migration below moves the store to ``NEWER``: a revision of this code's
    own (0007 once 0007 was added) is no newer release's, and the worker never stops."""
    head, known = revision._script()
    assert NEWER not in known, f"{NEWER} is this code's own revision: move NEWER past {head}"


@contextmanager
def new_release(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This code as a release whose migrations end at ``NEWER``."""
    head, known = revision._script()
    monkeypatch.setattr(revision, "_script", lambda: (NEWER, known | {NEWER}))
    try:
        yield
    finally:
        monkeypatch.setattr(revision, "_script", lambda: (head, known))


async def folded(connection: AsyncConnection) -> int:
    query = select(func.count()).select_from(schema.events)
    return int((await connection.execute(query)).scalar_one())


@asynccontextmanager
async def newer_migration(store: ProjectionStore) -> Any:
    """A newer release's migration transaction, up to its last statement: yields what it read
    (positions, events folded); moves the store to ``NEWER`` and commits on leaving."""
    async with store.migrating() as connection:
        await connection.run_sync(hold_folds)
        seen = (await read_positions(connection), await folded(connection))
        yield seen
        await connection.execute(text(f"UPDATE alembic_version SET version_num = '{NEWER}'"))


async def text_of(store: ProjectionStore) -> str:
    async with store.reading() as connection:
        return (await dump(connection)).text()


async def test_a_worker_folding_through_a_newer_migration_stops_and_the_new_release_resumes(
    events_topic: EventsTopic,
    stores: StoreFactory,
    shoe_seal: ShoeSeal,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    total = len(LOG.envelopes)
    # the log's last third is published only once the migration is in: on a quick machine the
    # worker folded all of it before the migration took its lock (840 < 840 in a CI run)
    held_back = total - total // 3
    wired = [to_wire(e, shoe_seal) for e in LOG.envelopes]
    ends = await publish(events_topic, wired[:held_back])
    url = await stores.url()
    store = await stores.store(url)
    output = tmp_path / "worker.log"
    # small batches: the worker is folding (a transaction open, or about to be) when the
    # migration runs
    old = start_worker(worker_env(events_topic, url, BLACKJACK_PROJECTION_BATCH="3"), output)
    try:

        async def a_third() -> bool:
            async with store.reading() as connection:
                return await folded(connection) >= total // 3

        await wait_until(a_third, "a third of the log folded")
        async with newer_migration(store) as (seen, events_seen):
            pass
        ends |= await publish(events_topic, wired[held_back:])
        code = await asyncio.to_thread(old.wait, WAIT_S)
    finally:
        if old.poll() is None:
            old.kill()
            old.wait()
    log = output.read_text()
    assert code == 3, log[-3000:]
    assert "read model schema mismatch; the worker stops" in log
    assert "a newer release migrated this database (schema revision 0013" in log

    # nothing was folded after the migration read the data: the positions it read are the
    # ones the old worker left, and they are short of the end
    stopped_at = await ProjectionWriter(store).stored_positions()
    assert stopped_at == seen
    async with store.reading() as connection:
        assert await folded(connection) == events_seen
    assert total // 3 <= events_seen <= held_back

    scratch = await stores.store()  # migrated to this code's head: a newer release's below
    with new_release(monkeypatch):
        # it resumes from the positions the old worker committed (some partitions done)
        async with projection_worker(events_topic.bootstrap, events_topic.prefix, store):
            await wait_until(lambda: reached(store, ends), "the new release at the end")
        async with scratch.writing() as connection:
            await connection.execute(text(f"UPDATE alembic_version SET version_num = '{NEWER}'"))
        await rebuild(ProjectionWriter(scratch), events_topic.bootstrap, events_topic.name)
    async with store.reading() as connection:
        assert await folded(connection) == total
    assert await text_of(store) == await text_of(scratch)


# ---- an idle worker: no batch comes, its lag watch looks -----------------------------------

OLDER = "0009"  # the revision before this code's head: the store rolled back under the worker
LOOK_S = 0.2


class LooksOften(SeekToStoredPositions):
    """The worker's positions, their lag watch (which looks at the store's revision too)
    every ``LOOK_S`` instead of every ``LAG_EVERY_SECONDS``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **{**kwargs, "lag_every": LOOK_S})


def test_the_older_revision_is_the_one_before_this_code_s_head() -> None:
    head, known = revision._script()
    assert OLDER in known and head != OLDER
    assert revision.mismatch([OLDER]) is not None


@pytest.mark.parametrize("direction", ["newer", "older"])
async def test_an_idle_worker_stops_when_its_store_is_migrated_past_it_or_back(
    events_topic: EventsTopic,
    stores: StoreFactory,
    shoe_seal: ShoeSeal,
    monkeypatch: pytest.MonkeyPatch,
    direction: str,
) -> None:
    """A running worker that has folded the whole log and gets no batch still notices, within
    a look of its lag watch, a newer release's migration (the store at ``NEWER``) or the
    store downgraded below its head (``OLDER``, by the real migration's downgrade), on SQLite
    and on PostgreSQL: it stops (its health's mismatch, what makes ``projections run`` exit
    3) and folds nothing more. Unit-tested before on SQLite only, the look called by hand."""
    monkeypatch.setattr(worker, "SeekToStoredPositions", LooksOften)
    ends = await publish(events_topic, (to_wire(e, shoe_seal) for e in LOG.envelopes))
    store = await stores.store()
    health = FoldHealth()
    writer = ProjectionWriter(store)
    async with projection_worker(events_topic.bootstrap, events_topic.prefix, store, health=health):
        await wait_until(lambda: reached(store, ends), "the worker at the end of the log")
        folded_at = await writer.stored_positions()
        assert health.mismatch is None
        if direction == "newer":
            async with newer_migration(store):
                pass
        else:
            async with store.migrating() as connection:
                await connection.run_sync(migrate, OLDER, True)
        stopped = await asyncio.wait_for(health.stopped(), WAIT_S)
    assert isinstance(stopped, SchemaMismatch)
    assert stopped.found == ((NEWER,) if direction == "newer" else (OLDER,))
    assert stopped.newer == (direction == "newer")
    assert stopped.expected == revision.code_revision()
    assert await writer.stored_positions() == folded_at


# ---- PostgreSQL: the lock orders a migration and a fold ------------------------------------

SEAL = ShoeSeal(bytes(range(32)))
TOPIC = "blackjack.events"
RECORDS = [
    Record(TOPIC, 0, offset, encode(to_wire(envelope, SEAL)))
    for offset, envelope in enumerate(LOG.envelopes)
]


@pytest.fixture
async def pg(postgres_server_url: str, tmp_path: Path) -> Any:
    factory = StoreFactory("postgresql", tmp_path, postgres_server_url)
    try:
        store = await factory.store()
        await ProjectionWriter(store).apply(RECORDS[:100])
        yield store
    finally:
        await factory.close()


async def waiting_on_the_version(store: ProjectionStore) -> None:
    """Until a transaction waits for a lock on ``alembic_version`` (there is no event to await
    across two connections: poll the server's lock table)."""
    watcher = await connect_directly(store.url)
    try:
        query = (
            "SELECT count(*) FROM pg_locks WHERE NOT granted "
            "AND relation = 'alembic_version'::regclass"
        )

        async def waits() -> bool:
            return bool(await watcher.fetchval(query))

        await wait_until(waits, "a transaction waiting on alembic_version", timeout=20)
    finally:
        await watcher.close()


async def test_a_fold_begun_during_a_migration_waits_for_it_then_stops(pg: ProjectionStore) -> None:
    """The migration has read the data (the version row not yet updated: alembic writes it
    last): a fold beginning now must not commit before it, nor after it."""
    writer = ProjectionWriter(pg)
    async with newer_migration(pg) as (seen, _):
        fold = asyncio.create_task(writer.apply(RECORDS[100:200]))
        await waiting_on_the_version(pg)
        assert not fold.done()
    with pytest.raises(SchemaMismatch, match="a newer release migrated") as raised:
        await fold
    assert raised.value.found == (NEWER,)
    assert await writer.stored_positions() == seen == {(TOPIC, 0): 100}


class PausedWriter(ProjectionWriter):
    """A fold that stops right after its check (its version lock held) until let go."""

    def __init__(self, store: ProjectionStore) -> None:
        super().__init__(store)
        self.checked, self.go = asyncio.Event(), asyncio.Event()

    async def check_schema(self, connection: AsyncConnection) -> None:
        await super().check_schema(connection)
        self.checked.set()
        await self.go.wait()


async def test_a_migration_begun_during_a_fold_waits_for_its_commit_and_reads_it(
    pg: ProjectionStore,
) -> None:
    writer = PausedWriter(pg)
    fold = asyncio.create_task(writer.apply(RECORDS[100:200]))
    await writer.checked.wait()

    read: list[tuple[dict[Position, int], int]] = []

    async def migration() -> None:
        async with newer_migration(pg) as seen:
            read.append(seen)

    migrating = asyncio.create_task(migration())
    await waiting_on_the_version(pg)
    assert not migrating.done()
    writer.go.set()
    assert (await fold).positions == {(TOPIC, 0): 200}
    await migrating
    assert read == [({(TOPIC, 0): 200}, 200)]  # the fold's rows, committed before it read
    with pytest.raises(SchemaMismatch):
        await ProjectionWriter(pg).apply(RECORDS[200:210])


def alembic(url: str, verb: str, revision: str, *x: str) -> None:
    """``alembic -x url=URL [-x X]... downgrade|upgrade REVISION``, as an operator runs it (its
    own connection: ``migrations/env.py``'s command-line path)."""
    from alembic import command
    from alembic.config import Config

    from blackjack.projections.store import MIGRATIONS

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.cmd_opts = argparse.Namespace(x=[f"url={url}", *x])
    getattr(command, verb)(config, revision)


async def test_the_alembic_command_line_waits_for_a_fold_and_the_fold_after_it_stops(
    pg: ProjectionStore, stores: StoreFactory
) -> None:
    """A real migration (0007's and 0006's downgrades, then their upgrades: 0006 folds
    ``sitting_out`` from the events stored) from the command line, while a fold holds the
    revision."""
    writer = PausedWriter(pg)
    fold = asyncio.create_task(writer.apply(RECORDS[100:200]))
    await writer.checked.wait()
    downgrade = asyncio.create_task(asyncio.to_thread(alembic, pg.url, "downgrade", "0005"))
    await waiting_on_the_version(pg)
    assert not downgrade.done()
    writer.go.set()
    assert (await fold).positions == {(TOPIC, 0): 200}
    await downgrade
    with pytest.raises(SchemaMismatch, match="run `blackjack projections migrate` first"):
        await ProjectionWriter(pg).apply(RECORDS[200:300])

    await asyncio.to_thread(alembic, pg.url, "upgrade", "head")
    await ProjectionWriter(pg).apply(RECORDS[200:])
    whole = await stores.store()
    await ProjectionWriter(whole).apply(RECORDS)
    assert await text_of(pg) == await text_of(whole)


async def test_a_downgrade_past_0008_is_refused_while_players_token_revocations_are_held(
    pg: ProjectionStore,
) -> None:
    """The operations review: the documented repair of migrations 0005 and 0006 (``downgrade
    0005``, ``upgrade head``) dropped ``token_revocations`` on the way, and a revoked player's
    token was good again (the audit passed). Refused, nothing changed, while one is held;
    ``-x drop_token_revocations=yes`` drops them."""
    async with pg.engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO token_revocations (player_id, not_before, revoked_at) "
                "VALUES ('alice', 1800000000, CURRENT_TIMESTAMP)"
            )
        )
    with pytest.raises(RuntimeError, match="token_revocations holds 1 revocation"):
        await asyncio.to_thread(alembic, pg.url, "downgrade", "0005")
    async with pg.engine.connect() as connection:
        held = await connection.scalar(text("SELECT count(*) FROM token_revocations"))
        version = await connection.scalar(text("SELECT version_num FROM alembic_version"))
    assert (held, version) == (1, revision.code_revision())
    await asyncio.to_thread(alembic, pg.url, "downgrade", "0007", "drop_token_revocations=yes")
    await asyncio.to_thread(alembic, pg.url, "upgrade", "head")
    async with pg.engine.connect() as connection:
        assert await connection.scalar(text("SELECT count(*) FROM token_revocations")) == 0
