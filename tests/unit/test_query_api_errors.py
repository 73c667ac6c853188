"""The query API answers in JSON even when its database is down or a query breaks, and finds
a player whose id holds characters a URL must escape."""

from __future__ import annotations

import json
import re
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from structlog.testing import capture_logs

from blackjack.api.contract import openapi_document
from blackjack.api.routes import query_api
from blackjack.api.tokens import ApiTokens
from blackjack.projection_worker.settings import ProjectionSettings
from blackjack.projections import queries
from blackjack.projections.store import ProjectionStore
from blackjack.projections.views import RoundRecord

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
    assert warned["event"] == "query failed: the store cannot serve now"


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


@pytest.mark.parametrize("query", ["wallet", "player_rounds"])
async def test_a_stored_row_the_models_refuse_is_a_500_not_the_caller_s_400(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, query: str
) -> None:
    """Pydantic's ``ValidationError`` is a ``ValueError``, which the wallet's and the rounds'
    pages took for a cursor refused: a 400 ``bad_parameter`` quoting the stored row (a field a
    newer worker wrote, during a rolling upgrade), neither logged nor alerted."""

    async def refused_row(*_: object) -> None:
        RoundRecord.model_validate({"stored": "by a newer worker"})

    monkeypatch.setattr(queries, query, refused_row)
    path = "/v1/players/alice/" + ("wallet" if query == "wallet" else "rounds")
    answer, logs = await get(f"sqlite+aiosqlite:///{tmp_path}/read.db", path)
    assert answer.status_code == 500 and "newer worker" not in answer.text
    assert [entry["event"] for entry in logs] == ["query failed"]


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

    async def wallet(_: object, who: str, *_page: object) -> dict[str, Any]:
        asked.append(who)
        return {"player_id": who}

    monkeypatch.setattr(queries, "wallet", wallet)
    answer, _ = await get(f"sqlite+aiosqlite:///{tmp_path}/read.db", path)
    assert answer.status_code == 200 and asked == [player_id]


async def test_a_path_whose_escapes_are_not_utf8_is_a_400(tmp_path: Path) -> None:
    answer, _ = await get(f"sqlite+aiosqlite:///{tmp_path}/read.db", "/v1/players/%FF/wallet")
    assert answer.status_code == 400 and answer.json()["error"]["code"] == "bad_path"


TOKEN, NEXT = "a" * 32, "b" * 40


async def ask(
    tmp_path: Path, path: str, tokens: ApiTokens, headers: dict[str, str] | None = None
) -> httpx.Response:
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path}/read.db")
    await store.migrate()

    async def fallback(scope: Any, receive: Any, send: Any) -> None:  # the probes' place
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    transport = httpx.ASGITransport(app=query_api(store, fallback, tokens))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
            return await http.get(path, headers=headers or {})
    finally:
        await store.close()


async def test_with_tokens_a_query_needs_one_of_them(tmp_path: Path) -> None:
    tokens = ApiTokens.from_env({"BLACKJACK_API_TOKENS": f"{TOKEN}, {NEXT}"})
    path = "/v1/players/alice/wallet"
    for headers in ({}, {"authorization": f"Bearer {'c' * 32}"}, {"authorization": TOKEN}):
        refused = await ask(tmp_path, path, tokens, headers)
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Bearer")
        assert refused.json()["error"]["code"] == "unauthenticated"
    for token in (TOKEN, NEXT):  # either of two: one can be rotated out
        answer = await ask(tmp_path, path, tokens, {"authorization": f"Bearer {token}"})
        assert answer.status_code == 404 and answer.json()["error"]["code"] == "unknown_player"
    # the probes and metrics behind it show no player's data: open
    assert (await ask(tmp_path, "/healthz", tokens)).status_code == 204
    # no tokens: open, as behind the platform's gateway
    assert (await ask(tmp_path, path, ApiTokens())).status_code == 404


def test_a_short_or_spaced_token_is_refused_and_none_is_shown() -> None:
    with pytest.raises(ValueError, match="token 2 is shorter than 32"):
        ApiTokens.from_env({"BLACKJACK_API_TOKENS": f"{TOKEN},short"})
    with pytest.raises(ValueError, match="set but names no token"):
        ApiTokens.from_env({"BLACKJACK_API_TOKENS": " , "})
    # blank, as a Secret's key left empty gives it: refused, not an open API (a security
    # review); only an unset variable leaves the API open
    for blank in ("", "  "):
        with pytest.raises(ValueError, match="set but names no token"):
            ApiTokens.from_env({"BLACKJACK_API_TOKENS": blank})
    assert not ApiTokens.from_env({}).required
    # a player key's setting left blank, with no operator token: open before (a review)
    for name in ("BLACKJACK_API_PLAYER_SECRETS", "BLACKJACK_API_PLAYER_KEYS"):
        with pytest.raises(ValueError, match=f"{name} is set but names no key"):
            ApiTokens.from_env({name: "  "})
        # with operator tokens the API is closed: a blank one admits no player's token
        assert ApiTokens.from_env({"BLACKJACK_API_TOKENS": TOKEN, name: ""}).players is None
    with pytest.raises(ValueError, match="ASCII without spaces"):
        ApiTokens.from_env({"BLACKJACK_API_TOKENS": "é" * 32})
    assert TOKEN not in repr(ApiTokens.from_env({"BLACKJACK_API_TOKENS": TOKEN}))
    settings = ProjectionSettings.from_env({"BLACKJACK_API_TOKENS": TOKEN})
    assert settings.api_tokens.required and TOKEN not in repr(settings)


# ---- found by fuzzing the API against its document (tests/unit/test_query_api_fuzz.py) ----


async def test_a_method_other_than_get_is_a_405_that_says_what_is_allowed(
    tmp_path: Path,
) -> None:
    """RFC 9110: a 405 must carry ``Allow`` (it had none)."""
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path}/read.db")
    transport = httpx.ASGITransport(app=query_api(store))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
            for method in ("POST", "PUT", "DELETE", "TRACE", "OPTIONS"):
                answer = await http.request(method, "/v1/players/alice/wallet")
                assert answer.status_code == 405 and answer.headers["allow"] == "GET, HEAD"
                assert answer.json()["error"]["code"] == "method_not_allowed"
    finally:
        await store.close()


async def asgi_get(
    tmp_path: Path, raw_path: bytes, query: bytes = b""
) -> tuple[int, dict[str, Any]]:
    """A GET as a server hands it over: ``raw_path`` as the bytes the client sent (a client
    may send UTF-8 unescaped; httpx would escape it)."""
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path}/read.db")
    await store.migrate()
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b""}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "method": "GET",
        "path": raw_path.decode(errors="replace"),
        "raw_path": raw_path,
        "query_string": query,
        "headers": [],
    }
    try:
        await query_api(store)(scope, receive, send)
    finally:
        await store.close()
    return sent[0]["status"], json.loads(sent[1]["body"])


@pytest.mark.parametrize(
    ("round_id", "well_formed"),
    [
        ("t:1", True),
        ("t:0007", True),
        ("vip:t:3", True),
        ("t\nx:1", True),
        ("t:" + "9" * 30, True),  # past any round held: a 404, not a 400
        ("t:0", False),
        ("t:", False),
        (":1", False),
        ("t", False),
        ("t:1x", False),
        ("t:-1", False),
        ("t:\u0661", False),  # an Arabic-Indic one
    ],
)
async def test_a_round_id_is_a_400_exactly_when_the_document_says_it_is_malformed(
    tmp_path: Path, round_id: str, well_formed: bool
) -> None:
    """The document said any string; a round id off ``STREAM_ID:ROUND`` is a 400, and now
    its pattern says which."""
    [parameter] = openapi_document()["paths"]["/v1/rounds/{round_id}"]["get"]["parameters"]
    assert bool(re.search(parameter["schema"]["pattern"], round_id)) is well_formed
    status, body = await asgi_get(tmp_path, b"/v1/rounds/" + quote(round_id, safe="").encode())
    assert (status == 400) is not well_formed, body
    assert status in (400, 404) and body["error"]["code"] in ("bad_round_id", "unknown_round")


async def test_a_player_id_sent_unescaped_in_utf8_is_that_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The raw path was read as latin-1: "café" sent as its UTF-8 bytes was asked as
    "cafÃ©" (a 404 for a player who exists)."""
    asked: list[str] = []

    async def wallet(_: object, who: str, *_page: object) -> dict[str, Any]:
        asked.append(who)
        return {"player_id": who}

    monkeypatch.setattr(queries, "wallet", wallet)
    for raw in ("/v1/players/café/wallet".encode(), b"/v1/players/caf%C3%A9/wallet"):
        status, _ = await asgi_get(tmp_path, raw)
        assert status == 200
    assert asked == ["café", "café"]


async def test_a_query_that_is_not_utf8_is_a_400(tmp_path: Path) -> None:
    for query in (b"limit=%FF", b"limit=\xff"):
        status, body = await asgi_get(tmp_path, b"/v1/interrupted-rounds", query)
        assert status == 400 and body["error"]["code"] == "bad_parameter", query


async def test_only_a_parameter_the_route_reads_may_not_be_repeated(tmp_path: Path) -> None:
    """``?x=1&x=2`` was a 400 on every route, though ``?x=1`` is ignored."""
    status, _ = await asgi_get(tmp_path, b"/v1/interrupted-rounds", b"x=1&x=2&limit=5")
    assert status == 200
    status, body = await asgi_get(tmp_path, b"/v1/interrupted-rounds", b"limit=5&limit=5")
    assert status == 400 and body["error"]["message"] == "limit is given more than once"
    status, _ = await asgi_get(tmp_path, b"/v1/openapi.json", b"v=1&v=2")
    assert status == 200
