"""The async client for casino platforms and tests (``BlackjackClient``, in ``client``): send a
command, await its result.

- ``client``: the client itself: its start and stop, sending, results and look-backs;
- ``reader``: its results reader (the results topic followed, whatever it goes through);
- ``answers``: the answers it keeps and the callers waiting for them (no I/O);
- ``sendings``: its sendings, and which answers are known lost (no I/O);
- ``events``: the events a command wrote, read back from the events topic;
- ``errors``: what it raises; ``health``: its results reader's health; ``metrics``: its
  counters, which a platform's process exports.
"""

from blackjack.client.answers import (
    KEEP_ANSWERS_OF_A_COMMAND,
    KEEP_ANSWERS_OF_A_COMMAND_ANYWHERE,
    KEEP_OTHERS_RESULTS,
    KEEP_RESULTS,
)
from blackjack.client.client import PRODUCER_BATCH_BYTES, BlackjackClient
from blackjack.client.errors import (
    AnswerLost,
    ClientAlreadyStarted,
    ClientStopped,
    SendTimedOut,
    TopicNotFound,
    UnreadableResult,
    WrongEventLoop,
)
from blackjack.client.health import ReaderHealth, read_error_is_fatal

__all__ = [
    "KEEP_ANSWERS_OF_A_COMMAND",
    "KEEP_ANSWERS_OF_A_COMMAND_ANYWHERE",
    "KEEP_OTHERS_RESULTS",
    "KEEP_RESULTS",
    "PRODUCER_BATCH_BYTES",
    "AnswerLost",
    "BlackjackClient",
    "ClientAlreadyStarted",
    "ClientStopped",
    "ReaderHealth",
    "SendTimedOut",
    "TopicNotFound",
    "UnreadableResult",
    "WrongEventLoop",
    "read_error_is_fatal",
]
