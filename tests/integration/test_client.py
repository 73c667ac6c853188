"""The client library keeps answering when the results topic holds a result it cannot read
(a newer service's rejection code, say): that one is skipped, the others still arrive."""

from __future__ import annotations

import json

import pytest
from aiokafka import AIOKafkaProducer
from structlog.testing import capture_logs

from blackjack.client import BlackjackClient
from blackjack.command_handler.service import CommandHandler
from blackjack.domain import commands as cmd
from tests.integration.conftest import KafkaSpace

pytestmark = [pytest.mark.integration, pytest.mark.also_on_three_nodes]


async def test_a_result_the_client_cannot_read_does_not_stop_the_others(
    space: KafkaSpace, handler: CommandHandler, client: BlackjackClient
) -> None:
    newer = {
        "command_id": "from-a-newer-service",
        "stream_id": "client-table",
        "status": "rejected",
        "rejection": {"code": "a_code_from_the_future", "message": "-"},
    }
    producer = AIOKafkaProducer(bootstrap_servers=space.bootstrap)
    await producer.start()
    with capture_logs() as logs:
        try:
            await producer.send_and_wait(
                space.topics.results, json.dumps(newer).encode(), key=b"client-table"
            )
        finally:
            await producer.stop()
        result = await client.execute("client-table", cmd.OpenTable(variant="mini-h17"))
    assert result.status == "accepted"
    assert any(entry["event"] == "a command result this client cannot read" for entry in logs)
