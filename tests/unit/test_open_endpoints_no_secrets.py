"""What ``blackjack serve`` answers without a token (``/healthz``, ``/readyz``, ``/metrics``,
the AsyncAPI document and page, the OpenAPI document) names no secret of its settings: the
database URL's password, host, user and database, the Kafka SASL password, the operator tokens,
the HS256 secrets, the shoe key, the brokers' addresses; not even with its store split
(``/readyz`` named the store's URL, its host and database, before: a reason code now, the URL
in the log only; the AsyncAPI document named the deployment's brokers: the committed
document's development server now)."""

from __future__ import annotations

from unittest.mock import PropertyMock, patch

import httpx
import pytest

from blackjack.app import build_app, projection_settings
from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.service import CommandHandler
from blackjack.projections.split import Behind

SECRETS = {
    "BLACKJACK_KAFKA_BOOTSTRAP": "kafka-7.internal:9093",
    "BLACKJACK_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
    "BLACKJACK_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
    "BLACKJACK_KAFKA_SASL_USERNAME": "handler-7",
    "BLACKJACK_KAFKA_SASL_PASSWORD": "kafka-pass-91",
    "BLACKJACK_DB_URL": "postgresql+asyncpg://reader-3:db-pass-55@db-eu-4.internal:6543/bj_live",
    "BLACKJACK_API_TOKENS": "operator-token-" + "o" * 32,
    "BLACKJACK_API_PLAYER_SECRETS": "kid-1=" + "hs256-secret-" + "h" * 32,
    "BLACKJACK_SHOE_KEY": "5e" * 32,
}
SHOWN_NOWHERE = (
    "kafka-7.internal",  # the AsyncAPI document named the brokers before
    "kafka-pass-91",
    "db-pass-55",
    "db-eu-4.internal",
    ":6543",  # with its colon: the digits alone occur in /metrics' float timestamps
    "bj_live",
    "reader-3",
    "operator-token-",
    "hs256-secret-",
    "5e5e5e5e",
)
OPEN_PATHS = ("/healthz", "/readyz", "/metrics", "/docs/asyncapi", "/docs/asyncapi.json")


async def test_no_open_endpoint_names_a_secret_even_with_the_store_split(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    config = HandlerConfig.from_env()
    served = build_app(config, projection_settings(config))
    assert served.folding is not None
    served.folding.started()
    served.start.done = True
    served.folding.store_name = "postgresql+asyncpg://reader-3:***@db-eu-4.internal:6543/bj_live"
    served.folding.group_checked([Behind("blackjack.events", 1, 40, 90)])
    transport = httpx.ASGITransport(app=served.app)
    with patch.object(CommandHandler, "ready", new_callable=PropertyMock, return_value=True):
        async with httpx.AsyncClient(transport=transport, base_url="http://serve") as http:
            answers = {path: await http.get(path) for path in OPEN_PATHS}
            token = SECRETS["BLACKJACK_API_TOKENS"]
            openapi = await http.get(
                "/v1/openapi.json", headers={"authorization": f"Bearer {token}"}
            )
    assert answers["/readyz"].status_code == 503  # split: not ready, and says why
    assert answers["/readyz"].json()["projections"]["split_store"]["reason"] == (
        "another_store_in_group"
    )
    for path, answer in {**answers, "/v1/openapi.json": openapi}.items():
        assert answer.status_code in (200, 503), path
        for secret in SHOWN_NOWHERE:
            assert secret not in answer.text, (path, secret)
