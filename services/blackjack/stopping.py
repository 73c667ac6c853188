"""Start-up steps that give way to a stop: a process waiting at start for its brokers or its
database must still answer SIGTERM at once (Kubernetes kills it after its grace period)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Any


async def unless_stopped(step: Awaitable[Any], stopped: asyncio.Future[Any]) -> bool:
    """Run ``step`` unless ``stopped`` ends first (a signal, or the HTTP server failing, whose
    error is raised here): whether the step ran to its end (its own error is raised)."""
    running = asyncio.ensure_future(step)
    await asyncio.wait({running, stopped}, return_when=asyncio.FIRST_COMPLETED)
    if running.done():
        running.result()
        return True
    running.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await running
    stopped.result()
    return False
