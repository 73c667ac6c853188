"""CPU seconds and metadata updates of a platform's process (a ``BlackjackClient`` writing
commands without pause) while its broker is stopped, with aiokafka's metadata updates as
they are (``before``) and backed off after a failure (``bus.metadata_backoff``: ``after``),
in the same process one after the other, each on a fresh private broker
(tests/integration/infra.py ``PrivateBroker``: ports and data of its own).

    PYTHONPATH=.:services .venv/bin/python -m tests.integration.measure_client_outage --down 20

A broker stopped by ``kafka.sh down`` (a controlled shutdown) answers a metadata request in
its last moments with its partitions leaderless; the producer's sender, holding batches for
them, asks again at once. A client writing without pause meets that window every time; one
sending now and then meets it only when a refresh lands in it. Printed per mode: CPU seconds
of the process over the outage, metadata updates (all clients of the process, two here) and
their rate; last, the ratios before/after."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.client import AIOKafkaClient

from blackjack.bus.topics import Topics
from blackjack.client import BlackjackClient
from tests.integration.infra import PrivateBroker


async def outage(mode: str, down_s: float, folder: Path) -> dict[str, Any]:
    broker = PrivateBroker(folder / mode)
    await asyncio.to_thread(broker.up)
    try:
        topics = Topics(f"client-outage-{uuid.uuid4().hex[:8]}.")
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        try:
            await admin.create_topics(
                [NewTopic(t, 12, 1) for t in (topics.commands, topics.results)]
            )
        finally:
            await admin.close()
        async with BlackjackClient(broker.bootstrap, topics) as client:
            # the client's clients back off (bus.clients); before: aiokafka's update as it is
            if mode == "before":
                for kafka in (client._producer.client, client._results_reader.consumer._client):  # type: ignore[union-attr]
                    vars(kafka).pop("_metadata_update")
            update = aiokafka_update = AIOKafkaClient._metadata_update
            updates = 0

            async def counted(self: AIOKafkaClient, *args: Any) -> Any:
                nonlocal updates
                updates += 1
                return await update(self, *args)

            AIOKafkaClient._metadata_update = counted
            sent = asyncio.Event()

            async def sending() -> None:
                while True:
                    with contextlib.suppress(Exception):
                        await client.send_raw(b"t", b"{}")
                        sent.set()

            sender = asyncio.create_task(sending())
            try:
                await sent.wait()
                await asyncio.to_thread(broker.down)
                updates, cpu, wall = 0, time.process_time(), time.monotonic()
                await asyncio.sleep(down_s)
                cpu, wall = time.process_time() - cpu, time.monotonic() - wall
                counted_updates = updates
            finally:
                sender.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await sender
                await asyncio.to_thread(broker.up)  # the client stops cleanly
                AIOKafkaClient._metadata_update = aiokafka_update
    finally:
        await asyncio.to_thread(broker.down)
    return {
        "mode": mode,
        "down_s": round(wall, 1),
        "cpu_s": round(cpu, 2),
        "metadata_updates": counted_updates,
        "updates_per_s": round(counted_updates / wall),
    }


async def measure(down_s: float) -> None:
    folder = Path(tempfile.mkdtemp(prefix="client-outage-"))
    before = await outage("before", down_s, folder)
    print(json.dumps(before), flush=True)
    after = await outage("after", down_s, folder)
    print(json.dumps(after), flush=True)
    print(
        json.dumps(
            {
                "cpu_before_over_after": round(before["cpu_s"] / max(after["cpu_s"], 0.01), 1),
                "updates_before_over_after": round(
                    before["metadata_updates"] / max(after["metadata_updates"], 1), 1
                ),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--down", type=float, default=20.0)
    asyncio.run(measure(parser.parse_args().down))


if __name__ == "__main__":
    main()
