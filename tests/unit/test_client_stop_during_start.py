"""A ``stop()`` from another task while ``start()`` runs, without a broker: the start, cut
short, stops what it made once that stop has ended, and only then says ``ClientStopped``.
Before (a review's find), its own stop ran beside the other (aiokafka's producer stop
returns at once when another has begun), the caller started the client again, and the
first stop's end then undid the new run: every send said "start() the client first"."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from blackjack.bus.topics import Topics
from blackjack.client import BlackjackClient, ClientStopped

UNDECIDED_S = 0.2
"""How long the test shows a start that must wait does not end (an absence: no event)."""


class _Producer:
    """aiokafka's producer as its stop behaves: once begun, a second returns at once."""

    def __init__(self, flushed: asyncio.Event, flushing: asyncio.Event) -> None:
        self._closed = False
        self.flushed, self.flushing = flushed, flushing

    async def stop(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.flushing.set()
        await self.flushed.wait()  # sending what is pending


async def test_a_start_cut_short_by_a_stop_ends_after_that_stop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = BlackjackClient("127.0.0.1:1", Topics("stop-during-start."))
    flushed, flushing, hanging = asyncio.Event(), asyncio.Event(), asyncio.Event()
    starts = 0

    async def start_hanging_the_first_time() -> None:
        nonlocal starts
        starts += 1
        client._producer = _Producer(flushed, flushing)
        if starts == 1:
            hanging.set()
            await asyncio.Event().wait()  # a broker slow to answer

    async def read_for_good() -> None:
        await asyncio.Event().wait()

    monkeypatch.setattr(client, "_start", start_hanging_the_first_time)
    monkeypatch.setattr(client._results_reader, "read", read_for_good)
    starting = asyncio.create_task(client.start())
    await hanging.wait()
    stopping = asyncio.create_task(client.stop())
    await flushing.wait()
    done, _ = await asyncio.wait({starting}, timeout=UNDECIDED_S)
    assert not done  # before: it had said ClientStopped, the other stop still running
    flushed.set()
    with pytest.raises(ClientStopped):
        await starting
    assert stopping.done()
    await client.start()  # again: usable, and nothing of the first run's stop undoes it
    await client._started()
    assert client._loop is asyncio.get_running_loop()
    reader: Any = client._reading
    await client.stop()
    assert reader.cancelled()
