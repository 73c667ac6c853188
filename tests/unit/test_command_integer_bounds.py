"""Every whole number a command carries is within ``commands.MAX_INT`` (2^53 - 1) either way:
what every JSON reader holds exactly (JavaScript's ``Number.MAX_SAFE_INTEGER``) and the read
model's 64-bit columns too. A ``VoidRound`` of round 10^23 passed the schema and the model and
reached the decider, refused only there (``round_not_in_play``); a box, a seat, an amount or a
transfer of 10^23 did the same. Now such a command is ``malformed`` at validation, before any
decider, and the schemas in schemas/ say the bound (``maximum``, ``minimum``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel, ValidationError

from blackjack.command_handler.processor import Handled, Processor
from blackjack.command_handler.reading import Inbound
from blackjack.command_handler.streams import PartitionStore
from blackjack.domain import commands as cmd
from blackjack.domain import wallet as wl
from tests.unit.processor_harness import new_processor

NOW = datetime(2026, 5, 1, tzinfo=UTC)
SCHEMAS = Path(__file__).resolve().parents[2] / "schemas" / "commands"
MODELS: list[type[BaseModel]] = [*cmd.COMMAND_TYPES, *wl.WALLET_COMMAND_TYPES]
PAST = [cmd.MAX_INT + 1, 10**23, -(cmd.MAX_INT + 1), -(10**23)]


def integer_fields(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The integer properties of a command's JSON Schema (nullable ones included)."""
    found = {}
    for name, prop in schema.get("properties", {}).items():
        for option in [prop, *prop.get("anyOf", [])]:
            if option.get("type") == "integer":
                found[name] = option
    return found


FIELDS = [(model, name) for model in MODELS for name in integer_fields(model.model_json_schema())]


def test_every_command_s_integers_are_found() -> None:
    """The fields checked below, so that the list cannot go empty without failing."""
    names = {f"{model.__name__}.{name}" for model, name in FIELDS}
    assert {"VoidRound.round", "PlaceBet.amount", "PlaceBet.box", "SitDown.seat"} <= names
    assert {"Hit.hand", "Rebet.multiplier", "ConfirmBuyIn.transfer"} <= names
    assert {"CashOut.table_sequence", "WalletDeposit.amount", "BuyIn.amount"} <= names
    assert {"PlaceBet.round", "Double.round", "TakeInsurance.round"} <= names  # a round named
    assert len(FIELDS) == 42, sorted(names)  # OpenTable.overrides: the rules bound theirs


@pytest.mark.parametrize(("model", "field"), FIELDS, ids=lambda x: getattr(x, "__name__", x))
def test_an_integer_past_the_bound_is_malformed_and_the_schema_says_the_bound(
    model: type[BaseModel], field: str
) -> None:
    bound = integer_fields(model.model_json_schema())[field]
    assert bound["maximum"] == cmd.MAX_INT, bound
    assert -cmd.MAX_INT <= bound["minimum"] <= 1, bound
    committed = json.loads((SCHEMAS / f"{model.__name__}.json").read_text())
    said = dict(integer_fields(committed)[field])
    assert said.pop("format", "int64") == "int64"  # schemas/ adds the format
    # schemas/ as the model says, plus what stood beside ``anyOf`` and moved into the integer
    # branch (``schemas.standard_keywords``: RemoveBet.amount's exclusiveMinimum)
    moved = model.model_json_schema()["properties"][field]
    assert bound.items() <= said.items(), (said, bound)
    assert {k: v for k, v in said.items() if k not in bound}.items() <= moved.items(), said
    valid = valid_command(model)
    jsonschema.validate(valid, committed)
    model.model_validate(valid)
    for number in PAST:
        with pytest.raises(ValidationError):
            model.model_validate({**valid, field: number})
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({**valid, field: number}, committed)
    model.model_validate({**valid, field: cmd.MAX_INT})  # the bound itself is a number


def valid_command(model: type[BaseModel]) -> dict[str, Any]:
    """A command of ``model`` that validates, every field given."""
    every = {
        "player_id": "ann",
        "operator": "ops-1",
        "reason": "a malfunction",
        "variant": "mini-h17",
        "table_id": "table-1",
        "box": 0,
        "hand": 0,
        "seat": 0,
        "amount": 100,
        "round": 1,
        "multiplier": 1,
        "transfer": 1,
        "table_sequence": 1,
    }
    if model is wl.RefundBuyIn:  # its reason is the table's decline code
        every["reason"] = "not_seated"
    fields = model.model_fields
    integers = integer_fields(model.model_json_schema())
    return {
        "type": fields["type"].default,
        **{
            name: value
            for name, value in every.items()
            if name in integers or (name in fields and fields[name].is_required())
        },
    }


def handle(processor: Processor, store: PartitionStore, stream: str, command: object) -> Handled:
    value = json.dumps({"command_id": f"c-{stream}", "stream_id": stream, "command": command})
    return processor.handle(store, Inbound(stream.encode(), value.encode(), [], 0, 1), NOW)


@pytest.mark.parametrize(
    ("stream", "command"),
    [
        ("table-1", {"type": "VoidRound", "round": 10**23, "operator": "o", "reason": "r"}),
        ("table-1", {"type": "PlaceBet", "player_id": "ann", "box": 10**23, "amount": 100}),
        ("table-1", {"type": "Deposit", "player_id": "ann", "amount": 10**23}),
        ("table-1", {"type": "SitDown", "player_id": "ann", "seat": -(10**23)}),
        ("wallet:ann", {"type": "WalletDeposit", "player_id": "ann", "amount": 10**23}),
    ],
)
def test_the_handler_refuses_it_malformed_before_the_decider(stream: str, command: Any) -> None:
    processor, store = new_processor(), PartitionStore(0)
    answer = handle(processor, store, stream, command)
    assert answer.result.status == "rejected" and answer.result.rejection is not None
    assert answer.result.rejection.code == "malformed", answer.result.rejection
    assert "less than or equal to 9007199254740991" in answer.result.rejection.message or (
        "greater than or equal to -9007199254740991" in answer.result.rejection.message
    ), answer.result.rejection.message
    assert answer.events == []
