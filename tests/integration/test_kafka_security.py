"""The service on a broker that requires TLS and SASL, as production Kafka clusters with ACLs
do: the local broker's SASL_SSL listener (deploy/kafka/kafka.sh: a self-signed certificate,
SASL/PLAIN). A handler creates its topics, takes commands from a client and writes its events
there; the audit's reader and a projection worker fold them; a wrong password or a client
without TLS gets nothing."""

from __future__ import annotations

import dataclasses
import json
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError

from blackjack.bus.settings import KafkaSecurity, KafkaSettings
from blackjack.bus.topics import Topics, delete_topics
from blackjack.client import BlackjackClient
from blackjack.command_handler.config import HandlerConfig
from blackjack.domain import commands as cmd
from blackjack.messages.sealing import ShoeSeal
from blackjack.projection_worker.settings import ProjectionSettings
from blackjack.projection_worker.worker import build_broker
from blackjack.projections.rebuild import read_topic
from blackjack.projections.store import ProjectionStore
from blackjack.projections.writer import ProjectionWriter, Record
from tests.integration.conftest import WAIT_S, accept, running_handler
from tests.integration.infra import SaslListener, kafka_sasl

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def listener() -> SaslListener:
    return kafka_sasl()


def secure_env(listener: SaslListener, **extra: str) -> dict[str, str]:
    """What an operator sets for a cluster that requires TLS and SASL."""
    return {**listener.service_env(), **extra}


async def test_handler_client_audit_reader_and_projection_worker_over_sasl_ssl(
    listener: SaslListener, tmp_path: Path
) -> None:
    prefix = f"sec{uuid.uuid4().hex[:8]}."
    env = secure_env(listener, BLACKJACK_TOPIC_PREFIX=prefix, BLACKJACK_PARTITIONS="2")
    kafka = KafkaSettings.from_env(env)
    assert kafka.security.protocol == "SASL_SSL"
    topics = Topics(prefix)
    config = dataclasses.replace(
        HandlerConfig(shoe_key_hex=ShoeSeal.new_key_hex(), kafka=kafka),
        session_timeout_ms=6000,
        instance_id=f"secure-{prefix}",
    )
    try:
        async with (
            running_handler(config),  # creates its topics over SASL_SSL too
            BlackjackClient.from_env(env) as client,  # the same settings, from the same place
        ):
            await accept(
                client,
                "vault-table",
                cmd.OpenTable(variant="mini-h17"),
                cmd.SitDown(player_id="ann", seat=0),
                cmd.Deposit(player_id="ann", amount=2_500),
            )

        # the audit's and rebuild's reader
        read: list[Record] = []
        await read_topic(listener.bootstrap, topics.events, read.extend, security=kafka.security)
        kinds = [json.loads(r.value)["type"] for r in read]
        assert {"TableOpened", "SeatTaken", "FundsDeposited"} <= set(kinds), kinds
        assert len(kinds) == len(set(kinds)) == sum(1 for _ in read)

        # a projection worker (FastStream) with the same settings
        projections = ProjectionSettings.from_env(
            {**env, "BLACKJACK_DB_URL": f"sqlite+aiosqlite:///{tmp_path}/read.db"}
        )
        store = ProjectionStore(projections.db_url)
        await store.migrate()
        writer = ProjectionWriter(store)
        broker = build_broker(projections, writer)
        await broker.start()
        try:
            # past the last event of each partition (its transaction marker takes an offset)
            last = {r.position: r.offset + 1 for r in sorted(read, key=lambda r: r.offset)}
            await writer.wait_for(last, WAIT_S)
        finally:
            await broker.stop()
            await store.close()
    finally:
        await delete_topics(kafka, topics)


async def connects(security: KafkaSecurity, bootstrap: str) -> bool:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, request_timeout_ms=5000, **security.client_options()
    )
    try:
        await producer.start()
    except (KafkaError, OSError):
        return False
    finally:
        await producer.stop()
    return True


@pytest.mark.parametrize(
    "change",
    [
        {"BLACKJACK_KAFKA_SASL_PASSWORD": "not-the-password"},
        # no TLS on a TLS listener
        {"BLACKJACK_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "BLACKJACK_KAFKA_SSL_CAFILE": ""},
        {"BLACKJACK_KAFKA_SSL_CAFILE": ""},  # a certificate the system does not trust
    ],
)
async def test_a_client_the_listener_does_not_accept_gets_nothing(
    listener: SaslListener, change: dict[str, str]
) -> None:
    good = KafkaSecurity.from_env(secure_env(listener))
    assert await connects(good, listener.bootstrap)  # the listener is there, and takes these
    wrong = KafkaSecurity.from_env({**secure_env(listener), **change})
    assert not await connects(wrong, listener.bootstrap)
