"""What a one-shot command (``audit``, ``replay --source kafka``, ``projections rebuild``)
tells an operator when it could not reach the brokers or a store, or was refused by them:
one line and exit 2, as ``send``, ``play`` and ``redrive`` do. Before, a traceback and exit
1, which for the audit means a finding: a rotated password or a missing CA read as an audit
that failed, and an audit that failed could not be told from one that never ran."""

from __future__ import annotations

import ssl
from collections.abc import Sequence

from aiokafka.errors import (
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    NoBrokersAvailable,
    RequestTimedOutError,
)
from sqlalchemy import exc as sql_errors

from blackjack.bus.refusals import REFUSED
from blackjack.error_text import error_text
from blackjack.projections.store import is_store_outage

KAFKA_SETTINGS = (
    "the brokers (BLACKJACK_KAFKA_BOOTSTRAP, --bootstrap), the topic prefix and the "
    "BLACKJACK_KAFKA_* security settings must be the service's, and the principal's ACLs "
    "let it read the topics"
)

KAFKA_NOT_REACHED: tuple[type[KafkaError], ...] = (
    KafkaConnectionError,
    KafkaTimeoutError,
    NoBrokersAvailable,
    RequestTimedOutError,
    *REFUSED,
)
"""The brokers not reached, or refusing: not a record's fault (a corrupt record, say, is
one for the audit to report, not a setting)."""


def cannot_reach(error: BaseException, *, bootstrap: str, stores: Sequence[str]) -> str | None:
    """The line to say for ``error`` if the brokers or one of ``stores`` (as shown: no
    password) were not reached or refused the command, else None (a bug, or a finding: let
    it raise). A bare connection, timeout or TLS error names both sides, as either may have
    raised it."""
    if isinstance(error, KAFKA_NOT_REACHED):
        return f"Kafka at {bootstrap}: {error_text(error)} ({KAFKA_SETTINGS})"
    named = " or ".join(stores)
    if isinstance(error, sql_errors.DBAPIError) and is_store_outage(error):
        return f"the store {named} cannot serve: {_first_line(error_text(error))}"
    if isinstance(error, ConnectionError | TimeoutError | ssl.SSLError):
        return (
            f"Kafka at {bootstrap}, or the store {named}, not reached: {error_text(error)} "
            f"({KAFKA_SETTINGS}; BLACKJACK_DB_URL, --db-url the store)"
        )
    return None


def _first_line(text: str) -> str:
    return text.splitlines()[0] if text else text
