"""The command handler's settings, read from the environment with embedded defaults.

    BLACKJACK_GROUP_ID              the handlers' consumer group; <prefix>blackjack-command-handler
    BLACKJACK_SOURCE                CloudEvents ``ce_source`` of what the handler writes
    BLACKJACK_INSTANCE_ID           this instance's name in logs and client ids; host-pid
    BLACKJACK_SNAPSHOT_EVERY        commands per partition between snapshots; 500
    BLACKJACK_DEDUP_WINDOW          command ids remembered per stream for idempotency; 1000
    BLACKJACK_MONEY_RETENTION_S     how long the platform may retry a money command (WalletDeposit,
                                    WalletWithdraw, Deposit, Withdraw): one whose sent_at is
                                    older is refused transfer_expired; 604800 (7 days)
    BLACKJACK_PRESENCE_TIMEOUT_S    silence after which the service disconnects a player who has
                                    a bet out, at tables with the disconnection policy; 30
    BLACKJACK_TIMER_TICK_MS         how often the clock looks for expired timers; 250
    BLACKJACK_COLD_AFTER_S          idle seconds after which a stream no timer can wake is
                                    kept as its sealed snapshot until a command needs it; 600
    BLACKJACK_SESSION_TIMEOUT_MS    consumer group session timeout; 10000
    BLACKJACK_MAX_BATCH             commands per transaction at most; 100
    BLACKJACK_CHECKPOINT_AFTER_S    at most this long between a partition's command and its
                                    next checkpoint (under the results topic's 7 days); 3600
    BLACKJACK_SHOE_SEAL_VERSION     2 seals new shoes with the shoe key derived for it (the
                                    auditor's key opens them); 1 with the master key, as
                                    handlers before it did, for the rolling upgrade to it; 2
    BLACKJACK_UNSIGNED_CHECKPOINTS  accept (trust a checkpoint the release before wrote, as the
                                    rolling upgrade needs) or refuse (rebuild such a partition
                                    from the start of its log); accept
    BLACKJACK_KAFKA_COMPRESSION     the codec of the batches the handler writes: none, gzip,
                                    snappy, lz4 or zstd (docs/kafka.md, "Compression"); gzip

plus the Kafka settings (``blackjack.bus.settings``) and the shoe key (``keys``).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta

from blackjack.bus.codecs import CODECS
from blackjack.bus.settings import KafkaSettings
from blackjack.bus.topics import REQUESTS_KEPT_MS, Topics
from blackjack.command_handler.keys import ShoeKeys, load_shoe_keys
from blackjack.configuration import ConfigurationError, env_value
from blackjack.domain.platform_money import DEFAULT_IDS_MAX, DEFAULT_RETENTION
from blackjack.messages.sealing import SealVersion

COMPRESSIONS = ("none", *CODECS)
"""what BLACKJACK_KAFKA_COMPRESSION may name"""


@dataclass(frozen=True)
class HandlerConfig:
    shoe_key_hex: str = field(repr=False)  # never in a log line
    accepted_shoe_keys_hex: tuple[str, ...] = field(default=(), repr=False)
    retired_shoe_keys_hex: tuple[str, ...] = field(default=(), repr=False)
    """a key rotation's other keys (``keys.ShoeKeys``): they never seal or sign"""
    kafka: KafkaSettings = field(default_factory=KafkaSettings)
    group_id: str = ""
    source: str = "/blackjack/command-handler"
    instance_id: str = field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    snapshot_every: int = 500
    checkpoint_after_s: float = 3600.0
    """A partition that handled a command checkpoints within this time even when fewer than
    ``snapshot_every`` came (the results topic keeps answers for 7 days)."""
    dedup_window: int = 1000
    money_retention_s: float = DEFAULT_RETENTION.total_seconds()
    """How long the platform may retry a money command (``domain.platform_money``): one
    issued (``sent_at``) longer ago is refused ``transfer_expired``, and its streams keep the
    ids of those they accepted that long."""
    money_ids_max: int = DEFAULT_IDS_MAX
    """How many platform money ids a stream keeps at most (``domain.platform_money``): a new
    platform money command at a stream that keeps as many is refused ``money_ids_full``, so
    its snapshot stays under the topic's size limit."""
    money_sent_at: str = "optional"
    """``required``: a platform money command without ``sent_at`` is refused ``malformed``
    (a copy of one its stream decided still gets its answer); ``optional``: it counts as
    issued when it arrived (docs/kafka.md, "Idempotency")."""
    command_round: str = "optional"
    """``required``: a player's command that acts in a round (``commands.ROUND_COMMANDS``)
    without ``round`` is refused ``malformed``; ``optional``: it acts in the round in play, as
    before rounds were named (docs/kafka.md, "Idempotency")."""
    presence_timeout_s: float = 30.0
    timer_tick_s: float = 0.25
    cold_after_s: float = 600.0
    session_timeout_ms: int = 10_000
    max_batch: int = 100
    shoe_seal_version: SealVersion = 2
    unsigned_checkpoints: str = "accept"
    """``accept``: a checkpoint without authentication (written by the release before) is
    trusted, as it must be during the rolling upgrade to this release; ``refuse``: it is not,
    and the partition is rebuilt from the start of its log (docs/kafka.md, "Upgrades")."""
    kafka_compression: str = "gzip"
    """The codec of the batches the handler writes (events, results, snapshots, the clock's
    commands): ``none``, ``gzip``, ``snappy``, ``lz4`` or ``zstd`` (docs/kafka.md,
    "Compression"). Every reader of the topics needs its codec (``bus.codecs``): gzip is the
    one every Kafka client reads without an extra library (kafkajs reads no other), and its
    bytes on the topics were within 7% of zstd's, the smallest, at the same CPU per command as
    lz4's (``tests/integration/measure_compression.py``)."""

    def __post_init__(self) -> None:
        if not self.group_id:
            object.__setattr__(
                self, "group_id", f"{self.kafka.topic_prefix}blackjack-command-handler"
            )
        if self.unsigned_checkpoints not in ("accept", "refuse"):
            raise ValueError("BLACKJACK_UNSIGNED_CHECKPOINTS is accept or refuse")
        if self.kafka_compression not in COMPRESSIONS:
            raise ValueError(
                f"BLACKJACK_KAFKA_COMPRESSION is one of {', '.join(COMPRESSIONS)}, "
                f"not {self.kafka_compression!r}"
            )
        if self.shoe_seal_version not in (1, 2):
            raise ValueError("BLACKJACK_SHOE_SEAL_VERSION is 1 or 2")
        if not self.money_retention_s > 0:
            raise ValueError("BLACKJACK_MONEY_RETENTION_S must be positive")
        if self.money_ids_max < 2:  # half of it for the buy-ins (platform_money.buy_in_share)
            raise ValueError("BLACKJACK_MONEY_IDS_MAX must be at least 2")
        if self.money_sent_at not in ("optional", "required"):
            raise ValueError("BLACKJACK_MONEY_SENT_AT is optional or required")
        if self.command_round not in ("optional", "required"):
            raise ValueError("BLACKJACK_COMMAND_ROUND is optional or required")
        if not self.cold_after_s > 0:
            raise ValueError("cold_after_s must be positive")
        if self.snapshot_every < 1 or self.dedup_window < 1 or self.max_batch < 1:
            raise ValueError("snapshot_every, dedup_window and max_batch must be positive")
        if not 0 < self.checkpoint_after_s * 1000 < REQUESTS_KEPT_MS:
            raise ValueError(
                "checkpoint_after_s must be positive and shorter than the results topic keeps "
                f"answers ({REQUESTS_KEPT_MS // 1000} s)"
            )

    @property
    def money_retention(self) -> timedelta:
        return timedelta(seconds=self.money_retention_s)

    @property
    def topics(self) -> Topics:
        return Topics(self.kafka.topic_prefix)

    @property
    def shoe_keys(self) -> ShoeKeys:
        return ShoeKeys(self.shoe_key_hex, self.accepted_shoe_keys_hex, self.retired_shoe_keys_hex)

    @property
    def compression_type(self) -> str | None:
        """``kafka_compression`` as aiokafka's producers take it."""
        return None if self.kafka_compression == "none" else self.kafka_compression

    def transactional_id(self, partition: int) -> str:
        """Stable per input partition: the next owner of the partition fences the last one."""
        return f"{self.group_id}.{self.topics.commands}.{partition}"

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> HandlerConfig:
        """The embedded defaults, with every variable that is set taking precedence."""
        settings: dict[str, Callable[[str], object]] = {
            "BLACKJACK_GROUP_ID": str,
            "BLACKJACK_SOURCE": str,
            "BLACKJACK_INSTANCE_ID": str,
            "BLACKJACK_SNAPSHOT_EVERY": int,
            "BLACKJACK_CHECKPOINT_AFTER_S": float,
            "BLACKJACK_DEDUP_WINDOW": int,
            "BLACKJACK_MONEY_RETENTION_S": float,
            "BLACKJACK_MONEY_IDS_MAX": int,
            "BLACKJACK_MONEY_SENT_AT": lambda text: text.strip().lower(),
            "BLACKJACK_COMMAND_ROUND": lambda text: text.strip().lower(),
            "BLACKJACK_PRESENCE_TIMEOUT_S": float,
            "BLACKJACK_TIMER_TICK_MS": lambda ms: float(ms) / 1000,
            "BLACKJACK_COLD_AFTER_S": float,
            "BLACKJACK_SESSION_TIMEOUT_MS": int,
            "BLACKJACK_MAX_BATCH": int,
            "BLACKJACK_SHOE_SEAL_VERSION": int,
            "BLACKJACK_UNSIGNED_CHECKPOINTS": lambda text: text.strip().lower(),
            "BLACKJACK_KAFKA_COMPRESSION": lambda text: text.strip().lower(),
        }
        fields = {
            "BLACKJACK_TIMER_TICK_MS": "timer_tick_s",
        }
        overrides = {
            fields.get(name, name.removeprefix("BLACKJACK_").lower()): env_value(
                env, name, convert, None
            )
            for name, convert in settings.items()
            if env.get(name, "").strip()
        }
        try:
            keys = load_shoe_keys(env)
            return cls(
                shoe_key_hex=keys.current,
                accepted_shoe_keys_hex=keys.accepted,
                retired_shoe_keys_hex=keys.retired,
                kafka=KafkaSettings.from_env(env),
                **overrides,  # type: ignore[arg-type]
            )
        except ConfigurationError:
            raise
        except ValueError as error:
            raise ConfigurationError(str(error)) from None
