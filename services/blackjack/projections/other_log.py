"""A read model folded from another log: a store whose stored positions lie past the end of
the topic's partitions.

A store's position in a partition is the offset after the last record it folded, so on the
log it was folded from it never passes the partition's end (read after the position: ends
only grow). A position past the end means the store was folded from another or a longer
log: the topic deleted and created again, a store restored beside the wrong cluster, a
``BLACKJACK_TOPIC_PREFIX`` naming another deployment's topic. Nothing such a store holds can
be compared with this log, nor folded on from it: a worker sought past the end has its
position reset by the broker to the partition's start (``auto_offset_reset``) and skips the
records below the stored position, folding the rest of another log on top; a rebuild or an
audit waits for records that never come. So the commands that compare a store with the log
(``blackjack audit``, ``blackjack projections rebuild``) refuse such a store at once (exit 2),
and a worker given such a partition stops (``FoldHealth.log_mismatched``) having folded
nothing.

An end of 0 (or a partition the broker does not list) is read again before it counts: a
broker can answer before it knows a partition (a transient metadata gap), and a store at 0,
or with no position, is never past any end.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from blackjack.configuration import ConfigurationError

Position = tuple[str, int]
"""(topic, partition)"""

END_READS = 3
"""How many times an end of 0, or a partition not listed, is read before it counts"""
END_READ_WAIT_S = 1.0
"""between those reads"""


@dataclass(frozen=True, slots=True)
class PastTheEnd:
    """A partition whose stored position lies past its end on the log."""

    topic: str
    partition: int
    stored: int
    end: int | None
    """the partition's end offset; None when the topic has no such partition"""
    other_topic: bool = False
    """a position of another topic than the one read (``folded_from_other_topics``)"""

    @property
    def unconfirmed(self) -> bool:
        """An end that may be a metadata gap rather than the log's: read again first."""
        return not self.end and not self.other_topic

    def describe(self) -> str:
        where = f"{self.topic}[{self.partition}]"
        if self.other_topic:
            return f"{where} stored at {self.stored}, a topic this one does not read"
        if self.end is None:
            return f"{where} stored at {self.stored}, a partition the topic does not have"
        return f"{where} stored at {self.stored}, past its end {self.end}"

    def fields(self) -> dict[str, object]:
        """For a log line."""
        return {
            "partition": f"{self.topic}[{self.partition}]",
            "stored": self.stored,
            "end": self.end,
        }


def past_the_end(stored: Mapping[Position, int], ends: Mapping[Position, int]) -> list[PastTheEnd]:
    """The partitions of ``stored`` (the store's positions) past their ``ends`` (the topic's
    end offsets; a partition missing from them is not in the topic). A position of 0 is past
    nothing."""
    return [
        PastTheEnd(topic, partition, offset, ends.get((topic, partition)))
        for (topic, partition), offset in sorted(stored.items())
        if offset > ends.get((topic, partition), 0)
    ]


def folded_from_other_topics(stored: Mapping[Position, int], topic: str) -> list[PastTheEnd]:
    """The store's positions of another topic than ``topic``, the one read: a store folds
    one log, and positions are kept by topic name, so one folded from another deployment's
    topic (another ``BLACKJACK_TOPIC_PREFIX``) is past nothing of this one: a worker folded
    the new log on top of the old read model, ready, and served both (a newcomer's review:
    ``var/`` kept, the prefix changed). A position of 0 folded nothing."""
    return [
        PastTheEnd(name, partition, offset, None, other_topic=True)
        for (name, partition), offset in sorted(stored.items())
        if name != topic and offset > 0
    ]


async def confirmed_past_the_end(
    stored: Mapping[Position, int],
    read_ends: Callable[[], Awaitable[Mapping[Position, int]]],
    *,
    reads: int | None = None,
    wait: float | None = None,
) -> list[PastTheEnd]:
    """``past_the_end`` of ``stored`` against the ends ``read_ends`` reads (after the store's
    positions were read: ends only grow), those of an end of 0 or of no partition read again
    up to ``reads`` times in all (``END_READS``), ``wait`` apart (``END_READ_WAIT_S``); a
    position past an end above 0 counts at once."""
    past = past_the_end(stored, await read_ends())
    for _ in range((END_READS if reads is None else reads) - 1):
        if not any(found.unconfirmed for found in past):
            break
        await asyncio.sleep(END_READ_WAIT_S if wait is None else wait)
        past = past_the_end(stored, await read_ends())
    return past


class StoreOfAnotherLog(ConfigurationError):
    """The read model's stored positions lie past the end of the topic's partitions: it was
    folded from another or a longer log. Exit 2 (``blackjack projections run``, ``blackjack
    audit``, ``blackjack projections rebuild``); ``blackjack serve`` exits 1."""

    def __init__(self, past: list[PastTheEnd], store: str = "") -> None:
        self.past = list(past)
        named = f"the read model {store}" if store else "the read model"
        super().__init__(
            f"{named} was folded from another or a longer log: its positions "
            "lie past the end of the topic's partitions, or are another topic's ("
            + "; ".join(found.describe() for found in self.past)
            + "), as after the topic was deleted and created again, or with the topic prefix "
            "of another deployment (BLACKJACK_TOPIC_PREFIX); nothing compared or folded. Point "
            "BLACKJACK_DB_URL (--db-url) at the store of this log, or fold this log into a new "
            "store (blackjack projections rebuild --db-url NEW_DB_URL)"
        )
