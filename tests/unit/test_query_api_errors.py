"""The query API answers in JSON even when its database is down or a query breaks, and finds
a player whose id holds characters a URL must escape."""

from __future__ import annotations

from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from blackjack.api.routes import query_api
from blackjack.projections import queries
from blackjack.projections.store import ProjectionStore

UNREACHABLE = "postgresql+asyncpg://blackjack:secret@127.0.0.1:9/blackjack"  # nothing listens


async def get(url: str, path: str) -> tuple[httpx.Response, list[MutableMapping[str, Any]]]:
    """The answer of the query API over the store at ``url``, and what it logged."""
    store = ProjectionStore(url)
    transport = httpx.ASGITransport(app=query_api(store))
    try:
        with capture_logs() as logs:
            async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
                return await http.get(path), logs
    finally:
        await store.close()


async def test_an_unreachable_database_is_a_typed_503() -> None:
    answer, logs = await get(UNREACHABLE, "/v1/players/alice/wallet")
    assert answer.status_code == 503
    assert answer.json()["error"]["code"] == "store_unavailable"
    [warned] = [entry for entry in logs if entry["log_level"] == "warning"]
    assert warned["event"] == "query failed: the store is unreachable"


async def test_a_query_that_breaks_is_a_logged_500_in_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*_: object) -> None:
        raise RuntimeError("a bug in the query")

    monkeypatch.setattr(queries, "wallet", broken)
    answer, logs = await get(f"sqlite+aiosqlite:///{tmp_path}/read.db", "/v1/players/alice/wallet")
    assert answer.status_code == 500
    assert answer.json() == {"error": {"code": "internal_error", "message": "the query failed"}}
    [entry] = logs
    assert entry["event"] == "query failed" and entry["exc_info"] is True


@pytest.mark.parametrize(
    ("path", "player_id"),
    [
        ("/v1/players/a%2Fb/wallet", "a/b"),
        ("/v1/players/caf%C3%A9%20%3F%23/wallet", "café ?#"),
        ("/v1/players/..%2F..%2Fx/wallet", "../../x"),
    ],
)
async def test_a_player_id_is_one_path_segment_whatever_it_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str, player_id: str
) -> None:
    asked: list[str] = []

    async def wallet(_: object, who: str) -> dict[str, Any]:
        asked.append(who)
        return {"player_id": who}

    monkeypatch.setattr(queries, "wallet", wallet)
    answer, _ = await get(f"sqlite+aiosqlite:///{tmp_path}/read.db", path)
    assert answer.status_code == 200 and asked == [player_id]


async def test_a_path_whose_escapes_are_not_utf8_is_a_400(tmp_path: Path) -> None:
    answer, _ = await get(f"sqlite+aiosqlite:///{tmp_path}/read.db", "/v1/players/%FF/wallet")
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "bad_path"
