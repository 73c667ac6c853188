"""The NotEnoughReplicas probe (``python -m blackjack.loadtest.verification``) changes a
broker setting while it runs: it must leave the broker's settings as it found them (Kafka's
AlterConfigs replaces all of a broker's dynamic settings at once), and refuse a cluster it
must not touch. On a broker of the module's own: the probe turns transaction verification off
on the whole broker for a while, which tests sharing the broker would run under (a review)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from blackjack.loadtest.verification import ProbeRefused, _dynamic_settings, _set, probe
from tests.integration.infra import PrivateBroker

pytestmark = pytest.mark.integration
BROKER = 1  # deploy/kafka/kafka.sh's node.id


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    broker = PrivateBroker(tmp_path_factory.mktemp("verification") / "kafka")
    broker.up()
    try:
        yield broker.bootstrap
    finally:
        broker.down()


@pytest.fixture
async def admin(bootstrap: str) -> AsyncIterator[AIOKafkaAdminClient]:
    client = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await client.start()
    before = await _dynamic_settings(client, BROKER)
    try:
        yield client
    finally:
        await _set(client, BROKER, before)
        await client.close()


async def settled(admin: AIOKafkaAdminClient, expected: dict[str, str]) -> dict[str, str]:
    """The broker's dynamic settings once they read as ``expected`` (a change reaches what
    DescribeConfigs reads a moment after AlterConfigs returns; Kafka has nothing to await)."""
    async with asyncio.timeout(30):
        while (found := await _dynamic_settings(admin, BROKER)) != expected:
            await asyncio.sleep(0.1)
    return found


async def test_the_probe_leaves_the_brokers_settings_as_it_found_them(
    bootstrap: str, admin: AIOKafkaAdminClient
) -> None:
    """The diff review: it wiped the broker's other dynamic settings and set verification
    back to on whatever it had been."""
    made = {"log.cleaner.threads": "2", "transaction.partition.verification.enable": "false"}
    await _set(admin, BROKER, made)
    await settled(admin, made)
    runs = await probe(bootstrap, 3, BROKER, 1)
    assert [(run.verification, run.transactions) for run in runs] == [(True, 9), (False, 9)]
    assert await settled(admin, made) == made


async def test_the_probe_refuses_a_broker_that_is_not_the_clusters_only_one(
    bootstrap: str, admin: AIOKafkaAdminClient
) -> None:
    with pytest.raises(ProbeRefused, match="a development broker only"):
        await probe(bootstrap, 1, BROKER + 1, 1)
