"""Structured logs: one JSON object per line on stdout, with the ids of the command being
handled (``command_id``, ``correlation_id``, ``stream_id``) bound by the handler."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable

import structlog

from blackjack.configuration import ConfigurationError

FASTSTREAM_LOGGER = "blackjack.faststream"


class _FastStreamNoise(logging.Filter):
    """Lines of FastStream's that say nothing to an operator: that topics are not auto-created
    and must exist (the service creates its own), that an asyncio task's done callback runs
    (one at each stop), and "To exit, press CTRL+C" (a pod; the service logs its own start)."""

    NOISE = ("Make sure the topics exist", "is being executed...", "To exit, press CTRL+C")

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(noise in message for noise in self.NOISE)


class Throttled:
    """One of the service's own repeated lines per ``every_s`` seconds: ``due()`` says whether
    to log now and, if so, how many were left out since the last (a flood of refusals or of a
    store's failures would write one line each)."""

    def __init__(self, every_s: float) -> None:
        self.every_s = every_s
        self.logged_at = -every_s
        self.unlogged = 0

    def due(self) -> int | None:
        """The count left out since the last line when one is due now, else None (counted)."""
        now = time.monotonic()
        if now - self.logged_at < self.every_s:
            self.unlogged += 1
            return None
        left_out, self.logged_at, self.unlogged = self.unlogged, now, 0
        return left_out


class LibraryRepeats(logging.Filter):
    """Lets a library's message through once every ``every`` seconds per logger and message
    template: aiokafka logs every failed connection attempt, about 350 lines a second per
    process while a broker is down (80,000 in a fault review's three outages). The line that
    passes says how many like it were left out since the last."""

    LIBRARIES = ("aiokafka", "kafka", "uvicorn")
    """uvicorn: a line for every request it cannot read ("Invalid HTTP request received."),
    as many as a client sends."""

    def __init__(self, every: float = 10.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.every = every
        self.clock = clock
        self._seen: dict[tuple[str, str, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(self.LIBRARIES):
            return True
        # the template: every node's attempt is one; and the error it names, when its last
        # argument is an error class (aiokafka's produce retries share one template, and a
        # steady kind must not hide another)
        final = record.args[-1] if isinstance(record.args, tuple) and record.args else None
        kind = _kind(final)
        key = (record.name, str(record.msg), kind)
        now = self.clock()
        last = self._seen.get(key)
        if last is not None and now - last[0] < self.every:
            self._seen[key] = (last[0], last[1] + 1)
            return False
        self._seen[key] = (now, 0)
        if last is not None and last[1]:
            record.msg = f"{record.msg} ({last[1]} more like it left out since the last)"
        return True


class RoutineRebalanceCommits(logging.Filter):
    """aiokafka logs at error level a group offset commit that a rebalance overtook
    ("OffsetCommit failed for group ... due to group error (IllegalGenerationError ...), will
    rejoin"): a projection worker's at a peer's stop (a chaos review saw one at 3 of 10
    disruptions, where an alert on error lines would have paged). Its positions are kept in
    the read model, the commit is for dashboards (``batches._commit_for_dashboards``): a
    warning that says so. Any other commit error (authorization) stays an error."""

    ROUTINE = ("IllegalGenerationError", "UnknownMemberIdError", "RebalanceInProgressError")
    HINT = (
        " [routine at a rebalance: the group rejoins; a projection worker keeps its positions in"
        " the read model]"
    )

    def filter(self, record: logging.LogRecord) -> bool:
        final = record.args[-1] if isinstance(record.args, tuple) and record.args else None
        if (
            record.name.startswith("aiokafka.consumer")
            and record.levelno == logging.ERROR
            and "OffsetCommit failed" in str(record.msg)
            and any(kind in f"{_kind(final)} {final}" for kind in self.ROUTINE)  # the error's
        ):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
            record.msg = f"{record.msg}{self.HINT}"
            return logging.getLogger().isEnabledFor(logging.WARNING)  # a level set above it
        return True


def _kind(argument: object) -> str:
    """What error a library's line names in its last argument: a class, an exception, or
    the broker's message (aiokafka logs ``global_error or error``)."""
    if isinstance(argument, type):
        return argument.__name__
    if isinstance(argument, BaseException):
        return type(argument).__name__
    if isinstance(argument, str):
        return argument[:80]
    return ""


class ExplainedRetries(logging.Filter):
    """aiokafka's ``NotEnoughReplicasError, retrying`` reads as lost replicas. A transactional
    producer gets it on every Kafka since 3.6 when the broker verifies a write while the
    producer's previous transaction is still being completed (KAFKA-15459); the line says so,
    and where to tell the two apart (docs/operations.md)."""

    HINT = (
        " [usually not replication: the broker's transaction verification met the previous"
        " transaction still completing; retried. Under-replication shows in the brokers'"
        " UnderMinIsrPartitionCount: docs/operations.md]"
    )

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith("aiokafka.producer") and "NotEnoughReplicas" in (
            record.getMessage()
        ):
            record.msg = f"{record.msg}{self.HINT}"
        return True


def faststream_logger() -> logging.Logger:
    """The logger FastStream's brokers write to: through the root's JSON handler."""
    logger = logging.getLogger(FASTSTREAM_LOGGER)
    if not any(isinstance(f, _FastStreamNoise) for f in logger.filters):
        logger.addFilter(_FastStreamNoise())
    return logger


def _stderr_logger(*_: object) -> structlog.PrintLogger:
    return structlog.PrintLogger(sys.stderr)  # the stream of the moment, not of configuring


def log_to_stderr() -> None:
    """A command's log lines on stderr, until a service configures its own (below): a one-shot
    command's stdout is its answer, which a script reads (``blackjack send ... | jq``), and a
    warning on the way (a results reader reset, a producer replaced) was printed into it."""
    structlog.configure(logger_factory=_stderr_logger)


LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def configure_logging(level: str = "INFO") -> None:
    """JSON lines at ``level`` and above; a level not known is a setting refused (exit 2 with
    one line naming it, as every other setting: it ended in a traceback and exit 1, which
    the runbook reads as a handler's loop that died)."""
    numeric = logging.getLevelName(level.strip().upper())
    if not isinstance(numeric, int):
        raise ConfigurationError(
            f"BLACKJACK_LOG_LEVEL (or --log-level) cannot be {level!r}: one of {', '.join(LEVELS)}"
        )
    processors: list[structlog.types.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,
        structlog.processors.JSONRenderer(),
    ]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(sys.stdout),
        cache_logger_on_first_use=False,
    )
    # Library logs (aiokafka, uvicorn) go through the standard library, also as JSON lines.
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.JSONRenderer(),
            ],
            foreign_pre_chain=[
                structlog.processors.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                structlog.stdlib.add_logger_name,
            ],
        )
    )
    handler.addFilter(LibraryRepeats())
    handler.addFilter(ExplainedRetries())  # on the lines let through only
    handler.addFilter(RoutineRebalanceCommits())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
