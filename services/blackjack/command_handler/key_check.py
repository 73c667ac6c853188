"""Whether the handler's shoe key is its deployment's, told by the shoes its log holds.

A handler with another key (a key file's mount missing, so a new key was made; another
deployment's key given) opens none of the shoes and snapshots sealed before, and holds the
partitions that have any ``failed``; but it would serve the partitions that have none, and
seal their new shoes under its key. Once the right key is back, those shoes open for no one
but their reveal: their tables stop for good, and the money in play with them (an upgrade
drill found it). So before it takes a partition, the handler reads the end of each events
partition: if shoes are sealed there and none under its key, the key is not the
deployment's, and it does not start (``NotTheDeploymentsKey``, exit 2).

One shoe under its key is enough to start: after such an incident, the right key's handler
finds the shoes the wrong one sealed too, and must still serve the partitions that hold none
of them. A new deployment's log holds no shoe yet: any key starts it.
"""

from __future__ import annotations

import json
import time

from aiokafka import AIOKafkaConsumer, TopicPartition

from blackjack.bus.topics import Topics
from blackjack.command_handler.replay import read_to_end
from blackjack.configuration import ConfigurationError
from blackjack.messages.sealing import ShoeSeal

TAIL = 2_000
"""Records read at the end of each events partition: a busy table shuffles every few rounds,
so a partition in use has a shoe among its last records; the read takes well under a second."""

_SHUFFLED = b"blackjack.ShoeShuffled."
"""The start of a sealed shoe's ``ce_type`` header (its version follows)."""


class NotTheDeploymentsKey(ConfigurationError):
    """The shoes of the log are sealed under another key than the handler's."""

    def __init__(self, topic: str, others: dict[str, int], own: str) -> None:
        found = ", ".join(f"{key_id} ({count})" for key_id, count in sorted(others.items()))
        super().__init__(
            f"the shoe key is not this deployment's: the last shoes on {topic} are sealed "
            f"under key id {found}, none under this key's ({own}); mount the deployment's "
            "key (BLACKJACK_SHOE_KEY_FILE, BLACKJACK_SHOE_KEY) and start again. Nothing was "
            "served: a handler with this key would seal new shoes no other handler opens"
        )


async def check_the_key_against_the_log(
    reader: AIOKafkaConsumer, topics: Topics, partitions: int, seal: ShoeSeal, timeout: float
) -> None:
    """``NotTheDeploymentsKey`` when the last ``TAIL`` records of the events partitions hold
    shoes sealed under a key, and none under ``seal``'s. ``reader`` holds the events
    partitions in its assignment (``replay.assign_reader``)."""
    deadline = time.monotonic() + timeout
    others: dict[str, int] = {}
    tps = [TopicPartition(topics.events, p) for p in range(partitions)]
    starts = await reader.beginning_offsets(tps)
    ends = await reader.end_offsets(tps)
    for tp in tps:
        start = max(starts[tp], ends[tp] - TAIL)
        async for record in read_to_end(reader, tp, start, ends[tp], deadline):
            if not any(k == "ce_type" and v.startswith(_SHUFFLED) for k, v in record.headers):
                continue
            key_id = ShoeSeal.key_id_of(json.loads(record.value or b"{}")["data"]["sealed"])
            if key_id == seal.key_id:
                return  # the deployment's: whatever else is sealed there
            if key_id is not None:  # (one sealed before key ids: no evidence either way)
                others[key_id] = others.get(key_id, 0) + 1
    if others:
        raise NotTheDeploymentsKey(topics.events, others, seal.key_id)
