"""Where a command's latency goes (docs/load.md, *Where a command's time goes*): the load
test's players against a ``CommandHandler`` in this process whose consumer, processor and
transactions are wrapped to stamp each command as it passes:

    PYTHONPATH=.:services .venv/bin/python -m tests.integration.measure_latency_split \\
        [--tables 24] [--rounds 30] [--partitions 6]

Per command, from the client's send: the produce (until the broker's acknowledgement), the
wait for the handler's loop to fetch it (the turn in progress), the decisions of the fetch
up to and including its own, its partition's transaction to the commit, and the client's
read of the result. Printed: the median of each and of the whole, in ms, over the measured
rounds (the set-up commands left out). The stamps cost the handler a JSON parse per command.
The broker is the tests' one (``tests/integration/infra.py``), the topics fresh and deleted
after.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import statistics
import time
import uuid
from collections import defaultdict
from typing import Any

from blackjack.bus.topics import delete_topics, ensure_topics
from blackjack.command_handler.service import CommandHandler
from blackjack.domain.rules import preset
from blackjack.loadtest.cli import quiet_logs
from blackjack.loadtest.players import EventFollower, Player, Sent, gather_all
from tests.integration.conftest import KafkaSpace
from tests.integration.infra import kafka_bootstrap

STEPS = ("produce", "wait for the loop", "decisions", "transaction", "read the result")
Stamps = defaultdict[str, dict[str, float]]


def command_id(value: bytes | None) -> str:
    return str(json.loads(value or b"{}").get("command_id", ""))


def stamp_handler(handler: CommandHandler, stamps: Stamps) -> None:
    """Wrap the handler's fetch, decision and transaction to stamp each command's id."""
    consumer: Any = handler._consumer
    fetch, decide, transact = consumer.getmany, handler.processor.handle, handler._transaction

    async def getmany(*args: Any, **kwargs: Any) -> Any:
        batches = await fetch(*args, **kwargs)
        now = time.perf_counter()
        for records in batches.values():
            for record in records:
                stamps[command_id(record.value)]["fetched"] = now
        return batches

    def handle(store: Any, inbound: Any, now: Any) -> Any:
        handled = decide(store, inbound, now)
        stamps[command_id(inbound.value)]["decided"] = time.perf_counter()
        return handled

    async def transaction(partition: Any, records: Any) -> None:
        await transact(partition, records)
        now = time.perf_counter()
        for record in records:
            stamps[command_id(record.value)]["committed"] = now

    consumer.getmany = getmany
    handler.processor.handle = handle  # type: ignore[method-assign]
    handler._transaction = transaction  # type: ignore[method-assign]


def stamp_client(client: Any, stamps: Stamps) -> None:
    send, result = client.send, client.result

    async def sending(stream_id: str, command: Any, *, command_id: str, **kwargs: Any) -> Any:
        stamps[command_id]["sent"] = time.perf_counter()
        sent = await send(stream_id, command, command_id=command_id, **kwargs)
        stamps[command_id]["acknowledged"] = time.perf_counter()
        return sent

    async def answered(command_id: str, *args: Any, **kwargs: Any) -> Any:
        answer = await result(command_id, *args, **kwargs)
        stamps[command_id]["answered"] = time.perf_counter()
        return answer

    client.send, client.result = sending, answered


ORDER = ("sent", "acknowledged", "fetched", "decided", "committed", "answered")


def split(stamps: dict[str, float]) -> list[float]:
    """The five steps and the whole of one command, in ms."""
    moments = [stamps[name] for name in ORDER]
    steps = [1000 * (b - a) for a, b in itertools.pairwise(moments)]
    return [*steps, 1000 * (moments[-1] - moments[0])]


async def measure(tables: int, rounds: int, partitions: int) -> None:
    space = KafkaSpace(kafka_bootstrap(), f"latency{uuid.uuid4().hex[:8]}.", partitions)
    await ensure_topics(space.settings, space.topics)
    handler = CommandHandler(space.config(session_timeout_ms=10_000, timer_tick_s=1.0))
    follower = EventFollower(space.bootstrap, space.topics, partitions, space.seal())
    stamps: Stamps = defaultdict(dict)
    sent: list[Sent] = []
    await handler.start()
    try:
        await handler.wait_ready(60)
        stamp_handler(handler, stamps)
        await follower.start()
        async with space.client() as client:
            stamp_client(client, stamps)
            rules = preset("mini-h17")
            players = [
                Player(i, rules, client=client, follower=follower, log=sent, timeout=60)
                for i in range(tables)
            ]
            await gather_all(p.set_up(4 * rules.min_bet * (rounds + 1)) for p in players)
            measured_from = len(sent)
            await gather_all(p.play(rounds, rules.min_bet) for p in players)
    finally:
        await follower.stop()
        await handler.stop()
        with contextlib.suppress(Exception):
            await delete_topics(space.settings, space.topics)
    measured = [stamps[s.command_id] for s in sent[measured_from:]]
    # a command whose transaction failed and was taken again may lack a stamp: left out
    splits = [split(moments) for moments in measured if set(ORDER) <= moments.keys()]
    medians = [statistics.median(column) for column in zip(*splits, strict=True)]
    print(
        f"{len(splits)} of {len(measured)} commands, {tables} tables x {rounds} rounds; median ms:"
    )
    for name, value in zip([*STEPS, "whole"], medians, strict=True):
        print(f"  {name:<18} {value:7.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--partitions", type=int, default=6)
    args = parser.parse_args()
    with open(os.devnull, "w") as discarded:
        quiet_logs(discarded)  # the handler logs each command as in service, out of sight
        asyncio.run(measure(args.tables, args.rounds, args.partitions))


if __name__ == "__main__":
    main()
