"""A client's sendings of its commands, and what became of each one's answer (no I/O).

The handler answers the commands of a partition in their order, on the same partition of the
results topic, each answer naming its command's offset (``bj_command_offset``). So once the
reader has read the answer to the command at some offset, every command before it in that
partition was answered before it: a sending of this run with no answer, made before the reader
last found answers there deleted unread (a gap), had its answer among them, and can be told
lost (``AnswerLost``) at once rather than waited for until its timeout."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

import structlog

from blackjack.client.answers import KEEP_RESULTS
from blackjack.client.errors import AnswerLost

log = structlog.get_logger("blackjack.client")

ANSWERED_EARLY = 10_000
"""How many answers the reader read last to commands not known as sent (others', or this
client's whose ack has not come yet) it keeps the command offsets of."""


@dataclass
class Sending:
    """One sending of a command by this client: where it went (``partition`` and ``offset``
    of the commands topic, once the broker took it), in which run, and its answer's fate."""

    stream_id: str
    sent_at: datetime
    run: int
    seq: int
    """the client's count of sendings when it was made: a gap in the results observed after
    it may have held its answer, one observed before cannot"""
    partition: int | None = None
    offset: int | None = None
    state: Literal["open", "answered", "lost"] = "open"


class Sendings:
    """Every sending of this client (the last ``KEEP_RESULTS`` command ids), and, for this
    run (since the last ``start()``), which are still waiting for their answer."""

    def __init__(self) -> None:
        self.sent: OrderedDict[str, list[Sending]] = OrderedDict()
        """Per command id, each sending by this client: an answer to one sent in an earlier
        run (before a ``stop()``) is looked back for; one this run's reader knows deleted
        unread fails its wait (``AnswerLost``)."""
        self.count = 0
        self.run = 0
        self._open: OrderedDict[tuple[int, int], tuple[str, Sending]] = OrderedDict()
        """This run's sendings not answered yet, by (partition, offset) of the commands
        topic: the answer names that offset, on that partition of the results topic."""
        self._answered_early: OrderedDict[tuple[int, int], None] = OrderedDict()
        """The last (partition, offset) of the commands topic whose answers the reader read
        that no sending was known for yet: an answer may come before the broker's ack."""
        self._gap_at: dict[int, int] = {}
        """Per partition of the results topic, ``count`` when the reader last found answers
        there deleted unread (or the topic made again) in this run."""

    def new_run(self) -> None:
        """A start: the earlier runs' answers are a look-back's, not the reader's."""
        self.run += 1
        self._open = OrderedDict()
        self._answered_early = OrderedDict()
        self._gap_at = {}

    def note(self, command_id: str, stream_id: str, sent_at: datetime) -> Sending:
        """A sending of ``command_id``: its answer is this run's reader's, or, after a
        restart, looked back for from its ``sent_at``."""
        sending = Sending(stream_id, sent_at, self.run, self.count)
        self.count += 1
        sendings = self.sent.setdefault(command_id, [])
        sendings.append(sending)
        del sendings[:-8]  # (a command sent again and again: its latest sendings)
        self.sent.move_to_end(command_id)
        while len(self.sent) > KEEP_RESULTS:
            self.sent.popitem(last=False)
        return sending

    def placed(self, command_id: str, sending: Sending, partition: int, offset: int) -> None:
        """Where the broker wrote a sending: its answer names that offset, on that partition
        of the results topic."""
        if sending.run != self.run:
            return  # (stopped meanwhile: the next run's reader did not see it sent)
        sending.partition, sending.offset = partition, offset
        key = (partition, offset)
        if key in self._answered_early:
            del self._answered_early[key]
            sending.state = "answered"  # read before the ack came
            return
        self._open[key] = (command_id, sending)
        while len(self._open) > KEEP_RESULTS:
            self._open.popitem(last=False)

    def gap(self, partition: int) -> None:
        """The reader found answers deleted unread in ``partition``: any sending of this run so
        far may have had its answer among them."""
        self._gap_at[partition] = self.count

    def only_gaps_in(self, partitions: Iterable[int]) -> None:
        """The results topic made again with ``partitions``: a gap in each of them (any answer
        of this run so far may have been in the old topic unread), none elsewhere (a gap in a
        partition the new topic lacks told of records no longer there)."""
        self._gap_at = dict.fromkeys(partitions, self.count)

    def answered_through(self, partition: int, command_offset: int) -> list[str]:
        """The handler answered the command at ``command_offset`` of the commands topic's
        ``partition``: the ids of the commands whose sendings this tells lost (sent before
        a gap there, before that command, and unanswered), in their order."""
        answered = self._open.pop((partition, command_offset), None)
        if answered is not None:
            answered[1].state = "answered"
        else:  # another client's, or one whose ack has not come yet
            self._answered_early[(partition, command_offset)] = None
            while len(self._answered_early) > ANSWERED_EARLY:
                self._answered_early.popitem(last=False)
        gap = self._gap_at.get(partition)
        if gap is None:
            return []
        before = [
            (key, command_id, sending)
            for key, (command_id, sending) in self._open.items()
            if key[0] == partition and sending.seq < gap
        ]
        lost = [
            (key, command_id, sending)
            for key, command_id, sending in before
            if key[1] < command_offset
        ]
        if len(lost) == len(before):  # none sent before the gap is left to tell
            del self._gap_at[partition]
        for key, command_id, sending in lost:
            del self._open[key]
            sending.state = "lost"
            log.error(
                "the answer to a command this client sent was deleted unread; its wait fails "
                "(AnswerLost: resend it under the same command id)",
                command_id=command_id,
                stream_id=sending.stream_id,
                partition=partition,
                command_offset=sending.offset,
                answered_after=command_offset,
            )
        return list(dict.fromkeys(command_id for _, command_id, _ in lost))

    def sent_this_run(self, command_id: str, stream_id: str | None) -> bool:
        """Whether ``command_id`` (at ``stream_id``, or anywhere) was sent since this start:
        its answer is the reader's."""
        return bool(self._this_run(command_id, stream_id))

    def lost(self, command_id: str, stream_id: str | None) -> AnswerLost | None:
        """``AnswerLost`` when a sending of this run (to ``stream_id``, or anywhere) was
        answered into records deleted unread, and no other is still open; else None."""
        mine = self._this_run(command_id, stream_id)
        lost = [sending for sending in mine if sending.state == "lost"]
        if not lost or any(sending.state == "open" for sending in mine):
            return None
        last = lost[-1]
        assert last.partition is not None and last.offset is not None
        return AnswerLost(command_id, last.stream_id, last.partition, last.offset)

    def _this_run(self, command_id: str, stream_id: str | None) -> list[Sending]:
        """The sendings of ``command_id`` (to ``stream_id``, or anywhere) since this start."""
        return [
            sending
            for sending in self.sent.get(command_id, [])
            if sending.run == self.run and stream_id in (None, sending.stream_id)
        ]
