"""Every event model the handler can write, not only the kinds the presets play: the shortcut
``wire.encode_event`` writes the bytes ``encode(to_wire(...))`` wrote, and the same CloudEvents
headers, for each type of the wire's event union (rare paths included: an interrupted round
closed, a declined transfer, seat changes, disconnections, time-outs, refunds), with its
optional fields unset, set, and given every value of their type the checks below can build."""

from __future__ import annotations

import types
import typing
from datetime import UTC, datetime, timedelta, timezone
from fractions import Fraction
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from blackjack.command_handler.ids import event_id
from blackjack.domain import events as ev
from blackjack.domain.rules import PRESETS, ReshuffleAtPenetration, Rules
from blackjack.domain.wallet import WALLET_EVENT_TYPES
from blackjack.messages import wire
from blackjack.messages.envelope import EventEnvelope, type_name
from blackjack.messages.sealing import ShoeSeal

SEAL = ShoeSeal.from_hex(ShoeSeal.new_key_hex())

EVERY_TYPE: tuple[type[BaseModel], ...] = tuple(
    ev.ShoeShuffled if kind is wire.SealedShoeShuffled else kind for kind in wire.WIRE_EVENT_TYPES
)

TIMES = (
    datetime(2026, 1, 1, 12, 30, 0, 250_000, tzinfo=UTC),
    datetime(2026, 1, 1, 12, 30, tzinfo=timezone(timedelta(hours=-3, minutes=-30))),
    datetime(2026, 1, 1, 12, 30, 0, 1),  # naive: the events' own datetimes may be
)
TEXTS = ("player-1", 'é ü € "quoted" \\ \n\t \u2028 \x00', "", "AS", "TD")  # card codes too
RULES = (
    *PRESETS.values(),
    Rules(blackjack_pays=1.15, reshuffle=ReshuffleAtPenetration(used=0.3), seats=3),
    Rules(
        blackjack_pays=Fraction(6, 5),
        double_on="totals",
        double_totals=frozenset({9, 10, 11}),
        rebet_multipliers=frozenset({1, 2, 3}),
        turn_seconds=30,
        interrupted_round_days=30,
    ),
)


def _candidates(annotation: Any) -> list[Any]:
    """Values of a field's type, every branch of a union and every literal."""
    origin = get_origin(annotation)
    if origin is Annotated:
        inner = get_args(annotation)[0]
        adapter: TypeAdapter[Any] = TypeAdapter(annotation)
        return [v for v in _candidates(inner) if _valid(adapter, v)]
    if origin is Literal:
        return list(get_args(annotation))
    if origin in (Union, types.UnionType):
        return [v for arg in get_args(annotation) for v in _candidates(arg)]
    if origin is tuple:
        item = get_args(annotation)[0]
        values = _candidates(item)
        return [(), tuple(values[:1]), tuple(values[:3])]
    if annotation is type(None):
        return [None]
    if annotation is bool:
        return [True, False]
    if annotation is int:
        return [0, 1, 7, -5, 10**12, 2**63 + 1]
    if annotation is str:
        return list(TEXTS)
    if annotation is datetime:
        return list(TIMES)
    if annotation is Rules:
        return list(RULES)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _instances(annotation)
    raise AssertionError(f"no values for {annotation!r}")


def _valid(adapter: TypeAdapter[Any], value: Any) -> bool:
    try:
        adapter.validate_python(value)
    except ValidationError:
        return False
    return True


def _field_values(kind: type[BaseModel]) -> dict[str, list[Any]]:
    values = {}
    for name, info in kind.model_fields.items():
        if name in ("type", "version"):
            continue
        field: Any = info.annotation
        adapter: TypeAdapter[Any] = TypeAdapter(
            Annotated[field, *info.metadata] if info.metadata else field
        )
        found = [v for v in _candidates(info.annotation) if _valid(adapter, v)]
        assert found, f"{kind.__name__}.{name}: no valid value"
        values[name] = found
    return values


def _instances(kind: type[BaseModel]) -> list[Any]:
    """Every value of every field at least once; then each field left to its default."""
    values = _field_values(kind)
    most = max((len(v) for v in values.values()), default=1)
    built = [kind(**{name: vs[i % len(vs)] for name, vs in values.items()}) for i in range(most)]
    for name, info in kind.model_fields.items():
        if name in values and not info.is_required():
            given = {n: vs[0] for n, vs in values.items() if n != name}
            built.append(kind(**given))
    return built


def test_the_union_is_every_event_of_a_table_or_a_wallet() -> None:
    assert set(EVERY_TYPE) == {*ev.EVENT_TYPES, *WALLET_EVENT_TYPES}
    assert len(EVERY_TYPE) == len(ev.EVENT_TYPES) + len(WALLET_EVENT_TYPES)


@pytest.mark.parametrize("kind", EVERY_TYPE, ids=lambda kind: kind.__name__)
def test_every_event_type_is_written_as_its_wire_envelope_would_be(
    kind: type[BaseModel],
) -> None:
    events = _instances(kind)
    assert events
    for sequence, event in enumerate(events, start=1):
        for when in TIMES:
            for causation, correlation in ((None, None), ("command-1", "session-9")):
                envelope = EventEnvelope(
                    event_id=event_id("table-1", sequence),
                    type=type_name(kind),
                    schema_version=typing.cast(Any, event).version,
                    stream_id="table-1",
                    sequence=sequence,
                    occurred_at=when,
                    causation_id=causation,
                    correlation_id=correlation,
                    data=event,
                )
                written = wire.encode_event(envelope, SEAL)
                long_way = wire.to_wire(envelope, SEAL)
                assert wire.cloudevents_headers(envelope, "/h") == wire.cloudevents_headers(
                    long_way, "/h"
                )
                if kind is ev.ShoeShuffled:  # sealed with a fresh nonce each time
                    assert wire.from_wire(wire.decode(written), SEAL) == envelope
                else:
                    assert written == wire.encode(long_way), (kind.__name__, event)
                    assert wire.from_wire(wire.decode(written), SEAL) == envelope
