"""Structured logs: one JSON object per line on stdout, with the ids of the command being
handled (``command_id``, ``correlation_id``, ``stream_id``) bound by the handler."""

from __future__ import annotations

import logging
import sys

import structlog

FASTSTREAM_LOGGER = "blackjack.faststream"


class _TopicsExist(logging.Filter):
    """FastStream warns on every start that topics are not auto-created and must exist: the
    service creates its topics itself, so the warning only misleads."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "Make sure the topics exist" not in record.getMessage()


def faststream_logger() -> logging.Logger:
    """The logger FastStream's brokers write to: through the root's JSON handler."""
    logger = logging.getLogger(FASTSTREAM_LOGGER)
    if not any(isinstance(f, _TopicsExist) for f in logger.filters):
        logger.addFilter(_TopicsExist())
    return logger


def configure_logging(level: str = "INFO") -> None:
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}")
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
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
