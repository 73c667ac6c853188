"""``blackjack play --api``'s bearer token goes to the query API only: a redirect is not
followed (urllib followed it with every header of the request, the token included, to the
host it named), and the join falls back to reading the partition, as for any API that cannot
say. Two local HTTP servers, over real sockets."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from blackjack.play.read_model import NoHistory, ReadModelApi

TOKEN = "t" * 40


class _Recorder(BaseHTTPRequestHandler):
    """Answers 200 ``{}`` and keeps each request's Authorization header."""

    seen: list[str | None]

    def do_GET(self) -> None:
        self.seen.append(self.headers.get("Authorization"))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:  # quiet
        pass


@contextlib.contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_the_token_is_never_sent_where_a_redirect_points(status: int) -> None:
    seen: list[str | None] = []
    recorder = type("Recorder", (_Recorder,), {"seen": seen})
    with serving(recorder) as elsewhere:

        class Redirecting(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(status)
                self.send_header("location", f"{elsewhere}{self.path}")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        refused = pytest.raises(NoHistory, match=f"answered {status} .a redirect: not followed")
        with serving(Redirecting) as api, refused:
            ReadModelApi(api, TOKEN).get("/v1/streams/t/events?limit=1000")
    assert seen == []  # before: [f"Bearer {TOKEN}"], the token at the other host


def test_the_api_itself_gets_the_token() -> None:
    seen: list[str | None] = []
    with serving(type("Recorder", (_Recorder,), {"seen": seen})) as api:
        assert ReadModelApi(api, TOKEN).get("/v1/streams/t/events") == {}
    assert seen == [f"Bearer {TOKEN}"]
