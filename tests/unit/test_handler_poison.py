"""A record that breaks reading it is answered ``malformed`` by the processor, never raised: a
raise aborts the transaction, and the partition would retry the same record for ever, with
every table and wallet on it (and the money steps queued behind it) stopped."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from structlog.testing import capture_logs

from blackjack.command_handler.processor import Inbound
from blackjack.command_handler.streams import PartitionStore
from blackjack.domain.wallet import WalletDeposit, wallet_stream
from blackjack.messages.envelope import CommandEnvelope
from tests.unit.processor_harness import new_processor

NOW = datetime(2026, 5, 1, tzinfo=UTC)
WALLET = wallet_stream("ann")
PREFIX = f'{{"command_id": "p-1", "stream_id": "{WALLET}", "command": '

POISON = {
    # int() refuses more than 4,300 digits: json.loads raises ValueError
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
