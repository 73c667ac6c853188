"""The snapshots topic's configs bound what a takeover reads.

A rebuild reads its partition of ``blackjack.snapshots`` from offset 0 to the end (the newest
snapshot of a stream is wherever the stream last changed). Compaction keeps one snapshot a
stream, but never cleans the segment being written: with the broker's defaults (1 GiB,
7 days) every checkpoint since the last roll was read, and a soak's busy partition reached
30 MB in four minutes. The service states the segment's bounds itself."""

from __future__ import annotations

from blackjack.bus.settings import KafkaSettings
from blackjack.bus.topics import SNAPSHOT_MAX_BYTES, Topics, topic_configs

MiB = 1024 * 1024
HOUR_MS = 60 * 60 * 1000


def _snapshots() -> dict[str, str]:
    topics = Topics("p.")
    return topic_configs(topics, KafkaSettings(topic_prefix="p."))[topics.snapshots]


def test_the_snapshots_topic_is_compacted_with_a_bounded_active_segment() -> None:
    config = _snapshots()
    assert config["cleanup.policy"] == "compact"
    # what compaction cannot clean yet is bounded in size and in age...
    assert int(config["segment.bytes"]) <= 16 * MiB
    assert int(config["segment.ms"]) <= HOUR_MS
    # ...and the cleaner takes a closed segment soon after it is closed
    assert float(config["min.cleanable.dirty.ratio"]) <= 0.1


def test_the_largest_snapshot_fits_in_a_segment() -> None:
    """A batch larger than ``segment.bytes`` is refused by the broker: a checkpoint with the
    largest snapshot allowed must still fit, with room for the rest of its transaction."""
    config = _snapshots()
    assert int(config["max.message.bytes"]) == SNAPSHOT_MAX_BYTES
    assert int(config["segment.bytes"]) >= 2 * SNAPSHOT_MAX_BYTES
