"""The results reader's health, and which read errors no retry mends."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from aiokafka.errors import KafkaError, TransactionalIdAuthorizationFailed, UnsupportedCodecError

from blackjack.bus.refusals import REFUSED

FATAL_READ_ERRORS: tuple[type[KafkaError], ...] = (
    *REFUSED,
    TransactionalIdAuthorizationFailed,
    UnsupportedCodecError,
)
"""What no retry mends: the results topic refused to this client's principal, a batch it
cannot decompress. Every other ``KafkaError`` (``retriable`` ones: a leader or coordinator
moved, a broker away, a request timed out; and the rest: a record too large, a corrupt
fetch) is retried after a backoff."""


ReaderState = Literal["not-started", "reading", "retrying", "failed", "stopped"]


@dataclass(frozen=True)
class ReaderHealth:
    """What the results reader is doing, for a platform to poll (``client.health``) or be
    told (``on_health``): ``reading``; ``retrying`` after ``failures`` fetches in a row failed
    with a passing error (``error``, the last; results come once the broker answers again,
    waits meanwhile run to their timeouts); ``failed`` for good (``error``: every wait fails
    at once with it); ``stopped``. ``since``: ``time.monotonic()`` of the change."""

    state: ReaderState
    error: str | None = None
    failures: int = 0
    since: float = 0.0

    @property
    def healthy(self) -> bool:
        return self.state == "reading"


def read_error_is_fatal(error: BaseException) -> bool:
    """Whether the results reader stops for good at ``error`` (``FATAL_READ_ERRORS``, or
    anything that is not a ``KafkaError``: ``CodecMissing``, a bug) rather than retrying."""
    return not isinstance(error, KafkaError) or isinstance(error, FATAL_READ_ERRORS)
