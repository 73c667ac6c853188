"""What compressing the handler's batches (``BLACKJACK_KAFKA_COMPRESSION``) changes, on the
tests' broker (``tests/integration/infra.py``; docs/kafka.md, "Compression"):

    PYTHONPATH=.:services .venv/bin/python -m tests.integration.measure_compression [--rounds 3]

Each run is a handler in this process with one codec, in topics of its own, and 20 tables
playing 10 rounds of mini-h17 each at once (open, sit, deposit, then bet, deal, stand: 660
commands, one in flight per table, every 100 commands a partition's checkpoint); the codecs
are run in turn, ``--rounds`` times, in a rotated order. Measured: the commands per second of
the run (first command sent to last result read), the CPU time of this process (handler and
client) per command over the same span (less disturbed by other load on the machine than the
rate), and the bytes the broker holds for each of
the handler's topics (the size of their log segments in the broker's data directory, after
the run): each as the median of its ratio to ``none``'s in the same round.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
import uuid

from blackjack.bus.settings import KafkaSettings
from blackjack.bus.topics import Topics, delete_topics, ensure_topics
from blackjack.client import BlackjackClient
from blackjack.command_handler.config import COMPRESSIONS, HandlerConfig
from blackjack.command_handler.service import CommandHandler
from blackjack.domain import commands as cmd
from blackjack.loadtest.cli import quiet_logs
from blackjack.messages.sealing import ShoeSeal
from tests.integration.infra import kafka_bootstrap, kafka_cache_dir

TABLES = 20
ROUNDS = 10
PARTITIONS = 3


def topic_bytes(topic: str) -> int:
    data = kafka_cache_dir() / "data"
    return sum(
        segment.stat().st_size
        for directory in data.glob(f"{topic}-*")
        if directory.name.rsplit("-", 1)[1].isdigit()
        for segment in directory.glob("*.log")
    )


async def play(client: BlackjackClient, table: str) -> int:
    opening: list[cmd.TableCommand] = [
        cmd.OpenTable(variant="mini-h17"),
        cmd.SitDown(player_id="alice"),
        cmd.Deposit(player_id="alice", amount=1_000_000),
    ]
    round_: list[cmd.TableCommand] = [
        cmd.PlaceBet(player_id="alice", box=0, amount=500),
        cmd.Deal(player_id="alice"),
        cmd.Stand(player_id="alice", box=0),  # refused when the deal settled the round
    ]
    commands = opening + round_ * ROUNDS
    for command in commands:
        await client.execute(table, command)
    return len(commands)


async def run(codec: str) -> dict[str, float]:
    prefix = f"compress{uuid.uuid4().hex[:8]}."
    settings = KafkaSettings(
        bootstrap=kafka_bootstrap(), topic_prefix=prefix, partitions=PARTITIONS
    )
    topics = Topics(prefix)
    await ensure_topics(settings, topics)
    config = HandlerConfig(
        shoe_key_hex=ShoeSeal.new_key_hex(),
        kafka=settings,
        snapshot_every=100,
        kafka_compression=codec,
        instance_id=f"measure-{codec}",
    )
    handler = CommandHandler(config)
    await handler.start()
    try:
        await handler.wait_ready(60)
        async with BlackjackClient(settings.bootstrap, topics) as client:
            started, cpu = time.perf_counter(), time.process_time()
            sent = sum(await asyncio.gather(*(play(client, f"t-{n}") for n in range(TABLES))))
            seconds = time.perf_counter() - started
            cpu = time.process_time() - cpu
    finally:
        await handler.stop()
    try:
        await asyncio.sleep(1)  # (the segments' sizes on disk after the last flush)
        sizes = {
            name: float(topic_bytes(getattr(topics, name)))
            for name in ("events", "results", "snapshots")
        }
    finally:
        await delete_topics(settings, topics)
    return {"commands_per_s": sent / seconds, "cpu_us_per_command": 1e6 * cpu / sent, **sizes}


async def measure(rounds: int) -> list[str]:
    lines = []
    ratios: dict[str, dict[str, list[float]]] = {}
    for number in range(rounds):
        order = (
            COMPRESSIONS[number % len(COMPRESSIONS) :] + COMPRESSIONS[: number % len(COMPRESSIONS)]
        )
        got = {codec: await run(codec) for codec in order}
        lines.append(json.dumps({c: {k: round(v) for k, v in m.items()} for c, m in got.items()}))
        for codec, measured in got.items():
            for what, value in measured.items():
                ratios.setdefault(codec, {}).setdefault(what, []).append(value / got["none"][what])
    for codec in COMPRESSIONS[1:]:
        medians = {what: statistics.median(r) for what, r in ratios[codec].items()}
        lines.append(
            f"{codec} / none: commands per second x{medians['commands_per_s']:.3f}, "
            f"CPU per command x{medians['cpu_us_per_command']:.3f}, bytes: "
            + ", ".join(f"{w} x{medians[w]:.3f}" for w in ("events", "results", "snapshots"))
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with open(os.devnull, "a") as sink:
        quiet_logs(sink)
        print("\n".join(asyncio.run(measure(args.rounds))))


if __name__ == "__main__":
    main()
