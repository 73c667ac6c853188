"""How many idle connections a worker's HTTP server holds, and whether its probes and the API
answer meanwhile: three servers of the worker's app (``projection_worker.worker.http_app``, a SQLite
store) in a child process whose file descriptors are limited as a container's often are,
each flooded with idle connections (none sends a byte):

- ``unbounded``: the service's protocol with no limit (the release before: every connection
  held until its 10 s head deadline);
- ``uvicorn``: uvicorn's own protocol with ``limit_concurrency`` (what the setting did
  before ``JsonH11Protocol`` took it over: a request past it is 503 text/plain);
- ``bounded``: the service's protocol with ``BLACKJACK_HTTP_MAX_CONNECTIONS``.

What the server's process writes to its stderr is summed up, not shown: without a bound,
asyncio logs each ``accept()`` that fails for want of a file descriptor with its traceback
(about 84 MB in a run), so each mode's line says how many it logged, by error.

    PYTHONPATH=.:services python -m tests.integration.measure_idle_connections \
        [--idle 1200] [--nofile 1024] [--limit 256]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from tests.integration import infra

CHILD = """
import asyncio, resource, sys
soft = int(sys.argv[4])
resource.setrlimit(resource.RLIMIT_NOFILE, (soft, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol
from blackjack.http_server import Server, http_config
from blackjack.projections.health import FoldHealth
from blackjack.projections.store import ProjectionStore
from blackjack.projection_worker.worker import http_app

mode, port, limit, _, db = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), 0, sys.argv[5]

async def main():
    store = ProjectionStore(f"sqlite+aiosqlite:///{db}")
    await store.migrate()
    app = http_app(store.for_queries(), FoldHealth())
    options = dict(lifespan="off", log_level="critical", log_config=None)
    bound = None if mode == "unbounded" else limit
    config = http_config(app, "127.0.0.1", port, limit_concurrency=bound, **options)
    if mode == "uvicorn":
        config.http = H11Protocol
    await Server(config).serve()

asyncio.run(main())
"""


async def _get(port: int, path: str, timeout: float = 3.0) -> str:
    start = time.monotonic()
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(f"GET {path} HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n".encode())
            raw = await reader.read()
            writer.close()
    except TimeoutError:
        return f"no answer in {timeout:g} s"
    except OSError as error:
        return f"{type(error).__name__}"
    head, _, body = raw.partition(b"\r\n\r\n")
    status = head.split(b"\r\n")[0].decode() if head else "closed without an answer"
    took = time.monotonic() - start
    return f"{status} {body[:60].decode(errors='replace')!r} in {took:.3f} s"


def _sockets(pid: int) -> int:
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            count += os.readlink(fd).startswith("socket:")
    return count


_ERROR = re.compile(r"^(?:[A-Za-z_][\w.]*)(?:Error|Exception|Exit)\b.*$")


def errors_logged(stderr: Path) -> str:
    """The child's stderr summed up: how many errors it logged (an exception's last line of
    a traceback, or a bare one), by error, the commonest first."""
    counts: Counter[str] = Counter()
    lines = 0
    with stderr.open(errors="replace") as text:
        for line in text:
            lines += 1
            if _ERROR.match(line):
                counts[line.strip()[:100]] += 1
    if not lines:
        return "the server logged nothing"
    by_error = "; ".join(f"{count} x {error}" for error, count in counts.most_common(5))
    return f"the server logged {lines} lines: {by_error or 'no error'}"


async def _ready(port: int) -> None:
    async with asyncio.timeout(60):
        while True:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                return
            except OSError:
                await asyncio.sleep(0.1)


async def measure(mode: str, idle: int, nofile: int, limit: int) -> None:
    port = infra.free_port()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        args = [mode, str(port), str(limit), str(nofile), f"{tmp}/read.db"]
        stderr = Path(tmp) / "stderr"
        with stderr.open("wb") as into:
            child = subprocess.Popen(
                [sys.executable, "-c", CHILD, *args], env=env, stderr=into, stdout=into
            )
        try:
            await _ready(port)
            base = _sockets(child.pid)
            opened = []
            for _ in range(idle):
                try:
                    opened.append(await asyncio.open_connection("127.0.0.1", port))
                except OSError:
                    break
            await asyncio.sleep(1.0)  # accepted (or refused) by now
            held = _sockets(child.pid) - base
            healthz = await _get(port, "/healthz")
            api = await _get(port, "/v1/openapi.json")
            for _, writer in opened:
                writer.close()
        finally:
            child.terminate()
            child.wait(30)
        print(
            f"{mode:9} limit {limit if mode != 'unbounded' else '-':>4}, nofile {nofile}: "
            f"{idle} idle connections opened, {held} held by the server; "
            f"/healthz: {healthz}; /v1/openapi.json: {api}; {errors_logged(stderr)}",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--idle", type=int, default=1200)
    parser.add_argument("--nofile", type=int, default=1024)
    parser.add_argument("--limit", type=int, default=256)
    args = parser.parse_args()
    for mode in ("unbounded", "uvicorn", "bounded"):
        asyncio.run(measure(mode, args.idle, args.nofile, args.limit))


if __name__ == "__main__":
    main()
