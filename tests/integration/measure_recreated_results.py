"""How late an answer comes after the results topic is deleted and made again under a client's
reader (docs/kafka.md, "The client's failure modes").

    PYTHONPATH=.:services .venv/bin/python -m tests.integration.measure_recreated_results \\
        [--trials 20] [--read 3] [--held]

Each trial, on the tests' broker (``KAFKA_BOOTSTRAP``), a one-partition space of its own: a
client reads ``--read`` answers (its reader's position: ``--read``), the results topic is
deleted and made again (``recreate``: until the broker serves the new one), and at once
``--read`` + 2 answers are written to the new topic, one producer, each acknowledged before the
next. Timed: from the first new answer's acknowledgement to its ``result()``. The new topic
soon becomes longer than the reader's position: if the reader fetched the new topic while it
was shorter, its position is out of range and it checks the topic's id at once; if not, the
first answers (before its position) come at the next check of the id
(``RESULTS_TOPIC_CHECK_S``). The topic is deleted at a random time between two checks.
Printed: each trial's latency, then the minimum, median, 90th
percentile and maximum, and how many trials waited more than 0.1 s.

``--held``: the reader fetches nothing of the partition from before the topic is deleted until
every new answer is written (``hold``, then ``release``): the new topic is longer than its
position when it fetches again, no offset is out of range, and the first new answer waits for
the check of the id (as for a reader whose fetches of the new topic came late: its metadata
behind, a broker away).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import time
import uuid

from aiokafka import AIOKafkaProducer, TopicPartition

from blackjack.bus.topics import delete_topics, ensure_topics
from tests.integration.conftest import WAIT_S, KafkaSpace
from tests.integration.infra import kafka_bootstrap
from tests.integration.test_client_lost_answers import (
    TABLE,
    answer,
    answered,
    hold,
    recreate,
    release,
)


async def trial(bootstrap: str, read: int, held: bool) -> float:
    space = KafkaSpace(bootstrap, f"recreated{uuid.uuid4().hex[:8]}.", 1)
    await ensure_topics(space.settings, space.topics)
    topic = space.topics.results
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
    try:
        await producer.start()
        async with space.client() as client:
            await answered(client, bootstrap, topic, *(f"old-{n}" for n in range(read)))
            # anywhere between two checks of the topic's id (the reader checks every second
            # from its start on): no event to await, a phase drawn at random
            await asyncio.sleep(random.random())
            tp = TopicPartition(topic, 0)
            if held:
                hold(client, tp)
            await recreate(bootstrap, topic, 1)
            first = f"new-{uuid.uuid4().hex[:8]}"
            waiting = asyncio.ensure_future(client.result(first, WAIT_S))
            await producer.send_and_wait(topic, answer(first), key=TABLE.encode(), partition=0)
            acked = time.monotonic()
            for n in range(read + 1):
                await producer.send_and_wait(
                    topic, answer(f"new-{n}"), key=TABLE.encode(), partition=0
                )
            if held:
                release(client, tp)
            await waiting
            return time.monotonic() - acked
    finally:
        await producer.stop()
        await delete_topics(space.settings, space.topics)


async def run(trials: int, read: int, held: bool) -> None:
    bootstrap = kafka_bootstrap()
    late: list[float] = []
    for n in range(trials):
        late.append(await trial(bootstrap, read, held))
        print(f"trial {n + 1}: {late[-1] * 1000:.0f} ms", flush=True)
    ordered = sorted(late)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    print(
        f"{trials} trials: min {ordered[0] * 1000:.0f} ms, median "
        f"{statistics.median(ordered) * 1000:.0f} ms, p90 {p90 * 1000:.0f} ms, max "
        f"{ordered[-1] * 1000:.0f} ms; {sum(1 for s in late if s > 0.1)} over 100 ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--read", type=int, default=3)
    parser.add_argument("--held", action="store_true")
    options = parser.parse_args()
    asyncio.run(run(options.trials, options.read, options.held))


if __name__ == "__main__":
    main()
