"""Topics just made, on three Kafka nodes of the test's own (``deploy/kafka/cluster.sh``).

Each broker answers metadata from its own copy of the cluster's, which takes a topic just made
in its own time: after the controller's answer to the create, after the broker that answered
the service's ``describe_topics``. A single broker has one copy; on three, a process started
on topics just made asked a broker that had not taken them yet: the command handlers' group
leader assigned the handler no partition (it sat "ready" with none until its consumer's
metadata refresh, 5 minutes; 1 handler of 4 here), and a client's results reader never learnt
the results topic's id. ``ensure_topics`` now returns once every broker has every topic with
its partitions.

The lag is the brokers' own, not made by the test: a few rounds, each on topics made at once,
make a broker that lags near certain (before the fix each of three runs failed, in its
first or third round: a broker without the topics)."""

from __future__ import annotations

import uuid

import pytest
from aiokafka import AIOKafkaConsumer

from blackjack.bus.topics import ensure_topics
from blackjack.domain import commands as cmd
from tests.integration.conftest import KafkaSpace, every_broker_s, running_handler
from tests.integration.infra import PrivateCluster

pytestmark = pytest.mark.integration

ROUNDS = 4
PARTITIONS = 3


async def missing_on_some_broker(bootstrap: str, topics: tuple[str, ...]) -> list[str]:
    """(node, topic) of each broker that has not ``topics`` with ``PARTITIONS`` partitions."""
    looking = AIOKafkaConsumer(bootstrap_servers=bootstrap)
    await looking.start()
    try:
        missing = []
        for topic in topics:
            states = await every_broker_s(looking, topic)
            assert len(states) == PrivateCluster.NODES
            missing += [
                f"{node}: {topic}"
                for node, state in states.items()
                if state is None or state.partitions != frozenset(range(PARTITIONS))
            ]
        return sorted(missing)
    finally:
        await looking.stop()


async def test_topics_just_made_are_on_every_broker_and_served_at_once(
    private_cluster: PrivateCluster,
) -> None:
    for round_ in range(ROUNDS):
        space = KafkaSpace(private_cluster.bootstrap, f"t{uuid.uuid4().hex[:10]}.", PARTITIONS)
        await ensure_topics(space.settings, space.topics)
        # before: a broker or two had not taken them yet
        assert await missing_on_some_broker(space.bootstrap, space.topics.all()) == [], round_
        async with running_handler(space.config()) as handler, space.client() as client:
            # before: no partition (the group leader's metadata had no partition of them)
            assert handler.owned_partitions() == set(range(PARTITIONS)), round_
            # before: None (the broker the reader asked first had no results topic)
            assert client._results_reader.topic_id is not None, round_
            result = await client.execute("cluster-1", cmd.OpenTable(variant="mini-h17"))
            assert result.status == "accepted", result
