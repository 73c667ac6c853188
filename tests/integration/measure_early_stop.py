"""How a ``blackjack`` process ends on a SIGTERM sent a given number of milliseconds after it
was started: its exit status for each of ``RUNS`` tries per delay, and how long it took to
end after the signal (the slowest).

    PYTHONPATH=.:services .venv/bin/python -m tests.integration.measure_early_stop \\
        serve 0 10 20 50 100 500 1000 2000

No broker needed: its address is a port nothing listens on (a SIGTERM after the start got
that far ends the wait for it, exit 0); the read model is a SQLite file in a directory of its
own. Status -15 is the signal's default action (a shell says 143)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

from blackjack.messages.sealing import ShoeSeal
from tests.integration.infra import free_port

RUNS = 5
BLACKJACK = Path(sys.executable).parent / "blackjack"
COMMANDS = {
    "serve": ["serve", "--port"],
    "handler": ["handler"],
    "projections": ["projections", "run"],
}


async def ended(command: str, delay_ms: int, directory: Path) -> tuple[int, float]:
    args = [*COMMANDS[command], str(free_port())] if command == "serve" else COMMANDS[command]
    env = {
        **os.environ,
        "BLACKJACK_KAFKA_BOOTSTRAP": f"127.0.0.1:{free_port()}",
        "BLACKJACK_SHOE_KEY": ShoeSeal.new_key_hex(),
        "BLACKJACK_DB_URL": f"sqlite+aiosqlite:///{directory / 'read.db'}",
    }
    process = await asyncio.create_subprocess_exec(
        str(BLACKJACK),
        *args,
        env=env,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    await asyncio.sleep(delay_ms / 1000)
    process.send_signal(signal.SIGTERM)
    sent = time.monotonic()
    status = await asyncio.wait_for(process.wait(), 60)
    return status, time.monotonic() - sent


async def main(command: str, delays: list[int]) -> None:
    for delay in delays:
        statuses, slowest = [], 0.0
        for _ in range(RUNS):
            with tempfile.TemporaryDirectory() as directory:
                status, took = await ended(command, delay, Path(directory))
            statuses.append(status)
            slowest = max(slowest, took)
        print(f"{command} SIGTERM at {delay} ms: exit {statuses}, ended within {slowest:.2f} s")


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], [int(d) for d in sys.argv[2:]]))
