"""What the producers' batch size can change in ``blackjack loadtest`` (docs/load.md, *Larger
producer batches*), on the tests' broker (``tests/integration/infra.py``):

    PYTHONPATH=.:services .venv/bin/python -m tests.integration.measure_producer_batches full \\
        [--partitions 6] [--batch-bytes 16384]
    PYTHONPATH=.:services .venv/bin/python -m tests.integration.measure_producer_batches send-cpu \\
        [--rounds 6]

``full``: one default load test in this process, counting per topic (the random prefix left
out) the records every producer of the process sent and the sends that found their
partition's batch full and waited for it to be sent (aiokafka's ``MessageBatch.wait_drain``,
which ``add_message`` calls only then): the stall a larger ``max_batch_size`` removes.

``send-cpu``: ``BlackjackClient.send`` alone, 40 tasks with one command in flight each, 100
commands a task, the process CPU per command and the commands per second, 16 KiB and 1 MB
batches alternated; the medians of 1 MB / 16 KiB.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
import uuid
from collections import Counter
from typing import Any

from aiokafka.producer import message_accumulator

from blackjack.bus.settings import KafkaSettings
from blackjack.bus.topics import Topics, delete_topics, ensure_topics
from blackjack.client import BlackjackClient
from blackjack.domain import commands as cmd
from blackjack.loadtest.cli import quiet_logs
from blackjack.loadtest.config import LoadConfig
from blackjack.loadtest.run import run_loadtest
from tests.integration.infra import kafka_bootstrap


def count_full_batches(partitions: int, batch_bytes: int) -> dict[str, Any]:
    records: Counter[str] = Counter()
    full: Counter[str] = Counter()
    accumulator, batch = message_accumulator.MessageAccumulator, message_accumulator.MessageBatch
    add, drain = accumulator.add_message, batch.wait_drain

    def topic(name: str) -> str:
        return name.split(".", 1)[1]

    async def counted_add(self: Any, tp: Any, *args: Any, **kwargs: Any) -> Any:
        records[topic(tp.topic)] += 1
        return await add(self, tp, *args, **kwargs)

    async def counted_drain(self: Any, timeout: float | None = None) -> None:
        full[topic(self.tp.topic)] += 1
        await drain(self, timeout)

    accumulator.add_message, batch.wait_drain = counted_add, counted_drain
    try:
        config = LoadConfig(
            bootstrap=kafka_bootstrap(), partitions=partitions, batch_bytes=batch_bytes
        )
        summary = asyncio.run(run_loadtest(config, lambda line: None))
    finally:
        accumulator.add_message, batch.wait_drain = add, drain
    return {"ok": summary["ok"], "records": records, "sends_that_found_their_batch_full": full}


async def send_cpu(rounds: int) -> list[str]:
    prefix = f"sendcpu{uuid.uuid4().hex[:8]}."
    settings = KafkaSettings(bootstrap=kafka_bootstrap(), topic_prefix=prefix)
    topics = Topics(prefix)
    await ensure_topics(settings, topics)

    async def run(size: int) -> tuple[float, float]:
        async with BlackjackClient(settings.bootstrap, topics, max_batch_size=size) as client:

            async def table(index: int) -> None:
                for _ in range(100):
                    hit = cmd.Hit(player_id=f"player-{index:04d}", box=0, hand=0)
                    await client.send(f"load-{index:04d}", hit)

            await asyncio.gather(*(table(i) for i in range(10)))  # warm-up
            wall, cpu = time.perf_counter(), time.process_time()
            await asyncio.gather(*(table(i) for i in range(40)))
            return 1000 * (time.process_time() - cpu) / 4000, 4000 / (time.perf_counter() - wall)

    lines, ratios = [], []
    try:
        for number in range(rounds):
            sizes = (16_384, 1_000_000) if number % 2 == 0 else (1_000_000, 16_384)
            got = {size: await run(size) for size in sizes}
            lines.append(
                json.dumps({size: {"cpu_ms": c, "per_s": r} for size, (c, r) in got.items()})
            )
            small, large = got[16_384], got[1_000_000]
            ratios.append((large[0] / small[0], large[1] / small[1]))
    finally:
        await delete_topics(settings, topics)
    cpu = statistics.median(r[0] for r in ratios)
    rate = statistics.median(r[1] for r in ratios)
    return [*lines, f"1 MB / 16 KiB: CPU per command x{cpu:.3f}, commands per second x{rate:.3f}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("what", choices=("full", "send-cpu"))
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--batch-bytes", type=int, default=16_384)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    with open(os.devnull, "a") as sink:
        quiet_logs(sink)
        if args.what == "full":
            print(json.dumps(count_full_batches(args.partitions, args.batch_bytes)))
        else:
            print("\n".join(asyncio.run(send_cpu(args.rounds))))


if __name__ == "__main__":
    main()
