"""A record that breaks reading it is answered ``malformed`` by the processor, never raised: a
raise aborts the transaction, and the partition would retry the same record for ever, with
every table and wallet on it (and the money steps queued behind it) stopped."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from aiokafka.errors import CorruptRecordException
from structlog.testing import capture_logs

import blackjack.command_handler.decision as decision_module
from blackjack.bus.header_names import cannot_decode
from blackjack.command_handler.processor import Handled, Processor
from blackjack.command_handler.reading import Inbound
from blackjack.command_handler.streams import PartitionStore
from blackjack.domain import commands as cmd
from blackjack.domain.rejections import MAX_MESSAGE_CHARS, Rejection
from blackjack.domain.wallet import WalletDeposit, wallet_stream
from blackjack.messages.envelope import CommandEnvelope
from tests.unit.processor_harness import new_processor

NOW = datetime(2026, 5, 1, tzinfo=UTC)
WALLET = wallet_stream("ann")
PREFIX = f'{{"command_id": "p-1", "stream_id": "{WALLET}", "command": '

POISON = {
    # int() refuses more than 4,300 digits: the amount is then not an integer
    "a number of 5,000 digits": (
        PREFIX + '{"type": "WalletDeposit", "player_id": "ann", "amount": ' + "9" * 5000 + "}}"
    ),
    # the JSON decoder recurses: RecursionError
    "100,000 nested arrays": PREFIX + "[" * 100_000 + "]" * 100_000 + "}",
}


@pytest.mark.parametrize("value", POISON.values(), ids=POISON.keys())
def test_a_record_that_breaks_the_json_reader_is_answered_malformed(value: str) -> None:
    processor, store = new_processor(), PartitionStore(0)
    handled = processor.handle(store, Inbound(WALLET.encode(), value.encode(), [], 0, 7), NOW)
    assert handled.result.status == "rejected" and handled.result.rejection is not None
    assert handled.result.rejection.code == "malformed"
    assert handled.result.command_id == ("p-1" if "9" * 5000 in value else "unparsed-0-7")
    assert handled.events == [] and store.streams == {}
    assert [r.topic for r in handled.outgoing] == [processor.topics.results]


def test_a_header_without_a_value_signs_nothing() -> None:
    """Kafka allows a null header value; a forged signature with a null transfer is unsigned."""
    processor, store = new_processor(), PartitionStore(0)
    envelope = CommandEnvelope(
        command_id="d-1", stream_id=WALLET, command=WalletDeposit(player_id="ann", amount=100)
    )
    headers: list[tuple[str, bytes | None]] = [("bj_signature", b"00"), ("bj_transfer", None)]
    inbound = Inbound(WALLET.encode(), envelope.model_dump_json().encode(), headers, 0, 1)
    handled = processor.handle(store, inbound, NOW)
    # an ordinary platform deposit: accepted as unsigned, nothing raised
    assert handled.result.status == "accepted"
    assert processor.signer.verify(inbound.key or b"", inbound.value or b"", headers) == (
        False,
        None,
    )


def test_whatever_else_breaks_reading_is_answered_malformed_too() -> None:
    """The reader's last guard: a record whose reading raises anything at all."""
    processor, store = new_processor(), PartitionStore(0)

    class Exploding(bytes):
        def decode(self, *args: object, **kwargs: object) -> str:
            raise LookupError("a decoder that fails in some way nobody listed")

    value = Exploding(b'{"command_id": "x"}')
    with capture_logs() as logs:
        handled = processor.handle(store, Inbound(WALLET.encode(), value, [], 0, 3), NOW)
    assert handled.result.rejection is not None
    assert handled.result.rejection.code == "malformed"
    # Unforeseen, or a bug in the reader: the operator gets the trace.
    [logged] = [entry for entry in logs if entry["log_level"] == "error"]
    assert logged["kafka_offset"] == 3 and logged["exc_info"] is True


# ---- nothing a command carries makes a record the topics refuse -----------------------------
# A result or event over the broker's size limit fails its transaction on every retry: the
# partition would stop for good, the committed offset pointing at the command.

TABLE = "table-1"


def opened(processor: Processor, store: PartitionStore) -> None:
    envelope = CommandEnvelope(
        command_id="open", stream_id=TABLE, command=cmd.OpenTable(variant="mini-h17")
    )
    inbound = Inbound(TABLE.encode(), envelope.model_dump_json().encode(), [], 0, 1)
    assert processor.handle(store, inbound, NOW).result.status == "accepted"


def answer_to(processor: Processor, store: PartitionStore, document: dict[str, Any]) -> Handled:
    value = json.dumps(document).encode()
    assert len(value) < 1_048_588  # a record the commands topic takes
    return processor.handle(store, Inbound(TABLE.encode(), value, [], 0, 2), NOW)


LARGE = {
    "a 1 MB variant name": {"type": "OpenTable", "variant": "v" * 1_040_000},
    "30,000 rule overrides": {
        "type": "OpenTable",
        "variant": "mini-h17",
        "overrides": {f"rule_{n}": n for n in range(30_000)},
    },
    "a 1 MB rule name": {
        "type": "OpenTable",
        "variant": "mini-h17",
        "overrides": {"r" * 1_040_000: 1},
    },
    "a 1 MB correlation id": {"type": "SitDown", "player_id": "ann"},
}


@pytest.mark.parametrize("name", LARGE)
def test_a_command_that_quotes_a_megabyte_is_answered_in_a_small_result(name: str) -> None:
    processor, store = new_processor(), PartitionStore(0)
    if "correlation" in name:
        opened(processor, store)
    document: dict[str, Any] = {"command_id": "big", "stream_id": TABLE, "command": LARGE[name]}
    if "correlation" in name:
        document["correlation_id"] = "c" * 1_040_000
    handled = answer_to(processor, store, document)
    assert handled.result.status == "rejected" and handled.result.rejection is not None
    assert handled.result.command_id == "big"
    assert handled.events == []
    assert all(
        len(r.value) + sum(len(v or b"") for _, v in r.headers) < 2_000 for r in handled.outgoing
    )


def test_a_rejection_message_is_cut_to_its_limit() -> None:
    rejection = Rejection(code="unknown_variant", message="x" * 10_000)
    assert len(rejection.message) <= MAX_MESSAGE_CHARS
    assert rejection.message.endswith(f"... ({10_000 - MAX_MESSAGE_CHARS + 40} more characters)")
    assert Rejection(code="unknown_variant", message="short").message == "short"


def test_a_decision_whose_record_would_be_over_the_limit_is_refused_and_changes_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    processor, store = new_processor(), PartitionStore(0)
    opened(processor, store)
    before = store.streams[TABLE].state
    monkeypatch.setattr(decision_module, "RECORD_MAX_BYTES", 200)
    envelope = CommandEnvelope(
        command_id="sit", stream_id=TABLE, command=cmd.SitDown(player_id="ann")
    )
    inbound = Inbound(TABLE.encode(), envelope.model_dump_json().encode(), [], 0, 3)
    handled = processor.handle(store, inbound, NOW)
    assert handled.result.rejection is not None
    assert handled.result.rejection.code == "internal_error"
    assert "over the 200 the topics take" in handled.result.rejection.message
    assert handled.events == [] and store.streams[TABLE].state is before


def test_an_unreadable_message_s_answer_quotes_its_stream_and_key_only_so_far() -> None:
    processor, store = new_processor(), PartitionStore(0)
    stream_id, key = "s" * 400_000, b"k" * 600_000
    value = json.dumps({"command_id": "c", "stream_id": stream_id, "command": {}}).encode()
    handled = processor.handle(store, Inbound(key, value, [], 0, 9), NOW)
    assert handled.result.rejection is not None
    assert handled.result.rejection.code == "malformed"
    assert handled.result.stream_id == "s" * 128 + "..."
    [answer] = handled.outgoing
    assert answer.key == b"s" * 128 + b"..."
    assert (
        len(answer.key) + len(answer.value) + sum(len(v or b"") for _, v in answer.headers) < 3_000
    )


@pytest.mark.parametrize("kind", [5, 6.5, ["a"] * 3, {"x": "y" * 300}])
def test_a_made_up_command_type_is_no_metrics_label(kind: object) -> None:
    processor, store = new_processor(), PartitionStore(0)
    value = json.dumps({"command_id": "c", "stream_id": TABLE, "command": {"type": kind}})
    handled = processor.handle(store, Inbound(TABLE.encode(), value.encode(), [], 0, 3), NOW)
    assert handled.result.rejection is not None
    assert handled.result.rejection.code == "malformed" and handled.command_type == "-"


# The AsyncAPI document promises the results' Kafka key: every key the processor answers an
# unreadable message under must fit it, or a platform validating the results against the
# document refuses the very answer meant for it.
ASYNCAPI = Path(__file__).parents[2] / "schemas" / "asyncapi.json"


@pytest.mark.parametrize("length", [0, 9, 128, 129, 512, 513, 600_000])
def test_the_key_of_an_unreadable_message_s_answer_is_what_the_asyncapi_document_allows(
    length: int,
) -> None:
    document = json.loads(ASYNCAPI.read_text())
    schema = document["components"]["messages"]["command-results:Message"]["bindings"]["kafka"][
        "key"
    ]
    processor, store = new_processor(), PartitionStore(0)
    key = b"k" * length
    value = json.dumps({"command_id": "c", "stream_id": "s" * length, "command": {}}).encode()
    handled = processor.handle(store, Inbound(key, value, [], 0, 9), NOW)
    [answer] = handled.outgoing
    assert answer.key == (key if length <= 512 else b"s" * 128 + b"...")
    jsonschema.validate(answer.key.decode(), schema)


UNREADABLE = {
    "a fractional amount": '{"type": "WalletDeposit", "player_id": "ann", "amount": 10.5}',
    "an unknown type": '{"type": "Teleport", "player_id": "ann"}',
    "a table command at a wallet": '{"type": "Deal", "player_id": "ann"}',
}


@pytest.mark.parametrize("body", UNREADABLE.values(), ids=UNREADABLE.keys())
def test_an_unreadable_command_s_answer_keeps_its_correlation_id(body: str) -> None:
    """docs/kafka.md: the correlation id "is copied onto every event and result the command
    causes". A Java platform routing answers by it got `malformed` and `unknown_command`
    answers with none (result and ce_correlationid header), though the command id was kept."""
    processor, store = new_processor(), PartitionStore(0)
    value = (
        f'{{"command_id": "p-9", "stream_id": "{WALLET}", "correlation_id": "session-42", '
        f'"command": {body}}}'
    )
    handled = processor.handle(store, Inbound(WALLET.encode(), value.encode(), [], 0, 9), NOW)
    assert handled.result.status == "rejected" and handled.result.command_id == "p-9"
    assert handled.result.correlation_id == "session-42"
    [record] = handled.outgoing
    assert dict(record.headers)["ce_correlationid"] == b"session-42"


def test_an_unreadable_command_s_correlation_id_is_kept_only_when_it_is_one() -> None:
    processor, store = new_processor(), PartitionStore(0)
    for correlation in ("x" * 1025, 42, ["session-42"]):
        envelope = {
            "command_id": "p-8",
            "stream_id": WALLET,
            "correlation_id": correlation,
            "command": {"type": "Teleport"},
        }
        inbound = Inbound(WALLET.encode(), json.dumps(envelope).encode(), [], 0, 8)
        handled = processor.handle(store, inbound, NOW)
        assert handled.result.correlation_id is None, correlation


@pytest.mark.parametrize("field", ["correlation_id", "command_id", "stream_id"])
@pytest.mark.parametrize("body", UNREADABLE.values(), ids=UNREADABLE.keys())
def test_an_unreadable_command_with_a_lone_surrogate_is_answered(field: str, body: str) -> None:
    """JSON may escape a lone surrogate ("\\ud800"), which UTF-8 cannot encode. Quoted onto
    the answer, it made writing the answer raise (PydanticSerializationError), which aborts
    the transaction: the partition stopped on that record at every retry. The correlation id
    began to be quoted with the malformed and unknown_command answers; a readable command
    with such a correlation id was already refused malformed, with none."""
    processor, store = new_processor(), PartitionStore(0)
    ids = {"command_id": "p-7", "stream_id": WALLET, "correlation_id": "session-42"}
    ids[field] = "a\\ud800b"
    fields = ", ".join(f'"{name}": "{value}"' for name, value in ids.items())
    value = f'{{{fields}, "command": {body}}}'
    handled = processor.handle(store, Inbound(WALLET.encode(), value.encode(), [], 0, 7), NOW)
    assert handled.result.status == "rejected"
    [record] = handled.outgoing
    answer = json.loads(record.value)
    assert answer["command_id"] == ("unparsed-0-7" if field == "command_id" else "p-7")
    assert answer["correlation_id"] == (None if field == "correlation_id" else "session-42")
    assert "\ud800" not in answer["stream_id"]


@pytest.mark.parametrize("body", [{"type": "WalletDeposit", "player_id": "ann", "amount": 5}, 7])
def test_a_command_under_an_unreadable_record_s_answer_id_is_answered_under_its_own(
    body: object,
) -> None:
    """``unparsed-<partition>-<offset>`` is the id of the answer to the unreadable record at
    that offset: a command that took it was accepted under it, two answers shared one id, and
    the unreadable record's sender read the other's (tests/integration/
    test_handler_bad_input.py). Readable or not, such a message is answered under its own
    offset's id; other ids that begin so are anyone's."""
    processor, store = new_processor(), PartitionStore(0)
    value = json.dumps({"command_id": "unparsed-0-9", "stream_id": WALLET, "command": body})
    handled = processor.handle(store, Inbound(WALLET.encode(), value.encode(), [], 0, 7), NOW)
    assert handled.result.command_id == "unparsed-0-7" and handled.events == []
    assert handled.result.rejection is not None and handled.result.rejection.code == "malformed"
    fine = {"command_id": "unparsed-ann", "stream_id": WALLET, "command": body}
    inbound = Inbound(WALLET.encode(), json.dumps(fine).encode(), [], 0, 8)
    assert processor.handle(store, inbound, NOW).result.command_id == "unparsed-ann"


def test_a_record_with_a_header_name_that_is_not_utf8_is_answered_malformed_by_its_offset() -> None:
    """None of the service's records has such a name (``bus.header_names`` reads it with
    surrogate escapes); what its sender meant is not read: a valid command in it is not
    decided, and its answer is filed under its offset, with the key it came with."""
    processor, store = new_processor(), PartitionStore(0)
    envelope = CommandEnvelope(
        command_id="d-1", stream_id=WALLET, command=WalletDeposit(player_id="ann", amount=100)
    )
    headers: list[tuple[str, bytes | None]] = [("\udcff\udcfebj", b"1")]
    value = envelope.model_dump_json().encode()
    inbound = Inbound(WALLET.encode(), value, headers, 0, 12, unreadable=True)
    with capture_logs() as logs:
        handled = processor.handle(store, inbound, NOW)
    assert handled.result.command_id == "unparsed-0-12" and handled.result.stream_id == WALLET
    assert handled.result.rejection is not None and handled.result.rejection.code == "malformed"
    assert "not UTF-8" in handled.result.rejection.message
    assert handled.events == [] and store.streams == {}
    [record] = handled.outgoing
    assert (record.topic, record.key, record.partition) == (
        processor.topics.results,
        WALLET.encode(),
        0,
    )
    [logged] = [e for e in logs if e["log_level"] == "error"]
    assert (logged["kafka_partition"], logged["kafka_offset"]) == (0, 12)


def test_only_a_header_name_that_is_not_utf8_is_unreadable() -> None:
    """aiokafka's C reader raises the decoding error, its pure-Python one a
    CorruptRecordException caused by it; a record whose checksum fails is no such record."""
    decoding = UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
    wrapped = CorruptRecordException("Found invalid record structure")
    wrapped.__cause__ = decoding
    assert cannot_decode(decoding) and cannot_decode(wrapped)
    assert not cannot_decode(CorruptRecordException("Invalid CRC"))
