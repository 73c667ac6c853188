"""The sums a partition keeps of its snapshots as they change (``snapshot_books``): the
digest a checkpoint signs is always the sum of the streams' shares, and the largest size the
largest, whatever the order of writes, rewrites and removals."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from blackjack.command_handler.snapshot_books import DIGEST_MODULUS, SnapshotMarks, SnapshotSizes
from blackjack.command_handler.snapshots import snapshots_digest

STREAMS = st.sampled_from([f"table-{n}" for n in range(6)])
STEPS = st.lists(st.tuples(STREAMS, st.none() | st.integers(0, 2**256 - 1)), max_size=60)


@given(STEPS)
def test_the_digest_kept_is_the_sum_of_the_shares(steps: list[tuple[str, int | None]]) -> None:
    marks, plain = SnapshotMarks(), dict[str, int]()
    for stream_id, mark in steps:
        if mark is None:
            if stream_id in plain:
                del marks[stream_id], plain[stream_id]
        else:
            marks[stream_id] = plain[stream_id] = mark
        assert marks.digest == snapshots_digest(plain.values())
        assert marks == plain
    assert SnapshotMarks(plain).digest == sum(plain.values()) % DIGEST_MODULUS


@given(STEPS)
def test_the_largest_size_kept_is_the_largest(steps: list[tuple[str, int | None]]) -> None:
    sizes, plain = SnapshotSizes(), dict[str, int]()
    for stream_id, size in steps:
        if size is None:
            if stream_id in plain:
                del sizes[stream_id], plain[stream_id]
        else:
            sizes[stream_id] = plain[stream_id] = size % 5_000_000
        assert sizes.largest() == max(plain.values(), default=0)
    assert SnapshotSizes(plain).largest() == max(plain.values(), default=0)
