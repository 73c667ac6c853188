"""Where a client joining a table starts: what the read model already folded.

A table's partition of ``blackjack.events`` holds every table hashed to it, for good: read from
its start, a join reads every record of them all before the first screen. The query API's
``GET /v1/streams/{stream_id}/events`` gives the stream's own events, as the read model folded
them, and the read model's position in the partition (the first offset it has not folded):
the client folds those events and reads the partition from that offset on. The same events,
folded by the same fold, so the same table and history as a read from the start.
"""

from __future__ import annotations

import asyncio
import json
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from blackjack.messages.wire import WireEnvelope, decode

PAGE = 1000
MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""The most of one answer the client reads: a page of ``PAGE`` events even of the largest kind
(a sealed ``ShoeShuffled``, a few KB) fits several times over; past it (a wrong URL that
streams a file, a server that never stops sending) the answer is refused as ``NoHistory``
instead of read whole into memory."""


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """The query API never redirects; urllib follows a redirect with every header the
    request had, the bearer token included, to whatever host it names."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None  # not followed: the 3xx is an HTTPError


_OPENER = urllib.request.build_opener(_NoRedirects)


class NoHistory(Exception):
    """The read model cannot give the stream's start: why, said to the player, who then
    reads the partition from its start."""


@dataclass(frozen=True)
class ReadModelApi:
    """The query API of the service's read model (``blackjack serve``, ``blackjack projections
    run --http``): its base URL and, when it has tokens, one of them."""

    url: str
    token: str | None = None
    timeout: float = 10.0
    max_bytes: int = MAX_ANSWER_BYTES

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> ReadModelApi | None:
        """``BLACKJACK_API_URL`` (and ``BLACKJACK_API_TOKEN``); None when not set."""
        url = env.get("BLACKJACK_API_URL", "").strip()
        if not url:
            return None
        return cls(url, env.get("BLACKJACK_API_TOKEN", "").strip() or None)

    def get(self, path: str) -> dict[str, Any]:
        """One answer of the API (blocking: run it in a thread)."""
        request = urllib.request.Request(self.url.rstrip("/") + path)
        if self.token is not None:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with _OPENER.open(request, timeout=self.timeout) as answer:
                length = answer.headers.get("content-length", "")
                if length.isdigit() and int(length) > self.max_bytes:
                    raise NoHistory(self._too_long(f"{int(length):,} bytes"))
                body = answer.read(self.max_bytes + 1)  # no more than that, said or not
                if len(body) > self.max_bytes:
                    raise NoHistory(self._too_long("more"))
                found: dict[str, Any] = json.loads(body)
                return found
        except urllib.error.HTTPError as error:
            moved = " (a redirect: not followed)" if 300 <= error.code < 400 else ""
            raise NoHistory(f"the query API at {self.url} answered {error.code}{moved}") from error
        except (OSError, ValueError) as error:  # refused, timed out, not JSON
            raise NoHistory(f"the query API at {self.url} did not answer ({error})") from error

    def _too_long(self, size: str) -> str:
        return (
            f"the query API at {self.url} answered {size}, past the {self.max_bytes:,} bytes "
            "a client reads of one answer: not read"
        )


@dataclass(frozen=True)
class History:
    """A stream's events as the read model holds them, and the offset of the stream's
    partition from which the topic has the rest."""

    envelopes: list[WireEnvelope]
    next_offset: int
    positions: dict[tuple[str, int], int]
    """the read model's position in each partition of the topic (the stream's among them),
    as the API gave them: (topic, partition) -> the first offset not folded"""


async def read_model_history(
    api: ReadModelApi, stream_id: str, topic: str, partition: int
) -> History:
    """The stream's events up to where the read model stands in ``topic``'s ``partition``,
    page by page. ``NoHistory`` when the API cannot say, or has folded nothing of that
    partition (another deployment's read model, or one that has not started)."""
    path = f"/v1/streams/{quote(stream_id, safe='')}/events?limit={PAGE}"
    first = await asyncio.to_thread(api.get, path)
    offset = next(
        (
            p.get("next_offset")
            for p in first.get("positions", [])
            if p.get("topic") == topic and p.get("partition") == partition
        ),
        None,
    )
    if not isinstance(offset, int):
        raise NoHistory(f"the read model at {api.url} has folded nothing of {topic}[{partition}]")
    positions = {
        (topic, p["partition"]): p["next_offset"]
        for p in first.get("positions", [])
        if p.get("topic") == topic
        and isinstance(p.get("partition"), int)
        and isinstance(p.get("next_offset"), int)
    }
    envelopes: list[WireEnvelope] = []
    page = first
    while True:
        envelopes += [decode(json.dumps(raw).encode()) for raw in page.get("events", [])]
        after = page.get("next")
        if after is None:
            break
        page = await asyncio.to_thread(api.get, f"{path}&after={int(after)}")
    if [e.sequence for e in envelopes] != list(range(1, len(envelopes) + 1)) or any(
        e.stream_id != stream_id for e in envelopes
    ):
        raise NoHistory(f"the read model's events of {stream_id} are not its whole history")
    return History(envelopes, offset, positions)
