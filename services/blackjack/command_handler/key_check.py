"""Whether the handler's shoe key is its deployment's, told by the shoes its log holds.

A handler with another key (a key file's mount missing, so a new key was made; another
deployment's key given) opens none of the shoes and snapshots sealed before, and holds the
partitions that have any ``failed``; but it would serve the partitions that have none, and
seal their new shoes under its key. Once the right key is back, those shoes open for no one
but their reveal: their tables stop for good, and the money in play with them (an upgrade
drill found it). So before it takes a partition, the handler reads back from the end of each
events partition to its last shoes: if shoes are sealed there and none under its key, the key
is not the deployment's, and it does not start (``NotTheDeploymentsKey``, exit 2). A log
whose every partition's last ``MOST`` records hold no shoe tells nothing: it starts.

One shoe under its key is enough to start: after such an incident, the right key's handler
finds the shoes the wrong one sealed too, and must still serve the partitions that hold none
of them. A new deployment's log holds no shoe yet: any key starts it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import structlog
from aiokafka import AIOKafkaConsumer, TopicPartition

from blackjack.bus.topics import Topics
from blackjack.command_handler.replay import read_to_end
from blackjack.configuration import ConfigurationError
from blackjack.messages.sealing import ShoeSeal
from blackjack.messages.wire import SealedShoeShuffled, decode

WINDOW = 2_000
"""Records read at a time, from the end of each events partition back: a table in play
shuffles every few rounds, so a partition in use has a shoe among its last records."""

MOST = 20_000
"""Records read at most per partition (ten windows), when no shoe is found nearer its end (a
partition of wallets, quiet tables): a bounded start, whatever the log's length."""

log = structlog.get_logger("blackjack.command_handler")

_SHUFFLED = b"blackjack.ShoeShuffled."
"""The start of a sealed shoe's ``ce_type`` header (its version follows)."""


class NotTheDeploymentsKey(ConfigurationError):
    """The shoes of the log are sealed under another key than the handler's."""

    def __init__(self, topic: str, others: dict[str, int], own: str) -> None:
        found = ", ".join(
            f"{key_id} (in {count} partition(s))" for key_id, count in sorted(others.items())
        )
        super().__init__(
            f"the shoe key is not this deployment's: the last shoes on {topic} are sealed "
            f"under key id {found}, none under this handler's key id(s) ({own}); mount the "
            "deployment's key (BLACKJACK_SHOE_KEY_FILE, BLACKJACK_SHOE_KEY) and start again. "
            "Nothing was served: a handler with this key would seal new shoes no other "
            "handler opens"
        )


async def check_the_key_against_the_log(
    reader: AIOKafkaConsumer, topics: Topics, partitions: int, seal: ShoeSeal, timeout: float
) -> None:
    """``NotTheDeploymentsKey`` when the shoes nearest the end of the events partitions (in
    the last ``MOST`` records of each) are sealed under keys, and none under any of ``seal``'s
    (a rotation's keys are one deployment's).
    ``reader`` holds the events partitions in its assignment (``replay.assign_reader``). A
    record that is not a readable shoe is stepped over; a read that does not end within
    ``timeout`` leaves the key unchecked (logged), not the handler unstarted: a slow broker
    at a start is more common than a wrong key."""
    deadline = time.monotonic() + timeout
    others: dict[str, int] = {}
    tps = [TopicPartition(topics.events, p) for p in range(partitions)]
    starts = await reader.beginning_offsets(tps)
    ends = await reader.end_offsets(tps)
    try:
        for tp in tps:
            found = await _key_ids_near_the_end(reader, tp, starts[tp], ends[tp], deadline)
            if found.intersection(seal.key_ids):
                return  # the deployment's (a key of its rotation): whatever else is sealed there
            for key_id in found:
                others[key_id] = others.get(key_id, 0) + 1
    except TimeoutError:
        log.warning("the shoe key was not checked against the log: reading it took too long")
        return
    if others:
        raise NotTheDeploymentsKey(topics.events, others, ", ".join(seal.key_ids))


async def _key_ids_near_the_end(
    reader: AIOKafkaConsumer, tp: TopicPartition, start: int, end: int, deadline: float
) -> set[str]:
    """The key ids of the shoes in the last window of ``tp`` that holds any (``WINDOW``
    records at a time back from ``end``, ``MOST`` at most)."""
    upper = end
    while upper > max(start, end - MOST):
        lower = max(start, upper - WINDOW, end - MOST)
        found = {
            key_id
            async for record in read_to_end(reader, tp, lower, upper, deadline)
            if (key_id := _key_id(record.headers, record.value)) is not None
        }
        if found:
            return found
        upper = lower
    return set()


def _key_id(headers: Sequence[tuple[str, bytes | None]], value: bytes | None) -> str | None:
    """The key id of a shoe the handler sealed, for a record that is one; else None (another
    event, a shoe sealed before key ids, or a record the service did not write)."""
    if not any(k == "ce_type" and v is not None and v.startswith(_SHUFFLED) for k, v in headers):
        return None  # (read before decoding: most records are other events)
    try:
        data = decode(value or b"").data
    except (ValueError, KeyError, TypeError):  # as ``wire.not_the_service_s`` steps over
        return None
    return ShoeSeal.key_id_of(data.sealed) if isinstance(data, SealedShoeShuffled) else None
