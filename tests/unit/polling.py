"""Waiting on a condition no event announces (a gauge's value, a task's state): checked every
10 ms, for at most ``within`` seconds when given (else the caller bounds it)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def until(condition: Callable[[], bool], within: float | None = None) -> None:
    async with asyncio.timeout(within):
        while not condition():
            await asyncio.sleep(0.01)
