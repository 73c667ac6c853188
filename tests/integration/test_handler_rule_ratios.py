"""A rule override's ratio (``blackjack_pays``, ``reshuffle.used``) is written into the table's
``TableOpened`` and read back by every rebuild: one whose terms Python cannot write as digits
(past 4,300 of them) was taken, and the event said ``"<unprintable Fraction object>"``. The
next handler of the partition could not read its log, and every table and wallet on it
stopped. Such an override is refused ``invalid_rules`` and the partition goes on."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from blackjack.bus.topics import partition_for
from blackjack.domain import commands as cmd
from tests.integration.conftest import WAIT_S, KafkaSpace, running_handler, verify_stream

pytestmark = pytest.mark.integration

NEIGHBOUR = "ratio-neighbour"

RATIOS = {
    # 10^-4300: a denominator of 4,301 digits
    "ratio-used": {"reshuffle": {"kind": "penetration", "used": "1e-4300"}},
    # 1.9...: a numerator of 4,301 digits, computed from 4,299 decimals, never parsed whole
    "ratio-pays": {"blackjack_pays": "19." + "0" * 4298 + "1e-1"},
}


async def test_a_ratio_no_reader_can_write_is_refused_and_a_rebuild_reads_the_partition(
    kafka_space: Any,
) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)  # every stream on one partition
    assert {partition_for(s, 1) for s in (*RATIOS, NEIGHBOUR)} == {0}
    async with running_handler(space.config()), space.client() as client:
        opened = await client.execute(NEIGHBOUR, cmd.OpenTable(variant="mini-h17"))
        assert opened.status == "accepted"
        for table, overrides in RATIOS.items():
            # sent as JSON text: the client's model would have to hold the number first
            body = {"type": "OpenTable", "variant": "mini-h17", "overrides": overrides}
            doc = {"command_id": f"open-{table}", "stream_id": table, "command": body}
            await client.send_raw(table.encode(), json.dumps(doc).encode())
        answers = [await client.result(f"open-{table}") for table in RATIOS]
    # A new owner of the partition (a restart, a takeover) rebuilds it from the log.
    async with running_handler(space.config()), space.client() as client:
        async with asyncio.timeout(WAIT_S):
            seated = await client.execute(NEIGHBOUR, cmd.SitDown(player_id="p"))
        assert seated.status == "accepted"
    for answer in answers:
        assert answer.status == "rejected" and answer.rejection is not None, answer
        assert answer.rejection.code == "invalid_rules", answer.rejection
    await verify_stream(space, NEIGHBOUR)
