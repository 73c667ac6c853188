"""The wallet answer of a player with many tables, on SQLite and PostgreSQL: the table accounts
page by a keyset cursor (``limit``, ``next``), the totals sum every table whatever the page,
and the answer of a player with fewer tables than a page is the one it always was (``next``
null)."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest
from sqlalchemy import insert

from blackjack.api.routes import query_api
from blackjack.projections import schema
from blackjack.projections.queries import MAX_WALLET_TABLES
from tests.integration.conftest_projections import StoreFactory

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration

PLAYER = "long-timer"
NUL_CURSOR = base64.urlsafe_b64encode(json.dumps(["EUR", "a\x00"]).encode()).decode()
TABLES = [(f"table-{n:02d}", "EUR" if n % 3 else "USD") for n in range(11)]


def account(stream_id: str, currency: str, n: int, player_id: str = PLAYER) -> dict[str, Any]:
    return {
        "stream_id": stream_id,
        "player_id": player_id,
        "currency": currency,
        "funded_by_wallet": True,
        "seat": None,
        "seated": False,
        "connected": False,
        "available": 100 * n,
        "in_play": 0,
        "deposited": 0,
        "withdrawn": 0,
        "cashed_out": 1000 + n,
        "wagered": 2**40 + n,  # past 32 bits: the sums stay whole numbers
        "won": n,
        "lost": 2 * n,
        "rounds": n + 1,
        "sitting_out": None,
        "rounds_sat_out": None,
    }


async def get(client: httpx.AsyncClient, path: str, status: int = 200) -> Any:
    response = await client.get(path)
    assert response.status_code == status, response.text
    return response.json()


async def test_a_wallet_pages_its_tables_and_sums_them_all(stores: StoreFactory) -> None:
    store = await stores.store()
    rows = [account(s, c, n) for n, (s, c) in enumerate(TABLES)]
    async with store.writing() as connection:
        await connection.execute(insert(schema.accounts), rows)
        await connection.execute(
            insert(schema.accounts), [account("table-00", "EUR", 5, player_id="someone-else")]
        )
    transport = httpx.ASGITransport(app=query_api(store))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        path = f"/v1/players/{PLAYER}/wallet"
        whole = await get(client, path)
        assert whole["next"] is None and len(whole["tables"]) == len(TABLES) < MAX_WALLET_TABLES
        order = sorted(TABLES, key=lambda t: (t[1], t[0]))
        assert [(t["stream_id"], t["currency"]) for t in whole["tables"]] == order
        expected = {
            currency: sum(r["wagered"] for r in rows if r["currency"] == currency)
            for currency in ("EUR", "USD")
        }
        assert {t["currency"]: t["wagered"] for t in whole["totals"]} == expected
        assert [t["currency"] for t in whole["totals"]] == ["EUR", "USD"]
        assert sum(t["rounds"] for t in whole["totals"]) == sum(n + 1 for n in range(11))

        listed, pages, cursor = [], 0, None
        while True:
            page = await get(client, f"{path}?limit=4" + (f"&cursor={cursor}" if cursor else ""))
            pages += 1
            assert len(page["tables"]) <= 4
            assert page["totals"] == whole["totals"] and page["wallet"] is None
            listed += page["tables"]
            cursor = page["next"]
            if cursor is None:
                break
        assert pages == 3 and listed == whole["tables"]

        exact = await get(client, f"{path}?limit={len(TABLES)}")
        assert exact["next"] is None and exact["tables"] == whole["tables"]

        for query, said in [
            ("limit=0", "limit must be a whole number from 1 to 1000"),
            ("limit=1001", "limit must be a whole number from 1 to 1000"),
            ("cursor=not-a-cursor", "the cursor is not one this API handed out"),
            (
                "cursor="
                + base64.urlsafe_b64encode(json.dumps(["EUR", "a\x00"]).encode()).decode(),
                "the cursor is not one this API handed out",
            ),
        ]:
            refused = await get(client, f"{path}?{query}", 400)
            assert refused["error"] == {"code": "bad_parameter", "message": said}
        await get(client, "/v1/players/nobody/wallet?limit=1", 404)
