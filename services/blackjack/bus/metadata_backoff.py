"""aiokafka's metadata updates, after one that failed, wait ``retry_backoff_ms`` first.

A producer with a batch for a partition whose leader it does not know asks for a metadata
update and, once that is answered, asks again at once: its sender waits on
``force_metadata_update()`` alone, no backoff (``producer/sender.py``, "try to update
cluster metadata and wait backoff time", which it does not; aiokafka 0.14.0). A broker
stopped (``kafka.sh down``: a controlled shutdown) answers a metadata request in its last
moments with every partition it led leaderless (-1); from then on each update fails at once,
connection refused, and the sender asked again about 2,600 times a second, a core busy in a
platform's process (``BlackjackClient``) for as long as the broker was away
(tests/integration/measure_client_outage.py). The consumer's fetcher does the same for a
partition without a leader. No setting reaches that loop.

The update every such wait ends with (``AIOKafkaClient._metadata_update``, run by the
client's metadata task) is wrapped: one that failed returns after the client's
``retry_backoff_ms`` (100 ms by default), so a client retries at most about 10 times a
second, as its other loops do. An update that succeeds returns at once.

``back_off_client`` wraps it on one client alone (an instance attribute): the clients of
``bus.clients`` (``BlackjackClient``'s, in a platform's process whose own aiokafka clients
stay as aiokafka ships them). ``back_off_failed_metadata_updates`` wraps it on the class, for
every client of the process: the service's own processes, whose FastStream clients are built
by FastStream. Both first check the aiokafka they wrap (``bus.aiokafka_internals``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import client as aiokafka_client

from blackjack.bus.aiokafka_internals import METADATA_UPDATE, require_metadata_update


async def _backed_off(update: Any, client: Any, cluster_metadata: Any, topics: Any) -> bool:
    updated: bool = await update(client, cluster_metadata, topics)
    if not updated and not getattr(update, "backs_off", False):
        await asyncio.sleep(client._retry_backoff)
    return updated


async def metadata_update_backed_off(
    self: aiokafka_client.AIOKafkaClient, cluster_metadata: Any, topics: Any
) -> bool:
    """aiokafka's update; one that failed returns after ``retry_backoff_ms``."""
    return await _backed_off(METADATA_UPDATE, self, cluster_metadata, topics)


metadata_update_backed_off.backs_off = True  # type: ignore[attr-defined]
metadata_update_backed_off.unwrapped = METADATA_UPDATE  # type: ignore[attr-defined]


def back_off_client(client: aiokafka_client.AIOKafkaClient) -> None:
    """Wrap the metadata update of ``client`` alone. The update it wraps is its class's at
    each call (one a test counts with is counted; one the class already backs off is not
    waited after twice)."""
    require_metadata_update()

    async def backed_off(cluster_metadata: Any, topics: Any) -> bool:
        update = type(client)._metadata_update
        return await _backed_off(update, client, cluster_metadata, topics)

    backed_off.backs_off = True  # type: ignore[attr-defined]
    client._metadata_update = backed_off


def back_off_failed_metadata_updates() -> None:
    """Wrap aiokafka's metadata update for every client of this process (the service's own
    processes; once a process: again, nothing)."""
    require_metadata_update()
    client = aiokafka_client.AIOKafkaClient
    if getattr(client._metadata_update, "backs_off", False):
        return
    client._metadata_update = metadata_update_backed_off
