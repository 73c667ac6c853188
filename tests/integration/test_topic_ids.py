"""``bus.topic_ids`` on the real broker: a topic's id, which aiokafka 0.14 neither asks for nor
keeps (the client's reader tells a topic made again by it: test_client_lost_answers.py), and a
broker that gives none told as such."""

from __future__ import annotations

from typing import Any

import pytest

from blackjack.bus.clients import ScopedConsumer
from blackjack.bus.topic_ids import METADATA_KEY, TopicIdsUnsupported
from tests.integration.conftest import KafkaSpace

pytestmark = pytest.mark.integration


async def test_a_topic_s_id_and_partitions_and_none_for_no_topic(kafka_space: Any) -> None:
    space: KafkaSpace = await kafka_space(partitions=2)
    topic = space.topics.results
    consumer = ScopedConsumer(bootstrap_servers=space.bootstrap)
    await consumer.start()
    try:
        first = await consumer.topic_state(topic)
        assert first is not None and first.topic_id is not None
        assert first.partitions == {0, 1}
        assert await consumer.topic_state(topic) == first  # asked again: the same
        other = await consumer.topic_state(space.topics.events)
        assert other is not None and other.topic_id not in (None, first.topic_id)
        assert await consumer.topic_state(f"{space.prefix}never-made") is None
    finally:
        await consumer.stop()


async def test_a_broker_without_topic_ids_is_told(kafka_space: Any) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)
    consumer = ScopedConsumer(bootstrap_servers=space.bootstrap)
    await consumer.start()
    try:
        await consumer.topic_state(space.topics.results)  # its connection made
        for connection in consumer._client._conns.values():
            # as a broker before Kafka 2.8 negotiates it: Metadata up to v9
            connection._versions[METADATA_KEY] = (0, 9)
        with pytest.raises(TopicIdsUnsupported):
            await consumer.topic_state(space.topics.results)
    finally:
        await consumer.stop()
