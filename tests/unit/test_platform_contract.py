"""What a platform on another stack (a JVM consumer, say) needs from the published contract and
cannot learn from the Python client: found by a Java client written against `README.md`,
`docs/kafka.md` and `schemas/` alone."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel

from blackjack.asyncapi.contract import asyncapi_document
from blackjack.command_handler.reading import Inbound
from blackjack.command_handler.streams import PartitionStore
from blackjack.domain.wallet import WalletDeposit, wallet_stream
from blackjack.messages import wire
from blackjack.messages.envelope import CommandEnvelope
from blackjack.messages.wire import UPCASTERS
from tests.unit.processor_harness import new_processor

ROOT = Path(__file__).parents[2]
NOW = datetime(2026, 5, 1, tzinfo=UTC)


def _json(envelope: BaseModel) -> bytes:
    return envelope.model_dump_json().encode()


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
    "RoundResumed": {"type": "RoundResumed", "version": 1, "round": 1,
                     "last_event_at": "2026-01-01T00:00:00Z"},
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


# Found by a Node.js client (kafkajs, Ajv 8 in strict mode with ajv-formats) written against the
# same documents: what a strict validator refuses to compile, and what the schemas let through
# that the server refuses.

_JSON_SCHEMAS = [
    path
    for path in sorted((ROOT / "schemas").rglob("*.json"))
    if path.name not in ("asyncapi.json", "query-api.openapi.json")
]
_NUMBER_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")


Schema = dict[str, Any]


def _nodes(node: object, path: str = "") -> Iterator[tuple[str, Schema]]:
    if isinstance(node, dict):
        yield path, node
        for key, value in node.items():
            yield from _nodes(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _nodes(value, f"{path}/{i}")


def _by_name(named: Schema) -> Callable[[str], Schema]:
    """Resolves a local $ref (`#/$defs/X`, `#/components/schemas/X`) in ``named``."""
    return lambda ref: named[ref.rsplit("/", 1)[1]]


def _unions(
    document: Schema, resolve: Callable[[str], Schema]
) -> Iterator[tuple[str, str, object, Schema, list[Schema]]]:
    """(where, tag, discriminator, node, branches) of every discriminated union."""
    for where, node in _nodes(document):
        union = node.get("discriminator")
        if "oneOf" in node and union is not None:
            tag = union["propertyName"] if isinstance(union, dict) else union
            branches = [resolve(b["$ref"]) if "$ref" in b else b for b in node["oneOf"]]
            yield where, tag, union, node, branches


def test_every_discriminator_is_one_ajv_compiles_and_its_tag_is_required() -> None:
    # pydantic wrote OpenAPI's discriminator, {propertyName, mapping}: Ajv (strict, with its
    # `discriminator: true` option) refused to compile the envelopes, rules.json and
    # TableOpened.json ("discriminator: mapping is not supported"; without `type: object` beside
    # it, "missing type object for keyword discriminator"), and a union tag with a default
    # (the rules' reshuffle `kind`) was optional although the models refuse a member without it.
    found = []
    for path in _JSON_SCHEMAS:
        document = json.loads(path.read_text())
        for where, tag, union, node, branches in _unions(
            document, _by_name(document.get("$defs", {}))
        ):
            if union != {"propertyName": tag} or node.get("type") != "object":
                found.append(f"{path.name}{where}: {union}, type {node.get('type')}")
            for branch in branches:
                if tag not in branch.get("required", []) or "default" in branch["properties"][tag]:
                    found.append(f"{path.name}{where}: {branch['title']}.{tag} optional")
    api = json.loads((ROOT / "schemas" / "asyncapi.json").read_text())
    for where, tag, _, _, branches in _unions(api, _by_name(api["components"]["schemas"])):
        for branch in branches:
            if tag not in branch.get("required", []):
                found.append(f"asyncapi.json{where}: {branch['title']}.{tag} optional")
    assert found == []


def test_a_reshuffle_without_its_kind_is_refused_by_the_schema_as_by_the_model() -> None:
    from pydantic import ValidationError

    from blackjack.domain.rules import Rules, preset

    rules = preset("atlantic-city").model_dump(mode="json")
    untagged = {**rules, "reshuffle": {"used": "1/3"}}
    schema = json.loads((ROOT / "schemas" / "rules.json").read_text())
    try:
        Rules.model_validate(untagged)
    except ValidationError as error:
        assert "Unable to extract tag" in str(error)
    else:
        raise AssertionError("the model took a reshuffle without its kind")
    assert not jsonschema.Draft202012Validator(schema).is_valid(untagged)
    tagged = {**rules, "reshuffle": {"kind": "penetration", "used": "1/3"}}
    assert jsonschema.Draft202012Validator(schema).is_valid(tagged)
    Rules.model_validate(tagged)


def test_every_format_is_one_a_validator_knows() -> None:
    # pydantic's `format: fraction` (rules.json, TableOpened's rules) is no format any
    # validator knows: Ajv in strict mode refuses to compile such a schema ("unknown format
    # 'fraction' ignored in schema"). The schemas give the text's pattern instead, which every
    # preset's rules, as the models write them, and the ratios the docs show ("6/5", "1.2") match.
    from blackjack.domain.rules import PRESETS, Rules

    formats = {
        node["format"]
        for path in sorted((ROOT / "schemas").rglob("*.json"))
        for _, node in _nodes(json.loads(path.read_text()))
        if isinstance(node.get("format"), str)
    }
    # JSON Schema's own, and OpenAPI's int64 (ajv-formats has it; Java's generators read it)
    assert formats <= {"date-time", "date", "int64"}, formats
    schema = jsonschema.Draft202012Validator(
        json.loads((ROOT / "schemas" / "rules.json").read_text())
    )
    for rules in PRESETS.values():
        assert schema.is_valid(rules.model_dump(mode="json")), rules.name
    base = next(iter(PRESETS.values())).model_dump(mode="json")
    for ratio in ("6/5", "1.2", "3/2", "1", 1.2, 2):
        assert schema.is_valid({**base, "blackjack_pays": ratio}), ratio
        Rules.model_validate({**base, "blackjack_pays": ratio})
    for ratio in ("6/0", "six to five", "", "1/"):
        assert not schema.is_valid({**base, "blackjack_pays": ratio}), ratio


def test_a_number_s_bounds_sit_beside_its_type() -> None:
    # RemoveBet's optional amount had `exclusiveMinimum: 0` beside `anyOf: [integer, null]`:
    # right in JSON Schema, but Ajv in strict mode refused to compile commands/RemoveBet.json
    # ("missing type number for keyword exclusiveMinimum"), and a code generator reading the
    # integer branch saw no bound. The bound now sits in the integer branch.
    found = [
        f"{path.relative_to(ROOT / 'schemas')}{where}"
        for path in sorted((ROOT / "schemas").rglob("*.json"))
        for where, node in _nodes(json.loads(path.read_text()))
        if any(bound in node for bound in _NUMBER_BOUNDS)
        and node.get("type") not in ("integer", "number")
    ]
    assert found == []
    schema = json.loads((ROOT / "schemas" / "commands" / "RemoveBet.json").read_text())
    command = {"type": "RemoveBet", "player_id": "p", "box": 0}
    assert jsonschema.Draft202012Validator(schema).is_valid(command)
    assert jsonschema.Draft202012Validator(schema).is_valid({**command, "amount": 1})
    for amount in (0, -5):
        assert not jsonschema.Draft202012Validator(schema).is_valid({**command, "amount": amount})


def test_every_ce_time_header_is_a_date_time_in_the_asyncapi_document() -> None:
    # the headers' schemas said "RFC 3339" in words only: a validator (Ajv with ajv-formats)
    # or a generator had nothing to check a record's ce_time with
    api = json.loads((ROOT / "schemas" / "asyncapi.json").read_text())
    for name, message in api["components"]["messages"].items():
        time = message["headers"]["properties"].get("ce_time")
        assert time is None or time.get("format") == "date-time", name


def test_a_stream_s_partition_is_murmur2_s_and_the_docs_tell_librdkafka_clients_so() -> None:
    # docs/kafka.md said any client's keyed send lands on the stream's partition: librdkafka's
    # default partitioner (consistent_random: CRC32 of the key; confluent-kafka in every
    # language, node-rdkafka) and kafkajs's LegacyPartitioner put most ids elsewhere, where
    # the handler answers `malformed` ("stream ... belongs to partition 0, not 1").
    import zlib

    from blackjack.bus.topics import partition_for

    ids = [f"table-{i}" for i in range(1000)]
    elsewhere = sum(zlib.crc32(i.encode()) % 6 != partition_for(i, 6) for i in ids)
    assert elsewhere == 845
    topics = _section((ROOT / "docs" / "kafka.md").read_text(), "### Topics")
    assert "any client's keyed send lands right" not in topics
    for needed in ("consistent_random", "partitioner=murmur2_random", "LegacyPartitioner", "845"):
        assert needed in topics, needed
    # and the AsyncAPI document, which an integrator may read alone, says it on the key
    [command] = [
        m for n, m in asyncapi_document()["components"]["messages"].items() if n[:9] == "commands:"
    ]
    key = command["bindings"]["kafka"]["key"]["description"]
    assert "murmur2" in key and "partitioner=murmur2_random" in key


def test_a_command_s_correlation_id_is_its_body_s_and_its_events_default_to_its_id() -> None:
    """A platform routing by the correlation id: a Kafka-console integrator's ce_correlationid
    header on a command was not read (the contract said a command's correlation id is that
    header), and the result of a command sent without one said null where its events said the
    command id. The contract now says what each carries; this pins the behaviour it states."""
    processor, store, wallet = new_processor(), PartitionStore(0), wallet_stream("ann")
    deposit = WalletDeposit(player_id="ann", amount=100, currency="USD")
    sent = [
        CommandEnvelope(command_id=f"d-{n}", stream_id=wallet, command=deposit.model_copy())
        for n in (1, 2)
    ]
    unread = [("ce_correlationid", b"header-session")]
    first = processor.handle(store, Inbound(wallet.encode(), _json(sent[0]), unread, 0, 1), NOW)
    with_id = sent[1].model_copy(update={"correlation_id": "body-session"})
    second = processor.handle(store, Inbound(wallet.encode(), _json(with_id), [], 0, 2), NOW)
    assert first.result.status == second.result.status == "accepted"
    assert first.result.correlation_id is None
    assert {e.correlation_id for e in first.events} == {"d-1"}
    assert second.result.correlation_id == "body-session"
    assert {e.correlation_id for e in second.events} == {"body-session"}
    locations = {
        n.split(":")[0]: (m.get("correlationId") or {}).get("location")
        for n, m in asyncapi_document()["components"]["messages"].items()
    }
    assert (
        locations["commands"] == locations["command-results"] == "$message.payload#/correlation_id"
    )
    assert locations["events"] == "$message.header#/ce_correlationid"


def test_a_wallet_s_balance_passes_2_53_by_cash_outs_and_the_docs_say_which_fields() -> None:
    # Found by the Node.js client: money paid in stops at 10^15, but a table's cash-out is never
    # refused, so a wallet that bought in the most at 11 tables and left them holds more than
    # 2^53, where JSON.parse (doubles) rounds: its CashOutReceived.balance_after
    # 10,999,999,999,999,989 came out ...988. The wallet is right (pinned here: this passed
    # before); docs/kafka.md did not say which fields a JavaScript reader must read exactly.
    from blackjack.domain.wallet import (
        INITIAL_WALLET,
        BuyIn,
        CashOut,
        CashOutReceived,
        WalletDeposit,
        decide_wallet,
        evolve_wallet,
    )

    most, tables, state = 999_999_999_999_999, 11, INITIAL_WALLET
    for command in [
        *(c for i in range(tables) for c in (
            WalletDeposit(player_id="p", amount=most),
            BuyIn(player_id="p", table_id=f"t{i}", amount=most),
        )),
        *(CashOut(player_id="p", table_id=f"t{i}", amount=most) for i in range(tables)),
    ]:  # fmt: skip
        decided = decide_wallet(state, command)
        assert isinstance(decided, list), decided
        for event in decided:
            state = evolve_wallet(state, event)
    assert isinstance(event, CashOutReceived)
    assert event.balance_after == 10_999_999_999_999_989 > 2**53
    assert int(float(event.balance_after)) == 10_999_999_999_999_988  # what JSON.parse gets
    note = _section((ROOT / "docs" / "kafka.md").read_text(), "### From another language")
    for needed in ("2^53", "10,999,999,999,999,989", "CashOutReceived.balance_after",
                   "balance_returned", "Number.isSafeInteger"):  # fmt: skip
        assert needed in note, needed


SENT_AT = [
    ("2026-05-01T12:00:00Z", True),
    ("2026-05-01T14:00:00+02:00", True),
    ("2026-05-01t12:00:00.123456789z", True),
    # ajv-formats' date-time takes these three; the model refuses them (malformed)
    ("2026-05-01 12:00:00Z", False),
    ("2026-05-01T12:00:00+0000", False),
    ("2026-05-01T12:00:00+01", False),
    ("2026-05-01T12:00Z", False),
    ("2026-05-01T12:00:00", False),
    ("٢٠٢٦-05-01T12:00:00Z", False),  # Arabic-Indic digits
    ("2026-05-01T12:00:00Z\n", False),  # Python's re, which jsonschema uses, let `$` match
]


def test_sent_at_is_refused_by_the_schema_s_pattern_where_the_model_refuses_it() -> None:
    # The Node.js client's Ajv (ajv-formats) passed `sent_at` "2026-05-01 12:00:00Z",
    # "+0000" and "+01" offsets, which the handler answers `malformed`; jsonschema checks no
    # format unless given a format checker. The pattern says the same to every validator.
    from pydantic import ValidationError

    from blackjack.messages.envelope import CommandEnvelope

    schema = json.loads((ROOT / "schemas" / "command-envelope.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)  # no format checker: the pattern alone
    for sent_at, accepted in SENT_AT:
        document = {"command_id": "c-1", "stream_id": "t-1", "sent_at": sent_at,
                    "command": {"type": "Reconnect", "player_id": "p"}}  # fmt: skip
        try:
            CommandEnvelope.model_validate(document)
            taken = True
        except ValidationError:
            taken = False
        assert (taken, validator.is_valid(document)) == (accepted, accepted), sent_at


def test_every_anchored_pattern_refuses_a_final_line_feed_in_python_s_validator_too() -> None:
    """Python's ``re`` (the ``jsonschema`` package's) matches ``$`` before a final line feed,
    where the models' regex, ECMA-262's and RE2's do not: a command id "c1\n" was valid to
    that validator and refused ``malformed`` by the handler (review of the bad input). Every
    pattern of the published documents that ends in ``$`` has a ``not`` beside it that
    refuses a final line feed in every dialect."""
    anchored = nullable = 0
    for path in sorted((ROOT / "schemas").rglob("*.json")):  # the AsyncAPI and OpenAPI too
        for where, node in _nodes(json.loads(path.read_text())):
            pattern = node.get("pattern")
            if not (isinstance(pattern, str) and pattern.endswith("$") and pattern != "\n$"):
                continue
            anchored += 1
            refused = node.get("not", {})
            final_line_feed = {"type": "string", "pattern": "\n$"}
            assert final_line_feed in (refused, *refused.get("anyOf", ())), (path, where)
            # typed: a field that may be null (a games line's rtp_percent) still takes null,
            # which an untyped pattern passes and its "not" then refused
            without = {key: value for key, value in node.items() if key != "not"}
            takes_null = jsonschema.Draft202012Validator(without).is_valid(None)
            assert jsonschema.Draft202012Validator(node).is_valid(None) == takes_null, where
            nullable += takes_null
    assert anchored >= 59  # ids, currencies, cards, ratios, times, headers and keys
    assert nullable >= 5  # the games report's percents and rules

    from pydantic import ValidationError

    from blackjack.messages.envelope import CommandEnvelope

    schema = json.loads((ROOT / "schemas" / "command-envelope.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    buy_in = {"type": "BuyIn", "player_id": "p", "table_id": "t-2", "amount": 5}
    good = {"command_id": "c-1", "stream_id": "wallet:p", "command": buy_in}
    assert validator.is_valid(good)
    CommandEnvelope.model_validate(good)
    for field in ("command_id", "stream_id", "table_id"):
        bad = json.loads(json.dumps(good))
        where = bad["command"] if field == "table_id" else bad
        where[field] += "\n"
        assert not validator.is_valid(bad), field
        with pytest.raises(ValidationError):
            CommandEnvelope.model_validate(bad)
    wallet = json.loads(json.dumps(good))
    wallet["command"]["table_id"] = "wallet:p"  # the "not" that was there still refuses
    assert not validator.is_valid(wallet)


def test_a_declines_stream_s_events_have_a_key_the_asyncapi_document_allows() -> None:
    # Found by the Node.js client: a BuyIn to an id no table was opened under is declined in
    # its partition's stream `#declined/<partition>` (or `#declined/<partition>.<n>`), whose
    # TransferDeclined is keyed by that id on blackjack.events; the AsyncAPI document gave the
    # events' key a table's or a wallet's pattern only, so Ajv refused the record's key
    # ('must match pattern "^[A-Za-z0-9._:@\-]+$"': keys "#declined/4", "#declined/2.3").
    from blackjack.command_handler.ids import declines_stream

    document = json.loads((ROOT / "schemas" / "asyncapi.json").read_text())
    messages = document["components"]["messages"]
    events_key = jsonschema.Draft7Validator(messages["events:Message"]["bindings"]["kafka"]["key"])
    commands_key = jsonschema.Draft7Validator(
        messages["commands:SubscribeMessage"]["bindings"]["kafka"]["key"]
    )
    ids = {declines_stream(p, n) for n in (1, 2, 6, 12, 64) for p in range(n)}
    assert any("." in i for i in ids) and any("." not in i for i in ids)
    for stream in sorted(ids):
        assert [e.message for e in events_key.iter_errors(stream)] == [], stream
        assert not commands_key.is_valid(stream), stream  # no command can name it
    for other in ("table-7", "wallet:alice"):
        assert events_key.is_valid(other)
    for junk in ("#declined/", "#declined/x", "#checkpoint/0", "#strays/0", "#declined/1.2.3"):
        assert not events_key.is_valid(junk), junk
    # and the docs name the stream where they list the streams
    streams = _section((ROOT / "docs" / "kafka.md").read_text(), "### Streams")
    assert "#declined/<partition>" in streams


def test_a_buy_in_refund_s_reason_is_a_closed_set_in_the_schema() -> None:
    # Found by the Node.js client: a wallet's BuyInRefunded.reason was a free string in
    # schemas/events/BuyInRefunded.json, while the table's TransferDeclined.reason_code it
    # copies is an enum, so a platform that reconciles a wallet from its own stream could not
    # switch over why its money came back. It is the decline's code (older refunds: the code
    # the table refused the deposit with), so the result's rejection codes bound it.
    from typing import get_args

    from blackjack.domain.rejections import DeclineCode
    from blackjack.domain.wallet import BuyInRefunded

    schemas = ROOT / "schemas"
    reason = json.loads((schemas / "events" / "BuyInRefunded.json").read_text())["properties"][
        "reason"
    ]
    codes = json.loads((schemas / "command-result.json").read_text())["$defs"]["Rejection"][
        "properties"
    ]["code"]["enum"]
    assert set(get_args(DeclineCode)) <= set(reason.get("enum", ())) <= set(codes)
    data = {"type": "BuyInRefunded", "version": 1, "player_id": "p", "transfer": 1,
            "table_id": "t", "amount": 5, "reason": "not_seated", "balance_after": 5}  # fmt: skip
    refunded = _stored(data)
    decoded = wire.decode(json.dumps(refunded).encode())
    assert isinstance(decoded.data, BuyInRefunded) and decoded.data.reason == "not_seated"
    # the docs say so where a client reads the refund
    money = _section((ROOT / "docs" / "kafka.md").read_text(), "### A round on the wire")
    assert "`BuyInRefunded`'s `reason`" in money


def test_the_bj_transfer_header_is_said_for_both_commands_that_carry_it() -> None:
    # Found by the Node.js client reading the commands topic: `bj_transfer` is on every
    # CashOut the service sends (the table event's sequence: 79, 80, 380, 381 in its run), not
    # only on a buy-in's Deposit, which is all docs/kafka.md and the AsyncAPI document said
    # ("the wallet's transfer number of a buy-in's Deposit"). What each carries is pinned on
    # the broker (test_every_record_on_the_wire_is_what_the_published_contract_says).
    document = json.loads((ROOT / "schemas" / "asyncapi.json").read_text())
    headers = document["components"]["messages"]["service-commands:Message"]["headers"]
    described = headers["properties"]["bj_transfer"]["description"]
    assert "Deposit" in described and "CashOut" in described and "sequence" in described
    text = (ROOT / "docs" / "kafka.md").read_text()
    start = text.index("Commands only the service may issue also carry `bj_signature`")
    paragraph = text[start : text.index("\n\n", start)]
    assert "`CashOut` the\nsequence of the table event" in paragraph


def test_a_time_at_a_whole_second_has_no_fraction_and_the_docs_say_so() -> None:
    # docs/kafka.md said bodies write UTC "with microseconds"; a time at a whole second (one
    # in a million, and any a test clock makes) is written with none, in the body and in
    # ce_time alike: a reader that cuts the text at fixed places (a regex with a required
    # fraction, slice(20, 26) for the microseconds) fails on it. RFC 3339 allows both.
    from datetime import UTC, datetime

    from blackjack.domain import events as ev
    from blackjack.messages.envelope import CommandResult, EventEnvelope
    from blackjack.messages.sealing import ShoeSeal
    from blackjack.messages.wire import cloudevents_headers, encode_event

    whole = datetime(2026, 12, 2, 22, 45, 29, tzinfo=UTC)
    result = CommandResult(command_id="c", stream_id="t", status="accepted", handled_at=whole)
    assert json.loads(result.model_dump_json())["handled_at"] == "2026-12-02T22:45:29Z"
    envelope = EventEnvelope(
        event_id="e", type="RoundOpened", schema_version=1, stream_id="t", sequence=1,
        occurred_at=whole, causation_id="c", data=ev.RoundOpened(round=1),
    )  # fmt: skip
    assert json.loads(encode_event(envelope, ShoeSeal(b"k" * 32)))["occurred_at"] == (
        "2026-12-02T22:45:29Z"
    )
    headers = dict(cloudevents_headers(envelope, "/s"))
    assert headers["ce_time"] == b"2026-12-02T22:45:29+00:00"
    times = (ROOT / "docs" / "kafka.md").read_text()
    times = times[times.index("* **Times.**") :][:900]
    assert "`2026-12-02T22:45:29Z`" in times and "`2026-12-02T22:45:29+00:00`" in times


@pytest.mark.parametrize("amount", ["5.0", "500.0", "1e2"])
def test_an_amount_with_a_fraction_or_an_exponent_is_malformed_as_the_docs_say(amount: str) -> None:
    """JSON Schema's `integer` admits 5.0 (a number with a zero fraction), which Jackson's
    BigDecimal writes; the handler reads integer literals only, and docs/kafka.md says so."""
    processor, store, wallet = new_processor(), PartitionStore(0), wallet_stream("ann")
    value = (
        f'{{"command_id": "d-1", "stream_id": "{wallet}", "command": {{"type": '
        f'"WalletDeposit", "player_id": "ann", "amount": {amount}, "currency": "USD"}}}}'
    )
    schema = json.loads((ROOT / "schemas" / "command-envelope.json").read_text())
    assert not list(jsonschema.Draft202012Validator(schema).iter_errors(json.loads(value)))
    handled = processor.handle(store, Inbound(wallet.encode(), value.encode(), [], 0, 1), NOW)
    assert handled.result.rejection is not None
    assert handled.result.rejection.code == "malformed" and store.streams == {}
    assert "Send integer literals" in (ROOT / "docs" / "kafka.md").read_text()
