"""The batch writer (five reads a batch, a statement a table's rows) folds what the writer of
6ea4ece folded (a statement a row, each table, wallet and round read as the fold reached it):
the same event log, cut into the same batches, leaves the same read model on SQLite and on
PostgreSQL, byte for byte (``projections.dump``), and what one refuses the other refuses. The
log: random play at single-player and shared tables (wallets, buy-ins, seat changes, leaves,
cancelled rounds), a voided round, refused money commands (``MoneyCommandRefused``,
``WalletCommandRefused``), players whose ids hold a NUL, U+FFFD, other unicode or 128
characters, a 120-character table id (``fold_equivalence``). More splittings and bigger logs:
``python -m tests.integration.measure_fold_equivalence``.

Also: a batch that fails at any of its statements leaves the store and the positions as they
were, and folds whole when applied again; two workers given overlapping batches at once fold
each event once."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import event, func, insert, select, update

from blackjack.domain import events as ev
from blackjack.domain import wallet as wl
from blackjack.messages import wire
from blackjack.messages.envelope import EventEnvelope
from blackjack.projections import schema
from blackjack.projections import writer as writing
from blackjack.projections.store import ProjectionStore
from blackjack.projections.views import RoundRecord
from blackjack.projections.writer import ProjectionWriter, Record, _Batch
from tests.integration import fold_equivalence as fe
from tests.integration.conftest_projections import StoreFactory, event_records

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration

LOG = fe.mixed_log()


def _cut_inside_rounds(records: Sequence[Record]) -> list[list[Record]]:
    """A batch ends after each RoundOpened and before each RoundSettled: every round's
    events over two batches or more."""
    cut: list[list[Record]] = [[]]
    for record in records:
        kind = wire.decode(record.value).type
        if kind == "RoundSettled" and cut[-1]:
            cut.append([])
        cut[-1].append(record)
        if kind == "RoundOpened":
            cut.append([])
    return [batch for batch in cut if batch]


SPLITTINGS: dict[str, Any] = {
    "1 a batch": lambda: fe.batches(LOG[:90], [1]),
    "2 then 3": lambda: fe.batches(LOG[:250], [2, 3]),
    "37": lambda: fe.batches(LOG, [37]),
    "500 over 3 partitions": lambda: fe.batches(fe.partitioned(LOG, 3), [500]),
    "inside rounds": lambda: _cut_inside_rounds(LOG),
    "redelivered, 5 1 17": lambda: fe.batches(fe.redelivered(LOG, 0.1), [5, 1, 17]),
}


def test_the_log_holds_what_the_writers_must_agree_on() -> None:
    """Not a vacuous comparison: the log has each case the brief names."""
    kinds = fe.event_types(LOG)
    for kind in (
        "MoneyCommandRefused",
        "WalletCommandRefused",
        "RoundVoided",
        "RoundCancelled",
        "SeatChanged",
        "SeatLeft",
        "BuyInCompleted",
        "HandSplit",
    ):
        assert kinds[kind] > 0, kind
    players = {getattr(wire.decode(r.value).data, "player_id", None) for r in LOG}
    assert set(fe.ODD_PLAYERS) <= players
    assert any(len(wire.decode(r.value).stream_id) == len(fe.LONG_TABLE) for r in LOG)
    # one batch of 500 holds a player's wallet and their table, and many of a table's events
    first = [wire.decode(r.value) for r in LOG[:500]]
    streams = [e.stream_id for e in first]
    assert any(wl.is_wallet_stream(s) for s in streams)
    assert max(streams.count(s) for s in set(streams)) > 50


@pytest.mark.parametrize("name", list(SPLITTINGS))
async def test_the_same_batches_fold_alike(stores: StoreFactory, name: str) -> None:
    cut = SPLITTINGS[name]()
    old_error, new_error, old, new = await fe.compare(
        await stores.store(), await stores.store(), cut
    )
    assert (old_error, new_error) == (None, None)
    assert new == old, fe.first_difference(old, new)


@pytest.fixture(scope="module")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite file, copied for each example (a migration per example is slow)."""
    path = tmp_path_factory.mktemp("template") / "migrated.db"

    async def make() -> None:
        store = ProjectionStore(f"sqlite+aiosqlite:///{path}")
        await store.migrate()
        await store.close()

    asyncio.run(make())
    return path


_counter = iter(range(10**9))


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    sizes=st.lists(st.integers(1, 120), min_size=1, max_size=6),
    partitions=st.integers(1, 3),
    start=st.integers(0, 200),
)
def test_any_splitting_folds_alike_on_sqlite(
    migrated_sqlite: Path, tmp_path: Path, sizes: list[int], partitions: int, start: int
) -> None:
    """Random batch sizes, taken in turn, from a random place of the log (a stream first
    seen mid-batch, its table already folded or not) over 1 to 3 partitions."""
    records = fe.partitioned(LOG[start:], partitions)
    if min(sizes) < 4:
        records = records[:150]  # one event a batch: the former writer's pace

    async def run() -> None:
        number = next(_counter)
        stores = []
        for side in ("old", "new"):
            path = tmp_path / f"{side}-{number}.db"
            shutil.copy(migrated_sqlite, path)
            stores.append(ProjectionStore(f"sqlite+aiosqlite:///{path}"))
        try:
            old_error, new_error, old, new = await fe.compare(
                stores[0], stores[1], fe.batches(records, sizes)
            )
        finally:
            for store in stores:
                await store.close()
        assert new_error == old_error
        assert new == old, fe.first_difference(old, new)

    asyncio.run(run())


# ---- a batch that fails part-way ----------------------------------------------------------


class _Refused(Exception):
    """The database's refusal of one statement, as the test makes it."""


@contextmanager
def failing_at(store: ProjectionStore, statement: int) -> Iterator[list[str]]:
    """The ``statement``-th statement sent (from 0) raises; the statements sent so far."""
    sent: list[str] = []

    def before(_c: Any, _cur: Any, text: str, _p: Any, _x: Any, _many: bool) -> None:
        sent.append(text)
        if len(sent) - 1 == statement:
            raise _Refused(f"refused: {text[:40]}")

    event.listen(store.engine.sync_engine, "before_cursor_execute", before)
    try:
        yield sent
    finally:
        event.remove(store.engine.sync_engine, "before_cursor_execute", before)


async def test_a_batch_failing_at_any_statement_leaves_nothing(stores: StoreFactory) -> None:
    """Half the log folded; the next batch of 200 fails at its first statement, its second...
    up to its last: each time the store's dump is the one before it, byte for byte, the
    positions (stored and the writer's) unmoved; then it folds, and the store is the one the
    former writer folds from the same batches."""
    store, reference = await stores.store(), await stores.store()
    writer = ProjectionWriter(store)
    head, batch, tail = LOG[:200], LOG[200:400], LOG[400:]
    await writer.apply(head)
    before = await fe.dumped(store)
    positions = dict(writer.positions)
    counted = ProjectionWriter(await stores.store())
    await counted.apply(head)
    with failing_at(counted.store, 10**9) as sent:  # how many statements the batch sends
        await counted.apply(batch)
    statements = len(sent)
    assert statements > 10
    for at in range(statements):
        with failing_at(store, at), pytest.raises(_Refused):
            await writer.apply(batch)
        assert await fe.dumped(store) == before, f"statement {at}"
        assert writer.positions == positions
        assert await writer.stored_positions() == positions
    await writer.apply(batch)
    await writer.apply(tail)
    old_error, _, old, _ = await fe.compare(reference, await stores.store(), [head, batch, tail])
    assert old_error is None
    assert await fe.dumped(store) == old


# ---- two workers at once (a rebalance) ----------------------------------------------------


async def test_two_workers_given_overlapping_batches_fold_each_event_once(
    stores: StoreFactory,
) -> None:
    """A rebalance: two workers, each with its own connection pool, are given overlapping
    windows of the same partitions at once. The positions' lock makes one wait for the other
    and step over what it folded: each event folded once, the read model the one a single
    worker folds."""
    records = fe.partitioned(LOG, 2)
    first = ProjectionWriter(await stores.store())
    url = first.store.url
    second = ProjectionWriter(ProjectionStore(url))
    reference = await stores.store()
    await fe.fold(ProjectionWriter(reference), fe.batches(records, [500]))
    try:
        # At each step both are given a batch from the position the store holds (where a
        # rebalance seeks them), one of 60 records and one of 45, the longer one in turn:
        # whichever takes the lock first, each folds the 15 the other was not given at least
        # every other step. (The second's batches used to start 30 records further on and
        # fall behind the first's: it folded only when it took the lock first, and on a
        # loaded machine it could lose every race: nothing folded, the test failed by chance;
        # or win the first one, ahead of the store's position, and the first's records before
        # it were stepped over.)
        a: list[list[Record]] = []
        b: list[list[Record]] = []
        for step, start in enumerate(range(0, len(records), 60)):
            longer, shorter = records[start : start + 60], records[start : start + 45]
            a.append(longer if step % 2 == 0 else shorter)
            b.append(shorter if step % 2 == 0 else longer)
        results: list[list[Any]] = [[], []]
        for step in range(len(a)):  # each step's two batches at once
            done = await asyncio.gather(first.apply(a[step]), second.apply(b[step]))
            for out, result in zip(results, done, strict=True):
                out.append(result)
    finally:
        await second.store.close()
    assert sum(r.folded + r.duplicates for rs in results for r in rs) == len(records)
    assert sum(r.duplicates for rs in results for r in rs) == 0
    assert all(sum(r.folded for r in rs) > 0 for rs in results)  # both folded some
    assert await fe.dumped(first.store) == await fe.dumped(reference)


# ---- batches larger than a statement's parameters -----------------------------------------

POSTGRES_MOST_PARAMETERS = 32_767
"""asyncpg's (PostgreSQL's protocol) limit on a statement's parameters"""


def _first_events(streams: int, make: Any) -> list[Record]:
    at = datetime(2026, 5, 1, tzinfo=UTC)
    envelopes = []
    for n in range(streams):
        stream_id, sequence, data = make(n)
        envelopes.append(
            EventEnvelope(
                event_id=f"{stream_id}-{sequence}",
                type=data.type,
                schema_version=data.version,
                stream_id=stream_id,
                sequence=sequence,
                occurred_at=at,
                causation_id=f"c-{n}",
                data=data,
            )
        )
    return event_records(envelopes, fe.SEAL)


async def test_a_batch_of_more_wallets_than_a_statement_takes_folds(
    stores: StoreFactory,
) -> None:
    """BLACKJACK_PROJECTION_BATCH is any positive number: a batch of 32,768 wallets' first
    events read them in one statement of 32,768 parameters, which PostgreSQL refuses (the
    partition stuck for good: every retry the same batch); the former writer read one a
    statement. Now in statements of ``store.READ_CHUNK`` ids."""
    count = POSTGRES_MOST_PARAMETERS + 1
    records = _first_events(
        count,
        lambda n: (
            wl.wallet_stream(f"p{n}"),
            1,
            wl.WalletDeposited(player_id=f"p{n}", amount=n + 1, balance_after=n + 1),
        ),
    )
    store = await stores.store()
    result = await ProjectionWriter(store).apply(records)
    assert result.folded == count
    async with store.reading() as connection:
        query = select(func.count(), func.sum(schema.wallets.c.balance))
        assert tuple((await connection.execute(query)).one()) == (count, count * (count + 1) // 2)


async def test_a_batch_continuing_more_rounds_than_a_statement_takes_reads_them(
    stores: StoreFactory,
) -> None:
    """The rounds a batch continues are read by (stream, round): 16,384 of them were 32,768
    parameters in one statement, refused by PostgreSQL. Read in chunks, each found."""
    store = await stores.store()
    count = POSTGRES_MOST_PARAMETERS // 2 + 1
    at = datetime(2026, 5, 1, tzinfo=UTC)
    records = [
        RoundRecord(
            round_id=f"t{n % 3}-r{n}",
            stream_id=f"t{n % 3}",
            round=n,
            variant="mini-h17",
            currency="EUR",
            opened_at=at,
            first_sequence=n,
            last_sequence=n,
        )
        for n in range(1, count + 1)
    ]
    rows = [
        {
            **r.model_dump(include=_ROUND_COLUMNS),
            "status": r.status,
            "record": r.stored(),
        }
        for r in records
    ]
    async with store.writing() as connection:
        await connection.execute(insert(schema.rounds), rows)
    events = _first_events(
        count, lambda n: (f"t{(n + 1) % 3}", n + 2, ev.RoundCancelled(round=n + 1))
    )
    async with store.writing() as connection:
        batch = _Batch(connection)
        await batch.load(events)
    assert sum(len(s.projection.rounds) for s in batch.streams.values()) == count


_ROUND_COLUMNS = {
    "stream_id",
    "round",
    "round_id",
    "variant",
    "currency",
    "opened_at",
    "closed_at",
    "first_sequence",
    "last_sequence",
}


# ---- executemany: rows of different columns -----------------------------------------------


def _account(n: int, *, full: bool) -> dict[str, Any]:
    values: dict[str, Any] = {
        "currency": "EUR",
        "funded_by_wallet": n % 2 == 0,
        "seat": n % 5 if n % 3 else None,
        "seated": True,
        "connected": n % 4 != 0,
        "available": n * 100,
        "in_play": n,
        "deposited": n * 101,
        "withdrawn": 0,
        "cashed_out": 0,
        "wagered": n * 3,
        "won": n,
        "lost": 2 * n,
        "rounds": n,
    }
    if full:
        values |= {"sitting_out": n % 2 == 1, "rounds_sat_out": n % 7}
    return values


async def test_rows_of_different_columns_are_each_written_whole(stores: StoreFactory) -> None:
    """``_Rows`` wrote a table's new rows in one executemany and its changed rows in another,
    the statement made from the first row's columns: a later row with a column the first
    lacked lost it without a word (written NULL), one lacking a column the first had was
    refused. 500 new rows and 500 changed rows, the columns alternating, read back as put."""
    store = await stores.store()
    rows = writing._Rows()
    expected = {}
    for n in range(500):
        values = _account(n, full=n % 2 == 1)
        rows.put(schema.accounts, {"stream_id": "t", "player_id": f"p{n:03}"}, values, exists=False)
        expected[f"p{n:03}"] = {
            "sitting_out": None,
            "rounds_sat_out": None,
            "paid_out_at": None,
        } | values
    async with store.writing() as connection:
        await rows.write(connection)
    changed = writing._Rows()
    for n in range(0, 500, 2):  # every other row changed, half of them with more columns
        values = _account(n + 1000, full=n % 4 == 2)
        changed.put(
            schema.accounts, {"stream_id": "t", "player_id": f"p{n:03}"}, values, exists=True
        )
        expected[f"p{n:03}"] |= values
    async with store.writing() as connection:
        await changed.write(connection)
    async with store.reading() as connection:
        query = select(schema.accounts).order_by(schema.accounts.c.player_id)
        found = {r["player_id"]: dict(r) for r in (await connection.execute(query)).mappings()}
    for player_id, row in found.items():
        del row["stream_id"], row["player_id"]
        assert row == expected[player_id], player_id
    assert len(found) == 500


# ---- a record or a row that cannot be read: which record is to blame ----------------------


async def _failed_at(writer: ProjectionWriter, batch: list[Record]) -> int | None:
    with pytest.raises(Exception):  # noqa: B017 - any: what matters is who is named
        await writer.apply(batch)
    return None if writer.failed_at is None else writer.failed_at.offset


@pytest.mark.parametrize(
    "poison", [b"[" * 100_000, b"{}", b"\xff"], ids=["nested", "no envelope", "not utf-8"]
)
async def test_a_record_that_cannot_be_read_is_named_as_the_former_writer_named_it(
    stores: StoreFactory, poison: bytes
) -> None:
    """The worker folds the records before the one ``failed_at`` names and reports that one
    as stuck (``batches._fold_up_to``, the operator's step-over). The batch writer decodes the
    records before folding: a value nested deeper than the decoder recurses (RecursionError,
    not a ValueError) raised there, before any record was folded, ``failed_at`` None: the
    records before it were held back with it and none was named."""
    batch = [*LOG[:20], Record(LOG[0].topic, 0, 20, poison), *LOG[20:40]]
    batch = [Record(r.topic, 0, offset, r.value) for offset, r in enumerate(batch)]
    old = await _failed_at(fe.writer_before()(await stores.store()), batch)
    new = await _failed_at(ProjectionWriter(await stores.store()), batch)
    assert (old, new) == (20, 20)


async def test_a_stored_row_that_cannot_be_read_is_blamed_on_the_record_that_needs_it(
    stores: StoreFactory,
) -> None:
    """A table's stored view that does not read (an operator's hand edit): the former writer
    named the first record of that table the batch folds, the others before it folded."""
    records = [Record(r.topic, 0, offset, r.value) for offset, r in enumerate(LOG)]
    head, batch = records[:150], records[150:300]
    broken = wire.decode(batch[40].value).stream_id
    named = []
    for writer in (
        fe.writer_before()(await stores.store()),
        ProjectionWriter(await stores.store()),
    ):
        await writer.apply(head)
        async with writer.store.writing() as connection:
            await connection.execute(
                update(schema.table_views)
                .where(schema.table_views.c.stream_id == broken)
                .values(view={"stream_id": broken, "last_sequence": "not a number"})
            )
        named.append(await _failed_at(writer, batch))
    first = next(r.offset for r in batch if wire.decode(r.value).stream_id == broken)
    assert named == [first, first]
