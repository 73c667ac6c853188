"""What the service's HTTP server refuses before a request reaches the app is answered in the
API's typed JSON error too, and a client cannot hold a connection open by trickling a
request head (or by sending nothing): over a real socket, uvicorn as ``blackjack serve`` and
``blackjack projections run --http`` configure it (``http_server.http_config``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from blackjack.api.contract import ErrorAnswer
from blackjack.api.routes import query_api
from blackjack.http_server import JsonH11Protocol, http_config
from blackjack.projections.store import ProjectionStore
from tests.integration import infra
from tests.unit.uvicorn_in_process import running

WAIT_S = 10.0
HEAD_TIMEOUT_S = 0.4
WITHIN_TIMEOUT_S = 1.5
"""the deadline of the test whose heads must arrive in time: the server runs on the test's
own event loop, so a loaded machine's stall of a few tenths of a second delays the test's
next piece and fires the server's deadline in the same turn of the loop (a 408 by chance,
seen at 0.4 s); its idle pause of twice the deadline stays under uvicorn's 5 s keep-alive"""


class _Quick(JsonH11Protocol):
    head_timeout_s = HEAD_TIMEOUT_S


class _LessQuick(JsonH11Protocol):
    head_timeout_s = WITHIN_TIMEOUT_S


@contextlib.asynccontextmanager
async def served(tmp_path: Path, protocol: type[JsonH11Protocol] = _Quick) -> AsyncIterator[int]:
    """The query API on a free local port, with the service's HTTP configuration (a shorter
    head deadline, so that the tests wait less than a second for it)."""
    store = ProjectionStore(f"sqlite+aiosqlite:///{tmp_path}/read.db")
    port = infra.free_port()
    config = http_config(query_api(store), "127.0.0.1", port, lifespan="off", log_level="critical")
    assert config.http is JsonH11Protocol  # what the service runs; the test shortens its clock
    config.http = protocol
    try:
        async with running(config):
            yield port
    finally:
        await store.close()


async def exchange(port: int, *parts: bytes, pause_s: float = 0.0) -> bytes:
    """Everything the server sends until it closes the connection, the request sent in
    ``parts`` with ``pause_s`` between them."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for index, part in enumerate(parts):
            if index and pause_s:
                await asyncio.sleep(pause_s)
            writer.write(part)
            await writer.drain()
        async with asyncio.timeout(WAIT_S):  # before: the connection stayed open
            return await reader.read()
    finally:
        writer.close()


def answer(raw: bytes) -> tuple[int, dict[bytes, bytes], dict[str, object]]:
    head, _, body = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.split(b"\r\n")
    headers = dict(line.lower().split(b": ", 1) for line in lines)
    assert int(headers[b"content-length"]) == len(body)
    return int(status_line.split()[1]), headers, json.loads(body)


def typed(raw: bytes, status: int, code: str) -> None:
    got, headers, body = answer(raw)
    assert (got, headers[b"content-type"]) == (status, b"application/json")
    assert headers[b"connection"] == b"close"
    error = ErrorAnswer.model_validate(body).error  # the OpenAPI document's error
    assert error.code == code and error.message


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET /v1/players/" + b"a" * 1_000_000 + b"/wallet HTTP/1.1\r\nhost: x\r\n\r\n",
        b"GET /v1/players/a/wallet HTTP/1.1\r\nhost: x\r\nx-big: " + b"a" * 70_000,
    ],
    ids=["a 1 MB request line", "a 70 kB header not ended"],
)
async def test_a_head_too_large_is_a_typed_431(tmp_path: Path, request_bytes: bytes) -> None:
    async with served(tmp_path) as port:
        typed(await exchange(port, request_bytes), 431, "request_too_large")


@pytest.mark.parametrize(
    "request_bytes",
    [
        "GET /v1/players/café/wallet HTTP/1.1\r\nhost: x\r\n\r\n".encode(),
        b"GET /v1/players/a/wallet HTTP/1.1\r\nhost: x\r\nno colon\r\n\r\n",
        b"GET /v1/openapi.json HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
        b"GET /v1/players/a%00b/wallet HTTP/1.1\x00\r\nhost: x\r\n\r\n",
        # a proxy reading the body by its length passes the GET behind the chunks' end
        # unchecked: answered before (a second answer on the connection kept open)
        b"POST /v1/openapi.json HTTP/1.1\r\nhost: x\r\ncontent-length: 43\r\n"
        b"transfer-encoding: chunked\r\n\r\n0\r\n\r\n"
        b"GET /v1/openapi.json HTTP/1.1\r\nhost: x\r\n\r\n",
    ],
    ids=[
        "unescaped non-ASCII target",
        "header without colon",
        "bad chunk",
        "NUL in line",
        "both Content-Length and Transfer-Encoding",
    ],
)
async def test_a_request_not_http_is_a_typed_400(tmp_path: Path, request_bytes: bytes) -> None:
    async with served(tmp_path) as port:
        typed(await exchange(port, request_bytes), 400, "bad_request")


@pytest.mark.parametrize(
    "target", [b"/%76%31/openapi.json", b"/%76%31/players/bob/wallet", b"/v1%2Fopenapi.json"]
)
async def test_a_path_whose_prefix_came_escaped_is_no_route(tmp_path: Path, target: bytes) -> None:
    """Before, served as its unescaped path: past a gateway that guards ``/v1/`` by the path
    as sent (``BLACKJACK_API_OPERATOR_AUTH=gateway`` takes every request for the
    operator's)."""
    async with served(tmp_path) as port:
        head = b"GET " + target + b" HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
        status, _, body = answer(await exchange(port, head))
        assert (status, body["error"]["code"]) == (404, "not_found")  # type: ignore[index]


async def test_a_head_trickled_past_the_deadline_is_a_typed_408(tmp_path: Path) -> None:
    # a line every quarter of the deadline, for twice the deadline (and less than the time
    # the server then reads and drops what still comes, http_server.LINGER_S)
    trickle = [b"GET /v1/openapi.json HTTP/1.1\r\n", *(b"x-%d: y\r\n" % n for n in range(8))]
    async with served(tmp_path) as port:
        typed(await exchange(port, *trickle, pause_s=HEAD_TIMEOUT_S / 4), 408, "request_timeout")


async def test_a_connection_that_sends_nothing_is_closed_at_the_deadline(tmp_path: Path) -> None:
    async with served(tmp_path) as port:
        typed(await exchange(port), 408, "request_timeout")


async def test_requests_within_the_deadline_and_an_idle_keep_alive_are_answered(
    tmp_path: Path,
) -> None:
    """A head in pieces inside the deadline, then a second request on the same connection
    after an idle pause longer than the deadline (the keep-alive's time, not the head's)."""
    ask = b"GET /v1/openapi.json HTTP/1.1\r\nhost: x\r\n\r\n"
    async with served(tmp_path, _LessQuick) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            for pieces in ([ask[:10], ask[10:]], [ask]):
                for piece in pieces:
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(WITHIN_TIMEOUT_S / 4)
                async with asyncio.timeout(WAIT_S):
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                    body = json.loads(await reader.readexactly(length))
                assert head.startswith(b"HTTP/1.1 200 ") and body["openapi"].startswith("3.1")
                await asyncio.sleep(WITHIN_TIMEOUT_S * 2)  # idle: uvicorn's keep-alive is 5 s
        finally:
            writer.close()


@pytest.mark.parametrize("method", [b"POST", b"GET"])
async def test_a_body_still_coming_after_the_answer_ends_the_connection(
    tmp_path: Path, method: bytes
) -> None:
    """No route reads a body: once answered, a connection whose client still sends one (a
    byte at a time, each before uvicorn's 5 s keep-alive) is ended, not kept reading."""
    head = b" /v1/openapi.json HTTP/1.1\r\nhost: x\r\ncontent-length: 1000000000\r\n\r\n"
    async with served(tmp_path) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(method + head + b"abc")
            async with asyncio.timeout(WAIT_S):
                answered = await reader.readuntil(b"\r\n\r\n")
                assert answered.split(b" ")[1] in (b"200", b"405")
                while not reader.at_eof():  # before: read and dropped for as long as it came
                    writer.write(b"x")
                    await writer.drain()
                    await reader.read(65536)
        except ConnectionError:
            pass  # closed by the server while the client still wrote: ended all the same
        finally:
            writer.close()


async def test_a_pipelined_request_whose_body_is_still_coming_is_answered(
    tmp_path: Path,
) -> None:
    """HTTP/1.1 pipelining: a request sent right behind another, its body not all come when
    the first is answered, gets its own answer (then, its body unread, the connection ends).
    Before, the first answer's end took the next request's body for the answered one's and
    ended the connection there: the second request, already started, was never answered."""
    ask = b"GET /v1/openapi.json HTTP/1.1\r\nhost: x\r\n\r\n"
    post = b"POST /v1/openapi.json HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\n\r\nabc"
    async with served(tmp_path) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            writer.write(ask + post)
            await writer.drain()
            async with asyncio.timeout(WAIT_S):
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
                await reader.readexactly(length)
                assert head.startswith(b"HTTP/1.1 200 ")
                writer.write(b"defghij")  # the rest of the second request's body
                await writer.drain()
                second = await reader.read()
            assert second.startswith(b"HTTP/1.1 405 "), second[:80]
            assert json.loads(second.partition(b"\r\n\r\n")[2])["error"]["code"]
        finally:
            writer.close()
