"""Where the projections read from and write to, from the environment.

BLACKJACK_DB_URL              SQLAlchemy async URL of the read-model store
                              (default ``sqlite+aiosqlite:///var/projections.db``;
                              production: ``postgresql+asyncpg://user:pw@host/db``)
BLACKJACK_KAFKA_BOOTSTRAP     bootstrap servers (falls back to KAFKA_BOOTSTRAP, then
                              ``127.0.0.1:9092``)
BLACKJACK_TOPIC_PREFIX        prefix of every topic name (default empty)
BLACKJACK_PROJECTION_GROUP    consumer group of the projection workers (default
                              ``<BLACKJACK_TOPIC_PREFIX>blackjack-projections``, so two
                              deployments sharing a broker under different prefixes never
                              share a group)
BLACKJACK_PROJECTION_BATCH    most records folded in one database transaction (default 500)
BLACKJACK_PROJECTION_INSTANCE a stable name per worker (static group membership)
BLACKJACK_PROJECTION_SESSION_TIMEOUT_MS  how long the group waits for a silent worker before
                              giving its partitions to others (default 45000 with a stable
                              name: a restarted worker comes back within it and keeps its
                              partitions, as static members send no LeaveGroup; 10000
                              without one)
BLACKJACK_KAFKA_SECURITY_PROTOCOL and the other BLACKJACK_KAFKA_* security settings, as
                              ``bus/settings.py`` lists them
BLACKJACK_PROJECTION_STUCK_AFTER  failed attempts in a row at the same record after which the
                              worker reports the partition stuck (default 10, about 20 s of retries)
BLACKJACK_PROJECTION_FATAL_LINGER_S  with ``--http``: seconds a worker that stops on a fault
                              (exit 3: a store at another schema revision; 4: a database that
                              refuses it; 2 or 1 for a fold's) keeps serving ``/metrics`` and
                              ``/readyz`` first, no query, so that a scrape sees it (default
                              30: two scrapes at 15 s; 0: none; a stop signal ends it at once)
BLACKJACK_API_TOKENS          bearer tokens (comma-separated, 32+ characters each) one of which
                              every query API request must carry; unset, the API is open
                              (behind the platform's gateway)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from blackjack.api.tokens import OPEN, ApiTokens
from blackjack.bus.settings import DEFAULT_BOOTSTRAP, PLAINTEXT, KafkaSecurity, KafkaSettings
from blackjack.bus.topics import Topics
from blackjack.configuration import env_value, positive_int, whole_number
from blackjack.projections.health import DEFAULT_STUCK_AFTER
from blackjack.projections.store import DEFAULT_DB_URL, db_url_from_env

DEFAULT_GROUP = "blackjack-projections"
DEFAULT_BATCH = 500
DEFAULT_FATAL_LINGER_S = 30
SESSION_TIMEOUT_MS = 10_000
STATIC_SESSION_TIMEOUT_MS = 45_000


@dataclass(frozen=True, slots=True)
class ProjectionSettings:
    db_url: str = field(default=DEFAULT_DB_URL, repr=False)  # its password: never in a log line
    bootstrap: str = DEFAULT_BOOTSTRAP
    topic_prefix: str = ""
    group_id: str = DEFAULT_GROUP
    batch: int = DEFAULT_BATCH
    instance_id: str | None = None
    stuck_after: int = DEFAULT_STUCK_AFTER
    session_timeout_ms: int = SESSION_TIMEOUT_MS
    security: KafkaSecurity = PLAINTEXT
    api_tokens: ApiTokens = OPEN  # who may read the query API the store serves
    fatal_linger_s: int = DEFAULT_FATAL_LINGER_S
    """with ``--http``, how long a worker stopping on a fault serves its metrics first"""
    watch_every_s: float | None = None
    """how often the lag and the group's offsets are read while idle (None:
    ``positions.LAG_EVERY_SECONDS``); the tests' worker makes it short"""
    split_after_s: float | None = None
    """how long the group stays past the store on a partition before another store is
    reported (None: ``split.SPLIT_AFTER_S``)"""

    @property
    def events_topic(self) -> str:
        return Topics(self.topic_prefix).events

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ProjectionSettings:
        env = os.environ if env is None else env

        def value(name: str, default: str) -> str:
            return env.get(name, "").strip() or default

        kafka = KafkaSettings.from_env(
            env
        )  # the broker, the prefix and the security: as the handler reads them
        prefix = kafka.topic_prefix
        instance_id = env.get("BLACKJACK_PROJECTION_INSTANCE", "").strip() or None
        session = STATIC_SESSION_TIMEOUT_MS if instance_id else SESSION_TIMEOUT_MS
        db_url = db_url_from_env(env)  # (a named worker without one is refused)

        def number(name: str, default: int) -> int:
            return env_value(env, name, positive_int, default)

        return cls(
            db_url=db_url,
            bootstrap=kafka.bootstrap,
            topic_prefix=prefix,
            group_id=value("BLACKJACK_PROJECTION_GROUP", f"{prefix}{DEFAULT_GROUP}"),
            batch=number("BLACKJACK_PROJECTION_BATCH", DEFAULT_BATCH),
            instance_id=instance_id,
            stuck_after=number("BLACKJACK_PROJECTION_STUCK_AFTER", DEFAULT_STUCK_AFTER),
            session_timeout_ms=number("BLACKJACK_PROJECTION_SESSION_TIMEOUT_MS", session),
            security=kafka.security,
            api_tokens=ApiTokens.from_env(env),
            fatal_linger_s=env_value(
                env, "BLACKJACK_PROJECTION_FATAL_LINGER_S", whole_number, DEFAULT_FATAL_LINGER_S
            ),
        )
