"""How a command handler's memory grows with the rounds its tables play (docs/operations.md,
*What grows*): a ``blackjack handler`` process, its resident memory read from ``/proc`` after
each phase of play.

    PYTHONPATH=.:services .venv/bin/python -m tests.integration.measure_handler_memory \\
        [--tables 40] [--rounds 50,200,500,800] [--partitions 3]

``--tables`` mini-h17 single-player tables are played with basic strategy by the load test's
players (``blackjack.loadtest.players``: one command in flight per table) until each has
played the first number of ``--rounds``, then the next, ...; after each phase the handler's
RSS is printed with the commands so far; at the end, each topic's bytes on the broker's disk
per round (the local broker's data directory: kafka.sh's ``KAFKA_CACHE_DIR``). The broker is
the tests' one (``tests/integration/infra.py``: ``KAFKA_PORT`` ...), the topics fresh and
deleted after.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import uuid
from pathlib import Path

from blackjack.bus.topics import delete_topics, ensure_topics
from blackjack.domain.rules import preset
from blackjack.loadtest.players import EventFollower, Player, Sent, gather_all
from tests.integration.conftest import KafkaSpace
from tests.integration.infra import kafka_bootstrap, kafka_cache_dir
from tests.integration.test_handler_failover import start_handler

BET = 100


def bytes_on_disk(topic: str) -> int:
    """The size of a topic's log segments in the local broker's data directory (kafka.sh's)."""
    return sum(f.stat().st_size for f in (kafka_cache_dir() / "data").glob(f"{topic}-*/*.log"))


def resident_mib(pid: int) -> float:
    """The process's resident set (``VmRSS``), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


async def measure(tables: int, phases: list[int], partitions: int, log: Path) -> None:
    space = KafkaSpace(kafka_bootstrap(), f"memory{uuid.uuid4().hex[:8]}.", partitions)
    await ensure_topics(space.settings, space.topics)
    handler = start_handler(space, log)
    follower = EventFollower(space.bootstrap, space.topics, partitions, space.seal())
    sent: list[Sent] = []
    try:
        await follower.start()
        async with space.client() as client:
            rules = preset("mini-h17")
            players = [
                Player(i, rules, client=client, follower=follower, log=sent, timeout=120)
                for i in range(tables)
            ]
            await gather_all(p.set_up(4 * BET * (phases[-1] + 1)) for p in players)
            played = 0
            print(f"set up: {len(sent)} commands, handler RSS {resident_mib(handler.pid):.1f} MiB")
            for rounds in phases:
                await gather_all(p.play(rounds - played, BET) for p in players)
                played = rounds
                print(
                    f"{rounds} rounds a table: {len(sent)} commands, "
                    f"handler RSS {resident_mib(handler.pid):.1f} MiB",
                    flush=True,
                )
            rounds = tables * phases[-1]
            topics = space.topics
            for name in (topics.events, topics.commands, topics.results, topics.snapshots):
                per_round = bytes_on_disk(name) / rounds / 1000
                print(f"{name.removeprefix(space.prefix)}: {per_round:.2f} kB a round on disk")
    finally:
        await follower.stop()
        handler.terminate()
        handler.wait()
        with contextlib.suppress(Exception):
            await delete_topics(space.settings, space.topics)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=40)
    parser.add_argument("--rounds", default="50,200,500,800", help="cumulative, a table")
    parser.add_argument("--partitions", type=int, default=3)
    args = parser.parse_args()
    phases = [int(n) for n in args.rounds.split(",")]
    with tempfile.TemporaryDirectory() as directory:
        asyncio.run(measure(args.tables, phases, args.partitions, Path(directory) / "handler.log"))


if __name__ == "__main__":
    main()
