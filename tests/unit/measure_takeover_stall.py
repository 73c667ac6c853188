"""How long a takeover holds the event loop while it opens its partition's snapshots, one for
every stream the partition ever had (an idle table's too): ``_PartitionRead.open_snapshots``
lets the loop run every ``SNAPSHOTS_BETWEEN_YIELDS`` snapshots (docs/kafka.md).

    PYTHONPATH=.:services .venv/bin/python -m tests.unit.measure_takeover_stall [--tables 2000]

``--tables`` idle mini-h17 tables, each with a full window of 1,000 answers (one table played
until its window is full, its snapshot sealed again under each table's id), are opened as a
takeover opens them, while a task that sleeps 0.1 s at a time notes how long it waited each
time. The lines printed: how long opening took, and the longest wait (0.1 s: no stall); then
what one such snapshot costs decoded whole and read without its window (``may_not_wait``),
the best of 5 times 200. No broker, one process.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime

from blackjack.command_handler.snapshots import SnapshotCodec
from blackjack.command_handler.spill import SpilledStreams
from blackjack.command_handler.streams import PartitionStore
from tests.unit.measure_table_memory import measure
from tests.unit.test_takeover_lets_the_loop_run import reading

TICK_S = 0.1


async def main(tables: int) -> None:
    _, _, _, snapshot, _, codec = measure(1, 1000)
    assert isinstance(codec, SnapshotCodec)
    stream = codec.decode(snapshot)
    store = PartitionStore(0, cold=SpilledStreams(), codec=codec)
    for number in range(tables):
        stream.stream_id = f"table-{number:06d}"
        store.cold[stream.stream_id] = codec.encode(stream)
    waits: list[float] = []

    async def ticker() -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(TICK_S)
            now = time.perf_counter()
            waits.append(now - last)
            last = now

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(3 * TICK_S)
    read = reading(store)
    started = time.perf_counter()
    opened = await read.open_snapshots(datetime.now(UTC))
    took = time.perf_counter() - started
    await asyncio.sleep(3 * TICK_S)
    ticking.cancel()
    store.close()
    print(
        f"{opened:,} idle tables with full windows opened in {took:.2f} s; the longest wait "
        f"of a task sleeping {TICK_S} s at a time: {max(waits):.2f} s"
    )
    whole, without = _best_ms(codec.decode, snapshot), _best_ms(codec.may_not_wait, snapshot)
    print(f"one snapshot: {whole:.2f} ms decoded whole, {without:.2f} ms without its window")


def _best_ms(read: Callable[[bytes], object], raw: bytes, times: int = 200) -> float:
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(times):
            read(raw)
        best = min(best, (time.perf_counter() - started) / times)
    return best * 1e3


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=2_000)
    asyncio.run(main(parser.parse_args().tables))
