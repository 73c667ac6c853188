"""``deploy/kafka/kafka.sh`` formats its storage with the cluster id it is given, whatever its
first character.

A cluster id is 16 random bytes in URL-safe base64, so one in 64 starts with "-". Kafka's
``kafka-storage format -t ID`` then reads the id as a flag ("argument --cluster-id/-t:
expected one argument") and every node of ``cluster.sh`` failed to start: the thirty-first
session's CI lost ``test_cluster_topics.py`` to it. The id is now passed as
``--cluster-id=ID``, and ``cluster.sh`` draws again rather than make such an id."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient

from tests.integration.infra import PrivateBroker

pytestmark = pytest.mark.integration

DASHED_ID = "-3tZ5o7ZTSKpB3Fh1vTwqQ"  # 16 bytes in URL-safe base64, as kafka-storage makes


async def test_a_cluster_id_starting_with_a_dash_formats_and_the_broker_serves(
    tmp_path: Path,
) -> None:
    broker = PrivateBroker(tmp_path / "kafka")
    broker.env["KAFKA_CLUSTER_ID"] = DASHED_ID
    broker.up()
    try:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        try:
            assert len((await admin.describe_cluster())["brokers"]) == 1
        finally:
            await admin.close()
    finally:
        broker.down()
    meta = (tmp_path / "kafka" / "data" / "meta.properties").read_text()
    assert f"cluster.id={DASHED_ID}\n" in meta
