"""Events as they travel: JSON envelopes with the shoe order sealed, CloudEvents headers, and
upcasting of old event versions on read (stored events are never rewritten)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Annotated, Any, Literal, Self, get_args

from pydantic import BaseModel, Field, TypeAdapter, model_validator

from blackjack.domain import events as ev
from blackjack.domain.rules import RECORDED, with_later_terms
from blackjack.domain.wallet import AnyWalletEvent
from blackjack.messages.envelope import EventEnvelope, EventMeta, check_names_its_event
from blackjack.messages.sealing import ShoeSeal

SPEC_VERSION = "1.0"


class SealedShoeShuffled(ev.Event):
    """``ShoeShuffled`` on the wire: the commitment in clear, the order and salt sealed."""

    type: Literal["ShoeShuffled"] = "ShoeShuffled"
    shoe: int
    commitment: str
    cards: int
    sealed: str


WireEvent = Annotated[
    SealedShoeShuffled | ev.PublicTableEvent | AnyWalletEvent, Field(discriminator="type")
]


class WireEnvelope(EventMeta):
    """What a reader of ``blackjack.events`` gets: safe to show anyone."""

    data: WireEvent

    @model_validator(mode="after")
    def _names_its_event(self) -> Self:
        check_names_its_event(self, self.data)
        return self


_WIRE = TypeAdapter(WireEnvelope)

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]


def _bet_refunded_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 always returned the box's whole bet: nothing was left on the box."""
    return {**data, "version": 2, "box_total": 0}


def _cash_out_received_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 did not name the table event that paid the money out (a document without a
    version reads as version 1: one that does name it keeps it)."""
    return {**data, "version": 2, "table_sequence": data.get("table_sequence")}


def _turn_started_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 did not list the actions open on the hand: not recorded."""
    return {**data, "version": 2, "actions": None}


def _player_timed_out_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 was written before a player left out sat out: that player did not."""
    return {**data, "version": 2, "sits_out": False}


def _seat_left_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 was written before anyone but the player stood them up: the player left."""
    return {
        **data,
        "version": 2,
        "reason": "left",
        "rounds_sat_out": None,
        "operator": None,
        "operator_reason": None,
    }


def _round_voided_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1's handler counted a voided round as one sat out, and stood up after it whom
    that brought to the table's limit."""
    return {**data, "version": 2, "counts_as_round_sat_out": True}


def _table_opened_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 was written before the rules carried ``interrupted_round_days``."""
    return {**data, "version": 2, "rules": with_later_terms(data["rules"])}


def _round_resumed_v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 was written before a resumed round's clock restarted: it did not."""
    return {**data, "version": 2, "deadline": None}


UPCASTERS: dict[tuple[str, int], Upcaster] = {
    ("TableOpened", 1): _table_opened_v1_to_v2,
    ("BetRefunded", 1): _bet_refunded_v1_to_v2,
    ("CashOutReceived", 1): _cash_out_received_v1_to_v2,
    ("TurnStarted", 1): _turn_started_v1_to_v2,
    ("PlayerTimedOut", 1): _player_timed_out_v1_to_v2,
    ("SeatLeft", 1): _seat_left_v1_to_v2,
    ("RoundVoided", 1): _round_voided_v1_to_v2,
    ("RoundResumed", 1): _round_resumed_v1_to_v2,
}
"""(event type, stored version) -> function returning the event one version newer."""

ABSENT_FROM_OLDER_VERSIONS: dict[str, tuple[str, ...]] = {
    "TableOpened": (),  # a field of its rules, which has a default there
    "BetRefunded": ("box_total",),
    "CashOutReceived": ("table_sequence",),
    "TurnStarted": ("actions",),
    "PlayerTimedOut": ("sits_out",),
    "SeatLeft": ("reason", "rounds_sat_out", "operator", "operator_reason"),
    "RoundVoided": ("counts_as_round_sat_out",),
    "RoundResumed": ("deadline",),
}
"""The fields of an event's current version that a stored older version lacks (its upcaster
fills them in). The log keeps every version for ever, so the published schemas do not
require them: a reader on another stack validates the records as they are stored (a JVM
client's finding: a version 1 ``TurnStarted`` failed the schema that required ``actions``)."""


def upcast(data: dict[str, Any]) -> dict[str, Any]:
    while (key := (data["type"], data.get("version", 1))) in UPCASTERS:
        data = UPCASTERS[key](data)
    return data


def to_wire(envelope: EventEnvelope, seal: ShoeSeal) -> WireEnvelope:
    event = envelope.data
    if not isinstance(event, ev.ShoeShuffled):
        return WireEnvelope(**dict(envelope))
    sealed = SealedShoeShuffled(
        version=event.version,
        shoe=event.shoe,
        commitment=event.commitment,
        cards=event.cards,
        sealed=seal.seal(envelope.stream_id, event.shoe, event.order, event.salt),
    )
    return WireEnvelope(**{**dict(envelope), "data": sealed})


def from_wire(wire: WireEnvelope, seal: ShoeSeal) -> EventEnvelope:
    """The event in the clear; only a holder of the shoe key can open a sealed shoe."""
    event = wire.data
    if isinstance(event, SealedShoeShuffled):
        order, salt = seal.unseal(wire.stream_id, event.shoe, event.sealed)
        opened = ev.ShoeShuffled(
            version=event.version,
            shoe=event.shoe,
            commitment=event.commitment,
            cards=event.cards,
            order=order,
            salt=salt,
        )
        return EventEnvelope(**{**dict(wire), "data": opened})
    return EventEnvelope(**dict(wire))


def encode(wire: WireEnvelope) -> bytes:
    return wire.model_dump_json().encode()


def encode_event(envelope: EventEnvelope, seal: ShoeSeal) -> bytes:
    """``encode(to_wire(envelope, seal))``: the event as ``blackjack.events`` carries it. Only
    a ``ShoeShuffled`` differs on the wire (its order sealed); any other event is written as
    its envelope serializes, the same bytes, without first validating a ``WireEnvelope`` copy
    of it (a quarter of the handler's time per command went to that copy)."""
    if isinstance(envelope.data, ev.ShoeShuffled):
        return encode(to_wire(envelope, seal))
    return envelope.model_dump_json().encode()


def decode(raw: bytes) -> WireEnvelope:
    """Parse an event message, upcasting an older stored version of its event first (the
    envelope then names the version its event now has)."""
    document = json.loads(raw)
    current = upcast(document["data"])
    named = document.get("schema_version")
    if (current.get("type"), named) in UPCASTERS and not isinstance(named, bool):
        # a version the event was upcast from: stored before its upcast, or by a reader that
        # wrote the upcast event back under the envelope it read (read models before the
        # envelope had to name its event's version)
        document["schema_version"] = current.get("version", 1)
    document["data"] = current
    # RECORDED: the rules a table was opened with, an older release's amounts included
    return _WIRE.validate_python(document, context=RECORDED)


def written_as_the_service_s(headers: Iterable[tuple[str, bytes | None]] | None) -> bool:
    """Whether a record carries the CloudEvents type header every event and command result
    the service writes has (``ce_type``)."""
    return any(name == "ce_type" for name, _ in headers or ())


def not_the_service_s(value: bytes | None, headers: Iterable[tuple[str, bytes]] | None) -> bool:
    """A record of the events topic that the service did not write: no CloudEvents type header
    (every event the service writes carries ``ce_type``) and not an event envelope. Junk that
    ACLs should have kept out (docs/operations.md, "A stuck projection worker"): no event of
    any stream, so stepping over it loses none (a missing event shows as a sequence gap)."""
    if written_as_the_service_s(headers):
        return False
    try:
        decode(value or b"")
    except (ValueError, KeyError, TypeError):
        return True
    return False


def cloudevents_headers(wire: EventMeta, source: str) -> list[tuple[str, bytes]]:
    """CloudEvents Kafka protocol binding, binary mode attributes (``ce_*``), plus extensions
    for the stream, its sequence and the causation and correlation ids."""
    headers = {
        "ce_specversion": SPEC_VERSION,
        "ce_id": wire.event_id,
        "ce_source": source,
        "ce_type": f"blackjack.{wire.type}.v{wire.schema_version}",
        "ce_time": wire.occurred_at.isoformat(),
        "ce_subject": wire.stream_id,
        "ce_sequence": str(wire.sequence),
        "content-type": "application/json",
    }
    if wire.causation_id:
        headers["ce_causationid"] = wire.causation_id
    if wire.correlation_id:
        headers["ce_correlationid"] = wire.correlation_id
    return [(name, value.encode()) for name, value in headers.items()]


WIRE_EVENT_TYPES: tuple[type[BaseModel], ...] = get_args(get_args(WireEvent)[0])
