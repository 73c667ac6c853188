"""Where the handler's ``NotEnoughReplicasError, retrying`` warnings come from, measured.

Since Kafka 3.6 a broker verifies that a transactional write belongs to an ongoing
transaction (``transaction.partition.verification.enable``, KIP-890 part 1). When the
transaction coordinator is still completing the producer's previous transaction, the
verification answers ``CONCURRENT_TRANSACTIONS``, which the broker turns into
``NOT_ENOUGH_REPLICAS`` for clients that predate the new error (KAFKA-15459): aiokafka
warns and sends again after ``retry_backoff_ms``. Nothing is under-replicated.

This probe plays the handler's shape of transaction (records to two topics and the consumed
offsets, one transactional producer per partition, back to back) with the broker's
verification on, then off, and counts the warnings. It changes a broker setting while it
runs and puts the broker's settings back as they were; it runs on a single-broker
(development) cluster only.

    python -m blackjack.loadtest.verification --bootstrap 127.0.0.1:9092 --transactions 1000
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import time
import uuid
from dataclasses import dataclass

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from blackjack.bus.settings import TRANSACTION_RETRY_BACKOFF_MS

SETTING = "transaction.partition.verification.enable"
PRODUCERS = 3  # partitions written at once, as a handler with three partitions
RECORDS = 5  # events per command, about a round's busiest command


class _Retries(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "NotEnoughReplicas" in record.getMessage():
            self.count += 1


@dataclass(frozen=True)
class Run:
    verification: bool
    transactions: int
    retries: int
    p50_ms: float
    p99_ms: float


async def _transactions(bootstrap: str, topic: str, partition: int, n: int) -> list[float]:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=f"verification-probe-{uuid.uuid4()}",
        enable_idempotence=True,
        acks="all",
        retry_backoff_ms=TRANSACTION_RETRY_BACKOFF_MS,
    )
    await producer.start()
    times = []
    try:
        for offset in range(1, n + 1):
            began = time.perf_counter()
            async with producer.transaction():
                for _ in range(RECORDS):
                    await producer.send(topic, b"event", partition=partition)
                await producer.send(f"{topic}-results", b"result", partition=partition)
                consumed = {TopicPartition(f"{topic}-commands", partition): offset}
                await producer.send_offsets_to_transaction(consumed, f"{topic}-group")
            times.append((time.perf_counter() - began) * 1000)
    finally:
        await producer.stop()
    return times


async def _run(bootstrap: str, topic: str, verification: bool, n: int) -> Run:
    retries = _Retries()
    logger = logging.getLogger("aiokafka")
    logger.addHandler(retries)
    logger.setLevel(logging.WARNING)  # counted here, not printed
    logger.propagate = False
    try:
        per_producer = await asyncio.gather(
            *(_transactions(bootstrap, topic, p, n) for p in range(PRODUCERS))
        )
    finally:
        logger.removeHandler(retries)
    times = sorted(t for run in per_producer for t in run)
    p99 = times[min(len(times) - 1, int(0.99 * len(times)))]
    return Run(verification, len(times), retries.count, statistics.median(times), p99)


class ProbeRefused(RuntimeError):
    """A broker this probe must not change (not the only one, or a secret it cannot keep)."""


DYNAMIC_BROKER_CONFIG = 2  # DescribeConfigs' source of a setting made for this broker


async def _dynamic_settings(admin: AIOKafkaAdminClient, broker_id: int) -> dict[str, str]:
    """The broker's own dynamic settings. Kafka's AlterConfigs (the only form aiokafka
    sends) replaces all of them, so a change sends them all again, and so does the restore."""
    [response] = await admin.describe_configs(
        [ConfigResource(ConfigResourceType.BROKER, str(broker_id))]
    )
    error_code, error_message, _, _, entries = response.resources[0]
    if error_code:
        raise ProbeRefused(f"broker {broker_id}: {error_message} (error {error_code})")
    settings = {}
    for name, value, _read_only, source, sensitive, *_ in entries:
        if source != DYNAMIC_BROKER_CONFIG:
            continue
        if sensitive or value is None:
            raise ProbeRefused(f"broker {broker_id} has a secret setting ({name}) to keep")
        settings[name] = value
    return settings


async def _set(admin: AIOKafkaAdminClient, broker_id: int, settings: dict[str, str]) -> None:
    resource = ConfigResource(ConfigResourceType.BROKER, str(broker_id), settings)
    for response in await admin.alter_configs([resource]):
        for error_code, error_message, *_ in response.resources:
            if error_code:
                raise ProbeRefused(f"broker {broker_id}: {error_message} (error {error_code})")


async def probe(bootstrap: str, n: int, broker_id: int, rounds: int) -> list[Run]:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, client_id="verification-probe")
    await admin.start()
    try:
        brokers = (await admin.describe_cluster())["brokers"]
        if [broker["node_id"] for broker in brokers] != [broker_id]:
            raise ProbeRefused(f"a development broker only, alone: this cluster has {brokers}")
        before = await _dynamic_settings(admin, broker_id)
        topic = f"verification-probe-{uuid.uuid4().hex[:8]}"
        names = (topic, f"{topic}-results", f"{topic}-commands")
        await admin.create_topics([NewTopic(name, PRODUCERS, 1) for name in names])
        runs = []
        try:
            for _ in range(rounds):
                for on in (True, False):
                    await _set(admin, broker_id, {**before, SETTING: "true" if on else "false"})
                    await asyncio.sleep(2)  # a dynamic setting reaches the broker's threads
                    runs.append(await _run(bootstrap, topic, on, n))
        finally:
            try:
                await _set(admin, broker_id, before)  # as it was, whatever it was
            finally:
                await admin.delete_topics(list(names))
        return runs
    finally:
        await admin.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--transactions", type=int, default=1000, help="per producer")
    parser.add_argument("--broker-id", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2, help="on/off pairs, interleaved")
    args = parser.parse_args()
    for run in asyncio.run(probe(args.bootstrap, args.transactions, args.broker_id, args.rounds)):
        print(
            f"verification {'on ' if run.verification else 'off'}: {run.transactions} "
            f"transactions, {run.retries} NotEnoughReplicas retries, "
            f"p50 {run.p50_ms:.1f} ms, p99 {run.p99_ms:.1f} ms"
        )


if __name__ == "__main__":
    main()
