"""What a ``read_uncommitted`` reader of ``blackjack.events`` gets that a ``read_committed``
one does not, after a handler process is killed with SIGKILL under load (docs/kafka.md,
*Reading the events and results*):

    PYTHONPATH=.:services .venv/bin/python -m tests.integration.measure_aborted_reads \\
        [--tables 24] [--rounds 18] [--partitions 6]

A ``blackjack handler`` process serves ``--tables`` atlantic-city tables (a new shoe every
round), each sent ``--rounds`` rounds of bet, deal, decline insurance, stand at once; it is
killed with SIGKILL ``--kills`` times, evenly through the load, a new process taking over each
time. The events topic
is then read from the start with each isolation level. Printed: the commands, the committed
events, the records of aborted transactions the other reader got too, and the (stream,
sequence) pairs it got two different events for. The broker is the tests' one
(``tests/integration/infra.py``: ``KAFKA_PORT`` ...), the topics fresh and deleted after.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import signal
import tempfile
import uuid
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from blackjack.bus.topics import delete_topics, ensure_topics
from blackjack.client import BlackjackClient
from blackjack.domain import commands as cmd
from blackjack.messages.wire import decode, from_wire
from tests.integration.conftest import WAIT_S, KafkaSpace, read_topic
from tests.integration.infra import kafka_bootstrap
from tests.integration.test_handler_failover import start_handler

PLAYER = "p"


def rounds_of(table: str, rounds: int) -> list[tuple[str, BaseModel]]:
    """Whatever the cards, each four commands play one round (those not offered are
    rejected and change nothing)."""
    cycle: list[BaseModel] = [
        cmd.PlaceBet(player_id=PLAYER, box=0, amount=100),
        cmd.Deal(player_id=PLAYER),
        cmd.DeclineInsurance(player_id=PLAYER, box=0),
        cmd.Stand(player_id=PLAYER, box=0),
    ]
    return [(table, command) for _ in range(rounds) for command in cycle]


async def answered_since(client: BlackjackClient, ids: list[str], moment: datetime) -> bool:
    """Waits for the first of these commands answered after ``moment``; False if none is."""
    for command_id in ids:
        if (await client.result(command_id, timeout=120)).handled_at >= moment:
            return True
    return False


def differing_pairs(space: KafkaSpace, records: list[Any]) -> tuple[int, int]:
    """The (stream, sequence) pairs read with two or more different events, and how many
    of them with events of two types (a sequence the new owner gave another event)."""
    seal = space.seal()
    seen: dict[tuple[str, int], set[str]] = defaultdict(set)
    for record in records:
        envelope = from_wire(decode(record.value), seal)
        seen[envelope.stream_id, envelope.sequence].add(envelope.data.model_dump_json())
    differing = [events for events in seen.values() if len(events) > 1]
    types = [{json.loads(event)["type"] for event in events} for events in differing]
    return len(differing), sum(len(kinds) > 1 for kinds in types)


async def measure(
    tables: int, rounds: int, partitions: int, kills: int, log: Path
) -> dict[str, Any]:
    space = KafkaSpace(kafka_bootstrap(), f"aborted{uuid.uuid4().hex[:8]}.", partitions)
    await ensure_topics(space.settings, space.topics)
    names = [f"table-{n}" for n in range(tables)]
    handlers = [start_handler(space, log)]
    chance = random.Random(kills)
    try:
        async with space.client() as client:
            for table in names:
                for setup in (
                    cmd.OpenTable(variant="atlantic-city"),
                    cmd.SitDown(player_id=PLAYER),
                    cmd.Deposit(player_id=PLAYER, amount=rounds * 100),
                ):
                    result = await client.execute(table, setup, timeout=WAIT_S)
                    assert result.status == "accepted", (table, setup, result.rejection)
            # Table by table in turn, so that the n-th answer comes about n / len(ids) in.
            load = [
                pair
                for turn in zip(*(rounds_of(t, rounds) for t in names), strict=True)
                for pair in turn
            ]
            restarted = datetime.now(UTC)
            ids = await client.send_all(load)
            for kill in range(1, kills + 1):
                # Killed once the handler now running (not one killed before) has answered
                # a command at least this far into the load, at any point of a later turn.
                if not await answered_since(
                    client, ids[kill * len(ids) // (kills + 1) :], restarted
                ):
                    break
                await asyncio.sleep(chance.uniform(0, 0.1))
                handlers[-1].send_signal(signal.SIGKILL)
                handlers[-1].wait(timeout=WAIT_S)
                restarted = datetime.now(UTC)
                handlers.append(start_handler(space, log))
            await asyncio.gather(*(client.result(i, timeout=120) for i in ids))
        committed = await read_topic(space, space.topics.events)
        everything = await read_topic(space, space.topics.events, "read_uncommitted")
        pairs, two_types = differing_pairs(space, everything)
        return {
            "commands": len(ids) + 3 * tables,
            "kills": len(handlers) - 1,
            "committed_events": len(committed),
            "aborted_records": len(everything) - len(committed),
            "pairs_with_two_events": pairs,
            "of_them_two_types": two_types,
        }
    finally:
        for process in handlers:
            if process.poll() is None:
                process.kill()
                process.wait()
        with contextlib.suppress(Exception):
            await delete_topics(space.settings, space.topics)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=18)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--kills", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        figures = asyncio.run(
            measure(
                args.tables,
                args.rounds,
                args.partitions,
                args.kills,
                Path(directory) / "handlers.log",
            )
        )
    print(figures)


if __name__ == "__main__":
    main()
