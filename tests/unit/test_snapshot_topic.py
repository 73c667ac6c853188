"""The snapshots topic's configs bound what a takeover reads.

A rebuild reads its partition of ``blackjack.snapshots`` from offset 0 to the end (the newest
snapshot of a stream is wherever the stream last changed). Compaction keeps one snapshot a
stream, but never cleans the segment being written: with the broker's defaults (1 GiB,
7 days) every checkpoint since the last roll was read, and a soak's busy partition reached
30 MB in four minutes. The service states the segment's bounds itself."""

from __future__ import annotations

import re
from pathlib import Path

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


def _alter_commands() -> list[str]:
    text = (Path(__file__).parents[2] / "docs" / "kafka.md").read_text()
    return [" ".join(c.split()) for c in re.findall(r"`(kafka-configs\.sh [^`]*)`", text)]


def test_the_docs_alter_existing_topics_with_a_command_that_runs() -> None:
    """Topics created before a release keep their configs; docs/kafka.md gives the command.
    Without --bootstrap-server, Kafka 3.9's kafka-configs (the broker deploy/kafka runs)
    takes the ZooKeeper mode and refuses: "Invalid entity type topics, the entity type must
    be one of users, brokers with a --zookeeper argument" (exit 1)."""
    commands = _alter_commands()
    assert commands
    for command in commands:
        assert "--bootstrap-server " in command, command
    configs = _snapshots()
    wanted = f"segment.bytes={configs['segment.bytes']},segment.ms={configs['segment.ms']}"
    assert any("blackjack.snapshots" in c and wanted in c for c in commands), commands
