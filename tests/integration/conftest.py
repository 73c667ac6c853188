"""Fixtures for the command handler tests on the real broker.

Every test session works in topics of its own: each ``KafkaSpace`` has a unique topic prefix
(and so its own consumer group and transactional ids), so concurrent sessions on one broker
never see each other's messages. The spaces' topics are deleted at the end of the session.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition
from infra import kafka_bootstrap

from blackjack.bus.settings import KafkaSettings
from blackjack.bus.topics import Topics, delete_topics, ensure_topics
from blackjack.client import BlackjackClient
from blackjack.command_handler.config import HandlerConfig
from blackjack.command_handler.service import CommandHandler
from blackjack.messages.envelope import CommandResult, EventEnvelope
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import decode, from_wire

WAIT_S = 30.0


@dataclass
class KafkaSpace:
    """A private set of the service's topics on the shared test broker."""

    bootstrap: str
    prefix: str
    partitions: int
    shoe_key: str = field(default_factory=ShoeSeal.new_key_hex)

    @property
    def settings(self) -> KafkaSettings:
        return KafkaSettings(
            bootstrap=self.bootstrap, topic_prefix=self.prefix, partitions=self.partitions
        )

    @property
    def topics(self) -> Topics:
        return Topics(self.prefix)

    def config(self, **overrides: Any) -> HandlerConfig:
        base = HandlerConfig(
            shoe_key_hex=self.shoe_key,
            kafka=self.settings,
            session_timeout_ms=6000,
            timer_tick_s=0.1,
            instance_id=f"test-{uuid.uuid4().hex[:6]}",
        )
        return replace(base, **overrides)

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a handler process working in this space."""
        return {
            "BLACKJACK_KAFKA_BOOTSTRAP": self.bootstrap,
            "BLACKJACK_TOPIC_PREFIX": self.prefix,
            "BLACKJACK_PARTITIONS": str(self.partitions),
            "BLACKJACK_SHOE_KEY": self.shoe_key,
            "BLACKJACK_SESSION_TIMEOUT_MS": "6000",
            "BLACKJACK_TIMER_TICK_MS": "100",
            **extra,
        }

    def seal(self) -> ShoeSeal:
        return ShoeSeal.from_hex(self.shoe_key)

    def client(self) -> BlackjackClient:
        return BlackjackClient(self.bootstrap, self.topics, client_id=f"{self.prefix}client")


@pytest.fixture(scope="session")
def bootstrap() -> str:
    return kafka_bootstrap()


@pytest.fixture(scope="session")
async def kafka_space(bootstrap: str) -> AsyncIterator[Callable[..., Any]]:
    """A factory of fresh spaces: ``await kafka_space(partitions=3)``."""
    made: list[KafkaSpace] = []

    async def make(partitions: int = 3) -> KafkaSpace:
        space = KafkaSpace(bootstrap, f"t{uuid.uuid4().hex[:10]}.", partitions)
        await ensure_topics(space.settings, space.topics)
        made.append(space)
        return space

    yield make
    for space in made:
        with contextlib.suppress(Exception):
            await delete_topics(space.settings, space.topics)


@contextlib.asynccontextmanager
async def running_handler(config: HandlerConfig, **kwargs: Any) -> AsyncIterator[CommandHandler]:
    handler = CommandHandler(config, **kwargs)
    await handler.start()
    try:
        await handler.wait_ready(WAIT_S)
        yield handler
    finally:
        await handler.stop()


# ---- reading what the handler wrote -------------------------------------------------------


async def read_topic(bootstrap: str, topic: str) -> list[Any]:
    """Every committed record of a topic, from the start to its end offsets as of now."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        await consumer.topics()  # fetches the cluster's metadata
        partitions = consumer.partitions_for_topic(topic) or set()
        tps = [TopicPartition(topic, p) for p in sorted(partitions)]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        await consumer.seek_to_beginning(*tps)
        records: list[Any] = []
        deadline = time.monotonic() + WAIT_S
        for tp in tps:
            while await consumer.position(tp) < ends[tp]:
                assert time.monotonic() < deadline, f"{topic} not read to its end"
                batch = await consumer.getmany(tp, timeout_ms=500)
                records += [r for r in batch.get(tp, ()) if r.offset < ends[tp]]
        return records
    finally:
        await consumer.stop()


async def stream_events(space: KafkaSpace, stream_id: str | None = None) -> list[EventEnvelope]:
    """The events (unsealed with the space's key), of one stream or all, in stream order."""
    seal = space.seal()
    envelopes = [
        from_wire(decode(record.value), seal)
        for record in await read_topic(space.bootstrap, space.topics.events)
    ]
    if stream_id is not None:
        envelopes = [e for e in envelopes if e.stream_id == stream_id]
    return envelopes


async def all_results(space: KafkaSpace) -> list[CommandResult]:
    return [
        CommandResult.model_validate_json(record.value)
        for record in await read_topic(space.bootstrap, space.topics.results)
    ]


async def wait_for_events(
    space: KafkaSpace,
    stream_id: str,
    done: Callable[[list[EventEnvelope]], bool],
    timeout: float = WAIT_S,
) -> list[EventEnvelope]:
    """Follow the stream's events until ``done`` holds for them (bounded)."""
    seal = space.seal()
    consumer = AIOKafkaConsumer(
        space.topics.events,
        bootstrap_servers=space.bootstrap,
        group_id=None,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    seen: list[EventEnvelope] = []
    try:
        async with asyncio.timeout(timeout):
            while not done(seen):
                batch = await consumer.getmany(timeout_ms=500)
                for records in batch.values():
                    for record in records:
                        envelope = from_wire(decode(record.value), seal)
                        if envelope.stream_id == stream_id:
                            seen.append(envelope)
    finally:
        await consumer.stop()
    return seen


def types_of(envelopes: Iterable[EventEnvelope]) -> list[str]:
    return [e.type for e in envelopes]
