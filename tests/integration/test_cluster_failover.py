"""``blackjack outage`` on three Kafka nodes of the test's own (``deploy/kafka/cluster.sh``),
every topic on all three and two in sync at least, as a production cluster runs: one node
killed under load (SIGKILL, transactions open on it), kept down, started again.

What a single broker cannot show: the tables are answered while the node is down (its
partitions' leaders and its transaction coordinators move to the other two), and still
nothing is lost or done twice: every command answered, the same each time it was sent; every
table's log folds to what the handlers and the players hold, money conserved; a projection
worker's read model, folded through the failover, equals one rebuilt from offset 0. Every
client is given the three addresses, as BLACKJACK_KAFKA_BOOTSTRAP names a cluster.

No timing threshold (the failover's length depends on the machine): only that answers came
while the node was down, which a long enough outage makes certain."""

from __future__ import annotations

from typing import Any

import pytest

from blackjack.loadtest.outage import OutageConfig, run_outage
from tests.integration.drill_checks import assert_nothing_lost_nor_done_twice, line_of
from tests.integration.infra import PrivateCluster

pytestmark = pytest.mark.integration

DOWN_S = 30.0
"""Longer than the cluster's failover: the controller fences a node it has not heard from in
9 s (broker.session.timeout.ms), then moves its leaders; measured 14 s on a loaded machine."""


@pytest.mark.parametrize("node", [1, 3])  # the first address every client is given, the last
async def test_a_node_of_three_killed_under_load_the_others_answer_and_nothing_is_lost(
    private_cluster: PrivateCluster, node: int
) -> None:
    lines: list[dict[str, Any]] = []
    config = OutageConfig(
        bootstrap=private_cluster.bootstrap,
        stop_broker=private_cluster.command("kill", str(node)),
        start_broker=private_cluster.command("start", str(node)),
        tables=4,
        partitions=3,
        down_s=DOWN_S,
        settle_s=2.0,
        resend_after_s=5.0,
        timeout_s=120.0,
        replication_factor=3,
        min_insync_replicas=2,
    )
    summary = await run_outage(config, lines.append)
    assert_nothing_lost_nor_done_twice(lines, summary, tables=4)
    outage = line_of(lines, "outage")
    assert outage["answered_while_down"] > 0, outage  # the other two served meanwhile
    assert 0 < outage["longest_wait_s"] < outage["broker_away_s"], outage
