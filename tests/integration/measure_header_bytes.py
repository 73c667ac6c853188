"""How long a ``CommandHandler`` takes to clear a backlog of command records some of whose header
names are not UTF-8 (docs/operations.md, ``bus.header_names``):

    PYTHONPATH=.:services .venv/bin/python -m tests.integration.measure_header_bytes \\
        [--records 1000] [--runs 3]

Three backlogs, each written to a fresh one-partition commands topic before the handler
starts, in producer batches of 20 records: ``valid``, 2 x ``--records`` valid commands (the
baseline); ``mixed``, ``--records`` records with such a name each between two valid commands
of the same batch (``--records`` of them); ``unreadable``, ``--records`` records with such a
name alone. The valid commands pay into a wallet each (accepted, one event). Timed: from the
handler's partition being ready to its last answer read from the results topic; printed, the
median of ``--runs`` runs of each, in seconds, and its ratio to the baseline's. The broker is
the tests' one (``tests/integration/infra.py``); the topics are fresh and deleted after.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import time
import uuid

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.producer import message_accumulator
from aiokafka.producer import producer as producer_module
from aiokafka.record import default_records

from blackjack.bus.topics import delete_topics, ensure_topics
from blackjack.command_handler.service import CommandHandler
from blackjack.domain.wallet import WalletDeposit, wallet_stream
from blackjack.loadtest.cli import quiet_logs
from blackjack.messages.envelope import CommandEnvelope
from tests.integration.conftest import KafkaSpace
from tests.integration.header_bytes import JUNK
from tests.integration.infra import kafka_bootstrap

BATCH = 20
Record = tuple[bytes, bytes, list[tuple[str, bytes]]]


def valid(n: int) -> Record:
    stream = wallet_stream(f"p{n}")
    envelope = CommandEnvelope(
        command_id=f"deposit-{n}",
        stream_id=stream,
        command=WalletDeposit(player_id=f"p{n}", amount=100),
    )
    return (stream.encode(), envelope.model_dump_json().encode(), [])


def unreadable(n: int) -> Record:
    key, value, _ = valid(1_000_000 + n)
    return (key, value, list(JUNK))


def backlog(kind: str, records: int) -> list[Record]:
    if kind == "valid":
        return [valid(n) for n in range(2 * records)]
    if kind == "unreadable":
        return [unreadable(n) for n in range(records)]
    mixed = [valid(0)]
    for n in range(records):
        mixed += [unreadable(n), valid(n + 1)]
    return mixed


async def write(space: KafkaSpace, records: list[Record]) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=space.bootstrap, max_batch_size=1 << 20)
    await producer.start()
    try:
        sent = []
        for start in range(0, len(records), BATCH):
            batch = producer.create_batch()
            for key, value, headers in records[start : start + BATCH]:
                assert batch.append(key=key, value=value, timestamp=None, headers=headers)
            sent.append(await producer.send_batch(batch, space.topics.commands, partition=0))
        await asyncio.gather(*sent)
    finally:
        await producer.stop()


async def answered(space: KafkaSpace, count: int) -> None:
    """Until ``count`` answers are on the results topic."""
    reader = AIOKafkaConsumer(
        bootstrap_servers=space.bootstrap,
        group_id=None,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await reader.start()
    try:
        tp = TopicPartition(space.topics.results, 0)
        reader.assign([tp])
        seen = 0
        while seen < count:
            fetched = await reader.getmany(tp, timeout_ms=200)
            seen += len(fetched.get(tp, []))
    finally:
        await reader.stop()


async def run(kind: str, records: int) -> float:
    space = KafkaSpace(kafka_bootstrap(), f"headerbytes{uuid.uuid4().hex[:8]}.", 1)
    await ensure_topics(space.settings, space.topics)
    written = backlog(kind, records)
    await write(space, written)
    handler = CommandHandler(space.config(session_timeout_ms=10_000, timer_tick_s=60.0))
    await handler.start()
    try:
        await handler.wait_ready(60)
        started = time.perf_counter()
        await asyncio.wait_for(answered(space, len(written)), 600)
        seconds = time.perf_counter() - started
        assert handler.failure is None
    finally:
        await handler.stop()
        with contextlib.suppress(Exception):
            await delete_topics(space.settings, space.topics)
    return seconds


async def measure(records: int, runs: int) -> None:
    kinds = ("valid", "mixed", "unreadable")
    seconds: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(runs):
        for kind in kinds:  # interleaved, so that the machine's load falls on each alike
            seconds[kind].append(await run(kind, records))
    baseline = statistics.median(seconds["valid"])
    print(f"backlogs cleared, median of {runs} runs (s), and ratio to the valid one:")
    for kind in kinds:
        median = statistics.median(seconds[kind])
        size = len(backlog(kind, records))
        print(
            f"  {kind:<10} {size:>5} records  {median:6.2f} s  x{median / baseline:.2f}  "
            f"(runs: {', '.join(f'{s:.2f}' for s in seconds[kind])})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    # this process's producer writes header names through ``str.encode`` (``header_bytes``)
    builder = default_records._DefaultRecordBatchBuilderPy
    for module in (message_accumulator, producer_module):
        module.DefaultRecordBatchBuilder = builder
    with open(os.devnull, "w") as discarded:
        quiet_logs(discarded)  # the handler logs each command, out of sight
        asyncio.run(measure(args.records, args.runs))


if __name__ == "__main__":
    main()
