"""``blackjack play``'s join from the read model over a stream longer than a page: every page
is read, in order, each from the ``next`` of the one before, and the position is the one the
first page gave (read before any event): the events of every page folded, none twice, none
missed."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from blackjack.messages.wire import encode
from blackjack.play import read_model
from blackjack.play.read_model import NoHistory, ReadModelApi, read_model_history
from tests.unit.test_replay_engine import wires, won_round

TOPIC = "blackjack.events"
STREAM = won_round().stream_id


@dataclass(frozen=True)
class PagedApi(ReadModelApi):
    """The query API's answer over ``envelopes``, as ``queries.stream_events`` pages it; the
    position moves on after the first page, as a read model folding meanwhile does."""

    envelopes: list[dict[str, Any]] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)

    def get(self, path: str) -> dict[str, Any]:
        self.asked.append(path)
        query = parse_qs(urlsplit(path).query)
        after, limit = int(query.get("after", ["0"])[0]), int(query["limit"][0])
        found = [e for e in self.envelopes if e["sequence"] > after][:limit]
        offset = 40 if len(self.asked) == 1 else 90
        return {
            "stream_id": STREAM,
            "positions": [{"topic": TOPIC, "partition": 2, "next_offset": offset}],
            "events": found,
            "next": found[-1]["sequence"] if len(found) == limit else None,
        }


def table_log() -> list[dict[str, Any]]:
    """A table's log, opened, a round won and a fresh shoe: its envelopes as the API gives."""
    return [json.loads(encode(wire)) for wire in wires(won_round())]


@pytest.mark.parametrize("page", [1, 3, 1000])
def test_every_page_is_folded_once_and_the_position_is_the_first_page_s(
    monkeypatch: pytest.MonkeyPatch, page: int
) -> None:
    log = table_log()
    monkeypatch.setattr(read_model, "PAGE", page)
    api = PagedApi("http://api", envelopes=log)
    history = asyncio.run(read_model_history(api, STREAM, TOPIC, 2))
    assert [e.sequence for e in history.envelopes] == [e["sequence"] for e in log]
    assert history.next_offset == 40
    assert len(api.asked) == len(log) // page + 1


def test_a_page_missing_from_the_middle_is_no_history() -> None:
    log = table_log()
    api = PagedApi("http://api", envelopes=[*log[:3], *log[4:]])
    with pytest.raises(NoHistory, match="not its whole history"):
        asyncio.run(read_model_history(api, STREAM, TOPIC, 2))
