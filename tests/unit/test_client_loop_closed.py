"""A client whose event loop closed without its ``stop()`` (an ``asyncio.run`` that ended, a
test's loop) is stopped, and can be started again in another loop. Before, ``start()`` said
``ClientAlreadyStarted`` and ``stop()`` ``WrongEventLoop``: the client was unusable for good."""

from __future__ import annotations

import asyncio

import pytest

from blackjack.bus.topics import Topics
from blackjack.client import BlackjackClient, ClientStopped


class _Producer:
    def __init__(self) -> None:
        self.stopped = False

    async def stop(self) -> None:
        self.stopped = True


def test_a_client_whose_loop_closed_unstopped_is_started_again_in_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = BlackjackClient("127.0.0.1:1", Topics("loop-closed."))
    producers: list[_Producer] = []

    async def start_without_a_broker() -> None:
        producers.append(_Producer())
        client._producer = producers[-1]

    async def read_for_good() -> None:
        await asyncio.Event().wait()

    monkeypatch.setattr(client, "_start", start_without_a_broker)
    monkeypatch.setattr(client._results_reader, "read", read_for_good)

    async def started_and_left() -> None:
        await client.start()

    asyncio.run(started_and_left())  # the loop ends, the client never stopped

    async def start_stop_again() -> None:
        await client.start()
        await client._started()
        await client.stop()
        with pytest.raises(ClientStopped):
            await client._started()

    asyncio.run(start_stop_again())
    assert [producer.stopped for producer in producers] == [False, True]
    assert client.health.state == "stopped"

    async def stop_only() -> None:  # a stop() alone in a new loop is one too
        await client.start()

    asyncio.run(stop_only())
    asyncio.run(client.stop())
    assert client.health.state == "stopped"
