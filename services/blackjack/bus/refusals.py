"""What the brokers answer a principal they refuse (its password, its ACLs): no retry mends
it. The client's results reader fails for good on these (``client.health``), and the
one-shot commands and the projection worker say them in one line (``cannot_reach``)."""

from __future__ import annotations

from aiokafka.errors import (
    ClusterAuthorizationFailedError,
    GroupAuthorizationFailedError,
    KafkaError,
    SaslAuthenticationFailed,
    TopicAuthorizationFailedError,
)

REFUSED: tuple[type[KafkaError], ...] = (
    TopicAuthorizationFailedError,
    GroupAuthorizationFailedError,
    ClusterAuthorizationFailedError,
    SaslAuthenticationFailed,
)
