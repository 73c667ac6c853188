"""The rules' amounts (``min_bet``, ``max_bet``) are bounded in ``Rules`` itself by the bound
of the commands' integers, ``MAX_INT`` (2^53 - 1): a rules document or an override past it is
malformed at validation, with the field named, and the schemas say so. A table an older release
opened with more (the log, a snapshot, the read model) still reads as it was opened."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from blackjack.command_handler.ids import event_id
from blackjack.domain import commands as cmd
from blackjack.domain import events as ev
from blackjack.domain.decide import decide
from blackjack.domain.rejections import Rejection
from blackjack.domain.rules import MAX_INT, PRESETS, RECORDED, Rules, fingerprint, stored_rules
from blackjack.domain.state import INITIAL_STATE
from blackjack.messages import wire
from blackjack.messages.envelope import EventEnvelope, type_name
from blackjack.messages.schemas import schema_documents
from blackjack.messages.sealing import ShoeSeal
from blackjack.simulation.commands import RulesRefused, _rules

NOW = datetime(2026, 1, 1, tzinfo=UTC)
ABSURD = [MAX_INT + 1, 10**30]


@pytest.mark.parametrize("field", ["min_bet", "max_bet"])
@pytest.mark.parametrize("value", ABSURD)
def test_a_rules_document_with_an_amount_past_max_int_is_malformed(field: str, value: int) -> None:
    doc = {**PRESETS["mini-h17"].model_dump(), "min_bet": 100, "max_bet": 10**30, field: value}
    with pytest.raises(ValidationError) as raised:
        Rules.model_validate(doc)
    [problem] = [p for p in raised.value.errors() if p["loc"] == (field,)]
    assert str(MAX_INT) in problem["msg"], problem


def test_the_bound_itself_is_an_amount() -> None:
    rules = Rules(min_bet=MAX_INT, max_bet=MAX_INT)
    assert (rules.min_bet, rules.max_bet) == (MAX_INT, MAX_INT)


@pytest.mark.parametrize(
    "overrides",
    [{"min_bet": 10**30, "max_bet": 10**30}, {"min_bet": MAX_INT + 1, "max_bet": MAX_INT + 1}],
)
def test_open_table_names_the_amount_past_the_bound(overrides: dict[str, object]) -> None:
    """Refused before for max_bet's table limit (10^12) only, which said nothing of min_bet."""
    decision = decide(INITIAL_STATE, cmd.OpenTable(variant="mini-h17", overrides=overrides), NOW)
    assert isinstance(decision, Rejection)
    assert decision.code == "invalid_rules"
    assert decision.message == (
        f"min_bet: at most {MAX_INT} minor units (2^53 - 1: a larger number is not exact in "
        f"JSON); max_bet: at most {MAX_INT} minor units (2^53 - 1: a larger number is not "
        "exact in JSON)"
    )


def test_the_math_commands_refuse_overrides_past_the_bound() -> None:
    """``blackjack strategy mini-h17 --overrides '{"max_bet": 10^30}'`` printed a chart."""
    args = argparse.Namespace(variant="mini-h17", overrides={"max_bet": 10**30})
    with pytest.raises(RulesRefused, match=rf"^max_bet: at most {MAX_INT} minor units"):
        _rules(args)


@pytest.mark.parametrize("schema", ["rules.json", "events/TableOpened.json"])
def test_the_schemas_say_the_bound(schema: str) -> None:
    document = schema_documents()[schema]
    text = json.dumps(document)
    for field in ("min_bet", "max_bet"):
        found = _property(document, field)
        assert found["maximum"] == MAX_INT and found["minimum"] == 1, (field, found)
    assert str(MAX_INT) in text


def _property(schema: object, name: str) -> dict[str, object]:
    if isinstance(schema, dict):
        properties = schema.get("properties", {})
        if name in properties:
            return properties[name]  # type: ignore[no-any-return]
        for value in schema.values():
            found = _property(value, name)
            if found:
                return found
    if isinstance(schema, list):
        for value in schema:
            found = _property(value, name)
            if found:
                return found
    return {}


def test_a_table_an_older_release_opened_past_the_bound_still_reads() -> None:
    """The log and the snapshots hold what an older release accepted (max_bet 10^30 before
    OpenTable's limit): its table reads as it was opened, fingerprint included, or its players'
    money would be stranded behind an unreadable event."""
    doc = {**PRESETS["mini-h17"].model_dump(mode="json"), "max_bet": 10**30}
    older = Rules.model_validate(doc, context=RECORDED)
    envelope = EventEnvelope(
        event_id=event_id("table-1", 1),
        type=type_name(ev.TableOpened),
        schema_version=2,
        stream_id="table-1",
        sequence=1,
        occurred_at=NOW,
        causation_id="command-1",
        data=ev.TableOpened(rules=older),
    )
    seal = ShoeSeal.from_hex(ShoeSeal.new_key_hex())
    read = wire.from_wire(wire.decode(wire.encode_event(envelope, seal)), seal)
    assert isinstance(read.data, ev.TableOpened) and read.data.rules.max_bet == 10**30
    assert stored_rules(doc) == older
    assert fingerprint(stored_rules(doc)) == fingerprint(doc)


def test_the_presets_documents_and_fingerprints_are_unchanged() -> None:
    """Pins what was right: the bound changes no preset's document (the game report's
    fingerprints, the snapshots' rules)."""
    assert {name: fingerprint(rules) for name, rules in PRESETS.items()} == {
        "atlantic-city": "53675bdca5bbcae8",
        "atlantic-city-multi": "fd05b375da3f0d14",
        "mini-h17": "89625393adaa32b8",
        "mini-s17": "24056ca53ac499f8",
        "surrender": "6e4064ec5ede9266",
    }
    for rules in PRESETS.values():
        assert Rules.model_validate(rules.model_dump(mode="json")) == rules
