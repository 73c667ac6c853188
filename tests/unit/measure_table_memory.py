"""What a table costs a command handler in memory, in use (hot) and idle (cold: its sealed
snapshot), by how full its idempotency window is (docs/operations.md, *What grows*):

    PYTHONPATH=.:services .venv/bin/python -m tests.unit.measure_table_memory [--tables 10]

``--tables`` mini-h17 tables are played (bet, deal, decline insurance, stand: every command
accepted) through the service's processor and one partition's store
(``test_cold_streams.Handler``) until each table's window holds 63, 303 and then 1,000
answers (``BLACKJACK_DEDUP_WINDOW``'s default: a full window). Measured with tracemalloc,
per table: hot, then cold once every table is frozen (its snapshot held in a dict, not
spilled to disk as the service does), and the size of a sealed snapshot. No broker: Python's
own allocations. Last, how long a full window's snapshot takes to write to the handler's
on-disk store of cold streams and to read back (a machine's figure).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import tracemalloc
import uuid
from datetime import timedelta

from pydantic import BaseModel

from blackjack.command_handler.clock import may_come_due
from blackjack.command_handler.snapshots import CheckpointSigner
from blackjack.command_handler.spill import SpilledStreams
from blackjack.command_handler.streams import StreamCodec
from blackjack.domain import commands as cmd
from blackjack.domain.state import TableState
from tests.unit.processor_harness import new_processor
from tests.unit.test_cold_streams import T0, Handler, seeded_shuffler

WINDOWS = (63, 303, 1000)


def measure(tables: int, window: int) -> tuple[int, float, float, bytes, float, StreamCodec]:
    """Rounds a table played to fill its window this far; KiB a table hot and cold; a sealed
    snapshot, the KiB of one on average, and the codec that sealed it."""
    handler, now = Handler(5, freeze=False, spill=False), T0
    handler.processor = new_processor(dedup_window=WINDOWS[-1], shuffler=seeded_shuffler(5))

    def send(table: str, command: BaseModel) -> TableState:
        nonlocal now
        now += timedelta(seconds=1)
        result, _ = handler.send(table, command, now, str(uuid.uuid4()))  # as clients send
        assert result["status"] == "accepted", (table, command, result)
        state = handler.store.streams[table].state
        assert isinstance(state, TableState)
        return state

    rounds = 0
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        for number in range(tables):
            table, rounds = f"t{number}", 0
            send(table, cmd.OpenTable(variant="mini-h17"))
            send(table, cmd.SitDown(player_id="p", seat=0))
            send(table, cmd.Deposit(player_id="p", amount=10_000_000))
            while len(handler.store.streams[table].results) < window:
                rounds += 1
                assert rounds <= window, "the window does not fill"
                send(table, cmd.PlaceBet(player_id="p", box=0, amount=500))
                state = send(table, cmd.Deal(player_id="p"))
                while state.round_open:  # every answer an accepted one, as a player's are
                    if state.phase == "insurance":
                        state = send(table, cmd.DeclineInsurance(player_id="p", box=0))
                    else:
                        assert state.active is not None
                        box, hand = state.active
                        state = send(table, cmd.Stand(player_id="p", box=box, hand=hand))
        hot = tracemalloc.get_traced_memory()[0] - start
        assert handler.store.freeze_idle(0, may_come_due) == tables
        cold = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    snapshots = list(handler.store.cold.values())
    assert handler.store.codec is not None
    per_table = tables * 1024
    return (
        rounds,
        hot / per_table,
        cold / per_table,
        snapshots[0],
        sum(map(len, snapshots)) / per_table,
        handler.store.codec,
    )


def digest_microseconds(snapshot: bytes, times: int = 200) -> float:
    """Median microseconds of a snapshot record's share of its checkpoint's digest
    (``CheckpointSigner.element``: once per snapshot written, and per snapshot a takeover
    reads)."""
    signer, spent = CheckpointSigner(os.urandom(32), "blackjack.snapshots"), []
    for _ in range(times):
        began = time.perf_counter()
        signer.element("t0", snapshot)
        spent.append(time.perf_counter() - began)
    return 1e6 * statistics.median(spent)


def seal_microseconds(codec: StreamCodec, snapshot: bytes, times: int = 200) -> tuple[float, float]:
    """Median microseconds to seal a table's snapshot (``SnapshotCodec.encode``: a checkpoint,
    a stream going cold) and to open it (``decode``: a thaw, a takeover)."""
    seals, opens = [], []
    for _ in range(times):
        began = time.perf_counter()
        stream = codec.decode(snapshot)
        opened = time.perf_counter()
        codec.encode(stream)
        seals.append(time.perf_counter() - opened)
        opens.append(opened - began)
    return 1e6 * statistics.median(seals), 1e6 * statistics.median(opens)


def spill_microseconds(snapshot: bytes, times: int = 200) -> tuple[float, float]:
    """Median microseconds to write a sealed snapshot to the on-disk store of cold streams
    (``SpilledStreams``) and to read it back."""
    spilled, writes, reads = SpilledStreams(), [], []
    for number in range(times):
        began = time.perf_counter()
        spilled[f"t{number}"] = snapshot
        wrote = time.perf_counter()
        assert spilled[f"t{number}"] == snapshot
        writes.append(wrote - began)
        reads.append(time.perf_counter() - wrote)
    return 1e6 * statistics.median(writes), 1e6 * statistics.median(reads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=int, default=10)
    tables = parser.parse_args().tables
    print("answers  rounds  hot KiB  cold KiB  sealed snapshot KiB  (a table)")
    for window in WINDOWS:
        rounds, hot, cold, snapshot, sealed, codec = measure(tables, window)
        print(f"{window:>7}  {rounds:>6}  {hot:>7.0f}  {cold:>8.0f}  {sealed:>19.0f}", flush=True)
    write, read = spill_microseconds(snapshot)
    print(
        f"a full window's snapshot ({len(snapshot) / 1024:.0f} KiB) on disk: "
        f"written in {write:.0f} us, read in {read:.0f} us (medians)"
    )
    sealing, opening = seal_microseconds(codec, snapshot)
    print(
        f"sealed in {sealing:.0f} us, opened in {opening:.0f} us, its share of the "
        f"checkpoint's digest in {digest_microseconds(snapshot):.0f} us (medians)"
    )


if __name__ == "__main__":
    main()
