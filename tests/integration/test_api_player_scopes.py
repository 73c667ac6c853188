"""A player's token on the query API over a real read model (SQLite and PostgreSQL): the
player's own wallet, history, rounds and table, each as the operator's token reads the
player's view of it; nothing of another player's, nor the operators' full answers (a round
or a table with every player's money, a table's stream of events)."""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
import sqlalchemy as sa
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from blackjack.api import revocations
from blackjack.api.routes import query_api
from blackjack.api.tokens import ApiTokens
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.transfers import buy_in_ref
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import decode
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter
from tests.integration.conftest_projections import (
    STORE_KINDS,
    Script,
    event_records,
    play_tables,
    store_factory,
)

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration

SHARED_TABLE, SINGLE_TABLE = "table-shared", "table-single"
LOG = play_tables([(SHARED_TABLE, "atlantic-city-multi"), (SINGLE_TABLE, "mini-h17")], 8, 21)
PLATFORM = ed25519.Ed25519PrivateKey.generate()
OPERATOR_TOKEN = "k" * 40
AUDIENCE = "blackjack-query-api"  # the default of BLACKJACK_API_AUDIENCE
TOKENS = ApiTokens.from_env(
    {
        "BLACKJACK_API_TOKENS": OPERATOR_TOKEN,
        "BLACKJACK_API_PLAYER_KEYS": PLATFORM.public_key()
        .public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
        .decode(),
    }
)


def bettors(stream_id: str) -> dict[int, set[str]]:
    """Each round of the table: who bet in it."""
    rounds: dict[int, set[str]] = {}
    for e in LOG.envelopes:
        if e.stream_id == stream_id and isinstance(e.data, ev.BetPlaced):
            rounds.setdefault(e.data.round, set()).add(e.data.player_id)
    return rounds


def shared_round() -> tuple[int, str, str]:
    """A round at the shared table two players bet in: its number, one player, another."""
    number, players = next((n, p) for n, p in sorted(bettors(SHARED_TABLE).items()) if len(p) > 1)
    me, other = sorted(players)[:2]
    return number, me, other


def player_token(player_id: str) -> str:
    now = int(time.time())
    claims = {"sub": player_id, "aud": AUDIENCE, "iat": now, "exp": now + 600}
    return jwt.encode(claims, PLATFORM, algorithm="EdDSA")


@pytest.fixture(scope="module", params=STORE_KINDS)
async def api(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[httpx.AsyncClient]:
    factory = store_factory(request, tmp_path_factory.mktemp("scopes"))
    try:
        store = await factory.store()
        seal = ShoeSeal(bytes(range(32)))
        await ProjectionWriter(store).apply(event_records(LOG.envelopes, seal))
        transport = httpx.ASGITransport(app=query_api(store, tokens=TOKENS))
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            yield client
    finally:
        await factory.close()


async def get(api: httpx.AsyncClient, path: str, token: str, status: int = 200) -> Any:
    answer = await api.get(path, headers={"authorization": f"Bearer {token}"})
    assert answer.status_code == status, (path, answer.text)
    assert answer.headers["content-type"] == "application/json"
    return answer.json()


async def test_a_player_reads_their_own_money_and_history_as_the_operator_reads_it(
    api: httpx.AsyncClient,
) -> None:
    number, me, _ = shared_round()
    mine = player_token(me)
    for path in (
        f"/v1/players/{me}/wallet",
        f"/v1/players/{me}/rounds?limit=5",
        f"/v1/players/{me}/rounds/{SHARED_TABLE}:{number}",
    ):
        assert await get(api, path, mine) == await get(api, path, OPERATOR_TOKEN)
    # their wallet's stream as the operator reads it, but for a cash-out's correlation id (the
    # command that began it at the table: an operator's stand-up's may name the staff)
    path = f"/v1/streams/wallet:{me}/events"
    full = await get(api, path, OPERATOR_TOKEN)
    cashed_out = [e for e in full["events"] if e["type"] == "CashOutReceived"]
    assert cashed_out and all(e["correlation_id"] for e in cashed_out)
    full["events"] = [
        {**e, "correlation_id": None} if e["type"] == "CashOutReceived" else e
        for e in full["events"]
    ]
    assert await get(api, path, mine) == full
    history = await get(api, f"/v1/players/{me}/rounds?limit=100", mine)
    assert {r["round_id"] for r in history["rounds"]} == {
        f"{SHARED_TABLE}:{n}" for n, players in bettors(SHARED_TABLE).items() if me in players
    }


async def test_a_shared_round_shows_the_player_only_what_the_table_shows_everyone(
    api: httpx.AsyncClient,
) -> None:
    number, me, other = shared_round()
    full = await get(api, f"/v1/rounds/{SHARED_TABLE}:{number}", OPERATOR_TOKEN)
    assert {p["player_id"] for p in full["players"]} >= {me, other}
    seen = await get(api, f"/v1/players/{me}/rounds/{SHARED_TABLE}:{number}", player_token(me))
    assert [p["player_id"] for p in seen["players"]] == [me]
    others = [e["data"] for e in seen["log"] if e["data"].get("player_id") == other]
    assert others and not any(k.startswith("balance") for data in others for k in data)
    # the same round in full, or as the other player sees it: not hers
    for path in (
        f"/v1/rounds/{SHARED_TABLE}:{number}",
        f"/v1/players/{other}/rounds/{SHARED_TABLE}:{number}",
        f"/v1/players/{other}/wallet",
        f"/v1/players/{other}/rounds",
        f"/v1/streams/wallet:{other}/events",
        f"/v1/streams/{SHARED_TABLE}/events",
    ):
        refused = await get(api, path, player_token(me), 403)
        assert refused["error"]["code"] == "forbidden"


async def test_a_player_sees_the_tables_they_sit_at_and_no_other(
    api: httpx.AsyncClient,
) -> None:
    table = await get(api, f"/v1/tables/{SHARED_TABLE}", OPERATOR_TOKEN)
    seated = [p["player_id"] for p in table["players"]]
    assert seated, "someone sits at the shared table at the end of the log"
    me = seated[0]
    path = f"/v1/players/{me}/tables/{SHARED_TABLE}"
    view = await get(api, path, player_token(me))
    assert view == await get(api, path, OPERATOR_TOKEN)
    assert view["you"]["player_id"] == me
    assert all("available" not in p for p in view["players"])
    await get(api, f"/v1/tables/{SHARED_TABLE}", player_token(me), 403)
    # a table she does not sit at: as if there were none (the operator is shown her view)
    elsewhere = f"/v1/players/{me}/tables/{SINGLE_TABLE}"
    assert (await get(api, elsewhere, OPERATOR_TOKEN))["you"] is None
    refused = await get(api, elsewhere, player_token(me), 404)
    assert refused["error"]["code"] == "unknown_table"


async def test_a_table_or_round_not_the_player_s_is_refused_before_it_is_read(
    shared_store: ProjectionStore,
) -> None:
    """A table or round that exists was read whole before it was refused to a player's own
    token, one that does not refused at once: the time of the same 404 told which tables
    exist and how many rounds another player played (a review timed 3.4 ms against 2.3 ms).
    Now only the player's seat or line is read before the refusal, the same query either way."""
    number, me, _ = shared_round()
    not_mine = next(n for n, players in bettors(SHARED_TABLE).items() if me not in players)
    await ProjectionWriter(shared_store).apply(
        event_records(LOG.envelopes, ShoeSeal(bytes(range(32))))
    )
    statements: list[str] = []

    def record(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    sa.event.listen(shared_store.engine.sync_engine, "before_cursor_execute", record)
    async with _client(shared_store) as client:
        for path, code in (
            (f"/v1/players/{me}/tables/{SINGLE_TABLE}", "unknown_table"),  # exists, not hers
            (f"/v1/players/{me}/tables/no-such-table", "unknown_table"),
            (f"/v1/players/{me}/rounds/{SHARED_TABLE}:{not_mine}", "unknown_round"),
            (f"/v1/players/{me}/rounds/{SHARED_TABLE}:{10**6}", "unknown_round"),
        ):
            statements.clear()
            refused = await get(client, path, player_token(me), 404)
            assert refused["error"]["code"] == code
            read = " ".join(statements)
            assert not re.search(r"\b(table_views|rounds)\b", read), (path, statements)
        # hers are read and answered as before
        assert await get(
            client, f"/v1/players/{me}/rounds/{SHARED_TABLE}:{number}", player_token(me)
        )


@pytest.fixture(params=STORE_KINDS)
async def shared_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ProjectionStore]:
    factory = store_factory(request, tmp_path_factory.mktemp("revocations"))
    try:
        yield await factory.store()
    finally:
        await factory.close()


async def test_a_revocation_holds_on_every_query_api_process_and_after_a_restart(
    shared_store: ProjectionStore,
) -> None:
    """Two query API processes over one store (each its own engine, as two workers'), and a
    third started after the revocation: the operator revokes on one, and the stolen token is
    refused by all three at once; a token signed after it is read by all (before: a token was
    good until its exp, whatever happened)."""
    apis = [ProjectionStore(shared_store.url) for _ in range(2)]
    stolen = player_token("ann")
    try:
        clients = [_client(api) for api in apis]
        for client in clients:
            answer = await client.get("/v1/players/ann/rounds", headers=_bearer(stolen))
            assert answer.status_code == 404  # admitted: she has no rounds in this store
        revoked = await clients[0].post(
            "/v1/players/ann/token-revocation", headers=_bearer(OPERATOR_TOKEN)
        )
        assert revoked.status_code == 200, revoked.text
        assert revoked.json()["not_before"] > time.time()  # from the next second on, leeway
        restarted = ProjectionStore(shared_store.url)
        apis.append(restarted)
        clients.append(_client(restarted))
        for client in clients:
            # every path, the document and the ones it would be forbidden too (a review:
            # those answered 200 and 403)
            for path in ("/v1/players/ann/rounds", "/v1/openapi.json", "/v1/players/bob/wallet"):
                refused = await client.get(path, headers=_bearer(stolen))
                assert refused.status_code == 401, (path, refused.text)
                assert "revoked" in refused.json()["error"]["message"]
                assert "revoked" in refused.headers["www-authenticate"]
        # revoked a minute ago (the same row as a POST writes): the player's tokens signed
        # since are read by every process, the ones before refused
        now = int(time.time())
        async with shared_store.writing() as connection:
            then = datetime.fromtimestamp(now - 60 - 31, UTC)  # by a leeway of 30 s
            await revocations.revoke(connection, "cy", now - 60, then, keep_s=3630)
        for iat, status in ((now - 61, 401), (now - 60, 404), (now, 404)):
            claims = {"sub": "cy", "aud": AUDIENCE, "iat": iat, "exp": iat + 600}
            token = jwt.encode(claims, PLATFORM, algorithm="EdDSA")
            for client in clients:
                answer = await client.get("/v1/players/cy/rounds", headers=_bearer(token))
                assert answer.status_code == status, (iat, answer.text)
        bob = player_token("bob")  # another player's: untouched
        for client in clients:
            answer = await client.get("/v1/players/bob/rounds", headers=_bearer(bob))
            assert answer.status_code == 404
        for client in clients:
            await client.aclose()
    finally:
        for api in apis:
            await api.close()


def _bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def _client(store: ProjectionStore) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=query_api(store, tokens=TOKENS))
    return httpx.AsyncClient(transport=transport, base_url="http://api")


@contextlib.asynccontextmanager
async def _api_over(
    request: pytest.FixtureRequest, folder: Path, envelopes: list[Any]
) -> AsyncIterator[httpx.AsyncClient]:
    """The query API over a store of the fixture's kind holding ``envelopes``, folded."""
    factory = store_factory(request, folder)
    try:
        store = await factory.store()
        seal = ShoeSeal(bytes(range(32)))
        await ProjectionWriter(store).apply(event_records(envelopes, seal))
        async with _client(store) as client:
            yield client
    finally:
        await factory.close()


@pytest.fixture(params=STORE_KINDS)
async def own_tables(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[httpx.AsyncClient]:
    """ann's single-player table, suspended and resumed by a member of staff; a single-player
    table ann left and bob then sat at."""
    alone = Script(
        "mini-h17", [["TS", "6H", "5S", "TD"]], players={"ann": 10_000}, stream_id="t-ann"
    )
    alone.do(
        cmd.SuspendTable(operator="ops-jane", reason="maintenance"),
        cmd.ResumeTable(operator="ops-jane"),
    )
    two = Script("mini-h17", [["TS", "6H", "5S", "TD"]], players={"ann": 0}, stream_id="t-two")
    two.do(cmd.LeaveTable(player_id="ann"), cmd.SitDown(player_id="bob", seat=0))
    envelopes = [*alone.envelopes, *two.envelopes]
    async with _api_over(request, tmp_path_factory.mktemp("own"), envelopes) as client:
        yield client


async def test_a_player_reads_the_events_of_a_single_player_table_only_they_played_at(
    own_tables: httpx.AsyncClient,
) -> None:
    """``blackjack play --api`` with the player's own token (before: a table's stream was
    refused to every player's token, so the client needed an operator's): the events of a
    single-player table only that player ever sat at, as the operator reads them, but for the
    staff's names and their commands' ids; nothing of a table another player sat at too."""
    path = "/v1/streams/t-ann/events"
    full = await get(own_tables, path, OPERATOR_TOKEN)
    seen = await get(own_tables, path, player_token("ann"))
    assert seen["positions"] == full["positions"] and len(seen["events"]) == len(full["events"])
    staff = [i for i, e in enumerate(full["events"]) if "operator" in e["data"]]
    assert [full["events"][i]["type"] for i in staff] == ["TableSuspended", "TableResumed"]
    for i, (theirs, record) in enumerate(zip(seen["events"], full["events"], strict=True)):
        if i in staff:
            assert record["data"]["operator"] == "ops-jane" and record["causation_id"]
            assert theirs["data"] == {**record["data"], "operator": "staff"}
            assert (theirs["causation_id"], theirs["correlation_id"]) == (None, None)
        else:
            assert theirs == record
        decode(json.dumps(theirs).encode())  # the client folds them: still events
    assert "ops-jane" not in json.dumps(seen)
    # another player's token, or a table someone else sat at too (their money, their play)
    for token, stream in (("bob", "t-ann"), ("ann", "t-two"), ("bob", "t-two"), ("ann", "t-none")):
        refused = await get(own_tables, f"/v1/streams/{stream}/events", player_token(token), 403)
        assert refused["error"]["code"] == "forbidden"


@pytest.fixture(params=STORE_KINDS)
async def voided_alone(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[httpx.AsyncClient]:
    """ann's single-player table whose round a member of staff voided: the void writes the
    hole card's reveal, then ``RoundVoided`` naming the staff, under one command id."""
    alone = Script(
        "mini-h17",
        [["TS", "6H", "5S", "TD", "9C"]],
        players={"ann": 10_000},
        stream_id="t-void",
        overrides={"void_on_malfunction": True},
    )
    alone.do(cmd.PlaceBet(player_id="ann", box=0, amount=1000), cmd.Deal(player_id="ann"))
    alone.do(cmd.VoidRound(round=1, operator="ops-jane", reason="card reader fault"))
    async with _api_over(request, tmp_path_factory.mktemp("void"), alone.envelopes) as client:
        yield client


async def test_a_staff_command_s_id_is_left_out_however_the_player_pages(
    voided_alone: httpx.AsyncClient,
) -> None:
    """Before, the staff's command id was left out only on the events of a page that held
    the one naming the staff: a page ending before it (here, of one event) showed it on the
    hole card's reveal."""
    path = "/v1/streams/t-void/events"
    full = (await get(voided_alone, path, OPERATOR_TOKEN))["events"]
    [void] = [e["causation_id"] for e in full if "operator" in e["data"]]
    by_staff = [e["sequence"] for e in full if e["causation_id"] == void]
    assert len(by_staff) > 1  # (the reveal and the void: one before the other)
    whole = (await get(voided_alone, path, player_token("ann")))["events"]
    for size in (1, 2):
        for after in range(by_staff[0] - size, by_staff[-1]):
            page = f"{path}?after={after}&limit={size}"
            seen = (await get(voided_alone, page, player_token("ann")))["events"]
            assert seen == whole[after : after + size], page
            assert void not in json.dumps(seen), page


@pytest.fixture(params=STORE_KINDS)
async def others_named(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[httpx.AsyncClient]:
    """Two single-player tables only ann ever sat at, each with an event naming another
    player who never had an account there: bob's buy-in declined (a single-player table is
    funded by the platform), and a platform's deposit for cy refused ``not_seated``."""
    declined = Script(
        "mini-h17", [["TS", "6H", "5S", "TD"]], players={"ann": 10_000}, stream_id="t-d"
    )
    declined.do(cmd.Deposit(player_id="bob", amount=700, transfer=buy_in_ref("wallet:bob", 1)))
    refused = Script(
        "mini-h17", [["TS", "6H", "5S", "TD"]], players={"ann": 10_000}, stream_id="t-r"
    )
    refused._record(
        "t-r",
        ev.MoneyCommandRefused(
            player_id="cy",
            command="Deposit",
            amount=900,
            reason_code="not_seated",
            message="cy is not seated at this table",
        ),
    )
    envelopes = [*declined.envelopes, *refused.envelopes]
    async with _api_over(request, tmp_path_factory.mktemp("others"), envelopes) as client:
        yield client


async def test_a_player_reads_no_table_stream_whose_events_name_another_player(
    others_named: httpx.AsyncClient,
) -> None:
    """Only ann sat at either table, yet each holds an event of another player's (their id,
    the amount, why): refused to ann's token, 403, as a table another player sat at is.
    Before, ann read bob's declined buy-in and cy's refused deposit."""
    for stream, other, amount in (("t-d", "bob", 700), ("t-r", "cy", 900)):
        path = f"/v1/streams/{stream}/events"
        full = await get(others_named, path, OPERATOR_TOKEN)
        assert any(e["data"].get("player_id") == other for e in full["events"])
        assert any(e["data"].get("amount") == amount for e in full["events"])
        refused = await get(others_named, path, player_token("ann"), 403)
        assert refused["error"]["code"] == "forbidden"
        assert other not in json.dumps(refused)
        # the page before that event holds only ann's: still hers to read
        first = next(i for i, e in enumerate(full["events"]) if e["data"].get("player_id") == other)
        page = await get(others_named, f"{path}?limit={first}", player_token("ann"))
        assert len(page["events"]) == first
