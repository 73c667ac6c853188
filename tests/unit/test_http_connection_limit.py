"""One process serves at most ``BLACKJACK_HTTP_MAX_CONNECTIONS`` connections. A connection
past them makes room by closing the oldest idle one (so idle connections keep no one out, the
probes included); when every connection is answering a request, a few more are kept for the
probes and metrics, and the rest answered 503 ``server_busy`` (typed JSON) and closed as they
come. Over real sockets, uvicorn configured as the service configures it
(``http_server.http_config``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import termios
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from blackjack.api.routes import query_api
from blackjack.configuration import ConfigurationError
from blackjack.http_server import (
    PROBE_RESERVE,
    JsonH11Protocol,
    _kernel_bytes,  # the bytes a socket holds in the kernel: what the server itself reads
    http_config,
    max_connections,
)
from blackjack.projections.store import ProjectionStore
from tests.integration import infra
from tests.unit.polling import until
from tests.unit.uvicorn_in_process import InProcessServer, running

WAIT_S = 10.0
LIMIT = 4

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


class Behind:
    """What the query API's fallback is in a worker (the probes: one answer for all here);
    a request with the query ``slow`` takes until the test releases it, one with ``large``
    is answered 8 MB (a page of events, the document of a large report)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["query_string"] == b"slow":
            await self.release.wait()
        body = json.dumps({"status": "ok", "path": scope["path"]}).encode()
        if scope["query_string"] == b"large":
            body = json.dumps({"status": "ok", "path": scope["path"], "pad": "x" * 2**23}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})


@contextlib.asynccontextmanager
async def served(
    tmp_path: Path, behind: Behind, **more: Any
) -> AsyncIterator[tuple[int, InProcessServer]]:
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path}/read.db")
    port = infra.free_port()
    app = query_api(store, fallback=behind)
    options: dict[str, Any] = {"lifespan": "off", "log_level": "critical", **more}
    config = http_config(app, "127.0.0.1", port, limit_concurrency=LIMIT, **options)
    assert config.http is JsonH11Protocol
    try:
        async with running(config) as server:
            try:
                yield port, server
            finally:
                behind.release.set()  # the slow requests end, so the server can
    finally:
        await store.close()


async def held(server: InProcessServer, count: int) -> None:
    """Until the server holds ``count`` connections (those it ended gone)."""
    async with asyncio.timeout(WAIT_S):
        while len(server.server_state.connections) != count:
            await asyncio.sleep(0.01)


async def ask(port: int, path: str) -> tuple[int, dict[bytes, bytes], dict[str, Any]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nhost: x\r\n\r\n".encode())
        await writer.drain()
        async with asyncio.timeout(WAIT_S):
            head = await reader.readuntil(b"\r\n\r\n")
            status_line, *lines = head.rstrip(b"\r\n").split(b"\r\n")
            headers = dict(line.lower().split(b": ", 1) for line in lines)
            body = await reader.readexactly(int(headers[b"content-length"]))
        return int(status_line.split()[1]), headers, json.loads(body)
    finally:
        writer.close()


async def refused_busy(port: int) -> None:
    """A connection answered 503 ``server_busy`` as it comes, and closed."""
    reader, _ = await asyncio.open_connection("127.0.0.1", port)
    async with asyncio.timeout(WAIT_S):
        raw = await reader.read()
    head, _, answer = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 503 ")
    assert json.loads(answer)["error"]["code"] == "server_busy"


async def slow_requests(
    port: int, server: InProcessServer, count: int, path: str = "/healthz"
) -> list[Streams]:
    """``count`` connections each answering a request to ``path``, held until released."""
    before = len(server.server_state.tasks)
    opened = []
    for _ in range(count):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET {path}?slow HTTP/1.1\r\nhost: x\r\n\r\n".encode())
        await writer.drain()
        opened.append((reader, writer))
    async with asyncio.timeout(WAIT_S):
        while len(server.server_state.tasks) < before + count:
            await asyncio.sleep(0.01)
    return opened


async def test_a_flood_of_idle_connections_keeps_no_one_out(tmp_path: Path) -> None:
    """300 connections that send nothing: the server holds LIMIT of them at most, and the
    probes and the API answer all the while. Before, each was held until its 10 s head
    deadline (300 file descriptors of the process); uvicorn's limit_concurrency held them
    all the same and answered every request past it, the probes' too, 503 text/plain."""
    async with served(tmp_path, Behind()) as (port, server):
        flood = [await asyncio.open_connection("127.0.0.1", port) for _ in range(300)]
        try:
            await held(server, LIMIT)
            for path in ("/healthz", "/readyz", "/metrics", "/v1/openapi.json"):
                status, _, body = await ask(port, path)
                assert status == 200, (path, body)
            reader, _ = flood[0]  # the oldest, closed to make room: nothing more held
            async with asyncio.timeout(WAIT_S):
                assert await reader.read() == b""
        finally:
            for _, writer in flood:
                writer.close()


async def test_with_every_connection_answering_the_probes_are_answered_the_rest_busy(
    tmp_path: Path,
) -> None:
    behind = Behind()
    async with served(tmp_path, behind) as (port, server):
        slow = await slow_requests(port, server, LIMIT)
        try:
            status, headers, body = await ask(port, "/v1/openapi.json")
            assert (status, body["error"]["code"]) == (503, "server_busy")
            assert headers[b"content-type"] == b"application/json"
            assert headers[b"retry-after"] == b"1"
            for path in ("/healthz", "/readyz", "/metrics"):
                status, headers, body = await ask(port, path)
                assert (status, body["path"]) == (200, path)
                assert headers[b"connection"] == b"close"  # its place free again at once
            # the reserve taken too (each a probe in progress): the next is 503 as it comes
            more = await slow_requests(port, server, PROBE_RESERVE, "/metrics")
            try:
                await refused_busy(port)
            finally:
                for _, writer in more:
                    writer.close()
            behind.release.set()  # the requests answered: the API again
            for reader, _ in slow:
                async with asyncio.timeout(WAIT_S):
                    assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200 ")
            status, _, body = await ask(port, "/v1/openapi.json")
            assert status == 200 and body["openapi"].startswith("3.1")
        finally:
            for _, writer in slow:
                writer.close()


async def test_an_idle_connection_in_the_probes_reserve_goes_within_seconds(
    tmp_path: Path,
) -> None:
    """Every connection answering a request: a connection in the probes' reserve that sends
    nothing is closed within 2 s (408), not the 10 s of the others, or at once when a newer
    one comes (the oldest idle makes room)."""
    async with served(tmp_path, Behind()) as (port, server):
        slow = await slow_requests(port, server, LIMIT)
        first = await asyncio.open_connection("127.0.0.1", port)
        await held(server, LIMIT + 1)
        second = await asyncio.open_connection("127.0.0.1", port)
        try:
            async with asyncio.timeout(WAIT_S / 2 - 1):  # the others' deadline is 10 s
                assert await first[0].read() == b""  # made room for the second
                raw = await second[0].readuntil(b"\r\n\r\n")
            assert raw.startswith(b"HTTP/1.1 408 ")
        finally:
            for _, writer in [*slow, first, second]:
                writer.close()


def test_the_setting() -> None:
    assert max_connections({}) == 256
    assert max_connections({"BLACKJACK_HTTP_MAX_CONNECTIONS": " 64 "}) == 64
    for wrong in ("0", "-1", "many", "1e3", "100001"):
        with pytest.raises(ConfigurationError, match="BLACKJACK_HTTP_MAX_CONNECTIONS"):
            max_connections({"BLACKJACK_HTTP_MAX_CONNECTIONS": wrong})
    config = http_config(Behind(), "127.0.0.1", 0)
    assert config.limit_concurrency == 256


async def _not_reading(port: int, requests: int) -> Streams:
    """A connection that sends ``requests`` pipelined requests for a large answer and reads
    none of them (its receive buffer small, so the server's writes stall soon)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    reader, writer = await asyncio.open_connection(sock=sock)
    writer.write(b"GET /healthz?large HTTP/1.1\r\nhost: x\r\n\r\n" * requests)
    return reader, writer


async def test_a_client_that_reads_no_answer_is_closed_once_its_writes_stall(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that sends requests (pipelined, or one with a large answer) and never reads
    the answers: once the server's writes to it make no progress for ``write_stall_s``, the
    connection is dropped with what it could not send. Before, the answer's write waited
    for ever, the request counted as in progress: LIMIT such connections (one client, no
    token) held the API at 503 server_busy and their descriptors for as long as they liked,
    and one closed with answers unsent (evicted idle, or uvicorn's keep-alive timeout) kept
    its descriptor, no longer counted against the limit."""
    monkeypatch.setattr(JsonH11Protocol, "write_stall_s", 0.5)
    async with served(tmp_path, Behind()) as (port, server):
        stalled = [await _not_reading(port, 2) for _ in range(LIMIT)]
        try:
            await held(server, 0)  # each dropped: its answers unread
            status, _, body = await ask(port, "/v1/openapi.json")
            assert status == 200, body
        finally:
            for _, writer in stalled:
                writer.transport.abort()


async def test_connections_refused_and_lingering_make_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection the server refused (a request it cannot read: 400, and the like) stays a
    moment to read and drop what its client still sends (``linger_s``); past the limit it
    makes room like an idle one, first. Before, it counted and could not be closed: LIMIT
    connections sending a bad request every ``linger_s`` (one client, no token) held the
    API at 503 server_busy."""
    monkeypatch.setattr(JsonH11Protocol, "linger_s", 60.0)
    async with served(tmp_path, Behind()) as (port, _server):
        refused = []
        for _ in range(LIMIT):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET / HTTP/1.1\r\nno colon here\r\n\r\n")
            async with asyncio.timeout(WAIT_S):
                assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 400 ")
            refused.append((reader, writer))
        try:
            status, _, body = await ask(port, "/v1/openapi.json")
            assert status == 200, body
            async with asyncio.timeout(WAIT_S):
                await refused[0][0].read()  # the rest of its answer, then the end:
            assert refused[0][0].at_eof()  # the oldest made room, not 60 s later
        finally:
            for _, writer in refused:
                writer.close()


async def test_a_connection_closed_with_its_answer_unread_keeps_no_descriptor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An answer written whole is complete for uvicorn while the client has read none of it:
    the connection is idle, and closed to make room (or by the keep-alive timeout) it waited
    for its unsent bytes to go, its descriptor held and no longer counted against the limit
    (a client that asks for a large answer and reads nothing on connection after connection
    held as many as it opened). It is dropped at once with what it could not send."""
    monkeypatch.setattr(JsonH11Protocol, "write_stall_s", 60.0)
    async with served(tmp_path, Behind()) as (port, server):
        (unread,) = [await _not_reading(port, 1)]
        try:
            async with asyncio.timeout(WAIT_S):  # its answer complete, sitting unsent
                while not any(
                    isinstance(c, JsonH11Protocol)
                    and c.transport.get_write_buffer_size()
                    and c.cycle is not None
                    and c.cycle.response_complete
                    for c in server.server_state.connections
                ):
                    await asyncio.sleep(0.01)
            newer = [await asyncio.open_connection("127.0.0.1", port) for _ in range(LIMIT)]
            try:
                await held(server, LIMIT)  # the unread one gone, not only closing
            finally:
                for _, writer in newer:
                    writer.close()
        finally:
            unread[1].transport.abort()


async def test_the_keep_alive_timeout_drops_a_connection_whose_answer_is_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """uvicorn's keep-alive timeout closes an idle connection gracefully: one whose client
    read none of its answer waited for it to go (its descriptor held, uncounted); it is
    dropped at the timeout instead."""
    monkeypatch.setattr(JsonH11Protocol, "write_stall_s", 60.0)
    async with served(tmp_path, Behind(), timeout_keep_alive=1) as (port, server):
        unread = await _not_reading(port, 1)
        try:
            await held(server, 0)  # within the keep-alive timeout (1 s), not 60 s
        finally:
            unread[1].transport.abort()


def _server_side(server: InProcessServer, writer: asyncio.StreamWriter) -> JsonH11Protocol:
    """The server's protocol of the connection whose client end is ``writer``."""
    host, port = writer.get_extra_info("sockname")[:2]
    (found,) = [
        c
        for c in server.server_state.connections
        if isinstance(c, JsonH11Protocol) and c.client == (host, port)
    ]
    return found


async def _answered(reader: asyncio.StreamReader) -> tuple[int, dict[bytes, bytes], bytes]:
    async with asyncio.timeout(WAIT_S):
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *lines = head.rstrip(b"\r\n").split(b"\r\n")
        headers = dict(line.lower().split(b": ", 1) for line in lines)
        body = await reader.readexactly(int(headers[b"content-length"]))
    return int(status_line.split()[1]), headers, body


async def _keep_alive(port: int) -> Streams:
    """A gateway's pooled connection: one request answered, the connection kept."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
    assert (await _answered(reader))[0] == 200
    return reader, writer


async def test_an_idle_connection_whose_next_request_has_begun_is_not_the_one_closed(
    tmp_path: Path,
) -> None:
    """The oldest idle connection of a gateway's pool has sent part of its next request's
    head as a new connection comes past the limit: another idle one makes room, and the
    request is answered. Before, the oldest idle was closed, with the request lost."""
    async with served(tmp_path, Behind()) as (port, server):
        pooled = await _keep_alive(port)
        others = [await asyncio.open_connection("127.0.0.1", port) for _ in range(LIMIT - 1)]
        pooled[1].write(b"GET /readyz HTTP/1.1\r\n")
        oldest = _server_side(server, pooled[1])
        await until(lambda: bool(oldest.conn.trailing_data[0]), WAIT_S)  # read by the server
        newer = await asyncio.open_connection("127.0.0.1", port)
        try:
            async with asyncio.timeout(WAIT_S):
                assert await others[0][0].read() == b""  # the next oldest made room
            pooled[1].write(b"host: x\r\n\r\n")
            status, _, body = await _answered(pooled[0])
            assert (status, json.loads(body)["path"]) == (200, "/readyz")
        finally:
            for _, writer in [pooled, *others, newer]:
                writer.close()


async def test_an_idle_connection_with_a_request_waiting_in_the_kernel_is_not_closed(
    tmp_path: Path,
) -> None:
    """The race itself: a gateway's next request has reached the server's socket, not yet
    read by the event loop, as a new connection comes past the limit (here the loop is held
    from reading it: ``pause_reading``). Closed then, the socket reset the connection with
    the request unread; it is kept, another idle one closed, and the request answered."""
    async with served(tmp_path, Behind()) as (port, server):
        pooled = await _keep_alive(port)
        others = [await asyncio.open_connection("127.0.0.1", port) for _ in range(LIMIT - 1)]
        oldest = _server_side(server, pooled[1])
        oldest.transport.pause_reading()
        pooled[1].write(b"GET /readyz HTTP/1.1\r\nhost: x\r\n\r\n")
        await pooled[1].drain()
        sock = oldest.transport.get_extra_info("socket")
        await until(lambda: _kernel_bytes(oldest.transport, termios.FIONREAD) > 0, WAIT_S)
        newer = await asyncio.open_connection("127.0.0.1", port)
        try:
            async with asyncio.timeout(WAIT_S):
                assert await others[0][0].read() == b""  # the next oldest made room
            assert sock.fileno() != -1
            oldest.transport.resume_reading()
            status, _, body = await _answered(pooled[0])
            assert (status, json.loads(body)["path"]) == (200, "/readyz")
        finally:
            for _, writer in [pooled, *others, newer]:
                writer.close()


async def test_with_every_idle_connection_receiving_a_request_the_oldest_is_answered_busy(
    tmp_path: Path,
) -> None:
    """Every connection has part of its next request in (a gateway's pool, or a client
    trickling heads) as one more comes: the oldest is answered 503 ``server_busy`` with
    ``connection: close`` (its request not handled, to send again), not reset, and the
    newer one is served."""
    async with served(tmp_path, Behind()) as (port, server):
        pooled = [await _keep_alive(port) for _ in range(LIMIT)]
        for _, writer in pooled:
            writer.write(b"GET /readyz HTTP/1.1\r\n")
        sides = [_server_side(server, writer) for _, writer in pooled]
        await until(lambda: all(c.conn.trailing_data[0] for c in sides), WAIT_S)
        try:
            status, _, body = await ask(port, "/healthz")
            assert (status, body["path"]) == (200, "/healthz")
            pooled[0][1].write(b"host: x\r\n\r\n")  # the rest of it, read and dropped
            status, headers, answer = await _answered(pooled[0][0])
            assert (status, json.loads(answer)["error"]["code"]) == (503, "server_busy")
            assert headers[b"connection"] == b"close"
            async with asyncio.timeout(WAIT_S):
                assert await pooled[0][0].read() == b""
            for reader, writer in pooled[1:]:  # the others' requests go on
                writer.write(b"host: x\r\n\r\n")
                assert (await _answered(reader))[0] == 200
        finally:
            for _, writer in pooled:
                writer.close()


async def test_a_slow_reader_of_a_large_answer_is_not_dropped_while_it_takes_some(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client reading an 8 MB answer slowly (16 KiB every 50 ms, its receive buffer
    64 KiB) for 6 times ``write_stall_s``, then the rest: never dropped, since it takes some
    all the time. Before, progress was the process's own buffer shrinking, which the
    kernel lets it write again only once half of its send queue has gone: at this pace the
    connection was dropped after ``write_stall_s`` as if it had read nothing."""
    monkeypatch.setattr(JsonH11Protocol, "write_stall_s", 0.5)
    async with served(tmp_path, Behind()) as (port, server):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2**16)
        sock.setblocking(False)
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
        reader, writer = await asyncio.open_connection(sock=sock, limit=2**14)
        writer.write(b"GET /healthz?large HTTP/1.1\r\nhost: x\r\n\r\n")
        side = _server_side(server, writer)
        await until(lambda: side._write_stall is not None, WAIT_S)  # the server's writes paused
        received = bytearray()
        try:
            loop = asyncio.get_running_loop()
            ends_at = loop.time() + 6 * 0.5
            while loop.time() < ends_at:  # the pace is the behaviour under test
                chunk = await reader.read(2**14)
                assert chunk and not side.transport.is_closing(), f"dropped at {len(received)}"
                received += chunk
                await asyncio.sleep(0.05)
            assert side._write_stall is not None  # still writing: read slower than sent
            head, _, body = bytes(received).partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 ")
            length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
            async with asyncio.timeout(WAIT_S):
                body += await reader.readexactly(length - len(body))
            assert json.loads(body)["status"] == "ok"
        finally:
            writer.close()


async def test_requests_whose_clients_have_gone_still_count(tmp_path: Path) -> None:
    """uvicorn runs a request to its end when its client leaves: 200 clients each sending a
    slow request and closing at once held no connection, so the limit let all 200 run (each
    a query of the read model, the store's pool exhausted for everyone; review of the HTTP
    edge, session 34). They count now: past the limit and the probes' reserve, 503."""
    behind = Behind()
    async with served(tmp_path, behind) as (port, server):
        for _ in range(LIMIT + PROBE_RESERVE):
            _, writer = (await slow_requests(port, server, 1))[0]
            writer.close()
        await held(server, 0)  # none held: each client gone, its request running
        assert len(server.server_state.tasks) == LIMIT + PROBE_RESERVE
        await refused_busy(port)
        behind.release.set()  # the requests end: room again
        async with asyncio.timeout(WAIT_S):
            while server.server_state.tasks:
                await asyncio.sleep(0.01)
        status, _, body = await ask(port, "/v1/openapi.json")
        assert status == 200, body
