"""The ids the handler derives rather than draws: an event's from its stream position, and
those of the money steps the service sends itself (``<cause>.<step>``), which only its signed
commands may take."""

from __future__ import annotations

import hashlib
import uuid
from functools import cache

from blackjack.bus.topics import partition_for
from blackjack.domain.transfers import DECLINES_PREFIX

EVENT_ID_NAMESPACE = uuid.UUID("6f1d6c8e-4b0a-5b8e-9d1e-2a7c3f0b9e41")

_EVENT_ID_PREFIX = EVENT_ID_NAMESPACE.bytes


def event_id(stream_id: str, sequence: int) -> str:
    """Deterministic: the same stream position always has the same id, so a step derived from
    an event (a buy-in's deposit) gets the same command id however often it is retried.

    ``str(uuid.uuid5(EVENT_ID_NAMESPACE, f"{stream_id}/{sequence}"))``, spelled out: the
    same SHA-1, version and variant bits, at a third of the cost (``uuid.UUID``'s checks and
    integer arithmetic were about a tenth of the handler's time per command)."""
    name = f"{stream_id}/{sequence}".encode()
    raw = bytearray(hashlib.sha1(_EVENT_ID_PREFIX + name, usedforsecurity=False).digest()[:16])
    raw[6] = (raw[6] & 0x0F) | 0x50  # version 5
    raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


STEPS = ("deposit", "cashout", "confirm", "refund")
"""The money steps the service sends itself, signed; their ids end in ``.<step>``."""


def step_id(cause_id: str, step: str) -> str:
    """The command id of a step caused by an event or a command (``<cause>.<step>``)."""
    assert step in STEPS
    return f"{cause_id}.{step}"


def is_step_id(command_id: str) -> bool:
    """Reserved for the service's signed steps: step ids can be predicted (they derive from
    event ids), so an unsigned command must not take one first and leave the step answered
    with its result."""
    return command_id.rpartition(".")[2] in STEPS and "." in command_id


@cache
def declines_stream(partition: int, partitions: int) -> str:
    """The stream that keeps the buy-ins ``partition`` declined at tables that do not exist
    (``domain.transfers.DECLINES_PREFIX``): ``#declined/<partition>``, or the first
    ``#declined/<partition>.<n>`` that the partitioner puts on that partition, so its events
    lie on the events partition a rebuild of ``partition`` reads, as every stream's do."""
    base = f"{DECLINES_PREFIX}{partition}"
    candidate, number = base, 0
    while partition_for(candidate, partitions) != partition:
        number += 1
        candidate = f"{base}.{number}"
    return candidate
