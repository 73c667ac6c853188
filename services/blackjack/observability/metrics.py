"""Prometheus metrics of the command handler, served at ``/metrics``.

A labelled series appears on its first ``inc()``, so Prometheus would first see a counter at 1
and ``increase()`` would miss that first occurrence: ``declare_handler`` creates, at start-up,
every series an alert fires on at its first increment (deploy/prometheus/rules.yml).
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import Counter, Gauge, Histogram

from blackjack.observability.roles import claim, declare_role

COMMANDS = Counter(
    "blackjack_commands_total",
    "Commands handled, by command type, status and rejection code",
    ["type", "status", "code"],
)
DUPLICATES = Counter(
    "blackjack_duplicate_commands_total",
    "Copies of commands already handled, by what told them: id (its id among the stream's "
    "remembered answers, a money command's retained id, a signed step's number: answered as "
    "the first, or refused as a copy) or round (a game command naming a round that is over: "
    "refused stale_command)",
    ["told_by"],
)
SIGNED_REFUSED = Counter(
    "blackjack_signed_commands_refused_total",
    "Commands carrying the service's signature header refused unauthorized, by command type: "
    "a money step signed under a key this handler does not accept (its money left in transit: "
    "blackjack redrive), one not the service's, or a copy of a step older handlers signed",
    ["type"],
)
EVENTS = Counter("blackjack_events_total", "Events written, by event type", ["type"])
TRANSACTIONS = Counter(
    "blackjack_transactions_total", "Kafka transactions, by outcome", ["outcome"]
)
TRANSACTION_SECONDS = Histogram(
    "blackjack_transaction_seconds",
    "Time from the start of a partition's transaction to its commit (the partitions of one "
    "fetch commit concurrently, so their times overlap)",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
COMMAND_LAG_SECONDS = Histogram(
    "blackjack_command_lag_seconds",
    "Time from a command's Kafka timestamp to the commit of its result",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
REBUILDS = Counter("blackjack_rebuilds_total", "Partition rebuilds, by kind", ["kind"])
REBUILD_SECONDS = Histogram(
    "blackjack_rebuild_seconds",
    "Time to rebuild a partition from its snapshot and log",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
REBUILD_EVENTS = Counter("blackjack_rebuild_events_total", "Events folded while rebuilding")
SNAPSHOTS = Counter("blackjack_snapshots_total", "Stream snapshots written")
CHECKPOINTS_DISTRUSTED = Counter(
    "blackjack_checkpoints_distrusted_total",
    "Checkpoints a rebuild did not use, by reason (forged: fails authentication; snapshots: "
    "its snapshots are not the ones it was written with; unsigned: refused by "
    "BLACKJACK_UNSIGNED_CHECKPOINTS; unreadable; missing: snapshots without one): the partition "
    "was rebuilt from its log's start",
    ["reason"],
)
SNAPSHOTS_RESEALED = Counter(
    "blackjack_snapshots_resealed_total",
    "Snapshots a rebuild found sealed under a key rotation's older key, sealed again under the "
    "current key (written with the checkpoint due at once)",
)
SHOE_KEYS = Gauge(
    "blackjack_shoe_keys",
    "The shoe keys this handler holds (1 each), by key id (as its shoes carry it) and part: "
    "current (seals and signs), accepted (opens and verifies), retired (opens only)",
    ["key_id", "role"],
)
CHECKPOINTS_UNSIGNED = Counter(
    "blackjack_checkpoints_unsigned_total",
    "Unsigned checkpoints (written by the release before) a rebuild trusted",
)
SNAPSHOT_LARGEST_BYTES = Gauge(
    "blackjack_snapshot_largest_bytes",
    "The newest snapshot of the largest stream this instance holds, sealed, in bytes (one "
    "too large to write: its record's size)",
)
SNAPSHOT_LIMIT_BYTES = Gauge(
    "blackjack_snapshot_limit_bytes",
    "The largest snapshot the snapshots topic accepts (with a larger one its partition "
    "writes no checkpoint)",
)
TIMER_COMMANDS = Counter(
    "blackjack_timer_commands_total", "Commands sent by the service's clock", ["type"]
)
TIMER_SEND_FAILURES = Counter(
    "blackjack_timer_send_failures_total",
    "Sends of the service's clock that failed (the broker away), by error; the clock's sends "
    "pause after each",
    ["error"],
)
PARTITIONS = Gauge(
    "blackjack_partitions", "Command partitions assigned to this instance, by status", ["status"]
)
COMMAND_PARTITIONS = Gauge(
    "blackjack_command_partitions",
    "Partitions of the commands topic (BLACKJACK_PARTITIONS): how many the handlers must own",
)
COMMAND_BACKLOG = Gauge(
    "blackjack_command_backlog",
    "Commands of a ready partition not yet taken by this instance (the commands topic's end "
    "offset less its position), measured every BACKLOG_EVERY_S whether or not it moves",
    ["partition"],
)
STREAMS = Gauge("blackjack_streams", "Streams held in memory by this instance")
COLD_STREAMS = Gauge(
    "blackjack_streams_cold",
    "Of those, streams idle for BLACKJACK_COLD_AFTER_S and kept as their sealed snapshot "
    "until a command needs them",
)


claim("handler", globals())  # served by the processes that run a handler only

TRANSACTION_OUTCOMES = ("committed", "aborted", "fenced")
DUPLICATES_TOLD_BY = ("id", "round")
TIMER_SEND_ERRORS = ("KafkaTimeoutError", "KafkaConnectionError", "TopicAuthorizationFailedError")
"""The errors of the clock's sends declared at 0 (a broker away, the commands topic refused):
BlackjackTimerSendsFailing counts their first failure too. Another error's series is born at
its first failure."""
SIGNED_STEP_COPY_CODES = ("transfer_already_handled", "unknown_transfer")
CHECKPOINT_DISTRUST_REASONS = ("forged", "snapshots", "unsigned", "unreadable", "missing")


def declare_handler(command_types: Iterable[str], signed_step_types: Iterable[str]) -> None:
    """A command handler runs here: say so, and create at 0 the series its alerts read."""
    declare_role("handler")
    for outcome in TRANSACTION_OUTCOMES:
        TRANSACTIONS.labels(outcome)
    for told_by in DUPLICATES_TOLD_BY:
        DUPLICATES.labels(told_by)
    for error in TIMER_SEND_ERRORS:
        TIMER_SEND_FAILURES.labels(error)
    for kind in command_types:
        COMMANDS.labels(kind, "rejected", "internal_error")
    for kind in signed_step_types:
        for code in SIGNED_STEP_COPY_CODES:
            COMMANDS.labels(kind, "rejected", code)
        SIGNED_REFUSED.labels(kind)
    for status in ("pending", "ready", "failed", "fenced"):
        PARTITIONS.labels(status)
    for reason in CHECKPOINT_DISTRUST_REASONS:
        CHECKPOINTS_DISTRUSTED.labels(reason)
