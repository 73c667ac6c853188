"""The projection worker's rebalance listener, without a broker.

A batch put back while the worker is seeking its partitions is read again: the rebalance
callback seeks the assigned partitions one after the other; a batch of an
already sought partition may arrive before the last seek is done. The worker drops it (some
partition is still unsynced) and puts it back, so that partition must be sought again: if the
running seek marked it synced, the dropped records were never folded by this worker (found on
the real broker by ``test_projection_poison``; shown here without one).
"""

from __future__ import annotations

import asyncio

from aiokafka import TopicPartition
from prometheus_client import REGISTRY

from blackjack.projections.health import FoldHealth
from blackjack.projections.metrics import LAG, POSITION
from blackjack.projections.positions import SeekToStoredPositions
from blackjack.projections.writer import Record

TOPIC = "blackjack.events"
P0, P1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)


class Consumer:
    def __init__(self) -> None:
        self.seeks: list[tuple[TopicPartition, int]] = []

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.seeks.append((tp, offset))

    async def end_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """Read before a seek (a store of another log: ``other_log``): far past the store."""
        return dict.fromkeys(partitions, 10**9)


class GatedStore:
    """Stored positions, answered once the test opens the gate."""

    def __init__(self, positions: dict[tuple[str, int], int]) -> None:
        self.positions = positions
        self.asked = asyncio.Event()
        self.gate = asyncio.Event()

    async def stored_positions(self) -> dict[tuple[str, int], int]:
        self.asked.set()
        await self.gate.wait()
        return self.positions


async def test_a_partition_put_back_during_a_sync_is_sought_again() -> None:
    consumer = Consumer()
    store = GatedStore({(TOPIC, 0): 7, (TOPIC, 1): 3})
    # no lag watch: on the session's loop it would outlive the test and log into others'
    # output every few seconds (a fake consumer has no end offsets)
    listener = SeekToStoredPositions(store, lambda: consumer, lag_every=None)  # type: ignore[arg-type]
    assigning = asyncio.create_task(listener.on_partitions_assigned({P0, P1}))
    await store.asked.wait()  # the rebalance's sync is reading the store
    putting = asyncio.create_task(listener.put_back([Record(TOPIC, 0, 7, b"")]))
    store.gate.set()  # runs after ``putting`` has put P0 back and queued for the lock
    await asyncio.gather(assigning, putting)
    assert consumer.seeks == [(P0, 7), (P1, 3), (P0, 7)]
    assert listener.unsynced == set()
    # each position is shown from the assignment on, before any new event is folded there
    for partition, offset in (("0", 7), ("1", 3)):
        labels = {"topic": TOPIC, "partition": partition}
        assert REGISTRY.get_sample_value("blackjack_projection_position", labels) == offset


async def test_revoked_partitions_leave_no_stale_series_behind() -> None:
    topic = "revoked.blackjack.events"
    health = FoldHealth(stuck_after=1)
    listener = SeekToStoredPositions(GatedStore({}), lambda: None, health)  # type: ignore[arg-type]
    for partition in ("0", "1"):
        POSITION.labels(topic, partition).set(40)
        LAG.labels(topic, partition).set(2)
    health.failed([Record(topic, 0, 40, b"")], Record(topic, 0, 40, b""), ValueError("bad"))
    await listener.on_partitions_revoked({TopicPartition(topic, 0)})
    assert health.folding
    for name in ("blackjack_projection_position", "blackjack_projection_lag"):
        assert REGISTRY.get_sample_value(name, {"topic": topic, "partition": "0"}) is None
        assert REGISTRY.get_sample_value(name, {"topic": topic, "partition": "1"}) is not None
    assert (
        REGISTRY.get_sample_value(
            "blackjack_projection_stuck_offset", {"topic": topic, "partition": "0"}
        )
        is None
    )
