"""The baseline: a bare transactional consume-produce echo on the same broker, answering the
same commands with results of the same size, so the ratio of the two says what the handler
costs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRecord, TopicPartition
from aiokafka.abc import ConsumerRebalanceListener

from blackjack.bus.settings import TRANSACTION_RETRY_BACKOFF_MS, KafkaSettings
from blackjack.bus.topics import Topics
from blackjack.domain import commands as cmd
from blackjack.loadtest.config import MAX_BATCH, POLL_MS, LoadConfig
from blackjack.loadtest.figures import Phase
from blackjack.loadtest.players import Sent, gather_all, timed
from blackjack.loadtest.proof import read_topic
from blackjack.messages.envelope import CommandResult


class _Assigned(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, event: asyncio.Event) -> None:
        self.event = event

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        return None

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        if assigned:
            self.event.set()


def echo_value(record: ConsumerRecord[bytes, bytes]) -> bytes:
    """A ``CommandResult``-shaped answer, padded with JSON whitespace to the size of the
    command it answers: the same client code reads it, and nothing is decided."""
    headers = dict(record.headers or ())
    body = json.dumps(
        {
            "command_id": headers.get("ce_id", b"").decode(),
            "stream_id": (record.key or b"").decode(),
            "status": "accepted",
            "first_sequence": 1,
            "last_sequence": 1,
            "handled_at": datetime.now(UTC).isoformat(),
        }
    ).encode()
    return body.ljust(len(record.value or b""))


class EchoServer:
    """read_committed consumer -> one transaction per fetched batch -> results + offsets."""

    def __init__(self, settings: KafkaSettings, group_id: str, config: LoadConfig) -> None:
        self.topics = Topics(settings.topic_prefix)
        self.group_id = group_id
        self.consumer = AIOKafkaConsumer(
            **settings.client_options(),  # TLS and SASL as the handler's, when set: a fair floor
            group_id=group_id,
            client_id="loadtest-echo",
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        self.producer = AIOKafkaProducer(
            **settings.client_options(),
            client_id="loadtest-echo",
            transactional_id=f"{group_id}.echo",
            enable_idempotence=True,
            acks="all",
            retry_backoff_ms=TRANSACTION_RETRY_BACKOFF_MS,  # as the handler's: a fair floor
            max_batch_size=config.batch_bytes,  # as the clients'
            linger_ms=config.linger_ms,
        )
        self.assigned = asyncio.Event()
        self.transactions = 0
        self.transaction_s = 0.0
        self._task: asyncio.Task[None] | None = None

    async def start(self, timeout: float) -> None:
        await self.producer.start()
        await self.consumer.start()
        self.consumer.subscribe([self.topics.commands], listener=_Assigned(self.assigned))
        self._task = asyncio.create_task(self._run(), name="loadtest-echo")
        await asyncio.wait_for(self.assigned.wait(), timeout)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.consumer.stop()
        await self.producer.stop()

    async def _run(self) -> None:
        while True:
            batches = await self.consumer.getmany(timeout_ms=POLL_MS, max_records=MAX_BATCH)
            batches = {tp: records for tp, records in batches.items() if records}
            if not batches:
                continue
            started = time.perf_counter()
            await self.producer.begin_transaction()
            for records in batches.values():
                for record in records:
                    await self.producer.send(
                        self.topics.results,
                        echo_value(record),
                        key=record.key,
                        partition=record.partition,
                    )
            await self.producer.send_offsets_to_transaction(
                {tp: records[-1].offset + 1 for tp, records in batches.items()}, self.group_id
            )
            await self.producer.commit_transaction()
            self.transactions += 1
            self.transaction_s += time.perf_counter() - started


async def run_baseline(
    config: LoadConfig, settings: KafkaSettings, sent: Sequence[Sent], measured_from: int
) -> tuple[Phase, dict[str, int]]:
    """The same clients send each table's own commands again, one at a time, to the echo."""
    topics = Topics(settings.topic_prefix)
    server = EchoServer(settings, f"{settings.topic_prefix}echo", config)
    client = config.players_client(settings)
    warmup: defaultdict[str, list[cmd.TableCommand]] = defaultdict(list)
    measured: defaultdict[str, list[cmd.TableCommand]] = defaultdict(list)
    for number, one in enumerate(sent):
        (measured if number >= measured_from else warmup)[one.stream_id].append(one.command)
    latencies: list[float] = []
    ids: list[str] = []
    phase = Phase(commands=len(sent) - measured_from, rounds=config.tables * config.rounds)

    async def replay(stream_id: str, commands: list[cmd.TableCommand], measure: bool) -> None:
        for command in commands:
            started = time.perf_counter()
            command_id = await client.send(stream_id, command)
            ids.append(command_id)
            result = await client.result(command_id, config.timeout_s)
            if result.command_id != command_id:
                raise RuntimeError(f"echo answered {result.command_id} for {command_id}")
            if measure:
                latencies.append(time.perf_counter() - started)

    await server.start(config.timeout_s)
    try:
        await client.start()
        try:
            await gather_all(replay(s, c, False) for s, c in warmup.items())
            before = (server.transactions, server.transaction_s)
            await timed(phase, gather_all(replay(s, c, True) for s, c in measured.items()))
            phase.transactions = server.transactions - before[0]
            phase.transaction_s = server.transaction_s - before[1]
        finally:
            await client.stop()
    finally:
        await server.stop()
    phase.latencies = latencies
    counts = Counter(
        CommandResult.model_validate_json(record.value or b"").command_id
        for record in await read_topic(settings.bootstrap, topics.results, settings.security)
    )
    check = {
        "sent": len(ids),
        "answered_once": sum(1 for i in ids if counts[i] == 1),
    }
    return phase, check
