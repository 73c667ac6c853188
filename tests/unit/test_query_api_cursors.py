"""A page's ``cursor`` is the API's own: one it handed out continues the list, anything else
is refused 400 ``bad_parameter``, on the wallet's pages as on the rounds'. Before, a wallet
page took any JSON its cursor unpacked into two texts: an object of two keys (``{"a": 1,
"b": 2}`` read as currency "a", table "b") or a text of two characters."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from blackjack.api.routes import query_api
from blackjack.projections.store import ProjectionStore
from tests.unit.test_interrupted_query import fold_envelopes
from tests.unit.test_query_api_fuzz import CURSOR_REFUSED, CURSORS, ENVELOPES, PLAYERS


def cursor_of(document: Any) -> str:
    """A cursor as the API writes one: its JSON in unpadded URL-safe base64."""
    raw = json.dumps(document, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.fixture
async def http(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path}/read.db")
    await store.migrate()
    await fold_envelopes(store, ENVELOPES)
    transport = httpx.ASGITransport(app=query_api(store))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
        yield client
    await store.close()


WELL_FORMED = {"wallet": cursor_of(["USD", "t-mini"]), "rounds": CURSORS[0]}
"""A cursor of each page's shape: after a table (the wallet's pages its tables) or a round."""


@pytest.mark.parametrize(
    ("page", "forged"),
    [
        ("wallet", {"USD": 1, "t-mini": 2}),  # an object of as many keys as the list's items
        ("wallet", "ab"),  # a text of as many characters
        ("wallet", ["USD", "t-mini", "x"]),
        ("wallet", ["USD"]),
        ("wallet", ["USD", 7]),
        ("rounds", {"2026-01-01T00:00:00+00:00": 1, "t-mini": 2, "3": 3}),
        ("rounds", "abc"),
        ("rounds", ["2026-01-01T00:00:00+00:00", "t-mini"]),
        ("rounds", [20260101, "t-mini", 1]),
    ],
)
async def test_a_cursor_the_api_did_not_hand_out_is_refused(
    http: httpx.AsyncClient, page: str, forged: Any
) -> None:
    player = quote(PLAYERS[0], safe="")
    answer = await http.get(f"/v1/players/{player}/{page}", params={"cursor": WELL_FORMED[page]})
    assert answer.status_code == 200, answer.text
    refused = await http.get(f"/v1/players/{player}/{page}", params={"cursor": cursor_of(forged)})
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["code"] == "bad_parameter"
    assert refused.json()["error"]["message"] == CURSOR_REFUSED
