"""What a load test run plays, and the limits it reads the broker with."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from blackjack.bus.settings import DEFAULT_BOOTSTRAP, PLAINTEXT, KafkaSecurity, KafkaSettings
from blackjack.bus.topics import Topics
from blackjack.client import PRODUCER_BATCH_BYTES, BlackjackClient
from blackjack.domain.rules import PRESETS, Rules, preset

Emit = Callable[[dict[str, Any]], None]

SINGLE_PLAYER_PRESETS = sorted(name for name, rules in PRESETS.items() if rules.seats == 1)
MAX_BATCH = 100  # records per fetch at most, as the handler's default BLACKJACK_MAX_BATCH
POLL_MS = 200
READ_TIMEOUT_S = 60.0
DELETE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class LoadConfig:
    bootstrap: str = DEFAULT_BOOTSTRAP
    tables: int = 40
    rounds: int = 50
    variant: str = "mini-h17"
    bet: int | None = None
    """Minor units per round; the variant's minimum bet when not given."""
    partitions: int = 6
    baseline: bool = True
    timeout_s: float = 30.0
    """How long one command may wait for its result before the run fails."""
    keep_topics: bool = False
    security: KafkaSecurity = PLAINTEXT
    """How every client of the run (the handler, the players' client and events reader, the
    echo and its clients, the proof's readers) connects: the service's own settings."""
    batch_bytes: int = PRODUCER_BATCH_BYTES
    linger_ms: int = 0
    """``max_batch_size`` and ``linger_ms`` of the producers the load test runs itself, set
    alike on both sides: the players' and the echo's ``BlackjackClient``, and the echo's
    transactional producer. The handler's producers keep their own (``TRANSACTION_BATCH_BYTES``,
    production's)."""
    replication_factor: int = 1
    min_insync_replicas: int = 1
    """of the run's topics, ours and the echo's alike (3 and 2 on deploy/kafka/cluster.sh)"""

    def rules(self) -> Rules:
        return preset(self.variant)

    def stake(self) -> int:
        return self.bet if self.bet is not None else self.rules().min_bet

    def players_client(self, settings: KafkaSettings) -> BlackjackClient:
        """The one client the run's players send through (ours and the echo's alike), with
        this run's producer batches."""
        return BlackjackClient(
            settings.bootstrap,
            Topics(settings.topic_prefix),
            client_id=f"{settings.topic_prefix}client",
            security=settings.security,
            max_batch_size=self.batch_bytes,
            linger_ms=self.linger_ms,
        )
