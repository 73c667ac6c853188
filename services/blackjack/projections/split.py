"""Another store in the workers' consumer group: the decision, without I/O or clock.

Every worker of a group folds only the partitions the group gives it, into its own store, so
the workers of one group must share one store (docs/kafka.md, docs/projections.md). Two
workers of one group on two stores (two SQLite files on two pods, a forgotten
``BLACKJACK_DB_URL``, two PostgreSQL databases) each miss the other's partitions, and each
query API answers stale wallets and histories as if they were right.

The worker commits its store's positions to the group after every batch, so the group's
committed offset of a partition is where the store of the worker that folds it stands. For a
partition this worker does NOT own, read the group's offset first and its own store's position
afterwards: on one shared store the position read second is at least the offset committed
from it earlier (a store's positions only move forward, and are committed after they are
stored), so the group is never past it. The group past this store means another store folds
that partition. The only other ways: this store was restored from a backup or rebuilt, and
its worker has not committed its first batch of the partition yet; a rolling move of the
workers from one database to another. Both end within a batch, or a rollout; hence a
partition is reported only once it has stayed behind for ``after`` seconds since the last
rebalance (``SplitWatch``), which may have given it to an owner that has not committed yet.
Partitions this worker owns are left out: it folds them from its store's position, whatever
the group says (a store behind the group there is caught up, and shows as lag).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from blackjack.projections.writer import Position

SPLIT_AFTER_S = 60.0
"""How long the group must stay past this store on a partition before it is reported: well
past a batch folded and committed by the partition's owner after a rebalance, counted from
the first comparison after it (``SplitWatch.restart``; a rebalance itself is not looked at:
the checks wait for it to end)."""


@dataclass(frozen=True, slots=True)
class Behind:
    """A partition another worker folds, whose group offset is past this worker's store."""

    topic: str
    partition: int
    stored: int | None
    """this store's position (``None``: never folded into it)"""
    committed: int
    """the group's committed offset"""

    @property
    def position(self) -> Position:
        return (self.topic, self.partition)

    @property
    def missing(self) -> int:
        """Offsets the group has committed past this store."""
        return self.committed - (self.stored or 0)

    def describe(self) -> dict[str, object]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "stored": self.stored,
            "committed": self.committed,
            "missing": self.missing,
        }


def behind_the_group(
    committed: Mapping[Position, int],
    stored: Mapping[Position, int],
    owned: Collection[Position],
) -> dict[Position, Behind]:
    """The partitions this worker does not own (``owned``) whose group offset
    (``committed``, read before ``stored``) is past this store's position (none: 0)."""
    return {
        key: Behind(key[0], key[1], stored.get(key), offset)
        for key, offset in sorted(committed.items())
        if key not in owned and offset > stored.get(key, 0)
    }


class SplitWatch:
    """Which partitions have stayed behind the group for ``after`` seconds, from one
    comparison (``behind_the_group``) to the next; ``now`` is a monotonic clock's reading."""

    def __init__(self, after: float = SPLIT_AFTER_S) -> None:
        self.after = after
        self._since: dict[Position, float] = {}

    def observe(self, now: float, behind: Mapping[Position, Behind]) -> list[Behind]:
        """The partitions behind since ``after`` seconds or more; one that caught up (or was
        given to this worker) in between starts again from zero."""
        self._since = {key: self._since.get(key, now) for key in behind}
        return [b for key, b in sorted(behind.items()) if now - self._since[key] >= self.after]

    def restart(self) -> None:
        """The group has been rebalanced: every partition starts again from zero at the next
        comparison. Who owns a partition this worker does not is not known here, so any may
        have a new owner, who has not sought it to the store and committed a batch yet (a
        store restored from a backup stays behind until then); before, a partition seen
        behind before a long rebalance was reported at the first comparison after it, a
        store that does not exist, and the pods went out of service."""
        self._since.clear()
