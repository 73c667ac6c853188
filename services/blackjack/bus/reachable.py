"""Waiting for the brokers at start-up.

A process started before its brokers answer (a cluster coming up in another order, a broker
restarting) waits for them instead of exiting with a trace, to be restarted again and again
(its HTTP probes answer meanwhile, alive and not ready). The wait never ends by itself: the
caller runs it under its stop (SIGTERM), which ends it at once. A wrong address, and for
aiokafka a TLS or SASL failure at bootstrap too, look the same as a broker that is down
("Unable to bootstrap"): the lines of the wait say which address is tried.
"""

from __future__ import annotations

import asyncio

import structlog
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaConnectionError

from blackjack.bus.settings import KafkaSecurity

log = structlog.get_logger("blackjack.bus")

RETRY_SECONDS = 2.0
REPEAT_LOG_EVERY = 30
"""The first failure is logged, then one line every this many in a row (once a minute)."""


async def wait_for_brokers(
    bootstrap: str, security: KafkaSecurity, *, retry_seconds: float = RETRY_SECONDS
) -> None:
    """Return once a broker of ``bootstrap`` answers a metadata request."""
    attempts = 0
    while True:
        admin = AIOKafkaAdminClient(
            bootstrap_servers=bootstrap, client_id="blackjack-probe", **security.client_options()
        )
        try:
            await admin.start()
        except KafkaConnectionError as error:
            attempts += 1
            if attempts == 1 or attempts % REPEAT_LOG_EVERY == 0:
                log.warning(
                    "Kafka unreachable; waiting for it",
                    bootstrap=bootstrap,
                    attempts=attempts,
                    error=str(error)[:300],
                )
        else:
            if attempts:
                log.info("Kafka reachable", bootstrap=bootstrap, attempts=attempts)
            return
        finally:
            await admin.close()
        await asyncio.sleep(retry_seconds)
