"""Kafka connection and topic settings, read from the environment with embedded defaults.

BLACKJACK_KAFKA_BOOTSTRAP     bootstrap servers (also read: KAFKA_BOOTSTRAP); 127.0.0.1:9092
BLACKJACK_TOPIC_PREFIX        prepended to every topic name (and the consumer group); ""
BLACKJACK_PARTITIONS          partitions of every topic; 6 (never change it once streams exist)
BLACKJACK_REPLICATION_FACTOR  replicas of every topic; 1 (3 in production)
BLACKJACK_MIN_INSYNC_REPLICAS min.insync.replicas of every topic; 1 (2 in production)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from blackjack.configuration import ConfigurationError, env_value

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"

TRANSACTION_RETRY_BACKOFF_MS = 20
"""``retry_backoff_ms`` of the transactional producers. Back to back, a partition's next
transaction often finds the coordinator still writing the last one's markers
(``CONCURRENT_TRANSACTIONS``, KAFKA-5477); aiokafka waits ``retry_backoff_ms`` (100 by default)
before it asks again, which was the p95 latency under load (docs/load.md)."""


@dataclass(frozen=True)
class KafkaSettings:
    bootstrap: str = DEFAULT_BOOTSTRAP
    topic_prefix: str = ""
    partitions: int = 6
    replication_factor: int = 1
    min_insync_replicas: int = 1

    def __post_init__(self) -> None:
        if self.partitions < 1:
            raise ConfigurationError("BLACKJACK_PARTITIONS must be at least 1")
        if not 1 <= self.min_insync_replicas <= self.replication_factor:
            raise ConfigurationError(
                "BLACKJACK_MIN_INSYNC_REPLICAS must be between 1 and BLACKJACK_REPLICATION_FACTOR"
            )

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> KafkaSettings:
        def number(name: str, default: int) -> int:
            return env_value(env, name, int, default)

        bootstrap = env.get("BLACKJACK_KAFKA_BOOTSTRAP") or env.get("KAFKA_BOOTSTRAP")
        return cls(
            bootstrap=(bootstrap or DEFAULT_BOOTSTRAP).strip(),
            topic_prefix=env.get("BLACKJACK_TOPIC_PREFIX", "").strip(),
            partitions=number("BLACKJACK_PARTITIONS", cls.partitions),
            replication_factor=number("BLACKJACK_REPLICATION_FACTOR", cls.replication_factor),
            min_insync_replicas=number("BLACKJACK_MIN_INSYNC_REPLICAS", cls.min_insync_replicas),
        )
