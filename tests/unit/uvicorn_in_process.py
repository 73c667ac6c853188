"""uvicorn serving on the test's own event loop, as the service configures it
(``http_server.http_config``), until the block ends."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator

import uvicorn

STARTED_WITHIN_S = 10.0


class InProcessServer(uvicorn.Server):
    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:  # the test process's signals stay its own
        yield


@contextlib.asynccontextmanager
async def running(config: uvicorn.Config) -> AsyncIterator[InProcessServer]:
    """The server, listening; asked to exit, and awaited, when the block ends."""
    server = InProcessServer(config)
    serving = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(STARTED_WITHIN_S):
            while not server.started:  # uvicorn has no event to await for it
                await asyncio.sleep(0.02)
        yield server
    finally:
        server.should_exit = True
        await serving
