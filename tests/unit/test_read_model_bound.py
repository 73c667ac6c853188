"""``blackjack play --api`` reads at most ``max_bytes`` of an answer: past it (said by
Content-Length or not, chunked) the answer is refused with a clear ``NoHistory``, which the
join answers as for any API that cannot say (the partition read from its start). Before, the
whole answer was read into memory, however long. Over real sockets."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import pytest

from blackjack.play.read_model import NoHistory, ReadModelApi, read_model_history
from tests.unit.test_read_model_redirect import serving

BOUND = 4096
ANSWER = json.dumps({"events": [], "next": None, "positions": [], "pad": "x" * (2 * BOUND)})


class _Long(BaseHTTPRequestHandler):
    """A JSON answer twice the bound, with its Content-Length."""

    def do_GET(self) -> None:
        body = ANSWER.encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class _Chunked(_Long):
    """The same answer with no length: chunk after chunk."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("transfer-encoding", "chunked")
        self.send_header("connection", "close")
        self.end_headers()
        body = ANSWER.encode()
        try:
            for at in range(0, len(body), 1000):
                chunk = body[at : at + 1000]
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
        except OSError:  # the client stopped reading: as it should
            pass


@pytest.mark.parametrize("handler", [_Long, _Chunked])
def test_an_answer_past_the_bound_is_refused_clearly(handler: type[_Long]) -> None:
    with serving(handler) as api:
        assert ReadModelApi(api, max_bytes=len(ANSWER)).get("/v1/streams/t/events")["pad"]
        with pytest.raises(NoHistory) as refused:
            ReadModelApi(api, max_bytes=BOUND).get("/v1/streams/t/events")
    said = str(refused.value)
    assert said.startswith(f"the query API at {api} answered ")
    assert f"past the {BOUND:,} bytes a client reads of one answer: not read" in said


async def test_the_join_is_told_why_it_reads_the_partition_instead() -> None:
    with serving(_Chunked) as api, pytest.raises(NoHistory, match="past the 4,096 bytes"):
        await read_model_history(ReadModelApi(api, max_bytes=BOUND), "t", "events", 0)
