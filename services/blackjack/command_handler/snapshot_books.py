"""What a partition keeps of its streams' newest snapshots: each one's share of the digest a
checkpoint signs, and each one's size. One of each for every stream the partition ever had
(an idle table's, a wallet's), so what is read of them (the digest's sum, the largest size)
is kept as they change. Worked out again each time, it grew with the partition's history: at
a million streams, 21.6 ms to sum the shares at each checkpoint and 12.6 ms to find the
largest size each time the partitions' gauges were published; kept, microseconds a
snapshot."""

from __future__ import annotations

from collections import UserDict
from collections.abc import Mapping

DIGEST_MODULUS = 2**256
"""The digest of a partition's snapshots is the sum of their shares, modulo this."""


class SnapshotMarks(UserDict[str, int]):
    """Each stream's newest snapshot record's share of the digest
    (``CheckpointSigner.element``), and ``digest``, their sum, kept as they change."""

    def __init__(self, marks: Mapping[str, int] | None = None) -> None:
        self.digest = 0
        super().__init__(marks)

    def __setitem__(self, stream_id: str, mark: int) -> None:
        self.digest = (self.digest - self.data.get(stream_id, 0) + mark) % DIGEST_MODULUS
        self.data[stream_id] = mark

    def __delitem__(self, stream_id: str) -> None:
        self.digest = (self.digest - self.data.pop(stream_id)) % DIGEST_MODULUS


class SnapshotSizes(UserDict[str, int]):
    """The size of each stream's newest snapshot, sealed (its topic has a size limit), and
    the largest of them (``largest``): looked for again only when the largest one shrinks."""

    def __init__(self, sizes: Mapping[str, int] | None = None) -> None:
        self._largest, self._stale = 0, False
        super().__init__(sizes)

    def __setitem__(self, stream_id: str, size: int) -> None:
        before = self.data.get(stream_id)
        self.data[stream_id] = size
        if size >= self._largest:
            self._largest = size
        elif before == self._largest:
            self._stale = True

    def __delitem__(self, stream_id: str) -> None:
        if self.data.pop(stream_id) == self._largest:
            self._stale = True

    def largest(self) -> int:
        if self._stale:
            self._largest, self._stale = max(self.data.values(), default=0), False
        return self._largest
