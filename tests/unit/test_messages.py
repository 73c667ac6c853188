"""The message contract: committed schemas match the models, shoe secrets never travel in
clear, and old event versions are upcast on read."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path

import jsonschema
import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import ValidationError

from blackjack.command_handler.keys import derive_key
from blackjack.domain import events as ev
from blackjack.domain.cards import fresh_shoe
from blackjack.domain.shoe import commitment
from blackjack.messages import wire
from blackjack.messages.envelope import CommandEnvelope, EventEnvelope
from blackjack.messages.schemas import drift
from blackjack.messages.sealing import SealedForOthers, SealError, ShoeSeal, derive

SCHEMAS = Path(__file__).parents[2] / "schemas"
KEY = ShoeSeal.new_key_hex()


def _envelope(event: ev.Event, stream: str = "table-1") -> EventEnvelope:
    return EventEnvelope.model_validate(
        {
            "event_id": "e-1",
            "type": type(event).model_fields["type"].default,
            "schema_version": event.version,
            "stream_id": stream,
            "sequence": 7,
            "occurred_at": datetime(2026, 1, 1, tzinfo=UTC),
            "causation_id": "c-1",
            "correlation_id": "k-1",
            "data": event,
        }
    )


def _shuffled() -> ev.ShoeShuffled:
    order = tuple(reversed(fresh_shoe(1)))
    salt = "0123456789abcdef"
    return ev.ShoeShuffled(
        shoe=3, commitment=commitment(order, salt), cards=52, order=order, salt=salt
    )


def test_committed_schemas_match_the_models() -> None:
    assert drift(SCHEMAS) == [], "run `make schemas` and commit the result"


@pytest.mark.parametrize(
    ("sent_at", "accepted"),
    [
        ("2026-05-01T12:00:00Z", True),
        ("2026-05-01T14:00:00+02:00", True),
        (None, True),
        ("2026-05-01T12:00:00", False),  # no offset: which time is it?
        ("2026-05-01", False),
        (1_777_636_800, False),  # pydantic would read a number as Unix time
        ("1777636800", False),  # and digits too
        ("2026-05-01T12:00Z", False),  # no seconds
        ("2026-05-01 12:00:00Z", False),  # JSON Schema's date-time has the T
    ],
)
def test_a_command_s_sent_at_is_the_schemas_date_time(sent_at: object, accepted: bool) -> None:
    """The integrator review: what the schema forbids was accepted."""
    document = {"command_id": "c-1", "stream_id": "t-1", "sent_at": sent_at}
    document["command"] = {"type": "Reconnect", "player_id": "p"}
    if accepted:
        CommandEnvelope.model_validate(document)
    else:
        with pytest.raises(ValidationError, match="sent_at"):
            CommandEnvelope.model_validate(document)


@pytest.mark.parametrize(
    ("table_id", "accepted"),
    [("mt-1", True), ("wallet-ish", True), ("wallet:bob", False), ("wallet:", False)],
)
def test_a_buy_in_s_table_is_never_a_wallet_in_the_schema_as_in_the_model(
    table_id: str, accepted: bool
) -> None:
    """The integrator review: `BuyIn` to `wallet:...` validated against schemas/ but was
    answered `malformed`; a platform that checks its commands against the schema must learn
    it there."""
    command = {"type": "BuyIn", "player_id": "ann", "table_id": table_id, "amount": 100}
    schema = json.loads((SCHEMAS / "commands" / "BuyIn.json").read_text())
    assert jsonschema.Draft202012Validator(schema).is_valid(command) is accepted
    document = {"command_id": "c-1", "stream_id": "wallet:ann", "command": command}
    envelope_schema = json.loads((SCHEMAS / "command-envelope.json").read_text())
    assert jsonschema.Draft202012Validator(envelope_schema).is_valid(document) is accepted
    if accepted:
        CommandEnvelope.model_validate(document)
    else:
        with pytest.raises(ValidationError, match="not to a wallet"):
            CommandEnvelope.model_validate(document)


PLATFORM_AMOUNTS = [
    ("t-1", {"type": "PlaceBet", "player_id": "ann", "box": 0}),
    ("t-1", {"type": "RemoveBet", "player_id": "ann", "box": 0}),
    ("t-1", {"type": "Deposit", "player_id": "ann"}),
    ("t-1", {"type": "Withdraw", "player_id": "ann"}),
    ("wallet:ann", {"type": "WalletDeposit", "player_id": "ann"}),
    ("wallet:ann", {"type": "WalletWithdraw", "player_id": "ann"}),
    ("wallet:ann", {"type": "BuyIn", "player_id": "ann", "table_id": "mt-1"}),
]


@pytest.mark.parametrize(("stream", "command"), PLATFORM_AMOUNTS)
@pytest.mark.parametrize(("amount", "accepted"), [(1, True), (500, True), (0, False), (-5, False)])
def test_an_amount_a_platform_sends_is_positive_in_the_schema(
    stream: str, command: dict[str, object], amount: int, accepted: bool
) -> None:
    """The second integrator review: `PlaceBet` with `amount: -5` (or 0) validated against
    schemas/ and was answered `invalid_amount`; the schema says so now. The model still reads
    it, so the answer stays the decider's typed `invalid_amount`, not `malformed`."""
    command = {**command, "amount": amount}
    schema = json.loads((SCHEMAS / "commands" / f"{command['type']}.json").read_text())
    assert jsonschema.Draft202012Validator(schema).is_valid(command) is accepted
    document = {"command_id": "c-1", "stream_id": stream, "command": command}
    envelope_schema = json.loads((SCHEMAS / "command-envelope.json").read_text())
    assert jsonschema.Draft202012Validator(envelope_schema).is_valid(document) is accepted
    CommandEnvelope.model_validate(document)


def test_every_command_and_event_schema_requires_its_type() -> None:
    """The models default ``type``; the server needs it to tell the message (review)."""
    for path in [*SCHEMAS.glob("commands/*.json"), *SCHEMAS.glob("events/*.json")]:
        schema = json.loads(path.read_text())
        assert schema["required"][0] == "type", path.name
        assert "default" not in schema["properties"]["type"], path.name


def test_the_shoe_order_is_sealed_on_the_wire_and_opens_with_the_key() -> None:
    seal = ShoeSeal.from_hex(KEY)
    envelope = _envelope(_shuffled())
    raw = wire.encode(wire.to_wire(envelope, seal))
    assert b"order" not in raw and b"0123456789abcdef" not in raw
    assert b'"KS"' not in raw  # no card code in clear (base64 has no quotes)
    assert wire.from_wire(wire.decode(raw), seal) == envelope


def test_a_sealed_shoe_does_not_open_with_another_key_or_on_another_table() -> None:
    seal = ShoeSeal.from_hex(KEY)
    sealed = wire.to_wire(_envelope(_shuffled()), seal)
    with pytest.raises(SealError):
        wire.from_wire(sealed, ShoeSeal.from_hex(ShoeSeal.new_key_hex()))
    moved = sealed.model_copy(update={"stream_id": "table-2"})
    with pytest.raises(SealError):
        wire.from_wire(moved, seal)


def _sealed_data(envelope: wire.WireEnvelope) -> str:
    data = envelope.data
    assert isinstance(data, wire.SealedShoeShuffled)
    return data.sealed


def test_the_auditor_s_key_opens_the_shoes_and_yields_no_other_key() -> None:
    """The fairness review: the audit Job held the master key, from which the key that signs
    money steps is derived. Its own key opens the shoes, and nothing else derives from it."""
    handlers = ShoeSeal.from_hex(KEY)
    auditor = ShoeSeal.for_auditor(handlers.audit_key_hex())
    envelope = _envelope(_shuffled())
    sealed = wire.to_wire(envelope, handlers)
    assert _sealed_data(sealed).startswith("2.")
    assert wire.from_wire(sealed, auditor) == envelope
    assert wire.from_wire(sealed, handlers) == envelope
    # the auditor's key is neither the master key nor any key derived from it for another use
    derived = {derive_key(KEY, p) for p in ("blackjack/commands/v1", "blackjack/snapshots/v1")}
    assert (
        handlers.audit_key_hex() != KEY and bytes.fromhex(handlers.audit_key_hex()) not in derived
    )
    # each table's shoes are sealed under a key of that table (derived from the shoe key), so
    # the random nonces of one key never come near GCM's bound, however many tables there are
    key_id, _, text = _sealed_data(sealed).removeprefix("2.").partition(".")
    raw = base64.b64decode(text)
    associated = b"table-1/shoe/3"
    with pytest.raises(InvalidTag):
        AESGCM(bytes.fromhex(handlers.audit_key_hex())).decrypt(raw[:12], raw[12:], associated)
    table_key = derive(bytes.fromhex(handlers.audit_key_hex()), "table/table-1")
    assert AESGCM(table_key).decrypt(raw[:12], raw[12:], associated)
    # another deployment's key (or the master key pasted as the auditor's) is told apart by the
    # key's id: not a changed shoe (the upgrade drill: 147 "does not open" findings)
    assert len(key_id) == 8
    with pytest.raises(SealedForOthers, match="sealed under another key"):
        wire.from_wire(sealed, ShoeSeal.for_auditor(KEY))
    # and a tampered shoe does not open with it
    text = _sealed_data(sealed)
    forged = sealed.model_copy(
        update={"data": sealed.data.model_copy(update={"sealed": text[:-4] + "AAA="})}
    )
    with pytest.raises(SealError):
        wire.from_wire(forged, auditor)


def test_a_shoe_sealed_before_the_auditor_s_key_opens_with_the_master_key_only() -> None:
    """Shoes sealed by older handlers (and during the rolling upgrade, with
    BLACKJACK_SHOE_SEAL_VERSION=1) are plain base64 under the master key."""
    before = ShoeSeal.from_hex(KEY, writes=1)
    envelope = _envelope(_shuffled())
    sealed = wire.to_wire(envelope, before)
    assert not _sealed_data(sealed).startswith("2.")
    assert wire.from_wire(sealed, ShoeSeal.from_hex(KEY)) == envelope  # the new handlers
    auditor = ShoeSeal.for_auditor(ShoeSeal.from_hex(KEY).audit_key_hex())
    with pytest.raises(SealedForOthers):  # not a forgery: its reveal opens it
        wire.from_wire(sealed, auditor)


def test_cloudevents_headers() -> None:
    headers = dict(wire.cloudevents_headers(_envelope(ev.RoundCancelled(round=2)), "blackjack"))
    assert headers["ce_specversion"] == b"1.0"
    assert headers["ce_id"] == b"e-1"
    assert headers["ce_type"] == b"blackjack.RoundCancelled.v1"
    assert headers["ce_subject"] == b"table-1"
    assert headers["ce_causationid"] == b"c-1"
    assert headers["ce_time"].startswith(b"2026-01-01T00:00:00")


def test_an_old_event_version_is_upcast_on_read(monkeypatch: pytest.MonkeyPatch) -> None:
    def v0_to_v1(data: dict[str, object]) -> dict[str, object]:
        # a hypothetical first shape that called the field ``cash_out``
        data = dict(data)
        data["balance_returned"] = data.pop("cash_out")
        data["version"] = 1
        return data

    monkeypatch.setitem(wire.UPCASTERS, ("SeatLeft", 0), v0_to_v1)
    current = _envelope(ev.SeatLeft(player_id="p", seat=0, balance_returned=500))
    stored = current.model_dump(mode="json")
    stored["data"] = {
        "type": "SeatLeft",
        "version": 0,
        "player_id": "p",
        "seat": 0,
        "cash_out": 500,
    }
    decoded = wire.decode(json.dumps(stored).encode())
    assert decoded.data == current.data
    # version 0 -> 1 (the hypothetical step) -> 2 (SeatLeft's ``reason``): every step applied
    assert decoded.schema_version == decoded.data.version == 2


def test_an_upcast_event_s_envelope_names_its_new_version() -> None:
    stored = _envelope(ev.RoundOpened(round=1)).model_dump(mode="json")
    stored |= {"type": "TurnStarted", "schema_version": 1}
    stored["data"] = {
        "type": "TurnStarted",
        "version": 1,
        "round": 1,
        "player_id": "p",
        "box": 0,
        "hand": 0,
    }
    decoded = wire.decode(json.dumps(stored).encode())
    assert isinstance(decoded.data, ev.TurnStarted) and decoded.data.actions is None
    assert (decoded.type, decoded.schema_version, decoded.data.version) == ("TurnStarted", 2, 2)


def test_an_envelope_that_names_another_event_is_refused() -> None:
    stored = _envelope(ev.RoundOpened(round=1)).model_dump(mode="json")
    for forged in ({"type": "BetPlaced"}, {"schema_version": 7}):
        with pytest.raises(ValidationError, match="the envelope names"):
            wire.decode(json.dumps(stored | forged).encode())


def test_an_event_stored_upcast_under_its_old_envelope_still_reads() -> None:
    # read models before the envelope check stored an upcast TurnStarted under the version 1
    # envelope it came in
    event = ev.TurnStarted(round=1, player_id="p", box=0, hand=0, actions=None)
    stored = _envelope(event).model_dump(mode="json") | {"schema_version": 1}
    decoded = wire.decode(json.dumps(stored).encode())
    assert (decoded.schema_version, decoded.data) == (2, event)


def test_only_a_version_an_event_was_upcast_from_is_renamed() -> None:
    stored = _envelope(ev.RoundOpened(round=1)).model_dump(mode="json")  # never upcast
    for named in (0, -7, 2):
        with pytest.raises(ValidationError, match="the envelope names"):
            wire.decode(json.dumps(stored | {"schema_version": named}).encode())


def test_every_schema_names_its_dialect_and_is_valid_in_it() -> None:
    """A validator picks its rules from ``$schema``: without it, some default to draft 4 or 7,
    where 2020-12's keywords (``$defs``, ``prefixItems``) are not checked."""
    from blackjack.messages.schemas import schema_documents

    for path, document in schema_documents().items():
        assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema", path
        validator = jsonschema.validators.validator_for(document)
        assert validator is jsonschema.Draft202012Validator, path
        validator.check_schema(document)
