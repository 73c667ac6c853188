"""No statement a projection batch or the query API sends reads a whole table (SQLite's query
plans). The read model keeps every event, round and account for good, so a statement that
scans one costs more with each round played: a batch that loaded two rounds once scanned every
round ever stored (``(a, b) IN (...)`` of two pairs or more, ``projections/pairs.py``), and
the seated players' accounts were found among every player who ever sat (``SEATED``). Nor may
a page (``LIMIT``) sort every row it matches but the open rounds' (the wallet's page sorted
every table the player ever sat at: ``ix_accounts_player_tables``).

SQLite plans without statistics here (no ``ANALYZE``): it takes every table to be large, so
a plan read at a few rounds is the plan at millions."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, event
from sqlalchemy.dialects import sqlite

from blackjack.api.routes import query_api
from blackjack.messages.sealing import ShoeSeal
from blackjack.projections import schema
from blackjack.projections.ids import round_id
from blackjack.projections.queries import encode_cursor
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter
from tests.integration.conftest_projections import event_records, play_tables

TOPIC = "blackjack.events"
LOG = play_tables(
    [("t-1", "mini-h17"), ("t-2", "atlantic-city-multi"), ("t-3", "surrender")], rounds=5, seed=4
)
RECORDS = event_records(LOG.envelopes, ShoeSeal(bytes(range(32))), TOPIC)
GROWING = frozenset(schema.metadata.tables) - {"projection_positions"}
"""the tables whose rows grow with the play (the positions hold a row an events partition)"""
PARTIAL = frozenset({"ix_rounds_open"})
"""the index of a few rows of a growing table (the open rounds: one a table at most), which a
statement may read whole (not the seated players': all of them are as many as the tables)"""


@contextmanager
def statements_of(store: ProjectionStore) -> Iterator[list[tuple[str, Any]]]:
    """Every statement the store's connections send meanwhile, with its parameters."""
    sent: list[tuple[str, Any]] = []

    def record(*args: Any) -> None:
        _, _, statement, parameters, _, _ = args
        sent.append((statement, parameters))

    engine = store.engine.sync_engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", record)


def scans(database: Path, sent: list[tuple[str, Any]]) -> set[str]:
    """The plan lines of the SELECTs ``sent`` that read a whole table of the read model."""
    found = set()
    with sqlite3.connect(database) as connection:
        for statement, parameters in sent:
            if not statement.lstrip().upper().startswith(("SELECT", "WITH")):
                continue
            for *_, line in connection.execute(f"EXPLAIN QUERY PLAN {statement}", parameters):
                words = line.split()
                if words[0] == "SCAN" and words[1] in GROWING and words[-1] not in PARTIAL:
                    found.add(f"{line}: {statement}")
    return found


def sorted_pages(database: Path, sent: list[tuple[str, Any]]) -> set[str]:
    """The SELECTs ``sent`` that answer a page (``LIMIT``) by sorting every row they match."""
    found = set()
    with sqlite3.connect(database) as connection:
        for statement, parameters in sent:
            if "LIMIT" not in statement or not statement.lstrip().startswith(("SELECT", "WITH")):
                continue
            plan = connection.execute(f"EXPLAIN QUERY PLAN {statement}", parameters).fetchall()
            if any(line.startswith("USE TEMP B-TREE FOR ORDER BY") for *_, line in plan):
                found.add(statement)
    return found


def pairs_read(sent: list[tuple[str, Any]]) -> int:
    """How many statements read rows by a list of two (stream, key) pairs or more."""
    return sum(
        1
        for statement, parameters in sent
        if "json_each" in statement
        and any(isinstance(p, str) and p[:2] == "[[" and len(json.loads(p)) > 1 for p in parameters)
    )


async def test_no_statement_of_a_projection_batch_reads_a_whole_table(tmp_path: Path) -> None:
    database = tmp_path / "read.db"
    store = ProjectionStore(f"sqlite+aiosqlite:///{database}")
    await store.migrate()
    writer = ProjectionWriter(store)
    try:
        with statements_of(store) as sent:
            for start in range(0, len(RECORDS), 41):
                await writer.apply(RECORDS[start : start + 41])
    finally:
        await store.close()
    assert scans(database, sent) == set()
    assert sorted_pages(database, sent) == set()
    assert pairs_read(sent) > 0  # the batches did read rounds and accounts by pairs


async def test_no_statement_of_the_query_api_reads_a_whole_table(tmp_path: Path) -> None:
    database = tmp_path / "read.db"
    store = ProjectionStore(f"sqlite+aiosqlite:///{database}")
    await store.migrate()
    await ProjectionWriter(store).apply(RECORDS)
    player = next(iter(LOG.states["t-2"].players))
    cursor = encode_cursor(LOG.envelopes[-1].occurred_at, "t-2", 3)
    paths = [
        f"players/{player}/wallet",
        f"players/{player}/rounds",
        f"players/{player}/rounds?cursor={cursor}",
        f"players/{player}/rounds/{round_id('t-2', 2)}",
        f"rounds/{round_id('t-1', 2)}",
        "tables/t-2",
        f"players/{player}/tables/t-2",
        "streams/t-1/events?after=5",
        "interrupted-rounds",
        f"reports/games?from={LOG.envelopes[0].occurred_at.date()}",
    ]
    transport = httpx.ASGITransport(app=query_api(store))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://api/v1/") as client:
            with statements_of(store) as sent:
                for path in paths:
                    answer = await client.get(path)
                    assert answer.status_code == 200, (path, answer.text)
    finally:
        await store.close()
    assert scans(database, sent) == set()
    # Only the open rounds are sorted for a page (the interrupted rounds: ix_rounds_open holds
    # the rounds in play); a player's tables come in the wallet's order (ix_accounts_player_tables).
    sorted_ = sorted_pages(database, sent)
    assert [s for s in sorted_ if "rounds.status IN ('betting', 'playing')" not in s] == []
    assert len(sorted_) == 1


def test_the_seated_players_are_read_through_their_own_index(tmp_path: Path) -> None:
    """A table's seated players are looked up through ``ix_accounts_seated`` (the primary
    key's prefix reads every player who ever sat there)."""
    database = tmp_path / "read.db"
    engine = create_engine(f"sqlite:///{database}")
    schema.metadata.create_all(engine)
    engine.dispose()
    statement = schema.seated_accounts(["t-1", "t-2"]).compile(
        dialect=sqlite.dialect(), compile_kwargs={"render_postcompile": True}
    )
    with sqlite3.connect(database) as connection:
        plan = connection.execute(f"EXPLAIN QUERY PLAN {statement}", ("t-1", "t-2")).fetchall()
    assert [line for *_, line in plan] == [
        "SEARCH accounts USING INDEX ix_accounts_seated (stream_id=?)"
    ]
