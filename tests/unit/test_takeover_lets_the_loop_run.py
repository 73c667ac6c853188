"""A takeover opens the snapshot of every stream its partition ever had (``open_snapshots``),
an idle table's too: it lets the event loop run between them, so the consumer's heartbeat, the
clock and the health endpoints go on meanwhile (2,000 idle tables held the loop 6 s in one go,
and about 3,300 outlast a group session of 10 s). No broker: the snapshots are put
where the read of the snapshots topic leaves them."""

from __future__ import annotations

import asyncio
import tracemalloc
from datetime import UTC, datetime
from typing import Any

import pytest

from blackjack.bus.topics import Topics
from blackjack.command_handler.clock import may_come_due
from blackjack.command_handler.replay import SNAPSHOTS_BETWEEN_YIELDS, _PartitionRead
from blackjack.command_handler.snapshots import SnapshotCodec
from blackjack.command_handler.spill import SpilledStreams
from blackjack.command_handler.streams import PartitionStore, Stream, initial_state
from blackjack.domain import commands as cmd
from blackjack.messages.sealing import ShoeSeal
from tests.unit.measure_table_memory import measure
from tests.unit.test_cold_streams import CLOCKED, T0, Handler

CODEC = SnapshotCodec(b"s" * 32)
STREAMS = 10 * SNAPSHOTS_BETWEEN_YIELDS


def reading(store: PartitionStore) -> _PartitionRead:
    """A takeover's reader of ``store``'s partition, where the read of the snapshots topic
    has left them (no topic is read here)."""
    assert isinstance(store.codec, SnapshotCodec)
    return _PartitionRead(
        store, None, Topics(), 0, codec=store.codec, seal=ShoeSeal(bytes(32)), deadline=float("inf")
    )


def a_partition_of_idle_tables() -> _PartitionRead:
    store = PartitionStore(0, codec=CODEC)
    for number in range(STREAMS):
        stream_id = f"table-{number}"
        store.cold[stream_id] = CODEC.encode(Stream(stream_id, initial_state(stream_id)))
    return reading(store)


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


def snapshots_of_every_kind() -> tuple[SnapshotCodec, dict[str, bytes]]:
    """Sealed snapshots of streams a takeover must open at once and of streams that can wait:
    a table whose turn clock runs, one with a connected player's bet out under the
    disconnection policy, an idle table, a wallet, and snapshots an older release wrote
    without the signed step ids or the platform money ids."""
    handler = Handler(1, freeze=False, spill=False)
    steps = [
        ("timed", cmd.OpenTable(variant="atlantic-city", overrides=CLOCKED)),
        ("timed", cmd.SitDown(player_id="cy", seat=0)),
        ("timed", cmd.Deposit(player_id="cy", amount=5_000)),
        ("timed", cmd.PlaceBet(player_id="cy", box=0, amount=500)),
        ("timed", cmd.Deal(player_id="cy")),
        ("boxes", cmd.OpenTable(variant="surrender")),
        ("boxes", cmd.SitDown(player_id="bo", seat=0)),
        ("boxes", cmd.Deposit(player_id="bo", amount=5_000)),
        ("boxes", cmd.PlaceBet(player_id="bo", box=0, amount=500)),
        ("idle", cmd.OpenTable(variant="mini-h17")),
        ("idle", cmd.SitDown(player_id="al", seat=0)),
    ]
    for table, command in steps:
        handler.send(table, command, T0, f"c-{handler.offset}")
    codec = handler.store.codec
    assert isinstance(codec, SnapshotCodec)
    raws = {s.stream_id: codec.encode(s) for s in handler.store.all_streams()}
    raws["wallet:al"] = codec.encode(Stream("wallet:al", initial_state("wallet:al")))
    for older, key in (("idle-unsigned", "signed"), ("idle-no-money", "money_refused")):
        stream = codec.decode(raws["idle"])
        stream.stream_id = older
        body = codec._open(codec.encode(stream))[2]
        del body[key]
        raws[older] = codec._seal(older, stream.sequence, 1, body)
    return codec, raws


async def test_a_takeover_opens_whole_the_snapshots_that_may_not_wait_and_only_those() -> None:
    codec, raws = snapshots_of_every_kind()
    for stream_id, raw in raws.items():
        sealed_for, may_not_wait = codec.may_not_wait(raw)
        whole = codec.decode(raw)
        hot = whole.signed_incomplete or whole.money_incomplete or may_come_due(whole)
        assert (sealed_for, may_not_wait) == (stream_id, hot), stream_id
    store = PartitionStore(0, codec=codec)
    store.cold.update(raws)
    read = reading(store)
    await read.open_snapshots(T0)
    assert set(store.streams) == {"timed", "boxes", "idle-unsigned", "idle-no-money"}
    assert set(store.cold) == {"idle", "wallet:al"}
    assert store.cold["idle"] == raws["idle"]  # left as read, its answers not decoded
    assert store.snapshot_bytes == {stream_id: len(raw) for stream_id, raw in raws.items()}


UNREADABLE = {
    "a refusal code this release does not know": ("money_refused", {"a_newer_code": [0]}),
    "an answer without its command id": ("results", [{"status": "accepted"}]),
    "a time that is not one": ("last_seen", {"al": "not a time"}),
    "no answers at all": ("results", None),
}


@pytest.mark.parametrize("why", sorted(UNREADABLE))
async def test_a_snapshot_that_does_not_read_fails_the_takeover_and_stays(why: str) -> None:
    """An idle table's snapshot that this release cannot read fails the takeover as it always
    did (the partition waits and retries: a handler that reads it may take it), not the first
    command that thaws the table, which would fail every batch of the partition after it; and
    a thaw that fails leaves the snapshot where it was, not the table gone."""
    codec, raws = snapshots_of_every_kind()
    field, value = UNREADABLE[why]
    stream = codec.decode(raws["idle"])
    body = codec._open(raws["idle"])[2]
    if value is None:
        del body[field]
    else:
        body[field] = value
    raw = codec._seal("idle", stream.sequence, 1, body)
    store = PartitionStore(0, codec=codec)
    store.cold["idle"] = raw
    read = reading(store)
    with pytest.raises((ValueError, KeyError)):
        await read.open_snapshots(T0)
    with pytest.raises((ValueError, KeyError)):
        store.get("idle")
    assert store.cold["idle"] == raw and "idle" not in store.streams and store.holds("idle")


async def test_checking_distrusted_snapshots_reads_them_off_the_disk_one_at_a_time() -> None:
    """The cold streams are kept on disk (``SpilledStreams``): the check of a distrusted
    checkpoint's snapshots reads each in turn, not all of them into memory at once (a version
    of it held 101 MB at 2,000 full-window tables)."""
    _, _, _, snapshot, _, codec = measure(1, 1000)
    assert isinstance(codec, SnapshotCodec)
    stream = codec.decode(snapshot)
    store = PartitionStore(0, codec=codec, cold=SpilledStreams())
    tables = 300
    for number in range(tables):
        stream.stream_id = f"table-{number}"
        store.cold[stream.stream_id] = codec.encode(stream)
    read = reading(store)
    tracemalloc.start()
    try:
        await read.drop_snapshots("another key signed the checkpoint")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        store.close()
    assert not store.cold
    # one at a time: one decode at most (about 1.1 MB); all of them read: over 15 MB
    assert peak < tables * len(snapshot) / 8, peak
