"""The projection workers' settings from the environment, and what ``serve`` derives."""

from __future__ import annotations

from pathlib import Path

import pytest

from blackjack.app import projection_settings
from blackjack.bus.settings import KafkaSettings
from blackjack.command_handler.config import HandlerConfig
from blackjack.projection_worker.settings import ProjectionSettings
from blackjack.projections.shown_url import shown_db_url

DB = "postgresql+asyncpg://u:p@db/blackjack"


def test_the_group_is_under_the_topic_prefix_unless_one_is_named() -> None:
    assert ProjectionSettings.from_env({}).group_id == "blackjack-projections"
    staging = ProjectionSettings.from_env({"BLACKJACK_TOPIC_PREFIX": "staging."})
    assert staging.group_id == "staging.blackjack-projections"
    assert staging.events_topic == "staging.blackjack.events"
    named = {"BLACKJACK_TOPIC_PREFIX": "staging.", "BLACKJACK_PROJECTION_GROUP": "mine"}
    assert ProjectionSettings.from_env(named).group_id == "mine"


def test_serve_folds_under_the_handlers_prefix_and_broker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BLACKJACK_PROJECTION_GROUP", raising=False)
    monkeypatch.delenv("BLACKJACK_TOPIC_PREFIX", raising=False)
    config = HandlerConfig.from_env(
        {
            "BLACKJACK_SHOE_KEY": "cd" * 32,
            "BLACKJACK_TOPIC_PREFIX": "prod.",
            "BLACKJACK_KAFKA_BOOTSTRAP": "kafka:9092",
        }
    )
    settings = projection_settings(config)
    assert settings.group_id == "prod.blackjack-projections"
    assert settings.events_topic == "prod.blackjack.events"
    assert settings.bootstrap == "kafka:9092"


def test_a_named_worker_waits_longer_for_a_restart_and_needs_the_shared_database() -> None:
    assert ProjectionSettings.from_env({}).session_timeout_ms == 10_000
    named = {"BLACKJACK_PROJECTION_INSTANCE": "blackjack-projections-0", "BLACKJACK_DB_URL": DB}
    assert ProjectionSettings.from_env(named).session_timeout_ms == 45_000
    tuned = {**named, "BLACKJACK_PROJECTION_SESSION_TIMEOUT_MS": "60000"}
    assert ProjectionSettings.from_env(tuned).session_timeout_ms == 60_000
    with pytest.raises(ValueError, match="BLACKJACK_DB_URL"):
        ProjectionSettings.from_env({"BLACKJACK_PROJECTION_INSTANCE": "blackjack-projections-0"})


@pytest.mark.parametrize(
    "name", ["BLACKJACK_PROJECTION_SESSION_TIMEOUT_MS", "BLACKJACK_PROJECTION_BATCH"]
)
def test_numbers_must_be_positive_integers(name: str) -> None:
    for bad in ("0", "-5", "ten"):
        with pytest.raises(ValueError, match=name):
            ProjectionSettings.from_env({name: bad})


def test_the_workers_read_the_broker_as_the_handler_does() -> None:
    for env in (
        {"BLACKJACK_KAFKA_BOOTSTRAP": "  ", "KAFKA_BOOTSTRAP": "kafka:9092"},
        {"BLACKJACK_KAFKA_BOOTSTRAP": " broker:9093 "},
        {},
    ):
        handler, worker = KafkaSettings.from_env(env), ProjectionSettings.from_env(env)
        assert worker.bootstrap == handler.bootstrap != ""
        assert worker.security == handler.security


def test_serve_s_query_api_requires_the_tokens_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    from blackjack.api.routes import QueryApi
    from blackjack.app import build_app

    token = "t" * 32
    monkeypatch.setenv("BLACKJACK_API_TOKENS", token)
    config = HandlerConfig.from_env({"BLACKJACK_SHOE_KEY": "cd" * 32})
    app = build_app(config, projection_settings(config)).app
    assert isinstance(app, QueryApi) and app.tokens.admits(f"Bearer {token}".encode())
    assert not app.tokens.admits(None)


def test_a_named_worker_may_be_given_its_database_on_the_command_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``blackjack projections run --db-url URL`` with BLACKJACK_PROJECTION_INSTANCE set and
    no BLACKJACK_DB_URL: the store is named, so the worker runs on it (it stopped with
    "BLACKJACK_PROJECTION_INSTANCE is set but BLACKJACK_DB_URL is not", exit 2)."""
    import argparse

    from blackjack.projection_worker.cli import settings_from

    monkeypatch.delenv("BLACKJACK_DB_URL", raising=False)
    monkeypatch.setenv("BLACKJACK_PROJECTION_INSTANCE", "blackjack-projections-0")
    args = argparse.Namespace(db_url=DB, bootstrap=None, topic_prefix=None)
    settings = settings_from(args)
    assert settings.db_url == DB
    assert settings.session_timeout_ms == 45_000
    with pytest.raises(ValueError, match="BLACKJACK_DB_URL"):
        settings_from(argparse.Namespace(db_url=None, bootstrap=None, topic_prefix=None))


def test_the_migrations_command_line_reads_the_store_as_the_worker_does(
    tmp_path: Path,
) -> None:
    """The alembic environment's URL (``db_url_from_env``, ``alembic -c ... upgrade head``)
    is the worker's: blank is the embedded store, spaces trimmed, and a named worker's
    environment without one is refused rather than migrating a local SQLite file."""
    from blackjack.configuration import ConfigurationError
    from blackjack.projections.store import DEFAULT_DB_URL, db_url_from_env

    url = f"sqlite+aiosqlite:///{tmp_path}/x.db"
    for env in ({}, {"BLACKJACK_DB_URL": "  "}, {"BLACKJACK_DB_URL": f" {url} "}):
        assert db_url_from_env(env) == ProjectionSettings.from_env(env).db_url
    assert db_url_from_env({}) == DEFAULT_DB_URL
    assert db_url_from_env({"BLACKJACK_DB_URL": f"\t{url} "}) == url
    named = {"BLACKJACK_PROJECTION_INSTANCE": "blackjack-projections-0"}
    with pytest.raises(ConfigurationError, match="BLACKJACK_DB_URL is not"):
        db_url_from_env(named)
    assert db_url_from_env(named | {"BLACKJACK_DB_URL": url}) == url


def test_the_settings_never_show_the_database_password() -> None:
    """The settings' repr (a traceback's locals, a log line's ``settings=``) leaves the store's
    URL out: its password with it (the Kafka SASL password and the shoe key likewise)."""
    settings = ProjectionSettings.from_env(
        {
            "BLACKJACK_DB_URL": "postgresql+asyncpg://blackjack:s3cret-pw@db.internal/blackjack",
            "BLACKJACK_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "BLACKJACK_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
            "BLACKJACK_KAFKA_SASL_USERNAME": "projections",
            "BLACKJACK_KAFKA_SASL_PASSWORD": "kafka-pw-9",
        }
    )
    assert settings.db_url.endswith("db.internal/blackjack")
    assert settings.security.password == "kafka-pw-9"
    for secret in ("s3cret-pw", "kafka-pw-9"):
        assert secret not in repr(settings)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "postgresql+asyncpg://blackjack:s3cret-pw@db.internal:5432/blackjack",
            "postgresql+asyncpg://blackjack:***@db.internal:5432/blackjack",
        ),
        ("sqlite+aiosqlite:///var/projections.db", "sqlite+aiosqlite:///var/projections.db"),
        ("s3cret-pw and not a URL", "the database"),  # unread: nothing of it printed
    ],
)
def test_a_store_s_url_is_shown_without_its_password(url: str, shown: str) -> None:
    assert shown_db_url(url) == shown
