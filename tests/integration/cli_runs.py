"""The service's command line run as an operator runs it: its own process, its output kept
or read line by line."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Mapping

from tests.integration.conftest import WAIT_S


def blackjack(
    *args: str, env: Mapping[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """``python -m blackjack.cli ARGS`` with ``env`` (this process's when None); its exit
    status is the caller's to check."""
    return subprocess.run(
        [sys.executable, "-m", "blackjack.cli", *args],
        env=dict(os.environ if env is None else env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


async def lines_until(stream: asyncio.StreamReader, wanted: str, count: int = 1) -> list[str]:
    """A process's log lines, read until ``wanted`` has appeared in ``count`` of them (the
    last line read holds it), within ``WAIT_S``; the process ending first, or the time running
    out, fails the test with its last lines."""
    seen: list[str] = []
    try:
        async with asyncio.timeout(WAIT_S):
            while sum(wanted in line for line in seen) < count:
                line = (await stream.readline()).decode()
                assert line, "the process ended:\n" + "".join(seen[-30:])
                seen.append(line)
    except TimeoutError:
        raise AssertionError(f"no {wanted!r} in:\n" + "".join(seen[-40:])) from None
    return seen
