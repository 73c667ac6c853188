"""How long a checkpoint holds up the command handler's event loop: ``--tables`` tables, each
with a full window of answers (1,000, the production ``dedup_window``), all changed since the
last checkpoint, snapshotted in one (``Checkpointing._checkpoint``: each sealed, then sent to a
producer that gzips it on the loop, as aiokafka's sender does with the default
``BLACKJACK_KAFKA_COMPRESSION``). Meanwhile a probe asks the loop for a turn every
millisecond: how late each comes is what a command arriving then (another partition's
transaction, the consumer's fetch, an HTTP probe) waits on top of its own work. Both in CPU
time of the loop's thread (what the loop did meanwhile, whatever else the machine runs: on a
shared machine the wall-clock time is several times longer). The checkpoint
as it is against the one of ``--before`` (a commit), alternated ``--runs`` times in one
process.

    PYTHONPATH=.:services python -m tests.integration.measure_checkpoint_stall \
        [--tables 200] [--runs 3] [--before 6ea4ece]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import dataclasses
import os
import statistics
import subprocess
import time
import types
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog
from aiokafka.codec import gzip_encode
from pydantic import BaseModel

from blackjack.command_handler import checkpointing
from blackjack.command_handler.partitions import _Partition
from blackjack.command_handler.snapshots import CheckpointSigner
from blackjack.command_handler.streams import PartitionStore, Stream
from blackjack.domain import commands as cmd
from tests.unit.processor_harness import new_processor
from tests.unit.test_cold_streams import Handler, seeded_shuffler

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 5, 1, tzinfo=UTC)
WINDOW = 1_000


def _before(commit: str) -> Any:
    source = subprocess.run(
        ["git", "show", f"{commit}:services/blackjack/command_handler/checkpointing.py"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    module = types.ModuleType(f"checkpointing_{commit}")
    exec(compile(source, f"checkpointing@{commit}", "exec"), module.__dict__)
    return module.Checkpointing


def full_window_table() -> Stream:
    """A mini-h17 table that answered over 1,000 commands (its window full)."""
    handler = Handler(5, freeze=False)
    handler.processor = new_processor(dedup_window=WINDOW, shuffler=seeded_shuffler(5))
    setup: list[BaseModel] = [cmd.OpenTable(variant="mini-h17"), cmd.SitDown(player_id="p")]
    setup.append(cmd.Deposit(player_id="p", amount=10_000_000))
    rounds: list[BaseModel] = [cmd.PlaceBet(player_id="p", box=0, amount=500)]
    rounds += [cmd.Deal(player_id="p"), cmd.DeclineInsurance(player_id="p", box=0)]
    rounds.append(cmd.Stand(player_id="p", box=0))
    # Some rounds refuse a command (no insurance offered, a blackjack ends the round): refusals
    # are kept apart, so the window of answers that wrote events fills after about 330.
    for number, command in enumerate(setup + rounds * 400):
        handler.send("t0", command, T0 + timedelta(seconds=number), f"c-{number}")
    stream = handler.store.streams["t0"]
    accepted = sum(answer.status == "accepted" for answer in stream.results.answers())
    assert accepted == WINDOW, accepted
    return stream


class _Producer:
    """Takes each record at once; its batch gzipped on the loop's next turn, as aiokafka's
    sender builds a produce request (a snapshot, over ``max_batch_size``, is a batch)."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.records = 0

    async def send(self, topic: str, value: bytes, **_: Any) -> asyncio.Future[None]:
        self.records += 1
        self.loop.call_soon(gzip_encode, value)
        done: asyncio.Future[None] = self.loop.create_future()
        done.set_result(None)
        return done


async def measure(cls: Any, table: Stream, tables: int) -> dict[str, float]:
    codec = Handler(5, freeze=False).store.codec
    store = PartitionStore(0, codec=codec)
    for number in range(tables):
        stream = dataclasses.replace(copy.deepcopy(table), stream_id=f"table-{number}")
        store.streams[stream.stream_id] = stream
        store.dirty.add(stream.stream_id)
    writer = cls.__new__(cls)
    writer.topics = types.SimpleNamespace(snapshots="s", events="e", results="r")
    writer._checkpoints = CheckpointSigner(os.urandom(32), "s")
    writer.log = structlog.get_logger("measure")
    writer._now = lambda: datetime.now(UTC)
    writer._publish_gauges = lambda: None
    partition = _Partition(0, None)
    producer = _Producer()
    late: list[float] = []
    done = asyncio.Event()

    async def probe() -> None:
        while not done.is_set():
            asked = time.thread_time()
            await asyncio.sleep(0.001)
            late.append(time.thread_time() - asked)

    probing = asyncio.create_task(probe())
    await asyncio.sleep(0.01)
    late.clear()
    start = time.thread_time()
    await writer._checkpoint(partition, store, producer, [])
    for _ in range(tables + 1):  # the batches' compression too
        await asyncio.sleep(0)
    took = time.thread_time() - start
    done.set()
    await probing
    assert producer.records == tables + 1 and not store.dirty
    ranked = sorted(late)
    return {
        "ms": took * 1000,
        "p50": 1000 * statistics.median(ranked),
        "p99": 1000 * ranked[max(0, round(0.99 * len(ranked)) - 1)],
        "max": 1000 * ranked[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tables", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", default="6ea4ece")
    args = parser.parse_args()
    structlog.configure(logger_factory=structlog.ReturnLoggerFactory())  # the checkpoint's line
    table = full_window_table()
    versions = {args.before: _before(args.before), "now": checkpointing.Checkpointing}
    for run in range(1, args.runs + 1):
        for name, cls in versions.items():
            got = asyncio.run(measure(cls, table, args.tables))
            print(
                f"run {run} {name:>8}: {args.tables} full-window tables checkpointed in "
                f"{got['ms']:.0f} ms of CPU; the loop's turns late by p50 {got['p50']:.2f} ms, "
                f"p99 {got['p99']:.1f} ms, at most {got['max']:.1f} ms",
                flush=True,
            )


if __name__ == "__main__":
    main()
