"""A JSON object that names a key twice is ``malformed``, never read as one of its values.

Python's reader keeps the last value: ``{"type": "SitDown", "type": "Deal"}`` was decided as
a ``Deal``, and a ``Deposit`` with ``"amount": 100, "amount": 100000`` took 100000, while a
gateway of the platform that keeps the first value (several JSON libraries do, others refuse
the text) checked the other command, or the other amount. RFC 8259: such an object's
behaviour is unpredictable; the handler refuses it, and changes nothing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from blackjack.bus.topics import RECORD_MAX_BYTES
from blackjack.command_handler.reading import Inbound
from blackjack.command_handler.streams import PartitionStore
from tests.unit.processor_harness import new_processor

NOW = datetime(2026, 5, 1, tzinfo=UTC)
TABLE = "table-1"
OPEN = (
    '{"command_id": "open", "stream_id": "table-1", '
    '"command": {"type": "OpenTable", "variant": "mini-h17"}}'
)

TWICE = {
    "the command's type": (
        '{"command_id": "c-1", "stream_id": "table-1", '
        '"command": {"type": "SitDown", "type": "Deal", "player_id": "ann"}}',
        "type",
    ),
    "an amount": (
        '{"command_id": "c-2", "stream_id": "table-1", '
        '"command": {"type": "Deposit", "player_id": "ann", "amount": 100, "amount": 100000}}',
        "amount",
    ),
    "the envelope's command id": (
        '{"command_id": "c-3", "command_id": "c-4", "stream_id": "table-1", '
        '"command": {"type": "Deposit", "player_id": "ann", "amount": 100}}',
        "command_id",
    ),
    "the command itself": (
        '{"command_id": "c-5", "stream_id": "table-1", '
        '"command": {"type": "Deposit", "player_id": "ann", "amount": 100}, '
        '"command": {"type": "Withdraw", "player_id": "ann", "amount": 100}}',
        "command",
    ),
}


@pytest.mark.parametrize(("value", "key"), TWICE.values(), ids=TWICE.keys())
def test_a_key_named_twice_is_malformed_and_changes_nothing(value: str, key: str) -> None:
    processor, store = new_processor(), PartitionStore(0)
    opened = processor.handle(store, Inbound(TABLE.encode(), OPEN.encode(), [], 0, 1), NOW)
    assert opened.result.status == "accepted"
    seated = (
        '{"command_id": "sit", "stream_id": "table-1", '
        '"command": {"type": "SitDown", "player_id": "ann"}}'
    )
    assert processor.handle(store, Inbound(TABLE.encode(), seated.encode(), [], 0, 2), NOW).events
    before = store.get(TABLE).sequence
    handled = processor.handle(store, Inbound(TABLE.encode(), value.encode(), [], 0, 3), NOW)
    assert handled.result.status == "rejected" and handled.result.rejection is not None
    assert handled.result.rejection.code == "malformed"
    assert f"the key {key!r} is named twice" in handled.result.rejection.message
    assert handled.events == [] and store.get(TABLE).sequence == before
    assert [record.topic for record in handled.outgoing] == [processor.topics.results]


def test_the_same_key_in_two_objects_is_no_duplicate() -> None:
    processor, store = new_processor(), PartitionStore(0)
    value = (
        '{"command_id": "open", "stream_id": "table-1", "command": {"type": "OpenTable", '
        '"variant": "mini-h17", "overrides": {"type": 1}}}'
    )
    handled = processor.handle(store, Inbound(TABLE.encode(), value.encode(), [], 0, 1), NOW)
    assert handled.result.rejection is not None
    assert handled.result.rejection.code == "invalid_rules"  # read, then refused by the rules


@pytest.mark.parametrize(
    ("value", "command_id", "correlation_id"),
    [
        (
            '{"command_id": "c-7", "stream_id": "table-1", "correlation_id": "s-42", '
            '"command": {"type": "SitDown", "type": "Deal", "player_id": "ann"}}',
            "c-7",
            "s-42",
        ),
        # the ids themselves named twice: neither is quoted, whichever a reader would keep
        (
            '{"command_id": "c-7", "command_id": "c-8", "stream_id": "table-1", '
            '"correlation_id": "s-42", "command": {"type": "Deal", "player_id": "ann"}}',
            "unparsed-0-3",
            "s-42",
        ),
        (
            '{"command_id": "c-7", "stream_id": "table-1", "correlation_id": "s-42", '
            '"correlation_id": "s-43", "command": {"type": "Deal", "player_id": "ann"}}',
            "c-7",
            None,
        ),
        # the ids' names twice inside another object: the envelope's own are named once (they
        # were left unquoted, filed under unparsed-<partition>-<offset>)
        (
            '{"command_id": "c-7", "stream_id": "table-1", "correlation_id": "s-42", '
            '"command": {"type": "OpenTable", "variant": "mini-h17", "overrides": '
            '{"command_id": 1, "command_id": 2, "correlation_id": 1, "correlation_id": 2}}}',
            "c-7",
            "s-42",
        ),
    ],
)
def test_the_answer_to_a_key_named_twice_quotes_the_ids_named_once(
    value: str, command_id: str, correlation_id: str | None
) -> None:
    """docs/kafka.md: a malformed answer carries the message's command id and correlation id
    when it has them, so that a platform routing answers by them gets this one."""
    processor, store = new_processor(), PartitionStore(0)
    handled = processor.handle(store, Inbound(TABLE.encode(), value.encode(), [], 0, 3), NOW)
    assert handled.result.rejection is not None
    assert handled.result.rejection.code == "malformed"
    assert handled.result.command_id == command_id
    assert handled.result.correlation_id == correlation_id
    assert handled.result.stream_id == TABLE


def test_a_record_of_a_hundred_thousand_keys_one_named_twice_is_answered_at_once() -> None:
    """Counting each key's names among all the object's names was quadratic: this record (just
    under the topics' 1,000,000 bytes) held the handler's one loop for six minutes, past the
    group's session timeout, and again at every instance the partition moved to (review of
    the handler's edges, session 34). Counted in one pass, it is answered like any other."""
    keys = ",".join(f'"{number:x}":0' for number in range(100_000))
    value = (
        '{"command_id": "c-9", "stream_id": "table-1", "command": {"type": "OpenTable", '
        f'"variant": "mini-h17", "overrides": {{{keys}, "0": 1}}}}}}'
    )
    assert len(value) < RECORD_MAX_BYTES
    processor, store = new_processor(), PartitionStore(0)
    handled = processor.handle(store, Inbound(TABLE.encode(), value.encode(), [], 0, 1), NOW)
    assert handled.result.rejection is not None and handled.result.command_id == "c-9"
    assert handled.result.rejection.code == "malformed"
    assert "the key '0' is named twice" in handled.result.rejection.message
    assert handled.events == []
