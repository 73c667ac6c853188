"""uvicorn for the service's HTTP endpoints, with the process's shutdown left to its caller.

``http_config`` builds uvicorn's configuration for every HTTP endpoint the service serves
(``blackjack serve``, ``blackjack projections run --http``): its ``JsonH11Protocol`` answers a
request uvicorn cannot parse with the API's typed JSON error instead of uvicorn's text/plain
400, and closes a connection whose request head has not all come within
``HEAD_TIMEOUT_S`` (a client trickling its headers, or connecting and sending nothing, held
the connection, and its file descriptor, for as long as it liked), or that still sends a
request body once it has been answered (none is read; trickled, it held it as long).

It also bounds the connections one process holds (``BLACKJACK_HTTP_MAX_CONNECTIONS``, default
``DEFAULT_MAX_CONNECTIONS``, carried as uvicorn's ``limit_concurrency``): uvicorn's own check
accepts every connection and only answers a request 503 (text/plain, probes included) once
the limit is reached, so idle connections still pile up, each a file descriptor of the
process that also runs the Kafka clients and the database pool, and the probes are refused
with the rest. Here a connection that comes past the limit makes room by closing the oldest
idle one (no request in progress: sending nothing, or idle between requests), so idle
connections cannot keep a client, the probes included, out. An idle connection whose next
request has begun to come (part of its head read, or bytes the kernel holds that the event
loop has not read yet: a gateway's pooled connection sending as it is chosen) is passed over
for another; if no other is idle it is answered 503 ``server_busy`` with ``connection:
close``, never reset with its request unread. The connections are kept in order of when
each became idle (``_Edge``), so making room is O(1) amortized whatever the limit (it
scanned them all, for each new connection). When every connection is answering a request,
the ``PROBE_RESERVE`` connections past the limit serve the probes and metrics only
(``PROBE_PATHS``; anything else on them is answered 503 ``server_busy``, typed JSON), each
given ``PROBE_HEAD_TIMEOUT_S`` to send its request; past the reserve a connection is
answered the same 503 and closed as it comes.

With ``BLACKJACK_HTTP_TLS_CERT_FILE`` and ``BLACKJACK_HTTP_TLS_KEY_FILE`` (PEM files: the
certificate, with its chain, and its private key) it serves HTTPS instead, so that the query
API's answers and bearer tokens cross the cluster's network encrypted (``tls_context``).

uvicorn (0.29 and later) raises a SIGTERM or SIGINT it caught again once it has shut down,
and with the default handler back in place that kills the process there: whatever the
caller does after ``serve()`` returns (a projection worker leaving its consumer group and
closing its store) never ran, and the process ended with status 143 after a clean stop.
Here the signal only asks the server to stop, and the caller decides the exit status.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import socket
import ssl
import struct
import termios
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from http import HTTPStatus
from types import FrameType
from typing import Any

import h11
import structlog
import uvicorn
from prometheus_client import Counter
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.utils import get_remote_addr
from uvicorn.server import ServerState

from blackjack.configuration import ConfigurationError
from blackjack.observability.logging import Throttled
from blackjack.stopping import STOP_SIGNALS, on_stop_signal

log = structlog.get_logger("blackjack.http")

# Not claimed by a role: every process that serves HTTP (a handler's, a projection worker's
# query API) counts its own refusals on its own /metrics.
CONNECTIONS_REFUSED = Counter(
    "blackjack_http_connections_refused_total",
    "HTTP connections ended past BLACKJACK_HTTP_MAX_CONNECTIONS (blackjack.http_server), by "
    "how: idle_closed (the oldest idle one, to make room for a new one), busy (answered 503 "
    "server_busy: every connection answering a request, and not a probe in their reserve), "
    "begun_busy (an idle one whose next request had begun to come, answered 503 "
    "server_busy to make room when no other was idle), write_stalled (dropped: the client "
    "took nothing of its answers for 10 s)",
    ["how"],
)

HEAD_TIMEOUT_S = 10.0
"""How long a connection may take to send a request's line and headers, from its first byte
(or from the connection, for its first request): a client on a slow link sends a head of a
few hundred bytes in far less. Idle between requests, uvicorn's keep-alive timeout (5 s)
closes it first."""

LINGER_S = 2.0
"""How long a connection ended by the server (a refusal, a body not read) has its further
bytes read and dropped before it is closed."""

MAX_CONNECTIONS_SETTING = "BLACKJACK_HTTP_MAX_CONNECTIONS"
DEFAULT_MAX_CONNECTIONS = 256
"""Connections one process serves at once: a gateway's pool to a worker is a few dozen, and
each connection is a file descriptor of a process whose Kafka clients and database pool
need theirs (a container's limit is often 1,024)."""
MAX_MAX_CONNECTIONS = 100_000
PROBE_RESERVE = 16
"""Connections accepted past the limit for ``PROBE_PATHS`` only: Kubernetes' probes (one
connection each, closed after its answer) and Prometheus' scrape while the API is flooded."""
PROBE_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})
PROBE_HEAD_TIMEOUT_S = 2.0
"""How long a connection in the probes' reserve may take to send its request: a probe sends
it at once; an idle connection frees its place within this."""
BUSY_LOG_EVERY_S = 10.0
WRITE_STALL_S = 10.0
"""How long the server's writes to a connection may make no progress (the client takes none
of what waits unsent, in the process or in the kernel's send queue) before the connection is
dropped with what could not be sent; a slow reader that keeps taking some is never dropped."""
WRITE_STALL_CHECKS = 5
"""Progress is looked at this many times per ``WRITE_STALL_S``: a connection is dropped
between ``WRITE_STALL_S`` and ``WRITE_STALL_S * (1 + 1 / WRITE_STALL_CHECKS)`` after the
last byte its client took."""

REFUSED = {
    431: ("request_too_large", "the request line or headers are too large"),
    408: ("request_timeout", f"the request's line and headers took over {HEAD_TIMEOUT_S:g} s"),
    503: ("server_busy", "this process serves as many connections as it may; try again"),
}
"""Answers to requests that never reached the app, by status; any other is 400 below."""
BAD_REQUEST = ("bad_request", "the request is not valid HTTP/1.1")


class _Connection(h11.Connection):
    """h11's connection, remembering why it refused the client's bytes: uvicorn only says
    that it did, and its answer is a 400 whatever h11's hint (431 for a head too large).

    It also refuses a request with both ``Content-Length`` and ``Transfer-Encoding``, whose
    connection RFC 9112 (6.1) has a server close: h11 reads its body by the chunks and kept
    the connection, so a request hidden after the chunks' end was answered too, which a proxy
    before the service that reads the body by its length passes unchecked (request
    smuggling)."""

    refused: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        try:
            event = super().next_event()
            if isinstance(event, h11.Request):
                names = {name for name, _ in event.headers}
                if b"content-length" in names and b"transfer-encoding" in names:
                    raise h11.RemoteProtocolError(
                        "both Content-Length and Transfer-Encoding", error_status_hint=400
                    )
            return event
        except h11.RemoteProtocolError as error:
            self.refused = error
            raise


def _refusal(status: int) -> bytes:
    """A whole HTTP/1.1 response, written without h11 (whose state may not allow one)."""
    code, message = REFUSED.get(status, BAD_REQUEST)
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    head = (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        "cache-control: no-store\r\n"
        f"{'retry-after: 1' + chr(13) + chr(10) if status == 503 else ''}"
        "connection: close\r\n\r\n"
    )
    return head.encode() + body


def max_connections(env: Mapping[str, str] = os.environ) -> int:
    """``BLACKJACK_HTTP_MAX_CONNECTIONS``, or ``DEFAULT_MAX_CONNECTIONS`` when blank."""
    text = env.get(MAX_CONNECTIONS_SETTING, "").strip()
    if not text:
        return DEFAULT_MAX_CONNECTIONS
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= MAX_MAX_CONNECTIONS):
        raise ConfigurationError(
            f"{MAX_CONNECTIONS_SETTING} is a whole number from 1 to {MAX_MAX_CONNECTIONS}, "
            f"not {text[:40]!r}"
        )
    return int(text)


class _BusyLog:
    """Each refusal counted; logged once per ``BUSY_LOG_EVERY_S`` with how many were not (a
    flood would write a line per connection)."""

    def __init__(self) -> None:
        self.throttled = Throttled(BUSY_LOG_EVERY_S)

    def __call__(self, client: object, how: str = "busy") -> None:
        CONNECTIONS_REFUSED.labels(how).inc()
        left_out = self.throttled.due()
        if left_out is None:
            return
        log.warning(
            "HTTP connections ended: past the limit (the oldest idle closed, or 503 "
            "server_busy), or reading no answer (write_stalled)",
            client=client,
            how=how,
            not_logged_since_last=left_out,
        )


_busy_refused = _BusyLog()
# at 0 from the start: the first is a rate Prometheus sees
for _how in ("idle_closed", "busy", "begun_busy", "write_stalled"):
    CONNECTIONS_REFUSED.labels(_how)


def _probes_only(app: Any) -> Any:
    """``app`` for ``PROBE_PATHS``, 503 ``server_busy`` for anything else; each answer ends
    the connection, so that the reserve's place is free again at once."""

    async def reserved(scope: Any, receive: Any, send: Any) -> None:
        async def closing(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", ()) if k != b"connection"]
                message = {**message, "headers": [*headers, (b"connection", b"close")]}
            await send(message)

        if scope["type"] != "http" or scope["path"] in PROBE_PATHS:
            await app(scope, receive, closing)
            return
        _busy_refused(scope.get("client"))
        code, message = REFUSED[503]
        body = json.dumps({"error": {"code": code, "message": message}}).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"cache-control", b"no-store"),
            (b"retry-after", b"1"),
        ]
        await closing({"type": "http.response.start", "status": 503, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    return reserved


def _kernel_bytes(transport: asyncio.BaseTransport, request: int) -> int:
    """``FIONREAD`` (bytes received, not yet read by the process) or ``TIOCOUTQ`` (bytes
    written, not yet taken by the client) of the connection's socket; 0 where the platform or
    the transport (TLS, a test's) cannot say."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return 0
    try:
        packed = fcntl.ioctl(sock.fileno(), request, b"\0\0\0\0")
    except (OSError, ValueError):
        return 0
    count: int = struct.unpack("i", packed)[0]
    return count


class _Edge:
    """One server's connections as the bound sees them, each kept up to date as a connection
    changes (no scan of the others: a scan per new connection was quadratic in the limit,
    up to ``MAX_MAX_CONNECTIONS``).

    ``held`` counts the connections made and not known to be closing; ``orphaned`` the
    requests the app still runs whose connection has gone (uvicorn runs a request to its end
    when its client leaves). ``idle`` and
    ``lingering`` are ordered by when each became so, the oldest first; an entry whose
    connection has since begun a request (or closed) is dropped when it comes first, and the
    connection is added again, last, when it is idle again, so a connection made room for
    costs O(1) amortized. ``begun`` holds the idle connections found to be receiving their
    next request (part of its head read, or bytes waiting in the kernel): made room for only
    when no other is idle, and then answered 503, not closed (a gateway's request lost)."""

    __slots__ = ("begun", "held", "idle", "lingering", "orphaned")

    def __init__(self) -> None:
        self.held = 0
        self.orphaned = 0
        self.idle: OrderedDict[JsonH11Protocol, None] = OrderedDict()
        self.begun: OrderedDict[JsonH11Protocol, None] = OrderedDict()
        self.lingering: OrderedDict[JsonH11Protocol, None] = OrderedDict()

    def forget(self, connection: JsonH11Protocol) -> None:
        self.idle.pop(connection, None)
        self.begun.pop(connection, None)
        self.lingering.pop(connection, None)

    def make_room(self) -> bool:
        """Closes the connection that has lingered longest (answered already), else the one
        idle longest with nothing of a next request received, else answers 503 and ends the
        one whose next request began longest ago; False when every other connection is
        answering a request."""
        while self.lingering:
            connection, _ = self.lingering.popitem(last=False)
            if connection._lingers():
                connection._close_busy(b"", "idle_closed")
                return True
        while self.idle:
            connection, _ = self.idle.popitem(last=False)
            if not connection._idle():
                continue  # begun a request since, or closed: added again when idle
            if connection._head_begun():
                self.begun[connection] = None
                continue
            connection._close_busy(b"", "idle_closed")
            return True
        while self.begun:
            connection, _ = self.begun.popitem(last=False)
            if connection._idle():
                connection._answer_busy()
                return True
        return False


_edges: weakref.WeakKeyDictionary[ServerState, _Edge] = weakref.WeakKeyDictionary()


def _edge(state: ServerState) -> _Edge:
    edge = _edges.get(state)
    if edge is None:
        edge = _edges[state] = _Edge()
    return edge


class JsonH11Protocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol, answering what it refuses in the API's error format
    (``{"error": {"code", "message"}}``, as every other 4xx) and bounding the time a
    request head may take (``head_timeout_s``)."""

    head_timeout_s = HEAD_TIMEOUT_S
    linger_s = LINGER_S
    probe_reserve = PROBE_RESERVE
    write_stall_s = WRITE_STALL_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        limit = self.config.h11_max_incomplete_event_size
        self.conn: _Connection = _Connection(h11.SERVER, *(() if limit is None else (limit,)))
        self._head_deadline: asyncio.TimerHandle | None = None
        self._lingering: asyncio.TimerHandle | None = None
        self.max_connections: int | None = self.limit_concurrency
        self.limit_concurrency = None  # taken over as connections come (connection_made)
        self._busy = False
        self._write_stall: asyncio.TimerHandle | None = None
        self._unsent = 0
        self._progress_at = 0.0
        self._edge = _edge(self.server_state)
        self._counted = False
        self._requests = 0  # the app's requests on this connection running now
        self._handshaking: asyncio.Future[None] | None = None  # TLS begun, not done
        self._gone = False
        self.app = self._counting(self.app)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        tls: ssl.SSLContext | None = getattr(self.config, "tls", None)
        if tls is None:
            self._connected(transport)
            # Writing pauses as soon as anything waits unsent (the kernel's buffer full: the
            # client reads slowly or not at all), which arms the stall timer
            # (``pause_writing``): a connection whose writes make no progress is dropped,
            # whether an answer is still being written (uvicorn waits before its next
            # write), written whole (complete for uvicorn, the connection idle) or the
            # connection closed (``_close``).
            transport.set_write_buffer_limits(high=0, low=0)
        else:
            # TLS is begun here, on the accepted connection, not by asyncio's server (which
            # hands a connection over only once its handshake is done): counted, bounded by
            # the head's deadline and made room for from its first moment, so connections
            # that never finish a handshake cannot hold the process's descriptors.
            self.transport = transport  # the TCP connection's, until the handshake is done
            self.client = get_remote_addr(transport)
            transport.pause_reading()  # the client's first TLS bytes are the handshake's
            self._handshaking = asyncio.ensure_future(self._start_tls(transport, tls))
        self._count()

    def _connected(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)

    async def _start_tls(self, transport: asyncio.Transport, tls: ssl.SSLContext) -> None:
        secured = None
        if not transport.is_closing():  # not refused or made room for as it came
            try:
                secured = await self.loop.start_tls(
                    transport,
                    self,
                    tls,
                    server_side=True,
                    ssl_handshake_timeout=self.head_timeout_s,
                )
            except Exception as error:  # not TLS, too slow, gone: only this connection's
                log.debug("TLS handshake failed", client=self.client, error=repr(error))
        if secured is None or self._busy or not self._counted:  # made room for meanwhile
            self._release()
            self._disarm_head_deadline()
            (secured or transport).abort()
            return
        self._handshaking = None
        # asyncio's TLS transport checks its buffer against the low mark only when the
        # socket's own transport pauses, so a mark at 0 paused uvicorn for good (an answer's
        # head sent, its body never): the default marks stay, and a stall is seen once
        # 64 KiB wait unsent.
        self._connected(secured)

    def _count(self) -> None:
        """Counted against the limit, making room for itself, or refused past the reserve."""
        edge = self._edge
        edge.held += 1
        self._counted = True
        limit = self.max_connections
        if limit is not None:
            held = edge.held
            # more than once when connections ended with a 503 still linger (counted)
            while held > limit and edge.make_room():
                held -= 1
            # and the requests still running for clients that have gone: counted nowhere,
            # they let a client that closes each connection at once start any number (no
            # idle connection is closed for them: it would free no request)
            held += edge.orphaned
            if held > limit:  # every other connection answering a request
                if held > limit + self.probe_reserve:
                    # in clear only: a TLS client would read the answer as a broken record
                    self._close_busy(b"" if self._handshaking else _refusal(503), "busy")
                    return
                self.head_timeout_s = min(self.head_timeout_s, PROBE_HEAD_TIMEOUT_S)
                self.app = _probes_only(self.app)
        edge.idle[self] = None
        self._arm_head_deadline()

    def _counting(self, app: Any) -> Any:
        """``app``, counting the requests it runs on this connection: those still running
        when the connection is lost are the edge's ``orphaned`` until they end."""

        async def counted(scope: Any, receive: Any, send: Any) -> None:
            self._requests += 1
            try:
                await app(scope, receive, send)
            finally:
                self._requests -= 1
                if self._gone:
                    self._edge.orphaned -= 1

        return counted

    def _idle(self) -> bool:
        """No request in progress: none begun, a head not complete, or between requests."""
        return (
            not self.transport.is_closing()
            and self._lingering is None
            and self.conn.their_state is h11.IDLE
            and (self.cycle is None or self.cycle.response_complete)
        )

    def _lingers(self) -> bool:
        """Answered and ended, reading what its client still sends (``_end``). A lingering
        connection counts against the limit like any other: left to its ``linger_s``, a
        client ending one that way every ``linger_s`` held all of them."""
        return not self.transport.is_closing() and self._lingering is not None

    def _head_begun(self) -> bool:
        """Idle, and yet some of a next request has come: part of its head read, or bytes
        the kernel received that the event loop has not read yet (a gateway's request on its
        keep-alive connection, arriving as the connection is chosen to make room: closed,
        the socket would reset the connection and the request be lost)."""
        if self._handshaking is not None:  # its bytes are the handshake's: no request yet
            return False
        return (
            bool(self.conn.trailing_data[0]) or _kernel_bytes(self.transport, termios.FIONREAD) > 0
        )

    def _release(self) -> None:
        """No longer counted against the limit (closing, or gone)."""
        self._edge.forget(self)
        if self._counted:
            self._counted = False
            self._edge.held -= 1

    def _answer_busy(self) -> None:
        """Makes room by ending a connection whose next request has begun: answered 503
        ``server_busy`` with ``connection: close`` (the gateway knows that request was not
        handled and may send it again), what else it sends read and dropped for ``linger_s``
        (``_end``). Still counted while it lingers; the next connection past the limit
        closes it first."""
        _busy_refused(self.client, "begun_busy")
        if self.timeout_keep_alive_task is not None:
            self.timeout_keep_alive_task.cancel()
            self.timeout_keep_alive_task = None
        self.transport.resume_reading()  # the rest of the request read and dropped, not reset
        self._end(_refusal(503))

    def _close_busy(self, last: bytes, how: str) -> None:
        """Closed at once, not lingering: a flood's connections keep no descriptor here."""
        self._busy = True
        self._disarm_head_deadline()
        if self._lingering is not None:
            self._lingering.cancel()
        if self.timeout_keep_alive_task is not None:
            self.timeout_keep_alive_task.cancel()
            self.timeout_keep_alive_task = None
        _busy_refused(self.client, how)
        if last:
            self.transport.write(last)
        self._close()

    def _close(self) -> None:
        """Closes the connection; at once, without what it could not send, when its client
        has not read the answers already written (closed gracefully, it would wait for them
        to go, its descriptor held until ``write_stall_s`` and no longer counted)."""
        self._release()
        if self.transport.get_write_buffer_size():
            self.transport.abort()
        else:
            self.transport.close()

    def timeout_keep_alive_handler(self) -> None:
        """uvicorn's keep-alive timeout, closing as ``_close`` does."""
        if not self.transport.is_closing():
            self.conn.send(h11.ConnectionClosed())
            self._close()

    def data_received(self, data: bytes) -> None:
        if self._lingering is not None or self._busy:  # answered already: dropped
            return
        super().data_received(data)
        if self.transport.is_closing():
            self._release()
            self._disarm_head_deadline()
        elif self.conn.their_state is h11.IDLE:  # a head begun, not complete: on the clock
            self._arm_head_deadline()
        else:
            self._disarm_head_deadline()

    def _queued(self) -> int:
        """Bytes written to the connection its client has not taken: waiting in the process,
        and in the kernel's send queue (where a slow reader's progress shows first: the
        kernel wakes the process to write again only once half its queue has gone, which at
        a slow reader's pace took longer than ``write_stall_s``)."""
        unsent = self.transport.get_write_buffer_size()
        return unsent + _kernel_bytes(self.transport, termios.TIOCOUTQ) if unsent else 0

    def pause_writing(self) -> None:
        super().pause_writing()
        if self._write_stall is None:
            self._unsent = self._queued()
            self._progress_at = self.loop.time()
            self._arm_write_stall()

    def _arm_write_stall(self) -> None:
        every = self.write_stall_s / WRITE_STALL_CHECKS
        self._write_stall = self.loop.call_later(every, self._writes_stalled)

    def resume_writing(self) -> None:
        self._disarm_write_stall()
        super().resume_writing()

    def _disarm_write_stall(self) -> None:
        if self._write_stall is not None:
            self._write_stall.cancel()
            self._write_stall = None

    def _writes_stalled(self) -> None:
        """Writing paused (something waits unsent): dropped once the client has taken
        nothing of what was written for ``write_stall_s`` (an answer's write waiting for
        ever held its connection as a request in progress, or, the connection closed, its
        descriptor). A time without progress, not a total: a slow reader of a long answer
        that keeps taking some is never dropped."""
        self._write_stall = None
        queued = self._queued()
        if not queued:
            return
        now = self.loop.time()
        if queued < self._unsent:  # the client took some
            self._progress_at = now
        self._unsent = queued
        if now - self._progress_at >= self.write_stall_s:
            _busy_refused(self.client, "write_stalled")
            self._release()
            self.transport.abort()
        else:
            self._arm_write_stall()

    def connection_lost(self, exc: Exception | None) -> None:
        self._release()
        if not self._gone:
            self._gone = True
            self._edge.orphaned += self._requests
        self._disarm_head_deadline()
        self._disarm_write_stall()
        if self._lingering is not None:
            self._lingering.cancel()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        refused = self.conn.refused
        status = refused.error_status_hint if refused is not None else 400
        self._refuse(status if status in REFUSED else 400)

    def on_response_complete(self) -> None:
        # asked before uvicorn starts the next cycle: a pipelined request behind this one,
        # whose body is still coming, is that request's to answer, not this one's
        body_unread = self.conn.their_state is h11.SEND_BODY
        super().on_response_complete()
        if body_unread and not self.transport.is_closing():
            # answered while the client still sends a body no route reads (every answer
            # comes without reading one): uvicorn read and dropped it for as long as it
            # came, each byte putting its keep-alive timeout off again
            self._unset_keepalive_if_required()
            self._end(b"")
        if self.transport.is_closing():
            self._release()
        elif self._idle():  # the newest idle (unless a pipelined request began)
            self._edge.begun.pop(self, None)
            self._edge.idle.pop(self, None)
            self._edge.idle[self] = None

    def _refuse(self, status: int) -> None:
        self._end(_refusal(status))

    def _end(self, last: bytes) -> None:
        """Sends ``last`` and ends the connection, reading (and dropping) what the client
        still sends for ``linger_s``: closed at once with its bytes unread, the socket resets
        the connection, and the client may lose the answer before reading it."""
        self._disarm_head_deadline()
        if self.transport.is_closing() or self._lingering is not None:
            return
        self.transport.write(last)
        if not self.transport.can_write_eof():  # TLS: no half-close
            self._release()
            self.transport.close()
            return
        self.transport.write_eof()
        self._edge.forget(self)
        self._edge.lingering[self] = None
        self._lingering = self.loop.call_later(self.linger_s, self._close)

    def _arm_head_deadline(self) -> None:
        if self._head_deadline is None:
            self._head_deadline = self.loop.call_later(self.head_timeout_s, self._head_too_slow)

    def _disarm_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_too_slow(self) -> None:
        self._head_deadline = None
        if self._handshaking is not None:  # no TLS yet to answer 408 in
            log.info("TLS handshake too slow: connection closed", client=self.client)
            self._close()
            return
        if self.conn.their_state is not h11.IDLE:  # a request is being answered
            return
        if self.timeout_keep_alive_task is not None:  # idle between requests: uvicorn's
            return
        log.info("request head too slow: connection closed", client=self.client)
        self._refuse(408)


class HttpConfig(uvicorn.Config):
    tls: ssl.SSLContext | None = None
    """HTTPS: the handshake ``JsonH11Protocol`` begins on each accepted connection (uvicorn's
    own ``ssl`` left unset: asyncio's server would hand a connection over only once its
    handshake is done, uncounted until then)."""


def http_config(app: Any, host: str, port: int, **options: Any) -> HttpConfig:
    """uvicorn's configuration of the service's HTTP endpoints (``JsonH11Protocol``), at most
    ``BLACKJACK_HTTP_MAX_CONNECTIONS`` connections (``limit_concurrency``) and the probes'
    reserve; HTTPS when ``tls_context`` says so."""
    options.setdefault("limit_concurrency", max_connections())
    config = HttpConfig(app, host=host, port=port, http=JsonH11Protocol, **options)
    config.tls = tls_context()
    if config.tls is not None:  # uvicorn's own start line says http://, its ssl unset
        log.info("HTTP endpoints answer HTTPS only", host=host, port=port)
    return config


TLS_CERT_SETTING = "BLACKJACK_HTTP_TLS_CERT_FILE"
TLS_KEY_SETTING = "BLACKJACK_HTTP_TLS_KEY_FILE"


def tls_context(env: Mapping[str, str] = os.environ) -> ssl.SSLContext | None:
    """The server's TLS context from the settings (None: plain HTTP). Both or neither, and a
    key that is the certificate's: checked here, at the start, with a line that says which."""
    cert = env.get(TLS_CERT_SETTING, "").strip()
    key = env.get(TLS_KEY_SETTING, "").strip()
    if not cert and not key:
        return None
    if not (cert and key):
        given, missing = (
            (TLS_CERT_SETTING, TLS_KEY_SETTING) if cert else (TLS_KEY_SETTING, TLS_CERT_SETTING)
        )
        raise ConfigurationError(f"{given} is set but {missing} is not: HTTPS needs both")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.set_alpn_protocols(["http/1.1"])
    try:
        context.load_cert_chain(cert, key)
    except ssl.SSLError as error:  # not PEM, or a key that is not the certificate's
        raise ConfigurationError(
            f"{TLS_CERT_SETTING} and {TLS_KEY_SETTING} are not a PEM certificate and its "
            f"private key ({error.reason or error})"
        ) from None
    except OSError as error:  # a file missing or unreadable (SSLError is an OSError too)
        raise ConfigurationError(
            f"{TLS_CERT_SETTING} {cert} or {TLS_KEY_SETTING} {key} cannot be read: "
            f"{error.strerror or error}"
        ) from None
    return context


class Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None] | None = None):
        """``on_exit``: told at once when a signal asks the server to stop (``serve`` halts
        its start there: uvicorn's shutdown of the app comes only after its connections)."""
        super().__init__(config)
        self.on_exit = on_exit

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().serve(sockets)
        except SystemExit as exiting:
            # uvicorn exits 3 when it cannot listen (the port taken, an address not this
            # host's): 3 is a store at another schema revision here, where this is a setting
            raise ConfigurationError(
                f"cannot listen on {self.config.host}:{self.config.port} (uvicorn's error line "
                "says why: a port another process holds, an address not this host's)"
            ) from exiting

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if self.on_exit is not None:
            self.on_exit()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # signals reach the main thread only (as uvicorn's own)
            return
        loop = asyncio.get_running_loop()
        # a SIGTERM that came before, while the process was importing, is taken here too
        on_stop_signal(loop, lambda signum: self.handle_exit(signum, None))
        try:
            yield
        finally:
            # back to the default actions: a second signal during the caller's shutdown
            # ends the process at once
            for signum in STOP_SIGNALS:
                loop.remove_signal_handler(signum)
