"""Who may read what on the query API: operator tokens read everything; a player's token, a
JWT the platform signs (EdDSA, ES256 or HS256, chosen by its ``kid`` when the keys have ids;
``sub`` the player, ``iat``, ``exp`` at most the longest lifetime after it, ``aud``), reads
that player's own resources only, until the operator revokes the player's tokens. Every
refusal is typed JSON: 401 with ``WWW-Authenticate`` (its ``error_description`` saying why)
for a missing, bad, expired, too long-lived or revoked token, 403 ``forbidden`` for what is
not the player's. No token is logged, and the operator tokens are compared in constant
time."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from sqlalchemy import insert
from structlog.testing import capture_logs

from blackjack.api import tokens as tokens_module
from blackjack.api.routes import query_api
from blackjack.api.tokens import (
    DEFAULT_AUDIENCE,
    OPERATOR,
    ApiTokens,
    Player,
    Unauthenticated,
)
from blackjack.configuration import ConfigurationError
from blackjack.projections import schema
from blackjack.projections.store import ProjectionStore

OPERATOR_TOKEN = "o" * 40
SECRET = "s" * 48
EDDSA = ed25519.Ed25519PrivateKey.generate()
ES256 = ec.generate_private_key(ec.SECP256R1())


def pem(key: Any) -> str:
    text: bytes = key.public_key().public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
    return text.decode()


ENV = {
    "BLACKJACK_API_TOKENS": OPERATOR_TOKEN,
    "BLACKJACK_API_PLAYER_KEYS": pem(EDDSA) + pem(ES256),
    "BLACKJACK_API_PLAYER_SECRETS": SECRET,
}


def signed(
    key: Any = EDDSA,
    algorithm: str = "EdDSA",
    lifetime: float = 300,
    headers: dict[str, Any] | None = None,
    **claims: Any,
) -> str:
    now = int(time.time())
    body = {"sub": "ann", "aud": DEFAULT_AUDIENCE, "iat": now, "exp": int(now + lifetime), **claims}
    content = {k: v for k, v in body.items() if v is not None}
    return jwt.encode(content, key, algorithm=algorithm, headers=headers)


def bearer(token: str) -> bytes:
    return f"Bearer {token}".encode()


def test_each_kind_of_key_admits_the_player_it_names() -> None:
    tokens = ApiTokens.from_env(ENV)
    assert tokens.authenticate(bearer(OPERATOR_TOKEN)) is OPERATOR
    for key, algorithm in ((EDDSA, "EdDSA"), (ES256, "ES256"), (SECRET, "HS256")):
        assert tokens.authenticate(bearer(signed(key, algorithm))) == Player("ann")
    # a few seconds of clock skew between the platform and the service: still valid
    assert tokens.authenticate(bearer(signed(lifetime=-5))) == Player("ann")


@pytest.mark.parametrize(
    ("token", "message"),  # made when the test runs: a token made at collection expires
    # in a suite that runs longer than its lifetime
    [
        (lambda: signed(lifetime=-60), "expired"),  # past the 30 s leeway
        (lambda: signed(exp=None), "no exp claim"),  # exp is required
        (lambda: signed(iat=None), "no iat claim"),  # and iat
        (lambda: signed(iat="yesterday"), "not valid"),
        (lambda: signed(iat=int(time.time()) + 60), "not valid yet"),  # past the 30 s leeway
        (lambda: signed(lifetime=3601), "lives longer"),  # the hour allowed by default
        (lambda: signed(iat=int(time.time()) - 3000, exp=int(time.time()) + 3000), "longer"),
        (lambda: signed(sub=None), "no sub claim"),
        (lambda: signed(sub=""), "not valid"),
        (lambda: signed(sub="x" * 129), "not valid"),
        (lambda: signed(aud="another-service"), "not valid"),
        (lambda: signed(aud=None), "no aud claim"),
        (lambda: signed(ed25519.Ed25519PrivateKey.generate()), "not valid"),  # not the platform's
        (lambda: signed("another secret of thirty-two characters", "HS256"), "not valid"),
        (lambda: signed(None, "none"), "not valid"),  # unsigned
        (lambda: signed(nbf=int(time.time()) + 120), "not valid yet"),
        (lambda: "a.b.c", "not valid"),
        (lambda: "o" * 39, "not valid"),
    ],
)
def test_a_bad_or_expired_token_is_refused(token: Callable[[], str], message: str) -> None:
    presented = token()
    with pytest.raises(Unauthenticated, match=message) as refused:
        ApiTokens.from_env(ENV).authenticate(bearer(presented))
    challenge = refused.value.challenge.decode("ascii")
    assert challenge == f'Bearer error="invalid_token", error_description="{refused.value.message}"'
    # said why, in the service's own words: no part of the token, no quote that would end it
    assert all(part not in challenge for part in presented.split(".") if len(part) >= 8)
    assert refused.value.message.count('"') == 0


def test_a_token_may_live_as_long_as_the_setting_allows_and_no_longer() -> None:
    """``exp - iat`` at most ``BLACKJACK_API_JWT_MAX_LIFETIME_S`` (an hour by default): a
    token signed for years was good for years (before: no bound, no iat needed)."""
    tokens = ApiTokens.from_env(ENV)
    assert tokens.authenticate(bearer(signed(lifetime=3600))) == Player("ann")
    assert tokens.authenticate(bearer(signed(lifetime=3600, iat=int(time.time()) + 25)))
    with pytest.raises(Unauthenticated, match=r"lives longer .* than the 3600 s"):
        tokens.authenticate(bearer(signed(lifetime=5 * 365 * 86400)))
    day = ApiTokens.from_env({**ENV, "BLACKJACK_API_JWT_MAX_LIFETIME_S": "86400"})
    assert day.authenticate(bearer(signed(lifetime=86400))) == Player("ann")
    for wrong in ("59", "604801", "1h", "-5"):
        with pytest.raises(ConfigurationError, match="MAX_LIFETIME_S is a whole number"):
            ApiTokens.from_env({**ENV, "BLACKJACK_API_JWT_MAX_LIFETIME_S": wrong})


def test_the_kid_chooses_among_keys_configured_with_ids() -> None:
    """``ID=`` before a PEM key or an HS256 secret names it; a token's ``kid`` then chooses
    the key, and a ``kid`` naming none is refused, whoever signed it. Keys without an id
    verify tokens without a ``kid`` (today's settings, a platform moving to ids)."""
    old, new, other = EDDSA, ed25519.Ed25519PrivateKey.generate(), "h" * 40
    named = ApiTokens.from_env(
        {
            "BLACKJACK_API_PLAYER_KEYS": f"2026-11={pem(old)}\n2026-12 = {pem(new)}",
            "BLACKJACK_API_PLAYER_SECRETS": f"hs-1={SECRET},{other}",
        }
    )
    assert named.authenticate(bearer(signed(new, headers={"kid": "2026-12"}))) == Player("ann")
    assert named.authenticate(bearer(signed(old, headers={"kid": "2026-11"}))) == Player("ann")
    hs = signed(SECRET, "HS256", headers={"kid": "hs-1"})
    assert named.authenticate(bearer(hs)) == Player("ann")
    assert named.authenticate(bearer(signed(other, "HS256"))) == Player("ann")  # no id, no kid
    refusals = [
        (signed(new, headers={"kid": "2026-11"}), "not valid"),  # the other key's id
        (signed(new, headers={"kid": "2027-01"}), "kid names no key"),
        (signed(ed25519.Ed25519PrivateKey.generate(), headers={"kid": "x" * 200}), "no key"),
        (signed(new), "has no kid"),  # no kid: only keys without an id (here HS256)
        (signed(SECRET, "HS256", headers={"kid": "2026-12"}), "not valid"),  # not its alg
    ]
    for token, message in refusals:
        with pytest.raises(Unauthenticated, match=message) as refused:
            named.authenticate(bearer(token))
        assert token.split(".")[0] not in refused.value.challenge.decode()
    only_named = ApiTokens.from_env({"BLACKJACK_API_PLAYER_KEYS": f"k1={pem(new)}"})
    with pytest.raises(Unauthenticated, match="has no kid"):
        only_named.authenticate(bearer(signed(new)))
    # today's settings, no id: a token's kid is not asked about
    unnamed = ApiTokens.from_env(ENV)
    assert unnamed.authenticate(bearer(signed(headers={"kid": "anything"}))) == Player("ann")
    with pytest.raises(ConfigurationError, match="'k1' names two keys"):
        ApiTokens.from_env({"BLACKJACK_API_PLAYER_KEYS": f"k1={pem(new)}k1={pem(old)}"})
    # a base64 secret (its "=" at the end) is a secret, not an id
    padded = base64.b64encode(b"z" * 32).decode()
    assert padded.endswith("=")
    b64 = ApiTokens.from_env({"BLACKJACK_API_PLAYER_SECRETS": padded})
    assert b64.authenticate(bearer(signed(padded, "HS256"))) == Player("ann")


def test_a_token_signed_with_the_public_key_as_an_hmac_secret_is_refused() -> None:
    """The algorithm confusion: an attacker who knows the public key signs HS256 with its
    PEM; each key verifies its own algorithm only."""
    tokens = ApiTokens.from_env({"BLACKJACK_API_PLAYER_KEYS": pem(EDDSA)})
    header, payload, _ = signed(SECRET, "HS256").split(".")
    forged = hmac.new(pem(EDDSA).encode(), f"{header}.{payload}".encode(), hashlib.sha256)
    signature = base64.urlsafe_b64encode(forged.digest()).rstrip(b"=").decode()
    with pytest.raises(Unauthenticated):
        tokens.authenticate(bearer(f"{header}.{payload}.{signature}"))


def test_the_issuer_is_checked_when_one_is_set() -> None:
    tokens = ApiTokens.from_env({**ENV, "BLACKJACK_API_PLAYER_ISSUER": "https://casino"})
    assert tokens.authenticate(bearer(signed(iss="https://casino"))) == Player("ann")
    for issuer in ("https://elsewhere", None):
        with pytest.raises(Unauthenticated):
            tokens.authenticate(bearer(signed(iss=issuer)))


def test_settings_refuse_keys_that_cannot_verify_and_show_none() -> None:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(ConfigurationError, match="key 1 is neither Ed25519"):
        ApiTokens.from_env({"BLACKJACK_API_PLAYER_KEYS": pem(rsa_key)})
    with pytest.raises(ConfigurationError, match="no PEM public key"):
        ApiTokens.from_env({"BLACKJACK_API_PLAYER_KEYS": "not a key"})
    with pytest.raises(ConfigurationError, match="shorter than 32"):
        ApiTokens.from_env({"BLACKJACK_API_PLAYER_SECRETS": "short"})
    with pytest.raises(ConfigurationError, match="LEEWAY_S"):
        ApiTokens.from_env({**ENV, "BLACKJACK_API_JWT_LEEWAY_S": "3600"})
    # a PEM in one line of an env file, its line breaks escaped
    one_line = ApiTokens.from_env({"BLACKJACK_API_PLAYER_KEYS": pem(EDDSA).replace("\n", "\\n")})
    assert one_line.authenticate(bearer(signed())) == Player("ann")
    assert SECRET not in repr(ApiTokens.from_env(ENV))
    assert SECRET not in repr(ApiTokens.from_env(ENV).players)
    assert ApiTokens.from_env({"BLACKJACK_API_PLAYER_SECRETS": SECRET}).required


def test_operator_tokens_are_compared_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each token compared, whichever matches, as digests of one length: a guess's timing
    says neither how long a token is nor which one it matched (before: the presented bytes
    against each token as it was, stopping at the first that matched)."""
    tokens = ApiTokens.from_env({"BLACKJACK_API_TOKENS": f"{OPERATOR_TOKEN},{'p' * 64}"})
    compared: list[tuple[int, int]] = []
    real = hmac.compare_digest

    def recording(a: bytes, b: bytes) -> bool:
        compared.append((len(a), len(b)))
        return bool(real(a, b))

    monkeypatch.setattr(tokens_module, "hmac", SimpleNamespace(compare_digest=recording))
    for presented in (OPERATOR_TOKEN, "x"):
        compared.clear()
        assert tokens.admits(bearer(presented)) is (presented == OPERATOR_TOKEN)
        assert compared == [(32, 32), (32, 32)]


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path}/read.db")
    await store.migrate()
    transport = httpx.ASGITransport(app=query_api(store, tokens=ApiTokens.from_env(ENV)))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as client:
            yield client
    finally:
        await store.close()


async def ask(api: httpx.AsyncClient, path: str, token: str | None) -> httpx.Response:
    headers = {} if token is None else {"authorization": f"Bearer {token}"}
    answer = await api.get(path, headers=headers)
    assert answer.headers["content-type"] == "application/json"
    return answer


async def test_a_cash_out_s_correlation_id_is_not_in_the_player_s_wallet_stream(
    tmp_path: Path,
) -> None:
    """A cash-out's correlation id is the id of the command that began it at the table, an
    operator's stand-up's too, whose sender chose it and may name the member of staff: left
    out of the table's entries, it reached the player through their own wallet's stream."""
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path}/read.db")
    await store.migrate()
    envelopes = [
        {"type": "WalletDeposited", "sequence": 1, "correlation_id": "platform-pay-1"},
        {"type": "CashOutReceived", "sequence": 2, "correlation_id": "eve.staffname-ticket-43"},
    ]
    rows = [
        {
            "stream_id": "wallet:ann",
            "sequence": e["sequence"],
            "event_id": f"e{e['sequence']}",
            "type": e["type"],
            "round": None,
            "occurred_at": datetime(2026, 5, 1, tzinfo=UTC),
            "topic": "blackjack.events",
            "kafka_partition": 0,
            "kafka_offset": e["sequence"],
            "envelope": json.dumps({**e, "stream_id": "wallet:ann", "data": {}}),
        }
        for e in envelopes
    ]
    async with store.engine.begin() as connection:
        await connection.execute(insert(schema.events), rows)
    transport = httpx.ASGITransport(app=query_api(store, tokens=ApiTokens.from_env(ENV)))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
            path = "/v1/streams/wallet:ann/events"
            theirs = (await ask(api, path, signed())).json()["events"]
            full = (await ask(api, path, OPERATOR_TOKEN)).json()["events"]
    finally:
        await store.close()
    assert [e["correlation_id"] for e in theirs] == ["platform-pay-1", None]
    assert [e["correlation_id"] for e in full] == ["platform-pay-1", "eve.staffname-ticket-43"]


async def test_a_player_s_token_reads_only_that_player_s_resources(
    api: httpx.AsyncClient,
) -> None:
    ann = signed()
    for path in (
        "/v1/players/ann/wallet",
        "/v1/players/ann/rounds",
        "/v1/players/ann/rounds/t-1:1",
        "/v1/players/ann/tables/t-1",
        "/v1/streams/wallet:ann/events",
        "/v1/openapi.json",
    ):  # hers: answered (a 404 where the empty store holds none of it)
        answer = await ask(api, path, ann)
        assert answer.status_code in (200, 404), (path, answer.text)
        assert answer.status_code == 200 or answer.json()["error"]["code"] != "forbidden"
    for path in (
        "/v1/players/bob/wallet",
        "/v1/players/bob/rounds",
        "/v1/players/bob/rounds/t-1:1",
        "/v1/players/bob/tables/t-1",
        "/v1/players/Ann/wallet",
        "/v1/streams/wallet:bob/events",
        "/v1/streams/t-1/events",  # a table's events carry every player's balances
        "/v1/rounds/t-1:1",  # the round in full: every player's money
        "/v1/tables/t-1",
        "/v1/interrupted-rounds",
        "/v1/reports/games",
    ):
        answer = await ask(api, path, ann)
        assert answer.status_code == 403, (path, answer.text)
        assert answer.json()["error"]["code"] == "forbidden"
    # refused by default: a path no rule gives players (one added later, or none at all) is
    # the back office's; the operator's token gets the 404
    for path in ("/v1/nowhere", "/v1/players", "/v1/streams/wallet:ann", "/v1/reports/later"):
        answer = await ask(api, path, ann)
        assert answer.status_code == 403, (path, answer.text)
        assert answer.json()["error"]["code"] == "forbidden"
        assert (await ask(api, path, OPERATOR_TOKEN)).status_code == 404
    # the operator's token reads them all (here: nothing there)
    for path in ("/v1/players/bob/wallet", "/v1/rounds/t-1:1", "/v1/interrupted-rounds"):
        assert (await ask(api, path, OPERATOR_TOKEN)).status_code in (200, 404)


async def test_every_refusal_is_typed_and_no_token_is_logged(api: httpx.AsyncClient) -> None:
    expired, forged = signed(lifetime=-3600), signed(ed25519.Ed25519PrivateKey.generate())
    with capture_logs() as logs:
        missing = await ask(api, "/v1/players/ann/wallet", None)
        late = await ask(api, "/v1/players/ann/wallet", expired)
        bad = await ask(api, "/v1/players/ann/wallet", forged)
        await ask(api, "/v1/players/bob/wallet", signed())
        await ask(api, "/v1/players/ann/wallet", OPERATOR_TOKEN)
    assert (missing.status_code, missing.headers["www-authenticate"]) == (401, "Bearer")
    for answer, message in ((late, "expired"), (bad, "not valid")):
        assert answer.status_code == 401
        assert answer.headers["www-authenticate"] == (
            f'Bearer error="invalid_token", error_description="{answer.json()["error"]["message"]}"'
        )
        assert answer.json()["error"]["code"] == "unauthenticated"
        assert message in answer.json()["error"]["message"]
    logged = repr(logs)
    for secret in (expired, forged, OPERATOR_TOKEN, SECRET):
        assert secret not in logged and secret.split(".")[-1] not in logged


async def revoke(api: httpx.AsyncClient, player: str, token: str | None) -> httpx.Response:
    headers = {} if token is None else {"authorization": f"Bearer {token}"}
    answer = await api.post(f"/v1/players/{player}/token-revocation", headers=headers)
    assert answer.headers["content-type"] == "application/json"
    return answer


async def test_an_operator_revokes_a_player_s_tokens_issued_until_then(
    api: httpx.AsyncClient,
) -> None:
    """A stolen token is refused before its exp once the operator revokes the player's
    tokens (before: good until its exp, nothing could cut it off); tokens signed from the
    answer's ``not_before`` on are good; other players' are untouched."""
    stolen, bob = signed(), signed(sub="bob")
    assert (await ask(api, "/v1/players/ann/rounds", stolen)).status_code == 404  # admitted
    before = int(time.time())
    with capture_logs() as logs:
        answer = await revoke(api, "ann", OPERATOR_TOKEN)
    assert answer.status_code == 200, answer.text
    not_before = answer.json()["not_before"]
    assert answer.json() == {"player_id": "ann", "not_before": not_before}
    # the next second, and the 30 s leeway later
    assert before + 31 <= not_before <= int(time.time()) + 31
    refused = await ask(api, "/v1/players/ann/rounds", stolen)
    assert refused.status_code == 401
    assert "revoked" in refused.json()["error"]["message"]
    assert 'error="invalid_token", error_description="' in refused.headers["www-authenticate"]
    assert (await ask(api, "/v1/players/bob/rounds", bob)).status_code == 404  # not hers
    # every path refuses it so, the revocation's POST too (a review: 403, as if still good)
    auth = {"authorization": f"Bearer {stolen}"}
    for answer in (
        await revoke(api, "ann", stolen),
        await ask(api, "/v1/openapi.json", stolen),
        await ask(api, "/v1/players/bob/rounds", stolen),
        # a method the path does not take too (a review: 405, as if the token still held)
        await api.put("/v1/players/ann/wallet", headers=auth),
        await api.post("/v1/players/ann/wallet", headers=auth),
        await api.delete("/v1/players/ann/token-revocation", headers=auth),
    ):
        assert (answer.status_code, answer.json()["error"]["code"]) == (401, "unauthenticated")
        assert "revoked" in answer.json()["error"]["message"]
    # revoked again at once: not_before never moves back
    assert (await revoke(api, "ann", OPERATOR_TOKEN)).json()["not_before"] >= not_before
    [line] = [entry for entry in logs if entry["event"] == "player tokens revoked"]
    assert line["player_id"] == "ann" and OPERATOR_TOKEN not in repr(logs)


async def test_only_an_operator_revokes_and_only_by_post(api: httpx.AsyncClient) -> None:
    mine = signed()
    for token, status, code in (
        (mine, 403, "forbidden"),  # a player's token: not even their own
        (signed(sub="bob"), 403, "forbidden"),
        (None, 401, "unauthenticated"),
        ("x" * 40, 401, "unauthenticated"),
    ):
        answer = await revoke(api, "ann", token)
        assert (answer.status_code, answer.json()["error"]["code"]) == (status, code)
    assert (await ask(api, "/v1/players/ann/rounds", mine)).status_code == 404  # still good
    got = await ask(api, "/v1/players/ann/token-revocation", OPERATOR_TOKEN)
    assert (got.status_code, got.headers["allow"]) == (405, "POST")
    elsewhere = await api.post(
        "/v1/players/ann/wallet", headers={"authorization": f"Bearer {OPERATOR_TOKEN}"}
    )
    assert (elsewhere.status_code, elsewhere.headers["allow"]) == (405, "GET, HEAD")
    too_long = await revoke(api, "x" * 129, OPERATOR_TOKEN)
    assert (too_long.status_code, too_long.json()["error"]["code"]) == (400, "bad_path")


async def test_a_revocation_is_kept_while_a_token_it_refuses_may_live(tmp_path: Path) -> None:
    """A token issued from ``not_before`` on is good. Bounded: each revocation drops the rows
    whose tokens have all expired (``not_before`` more than the longest lifetime and the
    leeway ago)."""
    from datetime import UTC, datetime, timedelta

    from blackjack.api import revocations

    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path}/read.db")
    await store.migrate()
    try:
        now = datetime.now(UTC)
        keep = 3600 + 30
        async with store.writing() as connection:
            old = int(now.timestamp()) - keep - 1
            await revocations.revoke(connection, "old", old, now - timedelta(hours=2), keep)
            recent = int(now.timestamp()) - keep + 200
            await revocations.revoke(connection, "recent", recent, now, keep)
            then = datetime.fromtimestamp(recent - 100 - 31, UTC)  # by a leeway of 30 s
            await revocations.revoke(connection, "ann", recent - 100, then, keep)
            assert await revocations.revoked_before(connection, "old") is None
            assert await revocations.revoked_before(connection, "recent") == recent
            assert await revocations.revoked_before(connection, "ann") == recent - 100
        app = query_api(store, tokens=ApiTokens.from_env(ENV))
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
            for iat, status in ((recent - 101, 401), (recent - 100, 404), (recent - 99, 404)):
                token = signed(iat=iat, exp=iat + 3600)
                assert (await ask(api, "/v1/players/ann/rounds", token)).status_code == status
    finally:
        await store.close()


async def test_an_operator_with_the_database_revokes_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``blackjack projections revoke-tokens PLAYER_ID``: the same revocation as the POST, for
    an operator who has the database's URL and no operator token (an API with player keys and
    no ``BLACKJACK_API_TOKENS`` has none to give)."""
    import asyncio
    import json

    from blackjack.cli import main

    url = f"sqlite+aiosqlite:///{tmp_path}/read.db"
    store = ProjectionStore(url)
    await store.migrate()
    stolen = signed()
    try:
        before = int(time.time())
        code = await asyncio.to_thread(
            main, ["projections", "revoke-tokens", "ann", "--db-url", url]
        )
        assert code == 0
        said = json.loads(capsys.readouterr().out)
        # the next second: no player keys in this shell, no leeway (each API adds its own)
        assert said["player_id"] == "ann" and said["not_before"] >= before + 1
        players_only = {k: v for k, v in ENV.items() if k != "BLACKJACK_API_TOKENS"}
        transport = httpx.ASGITransport(
            app=query_api(store, tokens=ApiTokens.from_env(players_only))
        )
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
            refused = await ask(api, "/v1/players/ann/wallet", stolen)
            assert refused.status_code == 401 and "revoked" in refused.text
            assert (await ask(api, "/v1/players/bob/wallet", signed(sub="bob"))).status_code == 404
    finally:
        await store.close()


async def test_a_revocation_outlives_the_settings_of_the_process_that_drops_rows(
    tmp_path: Path,
) -> None:
    """The rows a revocation drops are judged by the longest lifetime and leeway any process
    may be configured with, not by the revoking process's own: before, ``revoke-tokens`` run
    from a shell without the API's settings (3600 s by default) dropped ann's revocation of
    two hours ago, and an API allowing day-long tokens took her stolen one again. Without
    player keys the revocation counts no leeway into ``not_before``: each checking process
    adds its own (``test_a_revocation_without_player_keys_refuses_by_the_checker_s_leeway``)."""
    from datetime import UTC, datetime, timedelta

    from blackjack.api import revocations

    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path}/read.db")
    await store.migrate()
    try:
        now = datetime.now(UTC)
        ann_not_before = int(now.timestamp()) - 7200
        stolen = signed(iat=ann_not_before - 10, exp=ann_not_before - 10 + 86_000)
        async with store.writing() as connection:
            then = now - timedelta(hours=2)
            await revocations.revoke(connection, "ann", ann_not_before, then, 86_400 + 30)
        # bob revoked from the command line, no player keys in its settings
        before = int(time.time())
        bob_not_before = await revocations.revoke_now(store, "bob", None)
        assert before + 1 <= bob_not_before <= int(time.time()) + 1
        async with store.reading() as connection:
            assert await revocations.revoked_before(connection, "ann") == ann_not_before
        day_long = {**ENV, "BLACKJACK_API_JWT_MAX_LIFETIME_S": "86400"}
        transport = httpx.ASGITransport(app=query_api(store, tokens=ApiTokens.from_env(day_long)))
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
            refused = await ask(api, "/v1/players/ann/rounds", stolen)
            assert refused.status_code == 401 and "revoked" in refused.text
    finally:
        await store.close()


@pytest.mark.parametrize("leeway", [30, 0])
async def test_a_revocation_without_player_keys_refuses_by_the_checker_s_leeway(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, leeway: int
) -> None:
    """An API with operator tokens only (no player keys, so no leeway of its own) revokes
    ann's tokens 100 s ago; an API with player keys and a leeway of 30 s (or 0) checks them.
    Refused: an ``iat`` before the revocation's next second plus the checker's leeway (a
    token signed a moment before it by a platform whose clock ran that far ahead); taken: one
    from there on, and one signed now, after the revocation. Before, the revocation counted
    the longest leeway (300 s) into ``not_before`` and ann's new tokens were refused for
    about 270 s."""
    from datetime import UTC, datetime, timedelta

    from blackjack.api import revocations

    real_now = datetime.now(UTC)
    revoked_at = real_now - timedelta(seconds=100)

    class Earlier(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return revoked_at

    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path}/read.db")
    await store.migrate()
    operators_only = ApiTokens.from_env({"BLACKJACK_API_TOKENS": OPERATOR_TOKEN})
    checker = ApiTokens.from_env({**ENV, "BLACKJACK_API_JWT_LEEWAY_S": str(leeway)})
    try:
        transport = httpx.ASGITransport(app=query_api(store, tokens=operators_only))
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
            monkeypatch.setattr(revocations, "datetime", Earlier)
            answer = await revoke(api, "ann", OPERATOR_TOKEN)
            monkeypatch.undo()
        assert answer.status_code == 200, answer.text
        second = int(revoked_at.timestamp())  # the revocation's own second
        transport = httpx.ASGITransport(app=query_api(store, tokens=checker))
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
            for iat, status in (
                (second - 5, 401),  # signed before it
                (second + leeway, 401),  # signed before it, the platform's clock ahead
                (second + leeway + 1, 404),  # the first second past the checker's leeway
                (int(real_now.timestamp()), 404),  # signed now, 100 s after it
            ):
                token = signed(iat=iat, exp=iat + 300)
                got = await ask(api, "/v1/players/ann/rounds", token)
                assert got.status_code == status, (iat - second, got.text)
    finally:
        await store.close()


async def test_an_api_without_operator_tokens_takes_no_revocation_unless_the_gateway_does(
    tmp_path: Path,
) -> None:
    """An API left open (no tokens at all, ``blackjack serve``'s default) answered the POST to
    anyone, who could cut any player's tokens off on every API over the store (one with
    player keys included); now 403 ``forbidden`` and nothing written, its reads open as
    before. ``BLACKJACK_API_OPERATOR_AUTH=gateway`` says the gateway authenticates the
    operator: taken. An API with player keys and no operator token refuses it either way (no
    request is the operator's there); a wrong value of the setting is named."""
    from blackjack.api import revocations

    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path}/read.db")
    await store.migrate()
    players_only = {k: v for k, v in ENV.items() if k != "BLACKJACK_API_TOKENS"}
    try:
        for env, status in (
            ({}, 403),
            ({"BLACKJACK_API_OPERATOR_AUTH": "token"}, 403),
            ({**players_only, "BLACKJACK_API_OPERATOR_AUTH": "gateway"}, 403),
            ({"BLACKJACK_API_OPERATOR_AUTH": "gateway"}, 200),
        ):
            transport = httpx.ASGITransport(app=query_api(store, tokens=ApiTokens.from_env(env)))
            async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
                token = signed() if "BLACKJACK_API_PLAYER_KEYS" in env else None
                answer = await revoke(api, "ann", token)
                assert answer.status_code == status, (env, answer.text)
                if status == 403:
                    assert answer.json()["error"]["code"] == "forbidden"
                    if not env.get("BLACKJACK_API_PLAYER_KEYS"):  # it says what to set
                        assert "BLACKJACK_API_OPERATOR_AUTH=gateway" in answer.text
                    async with store.reading() as connection:
                        assert await revocations.revoked_before(connection, "ann") is None
                if not env.get("BLACKJACK_API_PLAYER_KEYS"):  # reads stay open
                    read = await api.get("/v1/players/ann/wallet")
                    assert read.status_code == 404  # answered: she has no wallet here
    finally:
        await store.close()
    with pytest.raises(ConfigurationError, match="BLACKJACK_API_OPERATOR_AUTH is token or gateway"):
        ApiTokens.from_env({"BLACKJACK_API_OPERATOR_AUTH": "none"})
    assert ApiTokens.from_env({}).operator_writes is False
    assert ApiTokens.from_env({"BLACKJACK_API_TOKENS": OPERATOR_TOKEN}).operator_writes
