"""The streamed dump and comparison (``projections.dump``) against the in-memory ones of
a1b3777 (``former_dump``), on SQLite and PostgreSQL.

- ``write_dump`` writes, page by page, the text the former dump held in memory, byte for byte
  (a log of every kind of event, player ids with a NUL, U+FFFD, other unicode and 128
  characters, a 120-character table id), with the same digest.
- Rows come in byte-wise key order whatever the database's collation: a PostgreSQL database
  whose collation (ICU) sorts the same keys otherwise gives the same dump.
- ``compare`` (a merge of two ordered streams, one of them a dump file, as the audit reads the
  live store) finds the differences the former ``differences`` found, each as informative,
  in key order; with a limit it lists the first N of each table and counts them all.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterable
from datetime import UTC, datetime

import pytest
from sqlalchemy import delete, insert, select, text, update
from sqlalchemy.engine import make_url

from blackjack.projections import schema
from blackjack.projections.dump import (
    Comparison,
    DumpFile,
    compare,
    dump,
    next_page,
    rows,
    table_lines,
    write_dump,
)
from blackjack.projections.store import NUL_STORED_AS, ProjectionStore
from blackjack.projections.writer import ProjectionWriter
from tests.integration import fold_equivalence as fe
from tests.integration import former_dump
from tests.integration.conftest_projections import StoreFactory, on_server

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration

LOG = fe.mixed_log()

ODD_TOPICS = ("b", "B", "a-b", "ab", "a b", "é", "e", "f", "\ufffd", "Z", "ä", "a", "A", "_x")
"""positions' keys that a linguistic collation sorts otherwise than byte-wise ("B" < "a"
byte-wise, "a" < "B" in a dictionary; "é" after "f" byte-wise, before it in a dictionary)"""


async def _filled(store: ProjectionStore, odd_topics: Iterable[str] = ODD_TOPICS) -> None:
    writer = ProjectionWriter(store)
    for batch in fe.batches(LOG, [500]):
        await writer.apply(batch)
    # a NUL stored as the store stores one (``store.NUL_STORED_AS``: PostgreSQL's text holds none)
    topics = [*odd_topics, "t" * 128, "t" * 127 + "é", f"a{NUL_STORED_AS}b", f"a{NUL_STORED_AS}"]
    async with store.writing() as connection:
        await connection.execute(
            insert(schema.positions),
            [{"topic": t, "kafka_partition": p, "next_offset": 7} for t in topics for p in (0, 3)],
        )


async def _dumps(store: ProjectionStore, page: int) -> tuple[str, list[str], str, str]:
    """(the former dump's text, the streamed dump's pieces, its digest, ``dump``'s text)"""
    pieces: list[str] = []
    async with store.reading() as connection:
        former = (await former_dump.dump(connection)).text()
        digest = await write_dump(connection, pieces.append, page=page)
        collected = (await dump(connection)).text()
    return former, pieces, digest, collected


@pytest.mark.parametrize("page", [7, 2_000])
async def test_the_streamed_dump_is_the_former_dump_byte_for_byte(
    stores: StoreFactory, page: int
) -> None:
    store = await stores.store()
    await _filled(store)
    former, pieces, digest, collected = await _dumps(store, page)
    streamed = "".join(pieces)
    assert streamed == former
    assert digest == hashlib.sha256(former.encode()).hexdigest()
    assert collected == former
    lines = former.count("\n")
    assert len(pieces) == -(-lines // page)  # written a page at a time, as read
    # not a vacuous comparison: every table holds rows, the odd ids among them
    for table in schema.READ_MODEL:
        assert f"# {table.name}\n{{" in former, table.name
    for player in fe.ODD_PLAYERS:
        assert f'"player_id":"{player.replace(chr(0), NUL_STORED_AS)}"' in former


async def test_a_page_is_bounded_by_bytes_as_well_as_rows(stores: StoreFactory) -> None:
    """A page of a wide table is fewer rows than ``page``: fetched and written about
    ``page_bytes`` at a time (a 2,000-row page of ``rounds``, about 16 KB a row, was tens of
    MB), and the dump is still the former one byte for byte."""
    store = await stores.store()
    await _filled(store)
    async with store.reading() as connection:
        former = (await former_dump.dump(connection)).text()
        widest = max(map(len, former.splitlines()))
        pieces: list[str] = []
        digest = await write_dump(connection, pieces.append, page=2_000, page_bytes=4_096)
        fetched: list[int] = []
        rounds = rows(connection, schema.rounds, page=2_000, page_bytes=4_096)
        async for _, _, line in rounds:
            fetched.append(len(line))
    assert "".join(pieces) == former
    assert digest == hashlib.sha256(former.encode()).hexdigest()
    assert len(pieces) > former.count("\n") // 2_000 + 1
    assert all(len(piece) < 4_096 + widest + 1 for piece in pieces)
    assert len(fetched) > 1 and sum(fetched) > 4_096  # more than a page's bytes of rounds
    # the pages after the first fetch hold about page_bytes of lines
    assert next_page(len(fetched), sum(fetched), 2_000, 4_096) < len(fetched)
    assert next_page(0, 0, 2_000, 4_096) == 16
    assert next_page(10, 100_000, 2_000, 4_096) == 1
    assert next_page(10, 10, 2_000, 4_096) == 2_000


async def test_rows_come_in_byte_order_under_a_linguistic_collation(
    stores: StoreFactory,
) -> None:
    """On PostgreSQL, a database whose collation (ICU, root locale) sorts the keys otherwise:
    the dump orders them byte-wise all the same (``COLLATE "C"``), as SQLite does."""
    if stores.kind == "postgresql":
        assert stores.server_url is not None
        name = "bjp_icu_" + datetime.now(UTC).strftime("%H%M%S%f")
        stores.databases.append(name)
        await on_server(
            stores.server_url,
            f"CREATE DATABASE \"{name}\" TEMPLATE template0 ENCODING 'UTF8' "
            "LOCALE_PROVIDER icu ICU_LOCALE 'und' LOCALE 'C.UTF-8'",
        )
        url = make_url(stores.server_url).set(database=name)
        store = await stores.store(url.render_as_string(hide_password=False))
    else:
        store = await stores.store()
    await _filled(store)
    p = schema.positions
    async with store.reading() as connection:
        read = [key async for key, _, _ in rows(connection, p, page=5)]
        native = [
            (r.topic, r.kafka_partition)
            for r in await connection.execute(select(p).order_by(p.c.topic, p.c.kafka_partition))
        ]
        for table in schema.READ_MODEL:  # every table: no OutOfOrder
            keys = [key async for key, _, _ in rows(connection, table, page=50)]
            assert keys == sorted(keys), table.name
    assert read == sorted(read)
    assert [t for t, part in read if t in ODD_TOPICS and part == 0] == sorted(ODD_TOPICS)
    if stores.kind == "postgresql":  # the collation does sort otherwise (else a vacuous test)
        assert native != read
        async with store.reading() as connection:
            collation = (
                await connection.execute(
                    text(
                        "SELECT datlocprovider::text FROM pg_database"
                        " WHERE datname = current_database()"
                    )
                )
            ).scalar()
        assert collation == "i"
    former, pieces, _, _ = await _dumps(store, 5)
    assert "".join(pieces) == former


async def _planted(stores: StoreFactory) -> tuple[ProjectionStore, ProjectionStore]:
    """Two stores of the same log; the second ("live") then differs: 20 round lines and an
    account changed, a round's record changed deep inside, a round's line deleted (missing),
    a wallet deleted from the first (unexpected in the second), an event's envelope changed."""
    rebuilt, live = await stores.store(), await stores.store()
    await _filled(rebuilt)
    await _filled(live)
    a, rp, w, r, e = (
        schema.accounts,
        schema.round_players,
        schema.wallets,
        schema.rounds,
        schema.events,
    )
    async with live.writing() as connection:
        keys = (await connection.execute(select(rp.c.stream_id, rp.c.round, rp.c.player_id))).all()
        assert len(keys) >= 21
        for stream_id, number, player_id in keys[1:21]:
            await connection.execute(
                update(rp)
                .where(
                    rp.c.stream_id == stream_id, rp.c.round == number, rp.c.player_id == player_id
                )
                .values(paid=rp.c.paid + 1, started_at=datetime(2030, 1, 1, tzinfo=UTC))
            )
        account = (await connection.execute(select(a.c.stream_id, a.c.player_id).limit(1))).one()
        await connection.execute(
            update(a)
            .where(a.c.stream_id == account.stream_id, a.c.player_id == account.player_id)
            .values(won=a.c.won + 1)
        )
        line = keys[0]
        await connection.execute(
            delete(rp).where(
                rp.c.stream_id == line.stream_id,
                rp.c.round == line.round,
                rp.c.player_id == line.player_id,
            )
        )
        last = (await connection.execute(select(r).order_by(r.c.stream_id.desc()).limit(1))).one()
        record = dict(last.record)
        record["status"] = "forged"
        await connection.execute(
            update(r)
            .where(r.c.stream_id == last.stream_id, r.c.round == last.round)
            .values(record=record)
        )
        event = (await connection.execute(select(e.c.stream_id, e.c.sequence).limit(1))).one()
        await connection.execute(
            update(e)
            .where(e.c.stream_id == event.stream_id, e.c.sequence == event.sequence)
            .values(envelope="not an envelope")
        )
    async with rebuilt.writing() as connection:
        wallet = (await connection.execute(select(w.c.stream_id).limit(1))).scalar_one()
        await connection.execute(delete(w).where(w.c.stream_id == wallet))
    return rebuilt, live


async def _streamed(
    rebuilt: ProjectionStore, live: ProjectionStore, limit: int, from_file: bool
) -> Comparison:
    """``compare`` as the audit runs it (the live side a dump file) or store against store."""
    async with live.reading() as connection, rebuilt.reading() as scratch:
        if not from_file:
            return await compare(
                lambda t: table_lines(scratch, t), lambda t: table_lines(connection, t), limit
            )
        with tempfile.TemporaryFile("w+", encoding="utf-8", newline="\n") as file:
            await write_dump(connection, file.write, page=3)
            file.seek(0)
            dumped = DumpFile(file)
            return await compare(lambda t: table_lines(scratch, t), dumped.table, limit)


@pytest.mark.parametrize("from_file", [True, False], ids=["dump file", "store"])
async def test_the_merge_finds_what_the_former_comparison_found(
    stores: StoreFactory, from_file: bool
) -> None:
    rebuilt, live = await _planted(stores)
    async with rebuilt.reading() as a, live.reading() as b:
        former = former_dump.differences(await former_dump.dump(a), await former_dump.dump(b))
    found = await _streamed(rebuilt, live, 1_000, from_file)
    assert sorted(map(str, found.shown)) == sorted(map(str, former))
    assert len(found.shown) == len(former) == found.total
    kinds = {(d.table, d.kind) for d in found.shown}
    assert {
        ("accounts", "changed"),
        ("round_players", "missing"),
        ("round_players", "changed"),
        ("wallets", "unexpected"),
        ("rounds", "changed"),
        ("events", "changed"),
    } <= kinds
    assert any("rounds" in str(d) and "record.status: expected" in str(d) for d in found.shown)
    # in the read model's table order, each table's in key order
    order = [t.name for t in schema.READ_MODEL]
    at = [(order.index(d.table), d.key) for d in found.shown]
    assert at == sorted(at)


async def test_a_limit_lists_the_first_differences_of_each_table_and_counts_them_all(
    stores: StoreFactory,
) -> None:
    rebuilt, live = await _planted(stores)
    everything = await _streamed(rebuilt, live, 1_000, from_file=True)
    found = await _streamed(rebuilt, live, 5, from_file=True)
    assert found.counts == everything.counts
    assert found.counts["round_players"] == 21  # 20 changed, 1 missing
    assert found.not_shown("round_players") == 16
    listed = [d for d in everything.shown if d.table != "round_players"]
    listed += [d for d in everything.shown if d.table == "round_players"][:5]
    assert sorted(map(str, found.shown)) == sorted(map(str, listed))
