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

``back_off_failed_metadata_updates`` wraps the update every such wait ends with
(``AIOKafkaClient._metadata_update``, run by the client's metadata task): one that failed
returns after the client's ``retry_backoff_ms`` (100 ms by default), so a client retries at
most about 10 times a second, as its other loops do. An update that succeeds returns at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiokafka import client as aiokafka_client


def back_off_failed_metadata_updates() -> None:
    """Wrap aiokafka's metadata update (once a process: again, nothing)."""
    client = aiokafka_client.AIOKafkaClient
    if getattr(client._metadata_update, "backs_off", False):
        return
    metadata_update = client._metadata_update

    async def metadata_update_backed_off(
        self: aiokafka_client.AIOKafkaClient, cluster_metadata: Any, topics: Any
    ) -> bool:
        updated: bool = await metadata_update(self, cluster_metadata, topics)
        if not updated:
            await asyncio.sleep(self._retry_backoff)
        return updated

    metadata_update_backed_off.backs_off = True  # type: ignore[attr-defined]
    metadata_update_backed_off.unwrapped = metadata_update  # type: ignore[attr-defined]
    client._metadata_update = metadata_update_backed_off
