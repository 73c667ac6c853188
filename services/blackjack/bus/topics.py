"""The service's topics: names (with an optional prefix), explicit configs, and their creation.

The broker never creates a topic by itself (``auto.create.topics.enable=false``): the service
creates its four topics at start-up with the configs below, and refuses to run when one exists
with another partition count. Streams are keyed to a partition by their id (murmur2, as the Java
client's default partitioner does; librdkafka's default does not: docs/kafka.md, Topics), so
changing the count would move streams to partitions whose history they do not have, and two
handlers could write one stream.

The four topics share one partition count on purpose: the commands of stream ``s`` arrive on
partition ``p = murmur2(s) % n`` of ``blackjack.commands`` and its events, results and snapshot
go to partition ``p`` of the other three, so the handler that owns command partition ``p``
rebuilds its streams from partition ``p`` alone.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass

import structlog
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError
from aiokafka.partitioner import murmur2

from blackjack.bus.settings import KafkaSettings
from blackjack.bus.topic_ids import TopicIdsUnsupported, topic_state
from blackjack.configuration import ConfigurationError
from blackjack.error_text import broker_error_name

log = structlog.get_logger("blackjack.bus")

DAY_MS = 24 * 60 * 60 * 1000
REQUESTS_KEPT_MS = 7 * DAY_MS
"""How long the commands and results topics keep a record."""
SNAPSHOT_MAX_BYTES = 4 * 1024 * 1024
SNAPSHOT_SEGMENT_BYTES = 4 * SNAPSHOT_MAX_BYTES
SNAPSHOT_SEGMENT_MS = 60 * 60 * 1000
"""The snapshots topic's segments: at most 16 MiB and an hour. Compaction never touches the
segment being written, and a takeover reads the whole partition of snapshots (the newest of
each stream is wherever the stream last changed), so the active segment is what bounds a
rebuild's read. With the broker's defaults (1 GiB, 7 days) a busy partition's snapshots
were read in full, every checkpoint since the last roll: 30 MB after four minutes of a
soak, on the way to a gigabyte a partition (docs/operations.md, "What grows")."""
RECORD_MAX_BYTES = 1_000_000
"""The largest record the handler writes to the events, results and commands topics: under
the broker's default max.message.bytes (1,048,588), with room for the batch's own header. A
record the broker refuses would fail its transaction on every retry and stop the partition."""
MESSAGE_MAX_BYTES = 1_048_588
"""Those topics' ``max.message.bytes``, set when the service creates them (Kafka's default,
stated): a transaction's records go out in one batch of up to ``RECORD_MAX_BYTES``, which
then fits whatever a cluster's own ``message.max.bytes`` default is set to."""

_UNKNOWN_TOPIC = 3
_TOPIC_EXISTS = 36


class TopicMismatch(ConfigurationError):
    """A topic exists with a shape the service must not run against: a deployment's
    settings and its topics disagree (said in one line, exit 2, as any setting it cannot use)."""


@dataclass(frozen=True)
class Topics:
    prefix: str = ""

    @property
    def commands(self) -> str:
        return f"{self.prefix}blackjack.commands"

    @property
    def events(self) -> str:
        return f"{self.prefix}blackjack.events"

    @property
    def results(self) -> str:
        return f"{self.prefix}blackjack.command-results"

    @property
    def snapshots(self) -> str:
        return f"{self.prefix}blackjack.snapshots"

    def all(self) -> tuple[str, str, str, str]:
        return (self.commands, self.events, self.results, self.snapshots)


def topic_configs(topics: Topics, settings: KafkaSettings) -> dict[str, dict[str, str]]:
    """Every config the service sets on its topics, stated explicitly."""
    common = {
        "min.insync.replicas": str(settings.min_insync_replicas),
        "unclean.leader.election.enable": "false",
        "message.timestamp.type": "CreateTime",
        "max.message.bytes": str(MESSAGE_MAX_BYTES),
    }
    kept = str(REQUESTS_KEPT_MS)
    return {
        # Commands and their results are a request log: kept a week, then deleted. A command
        # is stamped with the broker's time of receipt, which says whether a decision on a
        # shared table's clock came in time (a producer's own time is not trusted for that).
        topics.commands: {
            **common,
            "cleanup.policy": "delete",
            "retention.ms": kept,
            "message.timestamp.type": "LogAppendTime",
        },
        topics.results: {**common, "cleanup.policy": "delete", "retention.ms": kept},
        # The events are the source of truth: never deleted, never compacted.
        topics.events: {
            **common,
            "cleanup.policy": "delete",
            "retention.ms": "-1",
            "retention.bytes": "-1",
        },
        # The newest snapshot of each stream, and each partition's checkpoint, by key.
        topics.snapshots: {
            **common,
            "cleanup.policy": "compact",
            "max.message.bytes": str(SNAPSHOT_MAX_BYTES),
            "min.cleanable.dirty.ratio": "0.1",
            "segment.bytes": str(SNAPSHOT_SEGMENT_BYTES),
            "segment.ms": str(SNAPSHOT_SEGMENT_MS),
        },
    }


def partition_for(stream_id: str, partitions: int) -> int:
    """The partition of a stream: the Kafka default partitioner's murmur2 of the key."""
    hashed: int = murmur2(stream_id.encode())
    return (hashed & 0x7FFFFFFF) % partitions


async def ensure_topics(settings: KafkaSettings, topics: Topics) -> dict[str, int]:
    """Create the missing topics, then check that every one has the configured partitions.

    Returns each topic's partition count. Raises ``TopicMismatch`` when a topic exists with
    another count: the handler must not run on it.
    """
    admin = AIOKafkaAdminClient(**settings.client_options(), client_id="blackjack-admin")
    await admin.start()
    try:
        configs = topic_configs(topics, settings)
        counts = await _partition_counts(admin, topics.all())
        missing = [name for name in topics.all() if name not in counts]
        if missing:
            response = await admin.create_topics(
                [
                    NewTopic(
                        name,
                        settings.partitions,
                        settings.replication_factor,
                        topic_configs=configs[name],
                    )
                    for name in missing
                ]
            )
            for error in response.to_object()["topic_errors"]:
                if error["error_code"] not in (0, _TOPIC_EXISTS):  # another instance raced us
                    raise TopicMismatch(
                        f"cannot create {error['topic']}: {error['error_message']} "
                        f"(error {error['error_code']})"
                    )
            counts = await _wait_for_metadata(admin, topics.all())
        _check_counts(counts, topics.all(), settings.partitions)
        await wait_for_every_broker(admin, counts)
    finally:
        await admin.close()
    return counts


def _check_counts(counts: Mapping[str, int], names: tuple[str, ...], expected: int) -> None:
    for name in names:
        if name not in counts:
            raise TopicMismatch(f"{name} does not exist after creating it")
        if counts[name] != expected:
            raise TopicMismatch(
                f"{name} has {counts[name]} partitions, the service is configured for "
                f"{expected}: streams are keyed to partitions, so the count must never change "
                "(set BLACKJACK_PARTITIONS to the existing count)"
            )


async def _wait_for_metadata(
    admin: AIOKafkaAdminClient, names: tuple[str, ...], timeout: float = 30.0
) -> dict[str, int]:
    """Created topics reach the broker's metadata cache a moment after the create returns."""
    deadline = time.monotonic() + timeout
    while True:
        counts = await _partition_counts(admin, names)
        if len(counts) == len(names) or time.monotonic() > deadline:
            return counts
        await asyncio.sleep(0.1)


async def wait_for_every_broker(
    admin: AIOKafkaAdminClient, counts: Mapping[str, int | None], timeout: float = 30.0
) -> None:
    """Return once every broker has each topic with its partitions, or (a count of None) has
    it no more (or after ``timeout``).

    Each broker answers a client's metadata request from its own copy, which takes a topic
    just made in its own time, after the controller's answer and after the broker that
    answered ``describe_topics``. On a cluster a client that asks one that has not taken it
    yet finds no topic: the command handlers' group leader assigned no partition of it, and a
    handler sat ready with none until its consumer's next metadata refresh (5 minutes:
    1 handler of 4 started on topics just made, on three nodes); the client never learnt the
    results topic's id. A broker that cannot be reached (stopped, not fenced yet) is not
    waited for; one older than Kafka 2.8 (no ``bus.topic_ids``) ends the wait."""
    client = admin._client  # aiokafka's admin keeps its AIOKafkaClient there
    deadline = time.monotonic() + timeout
    while True:
        lagging = []
        for node in sorted(broker.nodeId for broker in client.cluster.brokers()):
            for name, count in counts.items():
                try:
                    state = await topic_state(client, name, node)
                except TopicIdsUnsupported:
                    return
                except KafkaError:
                    break  # (not reachable now)
                has = None if state is None else len(state.partitions)
                if has != count:
                    lagging.append((node, name))
        if not lagging:
            return
        if time.monotonic() > deadline:
            log.warning("topics not on every broker yet", missing=lagging)
            return
        await asyncio.sleep(0.05)  # each broker takes the metadata in its own time


async def _partition_counts(admin: AIOKafkaAdminClient, names: tuple[str, ...]) -> dict[str, int]:
    counts = {}
    for topic in await admin.describe_topics(list(names)):
        if topic["error_code"] == _UNKNOWN_TOPIC:
            continue
        if topic["error_code"] != 0:
            raise TopicMismatch(
                f"cannot describe {topic['topic']}: {broker_error_name(topic['error_code'])} "
                "(an authorization error: the principal's ACLs)"
            )
        counts[topic["topic"]] = len(topic["partitions"])
    return counts


async def delete_topics(settings: KafkaSettings, topics: Topics) -> None:
    """Remove the four topics (the load test and the drills remove theirs so, and tests their
    own prefixed ones), and return once no broker has them: the controller answers before
    every broker took the deletion, and a broker that had not still listed them."""
    admin = AIOKafkaAdminClient(**settings.client_options(), client_id="blackjack-admin")
    await admin.start()
    try:
        existing = set(await admin.list_topics())
        doomed = [name for name in topics.all() if name in existing]
        if doomed:
            await admin.delete_topics(doomed)
            await wait_for_every_broker(admin, dict.fromkeys(doomed))
    finally:
        await admin.close()
