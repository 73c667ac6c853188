"""The handler's shortcuts in writing an event are the long way's bytes: its event ids are
``uuid5``'s, and an event other than a shuffle is written as its envelope serializes, without
a ``WireEnvelope`` copy (docs/load.md, the handler's CPU per command)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, Literal, get_args

import pytest

from blackjack.command_handler.ids import EVENT_ID_NAMESPACE, event_id
from blackjack.domain import events as ev
from blackjack.domain.rejections import RejectionCode
from blackjack.domain.rules import PRESETS
from blackjack.domain.wallet import AnyWalletEvent, WalletEvent
from blackjack.messages import wire
from blackjack.messages.envelope import EventEnvelope, type_name
from blackjack.messages.sealing import ShoeSeal
from blackjack.simulation.player import play
from blackjack.strategy import compute_strategy
from blackjack.table import Applied

SEAL = ShoeSeal.from_hex(ShoeSeal.new_key_hex())


@pytest.mark.parametrize(
    "stream_id",
    ["load-0001", "table-1", "wallet:player-7", "tablé-ü-€", "x" * 128, ""],
)
def test_an_event_id_is_the_uuid5_of_its_stream_position(stream_id: str) -> None:
    for sequence in (1, 2, 9, 10, 99, 1000, 123_456_789):
        expected = str(uuid.uuid5(EVENT_ID_NAMESPACE, f"{stream_id}/{sequence}"))
        assert event_id(stream_id, sequence) == expected


def _played_events() -> list[ev.Event]:
    """Every event of 40 seeded rounds of every preset (single and multi-seat, surrender,
    insurance, shuffles)."""
    events: list[ev.Event] = []

    def watch(applied: Applied) -> None:
        events.extend(applied.events)

    for rules in PRESETS.values():
        play(rules, compute_strategy(rules), 40, rules.min_bet, 7, watch=watch)
    return events


def _wallet_events() -> list[WalletEvent]:
    """One of each wallet event, every field given a value of its type."""
    values: dict[Any, Any] = {
        int: 7,
        str: "player-1",
        int | None: 3,
        RejectionCode: "not_seated",
        Literal["WalletDeposit", "WalletWithdraw", "BuyIn"]: "BuyIn",
    }
    built = []
    for kind in get_args(AnyWalletEvent):
        fields = {
            name: values[info.annotation]
            for name, info in kind.model_fields.items()
            if name not in ("type", "version")
        }
        built.append(kind(**fields))
    return built


def _envelope(event: ev.Event | WalletEvent, sequence: int) -> EventEnvelope:
    return EventEnvelope(
        event_id=event_id("table-1", sequence),
        type=type_name(type(event)),
        schema_version=event.version,
        stream_id="table-1",
        sequence=sequence,
        occurred_at=datetime(2026, 1, 1, 12, 30, 0, 250_000, tzinfo=UTC),
        causation_id="command-1",
        correlation_id=None if sequence % 2 else "session-9",
        data=event,
    )


def test_every_event_is_written_as_its_wire_envelope_would_be() -> None:
    events: list[ev.Event | WalletEvent] = [*_played_events(), *_wallet_events()]
    kinds = {type(event) for event in events}
    assert len(kinds) >= 25 and ev.ShoeShuffled in kinds  # what the check below covers
    for sequence, event in enumerate(events, start=1):
        envelope = _envelope(event, sequence)
        written = wire.encode_event(envelope, SEAL)
        long_way = wire.to_wire(envelope, SEAL)
        assert wire.cloudevents_headers(envelope, "/h") == wire.cloudevents_headers(long_way, "/h")
        if isinstance(event, ev.ShoeShuffled):  # sealed with a fresh nonce each time
            assert b'"order"' not in written and b'"salt"' not in written
            assert wire.from_wire(wire.decode(written), SEAL) == envelope
        else:
            assert written == wire.encode(long_way)
