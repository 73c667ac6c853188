"""Rows read by a list of (stream, key) pairs (``projections/pairs.py``) on SQLite and
PostgreSQL: each dialect's statement answers exactly the rows whose pair is listed, once each
(ids with quotes, a backslash, a control character, beyond the BMP too; pairs with no row
answer nothing). Every projection test folds
through it as well (rounds, their players' lines and the accounts a batch reads)."""

from __future__ import annotations

import pytest
from sqlalchemy import insert, select

from blackjack.projections import schema
from blackjack.projections.pairs import one_of
from tests.integration.conftest_projections import StoreFactory

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration

STREAMS = ["t-1", "t-2", "wallet:p", "t 'quoted'", 't-"\\', "t-\u00e9", "t-\U0001f600", "t-\x01"]


async def test_exactly_the_listed_pairs_are_read(stores: StoreFactory) -> None:
    store = await stores.store()
    a = schema.accounts
    rows = [
        {
            "stream_id": stream_id,
            "player_id": f"p{number}",
            "currency": "USD",
            "funded_by_wallet": False,
            "seat": None,
            "seated": number % 2 == 0,
            "connected": True,
            **dict.fromkeys(
                ("available", "in_play", "deposited", "withdrawn", "cashed_out", "wagered"), 0
            ),
            **dict.fromkeys(("won", "lost", "rounds"), 0),
        }
        for stream_id in STREAMS
        for number in range(6)
    ]
    async with store.writing() as connection:
        await connection.execute(insert(a), rows)
    wanted = [(s, f"p{n}") for s in STREAMS for n in (1, 4)] + [("t-1", "absent"), ("none", "p1")]
    for pairs in (wanted[:1], wanted[:2], wanted, [*wanted[:3], *wanted[:3]]):
        async with store.reading() as connection:
            query = one_of(
                select(a.c.stream_id, a.c.player_id),
                a.c.stream_id,
                a.c.player_id,
                pairs,
                connection.dialect.name,
            )
            found = [tuple(row) for row in (await connection.execute(query)).all()]
        present = {p for p in pairs if p[0] in STREAMS and p[1] != "absent"}
        assert sorted(found) == sorted(present)  # each row once, a pair listed twice too
    # A NUL is stored as U+FFFD (``nul_replaced``), in these ids as in any parameter: the
    # id with one finds that row, not the row of the id before the NUL.
    async with store.writing() as connection:
        await connection.execute(insert(a), [rows[0] | {"player_id": "p\x00x"}])
    async with store.reading() as connection:
        query = one_of(
            select(a.c.stream_id, a.c.player_id),
            a.c.stream_id,
            a.c.player_id,
            [("t-1", "p\x00x"), ("t-1", "p2")],
            connection.dialect.name,
        )
        found = [tuple(row) for row in (await connection.execute(query)).all()]
    assert sorted(found) == [("t-1", "p2"), ("t-1", "p\ufffdx")]
    with pytest.raises(ValueError, match="a pair at least"):
        one_of(select(a), a.c.stream_id, a.c.player_id, [], "sqlite")
