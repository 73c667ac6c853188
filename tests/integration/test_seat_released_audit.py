"""``blackjack audit`` of a live read model whose position falls between a round's
``RoundSettled`` and the ``SeatLeft`` (reason ``sat_out``) the same command wrote after it: a
worker's batch may end there. The stand-up is not missing, only not folded yet (the audit
counts it pending): no finding. Against the whole log, a stand-up left out is one."""

from __future__ import annotations

import pytest

from blackjack.audit.audit import run_audit
from blackjack.audit.replay import replay_stream
from blackjack.bus.topics import partition_for
from blackjack.domain import events as ev
from blackjack.messages.sealing import ShoeSeal
from blackjack.projections.rebuild import rebuild
from blackjack.projections.writer import ProjectionWriter
from tests.integration.conftest_projections import (
    PARTITIONS,
    EventsTopic,
    StoreFactory,
    publish,
    to_wire,
)
from tests.unit.test_seat_released_reading import stood_up

pytest_plugins = ["tests.integration.conftest_projections"]
pytestmark = pytest.mark.integration


async def test_a_live_position_between_the_settlement_and_the_stand_up_is_no_finding(
    events_topic: EventsTopic, stores: StoreFactory, shoe_seal: ShoeSeal
) -> None:
    wires = to_wire(stood_up().envelopes, shoe_seal)
    settled = max(i for i, w in enumerate(wires) if isinstance(w.data, ev.RoundSettled))
    assert isinstance(wires[settled + 1].data, ev.SeatLeft)  # the same command's next event
    await publish(events_topic, wires)
    # the live worker has folded every event up to the settlement, in each partition
    stop: dict[tuple[str, int], int] = {}
    offsets: dict[int, int] = {}
    for index, wire in enumerate(wires):
        partition = partition_for(wire.stream_id, PARTITIONS)
        offsets[partition] = offsets.get(partition, -1) + 1
        if index <= settled:
            stop[(events_topic.name, partition)] = offsets[partition] + 1
    live, scratch = await stores.store(), await stores.store()
    await rebuild(ProjectionWriter(live), events_topic.bootstrap, events_topic.name, stop=stop)

    report = await run_audit(live, scratch, events_topic.bootstrap, events_topic.name, shoe_seal)
    assert sum(report.pending.values()) == len(wires) - settled - 1
    assert report.ok, report.render()
    # the whole log without the stand-up is still a finding
    cut = [w for w in wires if w.stream_id == "table-1" and not isinstance(w.data, ev.SeatLeft)]
    assert replay_stream(cut, shoe_seal).findings
