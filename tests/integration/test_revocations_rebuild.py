"""A read model rebuilt into a new store keeps the live store's revocations of players' tokens
(SQLite and PostgreSQL, the real broker): ``blackjack projections rebuild --revocations-from``
as an operator runs it to shed data or recover, then ``copy-revocations`` after the switch.
Before, the new store started with none, and every revoked token was good again there."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from blackjack.api import revocations
from blackjack.api.routes import query_api
from blackjack.api.tokens import ApiTokens
from blackjack.messages.sealing import ShoeSeal
from blackjack.projections.rebuild import rebuild
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter
from tests.integration.cli_runs import blackjack
from tests.integration.conftest_projections import (
    EventsTopic,
    StoreFactory,
    play_tables,
    publish,
    to_wire,
    worker_env,
)

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = [pytest.mark.integration, pytest.mark.also_on_three_nodes]

TABLE = "table-revoked"
LOG = play_tables([(TABLE, "mini-h17")], 4, seed=77)
PLAYER = f"{TABLE}-p0"
PLATFORM = ed25519.Ed25519PrivateKey.generate()
OPERATOR_TOKEN = "r" * 40
TOKENS = ApiTokens.from_env(
    {
        "BLACKJACK_API_TOKENS": OPERATOR_TOKEN,
        "BLACKJACK_API_PLAYER_KEYS": PLATFORM.public_key()
        .public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)
        .decode(),
    }
)


def token(player_id: str, iat: int | None = None) -> str:
    issued = int(time.time()) if iat is None else iat
    claims = {"sub": player_id, "aud": "blackjack-query-api", "iat": issued, "exp": issued + 900}
    return jwt.encode(claims, PLATFORM, algorithm="EdDSA")


async def status(store: ProjectionStore, player_id: str, bearer: str) -> int:
    transport = httpx.ASGITransport(app=query_api(store, tokens=TOKENS))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
        answer = await api.get(
            f"/v1/players/{player_id}/wallet", headers={"authorization": f"Bearer {bearer}"}
        )
        return answer.status_code


async def test_a_token_revoked_before_a_rebuild_is_refused_after_it(
    stores: StoreFactory, events_topic: EventsTopic, shoe_seal: ShoeSeal
) -> None:
    written = await publish(events_topic, to_wire(LOG.envelopes, shoe_seal))
    live_url = await stores.url()
    live = await stores.store(live_url)
    await rebuild(ProjectionWriter(live), events_topic.bootstrap, events_topic.name, stop=written)
    stolen, bob = token(PLAYER), token("bob")
    assert await status(live, PLAYER, stolen) == 200
    transport = httpx.ASGITransport(app=query_api(live, tokens=TOKENS))
    async with httpx.AsyncClient(transport=transport, base_url="http://api") as api:
        answer = await api.post(
            f"/v1/players/{PLAYER}/token-revocation",
            headers={"authorization": f"Bearer {OPERATOR_TOKEN}"},
        )
        assert answer.status_code == 200, answer.text
    # a revocation too old to refuse any token (7 days and more ago): not carried over
    async with live.writing() as connection:
        long_ago = datetime.now(UTC) - timedelta(seconds=revocations.KEPT_S + 400)
        await revocations.revoke(
            connection, "gone", revocations.not_before_of(long_ago, 0), long_ago, 10**9
        )
    assert await status(live, PLAYER, stolen) == 401

    new_url = await stores.url()
    env = worker_env(events_topic, new_url)
    done = blackjack("projections", "rebuild", "--revocations-from", live_url, env=env)
    assert done.returncode == 0, done.stderr
    assert "revocation(s) of players' tokens carried over" in done.stdout
    if "@" in live_url:  # PostgreSQL's: the password is never printed
        password = live_url.split("@")[0].rsplit(":", 1)[1]
        assert f":{password}@" not in done.stdout + done.stderr and ":***@" in done.stdout
    rebuilt = ProjectionStore(new_url, existing=True)
    try:
        assert await status(rebuilt, PLAYER, stolen) == 401  # before: 200, revoked no more
        assert await status(rebuilt, PLAYER, OPERATOR_TOKEN) == 200  # the read model is there
        assert await status(rebuilt, "bob", bob) == 404  # admitted: no wallet, no seat
        async with rebuilt.reading() as connection:
            assert await revocations.revoked_before(connection, "gone") is None
            assert await revocations.revoked_before(connection, PLAYER) is not None

        # revoked on the live store while the workers were being switched: carried over too
        await revocations.revoke_now(live, "bob", TOKENS.players)
        assert await status(rebuilt, "bob", bob) == 404
        copied = blackjack("projections", "copy-revocations", "--from", live_url, env=env)
        assert copied.returncode == 0, copied.stderr
        assert "2 revocation(s)" in copied.stdout
        assert await status(rebuilt, "bob", bob) == 401
        assert await status(rebuilt, PLAYER, stolen) == 401  # run twice: still refused
    finally:
        await rebuilt.close()

    # a rebuild into a new store without the option says what it left behind
    bare = blackjack("projections", "rebuild", env=worker_env(events_topic, await stores.url()))
    assert bare.returncode == 0, bare.stderr
    assert "no revocation of players' tokens carried over" in bare.stderr
