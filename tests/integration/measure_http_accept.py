"""What a new connection costs the HTTP server's event loop at its limit, by the number of
connections held: each past ``BLACKJACK_HTTP_MAX_CONNECTIONS`` makes room by closing the
oldest idle one (``blackjack.http_server``). The protocol as it is against the one of
``--before`` (a commit: 6ea4ece scanned every connection for each new one), in one process,
one after the other at each size: ``connection_made`` timed alone (the thread's CPU time),
over in-memory transports (no socket: the figure is the server's own work, not the
kernel's).

    PYTHONPATH=.:services python -m tests.integration.measure_http_accept \
        [--sizes 256,20000] [--new 500] [--before 6ea4ece]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import time
import types
from pathlib import Path
from typing import Any

import uvicorn
from uvicorn.server import ServerState

from blackjack import http_server

ROOT = Path(__file__).resolve().parents[2]


def _before(commit: str) -> types.ModuleType:
    """``blackjack/http_server.py`` at ``commit``, its metric kept off the registry."""
    source = subprocess.run(
        ["git", "show", f"{commit}:services/blackjack/http_server.py"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    source = source.replace('    ["how"],\n)', '    ["how"],\n    registry=None,\n)', 1)
    module = types.ModuleType(f"http_server_{commit}")
    exec(compile(source, f"http_server@{commit}", "exec"), module.__dict__)
    return module


class _Transport(asyncio.Transport):
    """In memory: closing tells the protocol it is lost on the loop's next turn."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self.loop = loop
        self.protocol: Any = None
        self.closing = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return self.closing

    def write(self, data: bytes | bytearray | memoryview) -> None:
        pass

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def close(self) -> None:
        if not self.closing:
            self.closing = True
            self.loop.call_soon(self.protocol.connection_lost, None)

    def abort(self) -> None:
        self.close()


async def _app(scope: Any, receive: Any, send: Any) -> None:
    pass


async def measure(protocol: type[Any], held: int, new: int) -> float:
    """CPU microseconds (the thread's: the machine may be shared) of ``connection_made``
    per new connection, ``held`` idle held."""
    loop = asyncio.get_running_loop()
    configs = {}
    for limit in (None, held):  # the first ``held`` made unbounded: no room to make
        configs[limit] = uvicorn.Config(_app, limit_concurrency=limit, log_config=None)
        configs[limit].load()
    state = ServerState()
    slow = type("Slow", (protocol,), {"head_timeout_s": 3600.0})  # no 408 while measured

    def connect(limit: int | None = held) -> float:
        made = slow(config=configs[limit], server_state=state, app_state={}, _loop=loop)
        transport = _Transport(loop)
        transport.protocol = made
        start = time.thread_time()
        made.connection_made(transport)
        return time.thread_time() - start

    for _ in range(held):
        connect(None)
    took = 0.0
    for done in range(new):
        took += connect()
        if done % 100 == 99:
            await asyncio.sleep(0)  # the closed ones lost
    await asyncio.sleep(0)
    assert len(state.connections) == held, len(state.connections)
    for connection in list(state.connections):
        connection.transport.close()
        deadline: Any = getattr(connection, "_head_deadline", None)
        if deadline is not None:
            deadline.cancel()
    await asyncio.sleep(0)
    return took / new * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="256,20000")
    parser.add_argument("--new", type=int, default=500)
    parser.add_argument("--before", default="6ea4ece")
    args = parser.parse_args()
    before = _before(args.before).JsonH11Protocol
    for size in (int(text) for text in args.sizes.split(",")):
        then = asyncio.run(measure(before, size, args.new))
        now = asyncio.run(measure(http_server.JsonH11Protocol, size, args.new))
        print(
            f"{size:>6} idle connections held, {args.new} new ones past the limit: "
            f"{args.before} {then:8.1f} us each, now {now:6.1f} us each "
            f"({then / now:.1f}x)",
            flush=True,
        )


if __name__ == "__main__":
    main()
