"""What a one-shot command (``audit``, ``replay --source kafka``, ``projections rebuild``)
tells an operator when it could not reach the brokers or the store, or was refused by them:
one line and exit 2, as ``send``, ``play`` and ``redrive`` do. Before, a traceback and exit
1, which for the audit means a finding: a rotated password or a missing CA read as an audit
that failed, and an audit that failed could not be told from one that never ran."""

from __future__ import annotations

import ssl

from aiokafka.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    KafkaError,
    SaslAuthenticationFailed,
    TopicAuthorizationFailedError,
)

from blackjack.error_text import error_text
from blackjack.projections.shown_url import shown_db_url
from blackjack.projections.store import is_store_outage

KAFKA_SETTINGS = (
    "the brokers (BLACKJACK_KAFKA_BOOTSTRAP, --bootstrap), the topic prefix and the "
    "BLACKJACK_KAFKA_* security settings must be the service's, and the principal's ACLs "
    "let it read the topics"
)


def cannot_reach(error: BaseException, *, bootstrap: str, db_url: str) -> str | None:
    """The line to say for ``error`` if it is the broker's or the store's (unreachable,
    refusing the credentials, the ACLs), else None (a bug: let it raise)."""
    if is_store_outage(error):
        return f"the store {shown_db_url(db_url)} cannot serve: {error_text(error)}"
    if isinstance(error, KafkaError | ConnectionError | TimeoutError | ssl.SSLError):
        return f"Kafka at {bootstrap}: {error_text(error)} ({KAFKA_SETTINGS})"
    return None


REFUSED: tuple[type[KafkaError], ...] = (
    TopicAuthorizationFailedError,
    GroupAuthorizationFailedError,
    ClusterAuthorizationFailedError,
    SaslAuthenticationFailed,
)
"""What the brokers answer a principal they refuse (its password, its ACLs): no retry mends it."""
