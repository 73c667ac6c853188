"""Reading ``blackjack.events`` from the start, outside any consumer group: to rebuild a read
model from offset 0 (the audit's scratch store, ``blackjack projections rebuild``) and to
collect one table's events for ``blackjack replay --source kafka``."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Mapping

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from blackjack.bus.codecs import require_codecs
from blackjack.bus.header_names import read_header_names_not_utf8
from blackjack.bus.settings import PLAINTEXT, KafkaSecurity
from blackjack.configuration import ConfigurationError
from blackjack.error_text import broker_error_name
from blackjack.messages import wire
from blackjack.projections.other_log import (
    StoreOfAnotherLog,
    confirmed_past_the_end,
    folded_from_other_topics,
)
from blackjack.projections.writer import Position, ProjectionWriter, Record

FETCH_MS = 500


async def read_topic(
    bootstrap: str,
    topic: str,
    on_records: Callable[[list[Record]], object],
    *,
    start: Mapping[int, int] | None = None,
    stop: Mapping[int, int] | None = None,
    batch: int = 500,
    timeout: float = 120.0,
    security: KafkaSecurity = PLAINTEXT,
) -> dict[Position, int]:
    """Hand every committed record of ``topic`` from ``start`` (partition -> offset, default
    the beginning) up to ``stop`` (exclusive; default the end as of now) to ``on_records``,
    in order within each partition. Returns the end offsets of the topic.

    ``StoreOfAnotherLog`` before anything is read when ``start`` or ``stop`` lies past the end
    of a partition (``other_log``): such records never come."""
    return await read_consumer_records(
        bootstrap,
        topic,
        lambda records: on_records([Record.of(record) for record in records]),
        start=start,
        stop=stop,
        batch=batch,
        timeout=timeout,
        security=security,
    )


async def read_consumer_records(
    bootstrap: str,
    topic: str,
    on_records: Callable[[list[ConsumerRecord]], object],
    *,
    start: Mapping[int, int] | None = None,
    stop: Mapping[int, int] | None = None,
    batch: int = 500,
    timeout: float = 120.0,
    security: KafkaSecurity = PLAINTEXT,
) -> dict[Position, int]:
    """``read_topic``, handing aiokafka's records as fetched (their headers too); one with a
    header name that is not UTF-8 too (``bus.header_names``), which aiokafka raised at;
    ``StoreOfAnotherLog`` as ``read_topic``'s."""
    require_codecs()  # a batch a producer compressed: read, or not read at all (bus.codecs)
    read_header_names_not_utf8()
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        **security.client_options(),
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
    )
    try:
        await consumer.start()  # (stopped when it fails: "Unclosed AIOKafkaConsumer" else)
        async with asyncio.timeout(timeout):
            partitions = await topic_partitions(bootstrap, topic, security)
            consumer.assign(partitions)
            ends = await consumer.end_offsets(partitions)
            await _refuse_past_the_end(consumer, partitions, ends, start, stop)
            targets = {
                tp: ends[tp] if stop is None else stop.get(tp.partition, 0) for tp in partitions
            }
            for tp in partitions:
                offset = (start or {}).get(tp.partition)
                if offset is None:
                    await consumer.seek_to_beginning(tp)
                else:
                    consumer.seek(tp, offset)
            remaining = {tp for tp in partitions if await consumer.position(tp) < targets[tp]}
            while remaining:
                fetched = await consumer.getmany(*remaining, timeout_ms=FETCH_MS, max_records=batch)
                records = [
                    record
                    for tp, batch_records in fetched.items()
                    for record in _below(batch_records, targets[tp])
                ]
                if records:
                    result = on_records(records)
                    if asyncio.iscoroutine(result):
                        await result
                for tp in list(remaining):
                    if await consumer.position(tp) >= targets[tp]:
                        remaining.discard(tp)
                        consumer.pause(tp)
        return {(tp.topic, tp.partition): offset for tp, offset in ends.items()}
    finally:
        await consumer.stop()


async def _refuse_past_the_end(
    consumer: AIOKafkaConsumer,
    partitions: list[TopicPartition],
    ends: dict[TopicPartition, int],
    start: Mapping[int, int] | None,
    stop: Mapping[int, int] | None,
) -> None:
    """``StoreOfAnotherLog`` when an offset to read from or up to lies past its partition's
    end: a store's positions from another log, waited for until the timeout before."""
    topic = partitions[0].topic if partitions else ""
    wanted: dict[Position, int] = {}
    for offsets in (start or {}, stop or {}):
        for partition, offset in offsets.items():
            key = (topic, partition)
            wanted[key] = max(wanted.get(key, 0), offset)
    first = {(tp.topic, tp.partition): end for tp, end in ends.items()}
    reads = iter([first])

    async def read_ends() -> dict[Position, int]:
        again = next(reads, None)
        if again is not None:
            return again
        return {
            (tp.topic, tp.partition): end
            for tp, end in (await consumer.end_offsets(partitions)).items()
        }

    past = await confirmed_past_the_end(wanted, read_ends)
    if past:
        raise StoreOfAnotherLog(past)


async def topic_ends(
    bootstrap: str, topic: str, security: KafkaSecurity = PLAINTEXT, timeout: float = 120.0
) -> dict[Position, int]:
    """The end offsets of every partition of ``topic`` (read_committed: the last stable
    offsets); ``UnknownTopic`` when it does not exist."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        **security.client_options(),
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_committed",
    )
    try:
        await consumer.start()  # (stopped when it fails: "Unclosed AIOKafkaConsumer" else)
        async with asyncio.timeout(timeout):
            partitions = await topic_partitions(bootstrap, topic, security)
            ends = await consumer.end_offsets(partitions)
        return {(tp.topic, tp.partition): end for tp, end in ends.items()}
    finally:
        await consumer.stop()


async def refuse_a_store_of_another_log(
    stored: Mapping[Position, int],
    bootstrap: str,
    topic: str,
    security: KafkaSecurity = PLAINTEXT,
    store: str = "",
) -> None:
    """``StoreOfAnotherLog`` when the store's positions ``stored`` (read before this call) of
    ``topic`` lie past the end of its partitions (``other_log``); the broker's ends read
    again before an end of 0 or a missing partition counts."""
    others = folded_from_other_topics(stored, topic)
    if others:
        raise StoreOfAnotherLog(others, store)
    mine = {key: offset for key, offset in stored.items() if key[0] == topic}
    if not any(mine.values()):  # a new store, or one at 0: past nothing
        return
    past = await confirmed_past_the_end(mine, lambda: topic_ends(bootstrap, topic, security))
    if past:
        raise StoreOfAnotherLog(past, store)


def _below(records: list[ConsumerRecord], target: int) -> list[ConsumerRecord]:
    return [r for r in records if r.offset < target]


class UnknownTopic(ConfigurationError, LookupError):
    """No such topic on the broker: a wrong ``BLACKJACK_TOPIC_PREFIX`` (``--topic-prefix``)
    or broker; the command line says so in one line, exit 2 (it was a traceback and exit 1,
    which ``blackjack audit`` uses for a mismatch)."""


async def topic_partitions(
    bootstrap: str, topic: str, security: KafkaSecurity
) -> list[TopicPartition]:
    """The partitions of ``topic``; ``UnknownTopic`` when it does not exist."""
    admin = AIOKafkaAdminClient(
        bootstrap_servers=bootstrap, client_id="blackjack-rebuild", **security.client_options()
    )
    try:
        await admin.start()
        described = await admin.describe_topics([topic])
    finally:
        await admin.close()
    found = [t for t in described if t.get("topic") == topic and t.get("error_code") == 0]
    refused = [t["error_code"] for t in described if t.get("error_code") not in (0, None, 3)]
    if not found and refused:  # (29: the principal's ACLs; it read as a wrong prefix)
        raise ConfigurationError(
            f"Kafka at {bootstrap} refused to describe {topic}: "
            f"{broker_error_name(refused[0])} (the principal's ACLs: "
            'BLACKJACK_KAFKA_SASL_USERNAME, docs/kafka.md "Securing the cluster")'
        )
    if not found:
        raise UnknownTopic(
            f"no topic {topic} on {bootstrap}: check BLACKJACK_TOPIC_PREFIX (--topic-prefix) "
            "and the broker (BLACKJACK_KAFKA_BOOTSTRAP, --bootstrap)"
        )
    return [
        TopicPartition(topic, p["partition"])
        for p in sorted(found[0]["partitions"], key=lambda p: p["partition"])
    ]


async def rebuild(
    writer: ProjectionWriter,
    bootstrap: str,
    topic: str,
    stop: Mapping[Position, int] | None = None,
    *,
    batch: int = 500,
    timeout: float = 600.0,
    security: KafkaSecurity = PLAINTEXT,
    foreign: list[Record] | None = None,
    unreadable: list[Record] | None = None,
) -> dict[Position, int]:
    """Fold ``topic`` into the writer's store, from its stored positions (offset 0 for a fresh
    store) up to ``stop`` or the end of the topic. Returns the topic's end offsets.

    With a ``foreign`` list, a record the service did not write (``wire.not_the_service_s``)
    is stepped over, as the operator steps a stuck worker over it (docs/operations.md, "A
    stuck projection worker"), and added to the list; without one it stops the rebuild, as it
    stops a worker. A record of the service's that cannot be folded stops it either way. A
    record with a header name that is not UTF-8 is stepped over as by a worker
    (``Record.unreadable``), and added to ``unreadable``."""
    every = await writer.stored_positions()
    others = folded_from_other_topics(every, topic)
    if others:  # another topic's fold: this one's is not to be folded on top of it
        raise StoreOfAnotherLog(others)
    stored = {key: offset for key, offset in every.items() if key[0] == topic}
    start = {partition: offset for (_, partition), offset in stored.items()}
    until = None if stop is None else {p: o for (t, p), o in stop.items() if t == topic}

    def records(fetched: list[ConsumerRecord]) -> object:
        batch = [Record.of(r) for r in fetched]
        if foreign is not None:
            batch = [
                dataclasses.replace(record, foreign=True)
                # one no reader can read is that (below), not named twice (an audit listed
                # it under both)
                if wire.not_the_service_s(raw.value, raw.headers) and not record.unreadable
                else record
                for raw, record in zip(fetched, batch, strict=True)
            ]
            foreign.extend(r for r in batch if r.foreign)
        if unreadable is not None:
            unreadable.extend(r for r in batch if r.unreadable)
        return writer.apply(batch)

    return await read_consumer_records(
        bootstrap,
        topic,
        records,
        start=start,
        stop=until,
        batch=batch,
        timeout=timeout,
        security=security,
    )
