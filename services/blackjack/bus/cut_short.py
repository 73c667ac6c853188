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

The bootstrap is wrapped: the connections it opened and did not keep are closed before its
cancellation (or error) goes on. It sees them where it opens them: aiokafka's own bootstrap
runs with its module's ``create_conn`` bound, for it alone, to one that notes each connection
in the bootstrap's context (``aiokafka_internals.with_globals``); ``aiokafka.client`` itself
is left as it is. ``close_client_cut_short`` wraps one client's bootstrap (the clients of
``bus.clients``, whose producer class also stops a producer whose start is cancelled);
``close_clients_cut_short`` wraps the class's and ``AIOKafkaProducer.start``, for every client
of the process (the service's own processes, whose FastStream clients FastStream builds).
Both first check the aiokafka they wrap (``bus.aiokafka_internals``).
"""

from __future__ import annotations

import asyncio
import contextvars
import types
from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka import client as aiokafka_client
from aiokafka.conn import AIOKafkaConnection

from blackjack.bus.aiokafka_internals import BOOTSTRAP, require_bootstrap, with_globals


class _Opened(list[AIOKafkaConnection]):
    """The connections one bootstrap opened; ``open`` no more once it has returned (the task
    it starts for the metadata keeps its context)."""

    open = True


_opening: contextvars.ContextVar[_Opened | None] = contextvars.ContextVar(
    "blackjack_bootstrap_connections", default=None
)


async def _create_conn_seen(*args: Any, **kwargs: Any) -> AIOKafkaConnection:
    connection = await aiokafka_client.create_conn(*args, **kwargs)
    opened = _opening.get()
    if opened is not None and opened.open:
        opened.append(connection)
    return connection


_bootstrap_seen = with_globals(BOOTSTRAP, create_conn=_create_conn_seen) if BOOTSTRAP else None
"""aiokafka's bootstrap, its connections seen (``_create_conn_seen``)"""


async def bootstrap_closed_when_cut_short(self: aiokafka_client.AIOKafkaClient) -> None:
    """aiokafka's bootstrap; cancelled (or failed), the connections it opened and did not keep
    are closed first."""
    assert _bootstrap_seen is not None  # (require_bootstrap)
    opened = _Opened()
    token = _opening.set(opened)
    try:
        await _bootstrap_seen(self)
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


bootstrap_closed_when_cut_short.closes_when_cut_short = True  # type: ignore[attr-defined]


async def stop_when_cut_short(producer: AIOKafkaProducer, start: Any) -> None:
    """``start()`` a producer; cancelled, stop it (another error: its caller may retry)."""
    try:
        await start()
    except asyncio.CancelledError:
        await producer.stop()
        raise


def close_client_cut_short(client: aiokafka_client.AIOKafkaClient) -> None:
    """Wrap the bootstrap of ``client`` alone."""
    require_bootstrap()
    client.bootstrap = types.MethodType(bootstrap_closed_when_cut_short, client)


def close_clients_cut_short() -> None:
    """Wrap aiokafka's bootstrap and its producer's start for every client of this process
    (the service's own processes; once a process: again, nothing)."""
    require_bootstrap()
    client = aiokafka_client.AIOKafkaClient
    if getattr(client.bootstrap, "closes_when_cut_short", False):
        return
    start_producer = AIOKafkaProducer.start

    async def producer_stopped_when_cut_short(self: AIOKafkaProducer) -> None:
        await stop_when_cut_short(self, lambda: start_producer(self))

    client.bootstrap = bootstrap_closed_when_cut_short
    AIOKafkaProducer.start = producer_stopped_when_cut_short
