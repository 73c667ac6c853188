"""What a ``BlackjackClient`` raises: each names what happened and what to do about it."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Self

from aiokafka.errors import KafkaTimeoutError, UnknownTopicOrPartitionError


class Resendable:
    """What an error of a command's sending names, where the command may have been written
    (``execute``'s, ``send``'s, ``send_all``'s): the ``command_id``, ``stream_id`` and
    ``sent_at`` to resend it under, answered once (each command of a ``send_all`` in
    ``commands``). None where the error came before any command was made."""

    command_id: str | None = None
    stream_id: str | None = None
    sent_at: datetime | None = None
    commands: tuple[tuple[str, str, datetime | None], ...] = ()
    """(command id, stream id, sent_at) of each command the error leaves unknown"""

    def naming(self, commands: Sequence[tuple[str, str, datetime | None]]) -> Self:
        """The error, naming ``commands`` (command id, stream id, sent_at)."""
        self.commands = tuple(commands)
        if len(self.commands) == 1:
            self.command_id, self.stream_id, self.sent_at = self.commands[0]
        return self


class ClientStopped(Resendable, RuntimeError):
    """The client was stopped (or never started, or its start failed): no command can be sent
    and no result come through it until it is started (again). ``result`` waits cut short by
    ``stop()`` get it at once. Raised by ``execute`` (or a send) for a command it had sent, or
    was sending, when the client stopped, it names the command (``Resendable``): it may have
    been applied, so resend it under that ``command_id`` and ``sent_at`` on a started client
    (answered once), never under a new id."""


class ClientAlreadyStarted(RuntimeError):
    """``start()`` on a client that is started (or being started): stop it first."""


class SendTimedOut(Resendable, KafkaTimeoutError):  # type: ignore[misc]
    """The broker did not take a command within ``send_timeout_s`` (it is away). The command
    may still be written once it is back: resend it under the same ``command_id`` and
    ``sent_at`` (answered once), never under a new id: the error names them (``Resendable``;
    a ``send_all``'s, every command's in ``commands``)."""


class AnswerLost(TimeoutError):
    """The answer to a command this client sent was deleted from the results topic before the
    client read it (retention, ``delete_records``, the topic deleted and made again): it can
    no longer come, so ``result()`` raises this at once rather than waiting out its timeout
    (a ``TimeoutError``, as the wait's end was before). Known so: the handler answers the
    commands of a partition in their order, on the same partition of the results topic, each
    answer naming its command's offset (``bj_command_offset``); the reader, past the records
    deleted unread, read the answer to a command sent after this one and never this one's.

    Resend the command under the same ``command_id`` (and ``sent_at``): the handler
    deduplicates by command id and answers a copy with the original result, applying nothing
    twice, as long as the stream has not handled ``BLACKJACK_DEDUP_WINDOW`` (1,000) other
    commands since (a money command's id: ``BLACKJACK_MONEY_RETENTION_S``, 7 days; a round's
    command names its round, so a later copy is refused ``stale_command``, never played in
    another round)."""

    def __init__(
        self, command_id: str, stream_id: str, partition: int, command_offset: int
    ) -> None:
        super().__init__(
            f"the answer to {command_id} at {stream_id} was deleted from the results topic "
            f"(partition {partition}) before this client read it: resend the command with the "
            f"same command_id {command_id} (and the same sent_at); the handler answers a copy "
            "with its original result and applies nothing twice"
        )
        self.command_id = command_id
        self.stream_id = stream_id
        self.partition = partition
        self.command_offset = command_offset


class UnreadableResult(ValueError):
    """The answer to a command, on the results topic at ``partition``/``offset``, is not a
    result this client can read (``error``): a newer service's (a status or a rejection code
    this release does not know), or a record no handler wrote. ``result()`` raises it instead
    of waiting out its timeout. What the command did is not known from it: read the stream's
    state (its events, the query API) before sending anything new; a resend under the same
    ``command_id`` gets the same answer."""

    def __init__(
        self, command_id: str, stream_id: str, partition: int, offset: int, error: str
    ) -> None:
        super().__init__(
            f"the answer to {command_id} at {stream_id} (results partition {partition}, "
            f"offset {offset}) cannot be read: {error}"
        )
        self.command_id = command_id
        self.stream_id = stream_id
        self.partition = partition
        self.offset = offset
        self.error = error


class WrongEventLoop(RuntimeError):
    """The client was used from an event loop other than the one it was started in: its
    aiokafka producer and consumer belong to that loop alone."""


class TopicNotFound(UnknownTopicOrPartitionError):  # type: ignore[misc]
    """A topic the client reads or writes is not on the cluster: the topic prefix
    (``BLACKJACK_TOPIC_PREFIX``) or the brokers are not the service's, or the service has
    not made its topics yet (``blackjack serve`` makes them at its start)."""

    def __init__(self, topic: str, bootstrap: str) -> None:
        super().__init__(
            f"the topic {topic} is not on the cluster at {bootstrap}: is the topic prefix "
            "(BLACKJACK_TOPIC_PREFIX) the service's, and has the service started once?"
        )
        self.topic = topic
        self.bootstrap = bootstrap
