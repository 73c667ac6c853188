"""The projection writer on an embedded SQLite store: records folded in exactly once,
whatever is redelivered, and nothing half-done when a batch fails."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import select, text, update
from sqlalchemy.engine import Connection

from blackjack.audit.conservation import conservation
from blackjack.domain.currencies import money
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import encode, to_wire
from blackjack.projections import schema
from blackjack.projections.dump import Dump, TableDump, differences, dump
from blackjack.projections.revision import SchemaMismatch
from blackjack.projections.store import ProjectionStore
from blackjack.projections.views import ProjectionError
from blackjack.projections.writer import ProjectionWriter, Record
from tests.integration.conftest_projections import event_records, play_tables

SEAL = ShoeSeal.from_hex(ShoeSeal.new_key_hex())
TOPIC = "blackjack.events"
LOG = play_tables([("t-1", "mini-h17"), ("t-2", "atlantic-city-multi")], rounds=8, seed=5)
RECORDS = event_records(LOG.envelopes, SEAL, TOPIC)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[ProjectionStore]:
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path / 'projections.db'}")
    await store.migrate()
    yield store
    await store.close()


async def snapshot(store: ProjectionStore) -> Dump:
    async with store.reading() as connection:
        return await dump(connection)


def schema_drift(connection: Connection) -> list[object]:
    found = compare_metadata(MigrationContext.configure(connection), schema.metadata)
    return [d for d in found if "alembic_version" not in str(d)]


async def test_the_migrations_create_exactly_the_declared_tables(store: ProjectionStore) -> None:
    async with store.reading() as connection:
        assert await connection.run_sync(schema_drift) == []
        # alembic does not compare an index's condition: the catalog has it
        query = "SELECT sql FROM sqlite_master WHERE name = 'ix_rounds_open'"
        condition = (await connection.execute(text(query))).scalar_one()
        query = "SELECT sql FROM sqlite_master WHERE name = 'ix_accounts_seated'"
        seated = (await connection.execute(text(query))).scalar_one()
    assert condition.endswith("WHERE status IN ('betting', 'playing')")
    assert seated.endswith("WHERE seated IS 1")


async def test_a_redelivered_batch_is_skipped_by_its_stored_position(
    store: ProjectionStore,
) -> None:
    writer = ProjectionWriter(store)
    first = await writer.apply(RECORDS[:300])
    assert (first.folded, first.skipped) == (300, 0)
    once = await snapshot(store)

    again = await writer.apply(RECORDS[:300])  # a crash before Kafka heard of the progress
    assert (again.folded, again.skipped) == (0, 300)
    assert (await snapshot(store)).text() == once.text()

    rest = await writer.apply(RECORDS[250:])  # overlapping: only the new ones count
    assert (rest.folded, rest.skipped) == (len(RECORDS) - 300, 50)
    assert rest.positions == {(TOPIC, 0): len(RECORDS)}


async def test_a_batch_that_fails_changes_nothing(store: ProjectionStore) -> None:
    writer = ProjectionWriter(store)
    await writer.apply(RECORDS[:100])
    before = await snapshot(store)
    poisoned = [*RECORDS[100:150], Record(TOPIC, 0, 150, b"{not json"), *RECORDS[151:200]]
    with pytest.raises(ProjectionError, match="offset 150 is not an event envelope"):
        await writer.apply(poisoned)
    assert (await snapshot(store)).text() == before.text()
    assert await writer.stored_positions() == {(TOPIC, 0): 100}


async def test_the_same_event_at_a_later_offset_is_a_duplicate(store: ProjectionStore) -> None:
    writer = ProjectionWriter(store)
    await writer.apply(RECORDS[:50])
    before = await snapshot(store)
    resent = Record(TOPIC, 0, 50, RECORDS[20].value)
    result = await writer.apply([resent])
    assert (result.folded, result.duplicates) == (0, 1)
    changed = differences(before, await snapshot(store))
    assert [d.table for d in changed] == ["projection_positions"]


async def test_another_event_at_a_known_place_in_the_stream_is_refused(
    store: ProjectionStore,
) -> None:
    writer = ProjectionWriter(store)
    await writer.apply(RECORDS[:50])
    original = to_wire(LOG.envelopes[20], SEAL)
    forged = original.model_copy(update={"event_id": "forged"})
    with pytest.raises(ProjectionError, match="forged"):
        await writer.apply([Record(TOPIC, 0, 50, encode(forged))])


async def test_the_same_event_id_with_other_contents_is_refused(store: ProjectionStore) -> None:
    """Event ids derive from the place in the stream: only the contents tell a different
    event written there (a fencing failure, a forged record) from a redelivery."""
    writer = ProjectionWriter(store)
    await writer.apply(RECORDS[:50])
    original = to_wire(LOG.envelopes[20], SEAL)
    later = original.model_copy(update={"occurred_at": original.occurred_at.replace(year=2031)})
    with pytest.raises(ProjectionError, match="with other contents"):
        await writer.apply([Record(TOPIC, 0, 50, encode(later))])
    # Within one batch as well (the first is not stored yet when the second comes); the
    # copies come on another partition, as a misrouted write would.
    writer = ProjectionWriter(store)
    copy = Record(TOPIC, 1, 0, encode(to_wire(LOG.envelopes[55], SEAL)))
    assert (await writer.apply([*RECORDS[50:60], copy])).duplicates == 1
    forged = to_wire(LOG.envelopes[65], SEAL).model_copy(update={"correlation_id": "x"})
    with pytest.raises(ProjectionError, match="with other contents"):
        await writer.apply([*RECORDS[60:70], Record(TOPIC, 1, 1, encode(forged))])
    assert await writer.stored_positions() == {(TOPIC, 0): 60, (TOPIC, 1): 1}


async def test_a_stored_event_that_no_longer_reads_is_named(store: ProjectionStore) -> None:
    writer = ProjectionWriter(store)
    await writer.apply(RECORDS[:50])
    stored = LOG.envelopes[20]
    async with store.writing() as connection:
        await connection.execute(
            update(schema.events)
            .where(schema.events.c.stream_id == stored.stream_id)
            .where(schema.events.c.sequence == stored.sequence)
            .values(envelope="{}")
        )
    resent = Record(TOPIC, 0, 50, RECORDS[20].value)
    with pytest.raises(ProjectionError, match=f"event {stored.sequence} as stored cannot be read"):
        await writer.apply([resent])


async def test_a_gap_in_a_stream_is_refused(store: ProjectionStore) -> None:
    writer = ProjectionWriter(store)
    stream = [r for r in RECORDS if b'"stream_id":"t-1"' in r.value]
    await writer.apply(stream[:10])
    with pytest.raises(ProjectionError, match="follows"):
        await writer.apply(stream[11:12])


@pytest.mark.parametrize("batch", [1, 7])
async def test_a_rebuild_in_another_batching_gives_the_same_dump(
    store: ProjectionStore, tmp_path: Path, batch: int
) -> None:
    await ProjectionWriter(store).apply(RECORDS)
    # the log has table events during open rounds (a batch may begin with one, its round
    # not loaded yet)
    async with store.reading() as connection:
        records = (await connection.execute(select(schema.rounds.c.record))).scalars().all()
    logged = {entry["event"] for record in records for entry in record["log"]}
    assert logged & {"FundsDeposited", "PlayerDisconnected", "SeatTaken", "SeatLeft"}
    other = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path / 'other.db'}")
    await other.migrate()
    try:
        writer = ProjectionWriter(other)
        for start in range(0, len(RECORDS), batch):
            await writer.apply(RECORDS[start : start + batch])
        assert (await snapshot(other)).text() == (await snapshot(store)).text()
    finally:
        await other.close()


async def test_a_changed_row_is_named_down_to_the_field(store: ProjectionStore) -> None:
    await ProjectionWriter(store).apply(RECORDS)
    before = await snapshot(store)
    async with store.writing() as connection:
        await connection.execute(
            update(schema.accounts)
            .where(schema.accounts.c.player_id == "t-1-p0")
            .values(available=schema.accounts.c.available + 1)
        )
    balance = LOG.states["t-1"].players["t-1-p0"].balance
    found = differences(before, await snapshot(store))
    assert [str(d) for d in found] == [
        f"accounts ['t-1', 't-1-p0']: available: expected {balance}, found {balance + 1}"
    ]


def test_a_log_missing_an_entry_is_named_where_it_parts() -> None:
    entries = [{"event": "BetPlaced"}, {"event": "FundsDeposited"}, {"event": "HandDoubled"}]
    expected = Dump((TableDump("rounds", {("t", 1): {"record": {"log": entries}}}),))
    found = Dump((TableDump("rounds", {("t", 1): {"record": {"log": entries[::2]}}}),))
    [difference] = differences(expected, found)
    assert difference.columns == {"record.log[1:]": (entries[1:], entries[2:])}
    assert 'record.log[1:]: expected [{"event":"FundsDeposited"}' in str(difference)


async def test_conservation_names_what_does_not_add_up(store: ProjectionStore) -> None:
    await ProjectionWriter(store).apply(RECORDS)
    async with store.reading() as connection:
        violations, totals = await conservation(connection)
    assert violations == [] and [t.currency for t in totals] == ["USD"] and totals[0].balanced
    assert totals[0].tables > 0 and totals[0].house_result != 0

    shared = "t-2-p0"
    async with store.writing() as connection:
        w, a = schema.wallets, schema.accounts
        await connection.execute(
            update(w)
            .where(w.c.player_id == shared)
            .values(cashed_in=w.c.cashed_in + 100, balance=w.c.balance + 100)
        )
        await connection.execute(
            update(a).where(a.c.player_id == "t-1-p0").values(available=a.c.available + 1)
        )
    async with store.reading() as connection:
        violations, totals = await conservation(connection)
    assert violations[0].startswith("t-1-p0 at t-1: deposits - withdrawals = ")
    assert violations[0].endswith("(off by 0.01)")
    assert violations[1:] == [
        f"{shared}: the wallet received 1.00 more than the tables paid out",
        # the account's cent: each currency's sum not adding up is a violation too
        f"USD: paid in less paid out is {money(totals[0].paid_in - totals[0].paid_out, 'USD')}, "
        f"but where it is adds up to {money(totals[0].held, 'USD')} (off by 0.01)",
    ]
    assert not totals[0].balanced


async def test_a_wallet_whose_tables_are_not_folded_yet_adds_up_in_its_currency(
    store: ProjectionStore,
) -> None:
    """The workers fold the wallets' partition before the shared table's (lag): the buy-ins
    are in transit, counted in the wallets' currency. Before, with no table account folded
    they were counted under "(wallets)", and both lines read UNBALANCED with no violation
    (a regulator's tamper review)."""
    wallets = [r for r in RECORDS if b'"stream_id":"wallet:' in r.value]
    assert wallets and len(wallets) < len(RECORDS)
    await ProjectionWriter(store).apply(wallets)
    async with store.reading() as connection:
        violations, totals = await conservation(connection)
        seated = (await connection.execute(select(schema.accounts))).all()
    assert seated == [] and violations == []
    assert [(t.currency, t.balanced) for t in totals] == [("USD", True)]
    assert totals[0].in_transit == totals[0].paid_in > 0  # all bought in, none folded yet


async def test_an_event_stored_under_its_older_envelope_dumps_as_a_rebuild_stores_it(
    store: ProjectionStore,
) -> None:
    """Read models before the envelope check kept an upcast event under the version 1
    envelope it came in; a rebuild stores it renamed. The audit compares dumps: the same."""
    await ProjectionWriter(store).apply(RECORDS)
    before = await snapshot(store)
    events = schema.events
    async with store.reading() as connection:
        row = (
            await connection.execute(
                select(events.c.stream_id, events.c.sequence, events.c.envelope).where(
                    events.c.type == "TurnStarted"
                )
            )
        ).first()
    assert row is not None
    older = json.loads(row.envelope) | {"schema_version": 1}
    async with store.writing() as connection:
        await connection.execute(
            update(events)
            .where(events.c.stream_id == row.stream_id, events.c.sequence == row.sequence)
            .values(envelope=json.dumps(older))
        )
    assert (await snapshot(store)).text() == before.text()


async def test_a_store_a_newer_version_migrated_is_named_in_one_line(
    store: ProjectionStore,
) -> None:
    """A rollback of the workers that kept the store: a SchemaMismatch (one line, exit 3),
    not alembic's traceback."""
    async with store.writing() as connection:
        await connection.execute(text("UPDATE alembic_version SET version_num = '0099'"))
    with pytest.raises(SchemaMismatch, match="a newer release migrated this database") as raised:
        await store.migrate()
    assert (raised.value.found, raised.value.newer, raised.value.exit_code) == (("0099",), True, 3)


async def test_a_round_s_recall_folded_by_an_older_release_dumps_as_a_rebuild_folds_it(
    store: ProjectionStore,
) -> None:
    """A player who leaves a shared table while a round is open is in that round's recall.
    The release before ``SeatLeft`` version 2 folded the entry without ``reason`` and
    ``rounds_sat_out``; a rebuild now folds the upcast event, with them. The audit compares
    dumps: the same round, or every such round after an upgrade fails the audit."""
    from blackjack.domain import commands as cmd
    from tests.integration.conftest_projections import Script

    script = Script("atlantic-city-multi", [["TS", "7S", "9S", "TD"]], {"ann": 10_000, "ben": 0})
    script.do(
        cmd.PlaceBet(player_id="ann", box=0, amount=1000),
        cmd.LeaveTable(player_id="ben"),
        cmd.Deal(player_id="ann"),
        cmd.Stand(player_id="ann", box=0),
    )
    records = event_records(script.envelopes, SEAL, TOPIC)
    await ProjectionWriter(store).apply(records)
    before = await snapshot(store)
    rounds = schema.rounds
    async with store.reading() as connection:
        record = (await connection.execute(select(rounds.c.record))).scalar_one()
    (left,) = [entry for entry in record["log"] if entry["event"] == "SeatLeft"]
    assert left["data"]["reason"] == "left"
    for name in ("reason", "rounds_sat_out"):
        del left["data"][name]  # as the release before folded it
    async with store.writing() as connection:
        await connection.execute(update(rounds).values(record=record))
    assert (await snapshot(store)).text() == before.text()


async def test_a_store_that_lost_folded_batches_is_refused_as_behind_not_folded_past(
    store: ProjectionStore, tmp_path: Path
) -> None:
    """The store loses a batch the worker had committed (a PostgreSQL crash with
    ``synchronous_commit = off``, as deploy/postgres/postgres.sh runs it; a failover to a
    standby that had not received it; a restore from a backup) while the worker runs on. The
    next batch begins past the store's position: folding it would move the position past the
    lost records, which then are never folded (and the next event of their stream is a gap:
    the partition stuck for good). It is refused as behind, changing nothing, and the worker
    reads the partition again from the store's position (``put_back``)."""
    import shutil

    writer = ProjectionWriter(store)
    t1 = b'"stream_id":"t-1"'
    # a t-1 event followed by a t-2 event, t-2 having events before it
    at = next(
        i
        for i in range(1, len(RECORDS) - 1)
        if t1 in RECORDS[i].value
        and t1 not in RECORDS[i + 1].value
        and any(t1 not in r.value for r in RECORDS[:i])
    )
    await writer.apply(RECORDS[:at])
    path = tmp_path / "projections.db"
    backup = tmp_path / "backup.db"
    await store.close()  # every connection closed: the file holds every commit
    shutil.copyfile(path, backup)
    await writer.apply(RECORDS[at : at + 1])  # committed, then lost:
    await store.close()
    shutil.copyfile(backup, path)
    # the next batch: t-2's events up to t-1's next (nothing in it tells of the loss)
    upto = next(i for i in range(at + 1, len(RECORDS)) if t1 in RECORDS[i].value)
    with pytest.raises(ProjectionError, match="behind"):
        await writer.apply(RECORDS[at + 1 : upto])
    assert await writer.stored_positions() == {(TOPIC, 0): at}  # nothing of it written
    # read again from the store's position, as the worker does: everything folds
    await writer.apply(RECORDS[at:])
    assert await writer.stored_positions() == {(TOPIC, 0): len(RECORDS)}
    assert (await snapshot(store)).text() == (await rebuilt(tmp_path)).text()


async def rebuilt(tmp_path: Path) -> Dump:
    other = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path / 'rebuilt.db'}")
    await other.migrate()
    try:
        await ProjectionWriter(other).apply(RECORDS)
        return await snapshot(other)
    finally:
        await other.close()
