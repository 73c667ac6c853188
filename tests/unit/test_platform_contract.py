"""What a platform on another stack (a JVM consumer, say) needs from the published contract and
cannot learn from the Python client: found by a Java client written against `README.md`,
`docs/kafka.md` and `schemas/` alone."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema

from blackjack.bus.contract import asyncapi_document
from blackjack.messages import wire
from blackjack.messages.wire import UPCASTERS

ROOT = Path(__file__).parents[2]


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    following = re.search(r"\n#{2,3} ", text[start + len(heading) :])
    return text[start : start + len(heading) + (following.start() if following else len(text))]


def test_readers_of_events_and_results_are_told_to_read_committed() -> None:
    # Java's consumer (and librdkafka's) reads read_uncommitted unless told otherwise: it then
    # sees the records of a handler transaction that was aborted (a handler killed or fenced
    # mid-batch), and the same stream and sequence again once the command is decided anew,
    # with other content where the decision drew a new shoe. The Java client measured 99 such
    # records and 6 (stream, sequence) pairs with two different events after one SIGKILL.
    channels = asyncapi_document()["channels"]
    for channel in ("events", "command-results"):
        assert "isolation.level=read_committed" in channels[channel]["description"], channel
    readme = _section((ROOT / "README.md").read_text(), "## Topics and the message contract")
    kafka = _section((ROOT / "docs" / "kafka.md").read_text(), "### Topics")
    for text in (readme, kafka):
        assert "isolation.level=read_committed" in text
        assert "read_uncommitted" in text  # why: the default of other clients


def _integers_without_int64(node: object, path: str = "") -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        if node.get("type") == "integer" and node.get("format") != "int64":
            found.append(path or "/")
        for key, value in node.items():
            found += _integers_without_int64(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _integers_without_int64(value, f"{path}/{i}")
    return found


def test_every_integer_of_the_published_contract_is_int64() -> None:
    # A format-less `type: integer` is a 32-bit Integer to the JVM's code generators
    # (openapi-generator, jsonschema2pojo): a deposit of 3,000,000,000 minor units, which the
    # service takes (balances go to 10^15), failed "Numeric value (3000000000) out of range of
    # int" in such a class. Every integer here fits 64 bits (docs/kafka.md, Money).
    schemas = ROOT / "schemas"
    found = [
        f"{path.relative_to(schemas)}{where}"
        for path in sorted(schemas.rglob("*.json"))
        for where in _integers_without_int64(json.loads(path.read_text()))
    ]
    assert found == []
    money = _section((ROOT / "README.md").read_text(), "### Money and rounding")
    assert "format: int64" in money and "2^53" in money  # and why, for the reader


def _stored(data: dict[str, object]) -> dict[str, object]:
    return {
        "event_id": "e-1",
        "type": data["type"],
        "schema_version": data["version"],
        "stream_id": "table-1",
        "sequence": 7,
        "occurred_at": "2026-01-01T00:00:00Z",
        "causation_id": "c-1",
        "correlation_id": "k-1",
        "data": data,
    }


# Events as the handlers that wrote each older version stored them (the log keeps them for
# ever): one per upcaster in messages/wire.py.
STORED_OLD_VERSIONS = {
    "TurnStarted": {"type": "TurnStarted", "version": 1, "round": 1, "player_id": "p", "box": 0,
                    "hand": 0},
    "BetRefunded": {"type": "BetRefunded", "version": 1, "round": 1, "player_id": "p", "box": 0,
                    "amount": 500, "reason": "cleared", "balance_after": 1000},
    "CashOutReceived": {"type": "CashOutReceived", "version": 1, "player_id": "p",
                        "table_id": "t", "amount": 500, "balance_after": 1000},
    "PlayerTimedOut": {"type": "PlayerTimedOut", "version": 1, "round": 1, "player_id": "p",
                       "phase": "playing", "action": "stood", "box": 0, "hand": 0},
    "SeatLeft": {"type": "SeatLeft", "version": 1, "player_id": "p", "seat": 0,
                 "balance_returned": 500},
    "RoundVoided": {"type": "RoundVoided", "version": 1, "round": 1, "operator": "ops",
                    "reason": "jammed", "returns": [{"player_id": "p", "wagered": 500,
                    "paid": 0, "returned": 500, "not_recovered": 0, "balance_after": 1000}]},
}  # fmt: skip


def test_every_stored_older_event_version_is_valid_against_the_published_schemas() -> None:
    # A reader on another stack validates what it reads against schemas/, and the events topic
    # holds every version ever written: a TurnStarted version 1 (no `actions`; read as null)
    # failed events/TurnStarted.json, which required the field.
    assert {kind for kind, _ in UPCASTERS} == set(wire.ABSENT_FROM_OLDER_VERSIONS)
    assert {kind for kind, _ in UPCASTERS} - {"TableOpened"} == set(STORED_OLD_VERSIONS)
    envelope = json.loads((ROOT / "schemas" / "event-envelope.json").read_text())
    for kind, data in STORED_OLD_VERSIONS.items():
        schema = json.loads((ROOT / "schemas" / "events" / f"{kind}.json").read_text())
        jsonschema.validate(data, schema)
        jsonschema.validate(_stored(data), envelope)
        assert wire.decode(json.dumps(_stored(data)).encode()).schema_version == 2
