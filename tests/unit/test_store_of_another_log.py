"""The worker given partitions its store holds positions past the end of
(``projections.other_log``): never sought there (the broker would reset the position to the
partition's start, and the rest of another log would be folded on top), the worker stopped;
but a store that is new, just caught up, or met with an end of 0 the broker has not
reported yet (a transient metadata gap) goes on as before. Before, every partition was sought
to its stored position, wherever the log ended."""

from __future__ import annotations

import pytest
from aiokafka import TopicPartition
from structlog.testing import capture_logs

from blackjack.projections import other_log
from blackjack.projections.health import FoldHealth
from blackjack.projections.other_log import PastTheEnd, StoreOfAnotherLog, past_the_end
from blackjack.projections.positions import SeekToStoredPositions
from tests.unit.test_projection_worker import Consumer, Store

TOPIC = "blackjack.events"
P0, P1, P2, P3 = (TopicPartition(TOPIC, n) for n in range(4))


class Paused(Consumer):
    """A consumer whose partitions' ends are read in turns (``answers``), which notes what it
    is asked to pause."""

    def __init__(self, answers: list[dict[TopicPartition, int]]) -> None:
        super().__init__()
        self.answers = answers
        self.reads = 0
        self.paused: set[TopicPartition] = set()

    async def end_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        answer = self.answers[min(self.reads, len(self.answers) - 1)]
        self.reads += 1
        return {tp: answer[tp] for tp in partitions}

    def pause(self, tp: TopicPartition) -> None:
        self.paused.add(tp)


def test_a_position_past_the_end_or_on_a_partition_not_there_is_found() -> None:
    stored = {(TOPIC, 0): 120, (TOPIC, 1): 7, (TOPIC, 2): 0, (TOPIC, 3): 5, (TOPIC, 4): 9}
    ends = {(TOPIC, 0): 8, (TOPIC, 1): 7, (TOPIC, 2): 0, (TOPIC, 3): 0}
    assert past_the_end(stored, ends) == [
        PastTheEnd(TOPIC, 0, 120, 8),
        PastTheEnd(TOPIC, 3, 5, 0),
        PastTheEnd(TOPIC, 4, 9, None),
    ]
    assert [found.unconfirmed for found in past_the_end(stored, ends)] == [False, True, True]


async def test_a_worker_sought_past_the_end_stops_and_a_zero_end_is_read_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(other_log, "END_READ_WAIT_S", 0.0)
    # P0 past its end; P1 just caught up; P2 a new partition of the store; P3 an end of 0
    # the broker has not reported yet, then reported
    consumer = Paused([{P0: 8, P1: 40, P3: 0}, {P0: 8, P1: 40, P3: 90}])
    health = FoldHealth()
    store = Store({(TOPIC, 0): 120, (TOPIC, 1): 40, (TOPIC, 3): 60})
    positions = SeekToStoredPositions(store, lambda: consumer, health, lag_every=None)  # type: ignore[arg-type]
    with capture_logs() as logs:
        await positions.on_partitions_assigned({P0, P1, P2, P3})
    assert consumer.sought == {P1: 40, P2: "beginning", P3: 60}  # P0 never sought
    assert consumer.paused == {P0} and positions.unsynced == {P0}
    assert isinstance(health.fatal, StoreOfAnotherLog)
    assert health.fatal.exit_code == 2 and health.fatal_reason == "store_of_another_log"
    assert "blackjack.events[0] stored at 120, past its end 8" in str(health.fatal)
    assert health.status()["status"] == "store_of_another_log"  # /readyz: 503 with it
    [critical] = [line for line in logs if line["log_level"] == "critical"]
    assert critical["partitions"] == [{"partition": f"{TOPIC}[0]", "stored": 120, "end": 8}]


async def test_an_end_of_0_that_stays_0_counts_after_it_is_read_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A topic created again and still empty: the end of 0 is read ``END_READS`` times."""
    monkeypatch.setattr(other_log, "END_READ_WAIT_S", 0.0)
    consumer = Paused([{P0: 0}])
    health = FoldHealth()
    positions = SeekToStoredPositions(
        Store({(TOPIC, 0): 30}),  # type: ignore[arg-type]
        lambda: consumer,
        health,
        lag_every=None,
    )
    await positions.on_partitions_assigned({P0})
    assert consumer.reads == other_log.END_READS
    assert consumer.sought == {} and consumer.paused == {P0}
    assert isinstance(health.fatal, StoreOfAnotherLog)
    assert "stored at 30, past its end 0" in str(health.fatal)
