"""Replacing a producer aiokafka left unusable: an idempotent producer fails every send after an
``OutOfOrderSequenceNumber`` (aio-libs/aiokafka#1017, seen here after a broker outage of a
minute) until it is replaced. The client library and the handler's clock do so with these."""

from __future__ import annotations

import contextlib

from aiokafka import AIOKafkaProducer


async def started(producer: AIOKafkaProducer) -> AIOKafkaProducer:
    """``producer``, started; when it cannot start (the broker still away), stopped again and
    the error raised, so that no unstarted producer is ever put in place."""
    try:
        await producer.start()
    except BaseException:
        await stopped(producer)
        raise
    return producer


async def stopped(producer: AIOKafkaProducer | None) -> None:
    """Stop a producer being replaced; its own errors are no longer anyone's concern."""
    if producer is not None:
        with contextlib.suppress(Exception):
            await producer.stop()
