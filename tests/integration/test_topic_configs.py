"""The topics the service creates carry every config ``bus.topics.topic_configs`` states, as
the broker reports them: the service does not rely on a cluster's own defaults."""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from blackjack.bus.topics import MESSAGE_MAX_BYTES, RECORD_MAX_BYTES, topic_configs
from tests.integration.conftest import KafkaSpace

pytestmark = [pytest.mark.integration, pytest.mark.also_on_three_nodes]


async def test_every_topic_has_the_configs_the_service_states(kafka_space: Any) -> None:
    space: KafkaSpace = await kafka_space(partitions=1)  # made by ensure_topics
    stated = topic_configs(space.topics, space.settings)
    admin = AIOKafkaAdminClient(bootstrap_servers=space.bootstrap)
    await admin.start()
    try:
        responses = await admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, name) for name in stated]
        )
    finally:
        await admin.close()
    found: dict[str, dict[str, str]] = {}
    for response in responses:
        for error_code, error_message, _kind, name, entries in response.resources:
            assert not error_code, (name, error_message)
            found[name] = {entry[0]: entry[1] for entry in entries}
    for name, configs in stated.items():
        for key, value in configs.items():
            assert found[name][key] == value, (name, key)
    # a transaction's records go out as one batch of up to RECORD_MAX_BYTES, header included
    for name in (space.topics.commands, space.topics.results, space.topics.events):
        assert int(found[name]["max.message.bytes"]) == MESSAGE_MAX_BYTES > RECORD_MAX_BYTES
