"""Where the projections read from and write to, from the environment.

BLACKJACK_DB_URL              SQLAlchemy async URL of the read-model store
                              (default ``sqlite+aiosqlite:///var/projections.db``;
                              production: ``postgresql+asyncpg://user:pw@host/db``)
BLACKJACK_KAFKA_BOOTSTRAP     bootstrap servers (falls back to KAFKA_BOOTSTRAP, then
                              ``127.0.0.1:9092``)
BLACKJACK_TOPIC_PREFIX        prefix of every topic name (default empty)
BLACKJACK_PROJECTION_GROUP    consumer group of the projection workers
BLACKJACK_PROJECTION_BATCH    most records folded in one database transaction (default 500)
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


@dataclass(frozen=True, slots=True)
class ProjectionSettings:
    db_url: str = DEFAULT_DB_URL
    bootstrap: str = DEFAULT_BOOTSTRAP
    topic_prefix: str = ""
    group_id: str = DEFAULT_GROUP
    batch: int = DEFAULT_BATCH
    instance_id: str | None = None

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
        if not batch.isdigit() or int(batch) < 1:
            raise ValueError(
                f"BLACKJACK_PROJECTION_BATCH must be a positive integer, not {batch!r}"
            )
        return cls(
            db_url=value("BLACKJACK_DB_URL", DEFAULT_DB_URL),
            bootstrap=bootstrap,
            topic_prefix=env.get("BLACKJACK_TOPIC_PREFIX", "").strip(),
            group_id=value("BLACKJACK_PROJECTION_GROUP", DEFAULT_GROUP),
            batch=int(batch),
            instance_id=env.get("BLACKJACK_PROJECTION_INSTANCE", "").strip() or None,
        )
