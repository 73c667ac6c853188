"""aiokafka clients whose start a stop cuts short: what they opened is closed at once.

Every aiokafka client starts by ``AIOKafkaClient.bootstrap``: it opens a connection to a
bootstrap server and asks it for the cluster's metadata. Cancelled while it waits for that
answer (a SIGTERM during a process's start: the probe of the wait for the brokers, the
topics' admin client, FastStream's producer and consumers, the handler's clients), it lets the
cancellation through without closing that connection, which no client holds (aiokafka 0.14.0,
the same upstream): it stayed open until the garbage collector found it, and asyncio logged
``Unclosed AIOKafkaConnection`` in the log of a clean stop. So did ``Unclosed
AIOKafkaProducer`` for FastStream's producer: aiokafka wants ``stop()`` after a start that
did not end (aio-libs/aiokafka#938), and FastStream drops a producer whose start was
cancelled without it.

``close_clients_cut_short`` wraps both: the connections a bootstrap opened and did not keep
are closed before its cancellation (or error) goes on, seen where it opens them
(``aiokafka.client.create_conn``) in its own context; a producer whose start is cancelled is
stopped.
"""

from __future__ import annotations

import asyncio
import contextvars
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka import client as aiokafka_client
from aiokafka.conn import AIOKafkaConnection


class _Opened(list[AIOKafkaConnection]):
    """The connections one bootstrap opened; ``open`` no more once it has returned (the task
    it starts for the metadata keeps its context)."""

    open = True


_opening: contextvars.ContextVar[_Opened | None] = contextvars.ContextVar(
    "blackjack_bootstrap_connections", default=None
)


def close_clients_cut_short() -> None:
    """Wrap aiokafka's bootstrap and its producer's start (once a process: again, nothing)."""
    client = aiokafka_client.AIOKafkaClient
    if getattr(client.bootstrap, "closes_when_cut_short", False):
        return
    bootstrap, create_conn = client.bootstrap, aiokafka_client.create_conn
    start_producer = AIOKafkaProducer.start

    async def create_conn_seen(*args: Any, **kwargs: Any) -> AIOKafkaConnection:
        connection = await create_conn(*args, **kwargs)
        opened = _opening.get()
        if opened is not None and opened.open:
            opened.append(connection)
        return connection

    async def bootstrap_closed_when_cut_short(self: aiokafka_client.AIOKafkaClient) -> None:
        opened = _Opened()
        token = _opening.set(opened)
        try:
            await bootstrap(self)
        except BaseException:
            kept = [id(c) for c in self._conns.values()]
            for connection in opened:
                if id(connection) not in kept:
                    connection.close()
            raise
        finally:
            opened.open = False
            opened.clear()
            _opening.reset(token)

    async def producer_stopped_when_cut_short(self: AIOKafkaProducer) -> None:
        try:
            await start_producer(self)
        except asyncio.CancelledError:  # its caller gives it up (another error: may retry)
            await self.stop()
            raise

    bootstrap_closed_when_cut_short.closes_when_cut_short = True  # type: ignore[attr-defined]
    client.bootstrap = bootstrap_closed_when_cut_short
    aiokafka_client.create_conn = create_conn_seen
    AIOKafkaProducer.start = producer_stopped_when_cut_short
