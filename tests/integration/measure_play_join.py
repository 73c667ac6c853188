"""How long ``blackjack play``'s follower takes to join a table whose partition of
``blackjack.events`` also holds N records of other tables: read from the partition's start
(no query API: how every join went before), and from the read model (its events of the table
from ``GET /v1/streams/{id}/events``, then the partition from the read model's position).

    KAFKA_BOOTSTRAP=127.0.0.1:9092 PYTHONPATH=.:services .venv/bin/python \\
        -m tests.integration.measure_play_join 100000 1000000

Per size: a fresh 3-partition events topic; N records of 300 other tables on the table's
partition (copies of the table's own events, so of an event's size), then the table's 20
rounds at atlantic-city-multi. The read model (SQLite, served over HTTP by uvicorn in this
process) holds the table's events and stands at the partition's end, as a worker that has
folded it all does (the others' rows are left out: the API reads the table's by its key)."""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

from aiokafka import AIOKafkaProducer

from blackjack.bus.topics import Topics, partition_for
from blackjack.messages import wire
from blackjack.messages.sealing import ShoeSeal
from blackjack.play.follow import TableFollower
from blackjack.play.read_model import ReadModelApi
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter, Record
from tests.integration import infra
from tests.integration.conftest_projections import (
    PARTITIONS,
    new_events_topic,
    play_tables,
    served_query_api,
    to_wire,
)
from tests.integration.test_play_join import same_table

TABLE = "joined-table"


async def fill(bootstrap: str, topic: str, others: int, table: list[bytes]) -> list[Record]:
    """``others`` records of other tables on the table's partition, then the table's own;
    the table's records as the read model folds them."""
    partition = partition_for(TABLE, PARTITIONS)
    keys = [k for i in range(2000) if partition_for(k := f"other-{i}", PARTITIONS) == partition]
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, max_batch_size=1 << 20)
    await producer.start()
    try:
        for start in range(0, others, 20_000):
            sent = [
                await producer.send(
                    topic,
                    key=keys[i % 300].encode(),
                    value=table[i % len(table)],
                    partition=partition,
                )
                for i in range(start, min(others, start + 20_000))
            ]
            await asyncio.gather(*sent)
        sent = [
            await producer.send(topic, key=TABLE.encode(), value=value, partition=partition)
            for value in table
        ]
        metadata = await asyncio.gather(*sent)
    finally:
        await producer.stop()
    return [
        Record(topic, m.partition, m.offset, v, TABLE.encode())
        for m, v in zip(metadata, table, strict=True)
    ]


async def join(
    bootstrap: str, topics: Topics, api: ReadModelApi | None
) -> tuple[float, TableFollower]:
    follower = TableFollower(bootstrap, TABLE, topics, read_model=api)
    started = time.perf_counter()
    await follower.start()
    await follower.caught_up(timeout=1800)
    took = time.perf_counter() - started
    await follower.stop()
    return took, follower


async def measure(bootstrap: str, others: int) -> None:
    log = play_tables([(TABLE, "atlantic-city-multi")], rounds=20, seed=3)
    table = [
        wire.encode(e) for e in to_wire(log.of(TABLE), ShoeSeal.from_hex(ShoeSeal.new_key_hex()))
    ]
    async with new_events_topic(bootstrap) as topic:
        topics = Topics(topic.prefix)
        started = time.perf_counter()
        records = await fill(bootstrap, topic.name, others, table)
        filled = time.perf_counter() - started
        with tempfile.TemporaryDirectory() as scratch:
            store = ProjectionStore(f"sqlite+aiosqlite:///{Path(scratch) / 'read.db'}")
            await store.migrate()
            await ProjectionWriter(store).apply(records)
            async with served_query_api(store) as url:
                before, from_start = await join(bootstrap, topics, None)
                after, from_model = await join(bootstrap, topics, ReadModelApi(url))
            await store.close()
        same_table(from_model, from_start)
        print(
            f"{others:>9,} other records (+{len(table)} of the table, filled in {filled:.1f} s): "
            f"from the start {before:.2f} s, {from_start.records_read:,} records read; "
            f"from the read model {after:.2f} s, {from_model.records_read:,} records read "
            f"({len(table)} events from the API)"
        )


async def main(sizes: list[int]) -> None:
    bootstrap = infra.kafka_bootstrap()
    for size in sizes:
        await measure(bootstrap, size)


if __name__ == "__main__":
    asyncio.run(main([int(a) for a in sys.argv[1:]] or [100_000, 1_000_000]))
