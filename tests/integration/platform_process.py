"""A casino platform's process, run by ``test_client_scoped.py``: it imports ``BlackjackClient``
and runs aiokafka clients of its own beside it. It prints one JSON line when its client has
started (then waits for a line on its standard input: the test has written the results), and
one with what it found:

- ``changed``: every attribute of aiokafka's modules and classes that is no longer the object
  it was before ``blackjack`` was imported (none: aiokafka as it ships);
- ``client``: the results the client read around a record whose header name is not UTF-8;
- ``platform``: what the platform's own consumer did at that record (aiokafka's own reader
  raises there: ``UnicodeDecodeError``, or ``CorruptRecordException`` from its pure-Python one).

    python -m tests.integration.platform_process BOOTSTRAP TOPIC_PREFIX
"""

from __future__ import annotations

import asyncio
import inspect
import json
import sys
from typing import Any

import aiokafka.admin  # noqa: F401  (aiokafka's modules, loaded before blackjack's)
from aiokafka import AIOKafkaConsumer, TopicPartition


def code(value: Any) -> bool:
    """A function, class or method (not a datum aiokafka itself changes: a counter)."""
    return callable(value) or isinstance(value, (property, staticmethod, classmethod))


def aiokafka_objects() -> dict[str, Any]:
    """Every function, class and method of every aiokafka module loaded, and of every class
    defined in one."""
    found: dict[str, Any] = {}
    for name, module in sorted(sys.modules.items()):
        if not name.startswith("aiokafka") or module is None:
            continue
        for attribute, value in list(vars(module).items()):
            if code(value):
                found[f"{name}.{attribute}"] = value
            if inspect.isclass(value) and value.__module__ == name:
                for member, inner in list(vars(value).items()):
                    if code(inner):
                        found[f"{name}.{attribute}.{member}"] = inner
    return found


async def platform_reads(bootstrap: str, topic: str) -> str:
    """The platform's own consumer reads the topic from its start: what it ended with."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        read = 0
        for _ in range(20):
            try:
                batches = await consumer.getmany(tp, timeout_ms=500)
            except Exception as error:
                return f"raised {type(error).__name__} after {read} records"
            read += len(batches.get(tp, []))
        return f"read {read} records"
    finally:
        await consumer.stop()


async def main(bootstrap: str, prefix: str) -> None:
    before = aiokafka_objects()
    from blackjack.bus.topics import Topics
    from blackjack.client import BlackjackClient

    topics = Topics(prefix)
    async with BlackjackClient(bootstrap, topics) as client:
        print(json.dumps({"started": True}), flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        async with asyncio.timeout(30):
            read = [(await client.result(c)).command_id for c in ("before", "after")]
        forged = client.results_for("forged")
        platform = await platform_reads(bootstrap, topics.results)
    after = aiokafka_objects()
    changed = sorted(k for k in before if after.get(k) is not before[k])
    print(
        json.dumps(
            {"changed": changed, "client": read, "forged": len(forged), "platform": platform}
        ),
        flush=True,
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
