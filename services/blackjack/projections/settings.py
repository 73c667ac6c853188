"""Where the projections read from and write to, from the environment.

BLACKJACK_DB_URL              SQLAlchemy async URL of the read-model store
                              (default ``sqlite+aiosqlite:///var/projections.db``;
                              production: ``postgresql+asyncpg://user:pw@host/db``)
BLACKJACK_KAFKA_BOOTSTRAP     bootstrap servers (falls back to KAFKA_BOOTSTRAP, then
                              ``127.0.0.1:9092``)
BLACKJACK_TOPIC_PREFIX        prefix of every topic name (default empty)
BLACKJACK_PROJECTION_GROUP    consumer group of the projection workers
BLACKJACK_PROJECTION_BATCH    most records folded in one database transaction (default 500)
BLACKJACK_PROJECTION_INSTANCE a stable name per worker (static group membership)
BLACKJACK_PROJECTION_STUCK_AFTER  failed attempts in a row at the same record after which the
                              worker reports not ready (default 10, about 20 s of retries)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

EVENTS_TOPIC = "blackjack.events"
DEFAULT_DB_URL = "sqlite+aiosqlite:///var/projections.db"
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_GROUP = "blackjack-projections"
DEFAULT_BATCH = 500
DEFAULT_STUCK_AFTER = 10


@dataclass(frozen=True, slots=True)
class ProjectionSettings:
    db_url: str = DEFAULT_DB_URL
    bootstrap: str = DEFAULT_BOOTSTRAP
    topic_prefix: str = ""
    group_id: str = DEFAULT_GROUP
    batch: int = DEFAULT_BATCH
    instance_id: str | None = None
    stuck_after: int = DEFAULT_STUCK_AFTER

    @property
    def events_topic(self) -> str:
        return f"{self.topic_prefix}{EVENTS_TOPIC}"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ProjectionSettings:
        env = os.environ if env is None else env

        def value(name: str, default: str) -> str:
            return env.get(name, "").strip() or default

        bootstrap = value("BLACKJACK_KAFKA_BOOTSTRAP", value("KAFKA_BOOTSTRAP", DEFAULT_BOOTSTRAP))
        batch = value("BLACKJACK_PROJECTION_BATCH", str(DEFAULT_BATCH))
        stuck_after = value("BLACKJACK_PROJECTION_STUCK_AFTER", str(DEFAULT_STUCK_AFTER))
        for name, text in (
            ("BLACKJACK_PROJECTION_BATCH", batch),
            ("BLACKJACK_PROJECTION_STUCK_AFTER", stuck_after),
        ):
            if not text.isdigit() or int(text) < 1:
                raise ValueError(f"{name} must be a positive integer, not {text!r}")
        return cls(
            db_url=value("BLACKJACK_DB_URL", DEFAULT_DB_URL),
            bootstrap=bootstrap,
            topic_prefix=env.get("BLACKJACK_TOPIC_PREFIX", "").strip(),
            group_id=value("BLACKJACK_PROJECTION_GROUP", DEFAULT_GROUP),
            batch=int(batch),
            instance_id=env.get("BLACKJACK_PROJECTION_INSTANCE", "").strip() or None,
            stuck_after=int(stuck_after),
        )
