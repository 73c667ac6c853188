"""What the platform money ids a stream keeps (``domain.platform_money``) cost: bytes an id in
its sealed snapshot and in memory, and the time to open the snapshot, as a ratio against the
same stream without them (docs/kafka.md, "Idempotency").

    PYTHONPATH=.:services .venv/bin/python -m tests.unit.measure_platform_money [--ids 1000,10000]

One wallet takes ``--ids`` platform ``WalletDeposit``s (uuids for command ids, as platforms
send them; all within the retention) through the service's processor
(``test_platform_money.Harness``, with the default window of 1,000 answers). For each count:
the sealed snapshot's bytes with the ids and without them (the same stream, ``money``
emptied), the memory ``SnapshotCodec.decode`` holds for the stream (tracemalloc, the ids read
back as a rebuild reads them), and the time to open it, each with and without the ids.
Printed: a line per count, then how many ids fit in half the snapshots' limit (where
``BlackjackSnapshotNearSizeLimit`` fires).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import random
import time
import tracemalloc
import uuid
from collections.abc import Callable
from datetime import timedelta

from blackjack.bus.topics import SNAPSHOT_MAX_BYTES
from blackjack.command_handler.snapshots import SnapshotCodec
from blackjack.command_handler.streams import Stream
from tests.unit.processor_harness import new_processor
from tests.unit.test_platform_money import PLAYER, START, WALLET, Harness, deposit


def held(decode: Callable[[], Stream]) -> tuple[int, Stream]:
    """The bytes ``decode``'s stream holds in memory (tracemalloc), and the stream."""
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    stream = decode()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return after - before, stream


def timed(decode: Callable[[], Stream], rounds: int = 20) -> float:
    started = time.perf_counter()
    for _ in range(rounds):
        decode()
    return (time.perf_counter() - started) / rounds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ids", default="1000,10000")
    counts = [int(n) for n in parser.parse_args().ids.split(",")]
    codec, ids = SnapshotCodec(b"s" * 32), random.Random(7)
    per_id = 0.0
    for count in counts:
        h = Harness()
        h.processor = new_processor(dedup_window=1000)  # the default window, full
        for number in range(count):
            h.now = START + timedelta(seconds=number)  # one a second: all within 7 days
            command_id = str(uuid.UUID(int=ids.getrandbits(128)))
            assert h.send(WALLET, deposit(1), command_id, sent_at=h.now).status == "accepted"
        stream = h.store.streams[WALLET]
        assert len(stream.money) == count and stream.state.balance == count  # type: ignore[union-attr]
        with_ids = codec.encode(stream)
        without = codec.encode(dataclasses.replace(stream, money={}))
        memory_with, opened = held(functools.partial(codec.decode, with_ids))
        memory_without, _ = held(functools.partial(codec.decode, without))
        assert opened.money == stream.money
        ratio = timed(functools.partial(codec.decode, with_ids)) / timed(
            functools.partial(codec.decode, without)
        )
        per_id = (len(with_ids) - len(without)) / count
        print(
            f"{count:,} ids ({PLAYER}'s wallet, window {h.processor.dedup_window}): sealed "
            f"{len(with_ids):,} bytes, {len(without):,} without them "
            f"({per_id:.1f} bytes an id); in memory {memory_with:,} bytes, "
            f"{memory_without:,} without them ({(memory_with - memory_without) / count:.0f} "
            f"bytes an id); opening it takes {ratio:.2f}x the time without them"
        )
    print(
        f"half the snapshots' limit ({SNAPSHOT_MAX_BYTES // 2:,} bytes) holds "
        f"{SNAPSHOT_MAX_BYTES / 2 / per_id:,.0f} ids"
    )


if __name__ == "__main__":
    main()
