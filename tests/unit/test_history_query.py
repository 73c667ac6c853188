"""A player's betting history (``/v1/players/{id}/rounds``) for players the read model knows
in either way: seated at a table, or only holding a wallet (recall review: a wallet-only
player was told "no wallet, no seat")."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from blackjack.api.routes import query_api
from blackjack.domain.wallet import WalletDeposited, wallet_stream
from blackjack.messages.envelope import EventEnvelope
from blackjack.projections.store import ProjectionStore
from tests.integration.conftest_projections import Script
from tests.unit.test_interrupted_query import fold, fold_envelopes


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path / 'read.db'}")
    await store.migrate()
    seated = Script("mini-h17", [], players={"bob": 0}, stream_id="table-1")  # no wallet
    await fold(store, seated)
    deposited = WalletDeposited(player_id="wendy", amount=500, balance_after=500)
    await fold_envelopes(
        store,
        [
            EventEnvelope(
                event_id="w-1",
                type=deposited.type,
                schema_version=deposited.version,
                stream_id=wallet_stream("wendy"),
                sequence=1,
                occurred_at=datetime(2026, 12, 1, tzinfo=UTC),
                data=deposited,
            )
        ],
        first_offset=len(seated.envelopes),
    )
    transport = httpx.ASGITransport(app=query_api(store))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            yield client
    finally:
        await store.close()


@pytest.mark.parametrize("player_id", ["bob", "wendy"])
async def test_a_known_player_without_rounds_has_an_empty_history(
    api: httpx.AsyncClient, player_id: str
) -> None:
    answer = await api.get(f"/v1/players/{player_id}/rounds")
    assert answer.status_code == 200, answer.text
    assert answer.json()["rounds"] == []


async def test_an_unknown_player_has_no_history(api: httpx.AsyncClient) -> None:
    answer = await api.get("/v1/players/nobody/rounds")
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "unknown_player"
