"""A takeover opens the snapshot of every stream its partition ever had (``open_snapshots``),
an idle table's too: it lets the event loop run between them, so the consumer's heartbeat, the
clock and the health endpoints go on meanwhile (2,000 idle tables held the loop 6 s in one go,
and a few thousand more outlast a group session of 10 s). No broker: the snapshots are put
where the read of the snapshots topic leaves them."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from blackjack.bus.topics import Topics
from blackjack.command_handler.replay import SNAPSHOTS_BETWEEN_YIELDS, _PartitionRead
from blackjack.command_handler.snapshots import SnapshotCodec
from blackjack.command_handler.streams import PartitionStore, Stream, initial_state
from blackjack.messages.sealing import ShoeSeal

CODEC = SnapshotCodec(b"s" * 32)
STREAMS = 10 * SNAPSHOTS_BETWEEN_YIELDS


def a_partition_of_idle_tables() -> _PartitionRead:
    store = PartitionStore(0, codec=CODEC)
    for number in range(STREAMS):
        stream_id = f"table-{number}"
        store.cold[stream_id] = CODEC.encode(Stream(stream_id, initial_state(stream_id)))
    read = _PartitionRead(
        store,
        None,  # no topic is read here
        Topics(),
        0,
        codec=CODEC,
        seal=ShoeSeal(bytes(32)),
        deadline=float("inf"),
    )
    return read


async def turns_of_another_task_while(opening: asyncio.Future[Any]) -> int:
    turns = 0
    while not opening.done():
        turns += 1
        await asyncio.sleep(0)
    return turns


async def test_opening_the_snapshots_lets_other_tasks_run_between_them() -> None:
    read = a_partition_of_idle_tables()
    opening = asyncio.ensure_future(read.open_snapshots(datetime(2026, 12, 5, tzinfo=UTC)))
    turns = await turns_of_another_task_while(opening)
    assert opening.result() == STREAMS
    assert len(read.store.cold) == STREAMS  # idle: left cold, as before
    assert set(read.store.snapshot_bytes) == {f"table-{n}" for n in range(STREAMS)}
    assert turns >= STREAMS // SNAPSHOTS_BETWEEN_YIELDS


async def test_checking_distrusted_snapshots_lets_other_tasks_run_between_them() -> None:
    read = a_partition_of_idle_tables()
    checking = asyncio.ensure_future(read.drop_snapshots("another key signed the checkpoint"))
    turns = await turns_of_another_task_while(checking)
    assert checking.result() is None and not read.store.cold
    assert turns >= STREAMS // SNAPSHOTS_BETWEEN_YIELDS
