"""JSON Schemas of the message contract, generated from the models into ``schemas/``."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from blackjack.domain.commands import COMMAND_TYPES
from blackjack.domain.rules import Rules
from blackjack.domain.wallet import WALLET_COMMAND_TYPES
from blackjack.messages.envelope import CommandEnvelope, CommandResult
from blackjack.messages.wire import ABSENT_FROM_OLDER_VERSIONS, WIRE_EVENT_TYPES, WireEnvelope

DIALECT = "https://json-schema.org/draft/2020-12/schema"
"""pydantic writes JSON Schema 2020-12; saying so lets a validator pick its rules without
being told (an integrator review: the documents did not name their dialect)."""


def _name(model: type[BaseModel]) -> str:
    default = model.model_fields["type"].default if "type" in model.model_fields else None
    return str(default or model.__name__)


def schema_documents() -> dict[str, dict[str, Any]]:
    """Relative path -> JSON Schema, for every document the contract publishes."""
    documents: dict[str, dict[str, Any]] = {
        "command-envelope.json": CommandEnvelope.model_json_schema(),
        "command-result.json": CommandResult.model_json_schema(),
        "event-envelope.json": WireEnvelope.model_json_schema(),
        "rules.json": Rules.model_json_schema(),
    }
    for command in (*COMMAND_TYPES, *WALLET_COMMAND_TYPES):
        documents[f"commands/{_name(command)}.json"] = command.model_json_schema()
    for event in WIRE_EVENT_TYPES:
        documents[f"events/{_name(event)}.json"] = event.model_json_schema()
    for document in documents.values():
        require_the_type(document)
        int64_integers(document)
        stored_versions_valid(document)
        plain_discriminators(document)
        standard_keywords(document)
        no_final_line_feed(document)
    return {path: {"$schema": DIALECT, **document} for path, document in documents.items()}


def require_the_type(schema: dict[str, Any]) -> None:
    """Mark ``type`` required in every command and event schema (and their ``$defs``): the
    models give it a default, for building them in Python, but on the wire it names the
    message, and the server refuses a command without it (an integrator review)."""
    for part in (schema, *schema.get("$defs", {}).values()):
        kind = part.get("properties", {}).get("type", {})
        if "const" in kind:
            kind.pop("default", None)
            required = part.setdefault("required", [])
            if "type" not in required:
                required.insert(0, "type")


def stored_versions_valid(schema: dict[str, Any]) -> None:
    """Do not require, in an event's schema (and its ``$defs``), a field that a stored older
    version of the event lacks (``wire.ABSENT_FROM_OLDER_VERSIONS``): the events topic holds
    those records for ever, and they are read with the upcaster's value."""
    for part in (schema, *schema.get("$defs", {}).values()):
        kind = part.get("properties", {}).get("type", {}).get("const")
        for field in ABSENT_FROM_OLDER_VERSIONS.get(kind, ()):
            if field in part.get("required", []):
                part["required"].remove(field)


def int64_integers(schema: Any) -> None:
    """Give every ``type: integer`` of a schema ``format: int64``. Python's int has no size,
    but a format-less integer is a 32-bit ``Integer`` to the JVM's code generators
    (openapi-generator, jsonschema2pojo), and money here goes past 2^31 (balances up to 10^15
    minor units); every integer of the contract fits 64 bits (a JVM client's finding)."""
    for node in schema_nodes(schema):
        if node.get("type") == "integer":
            node.setdefault("format", "int64")


def schema_nodes(schema: Any) -> Iterator[dict[str, Any]]:
    """Every object of a schema, each before the ones inside it (so a caller may change a node's
    keys as it gets it: its values are read only after)."""
    if isinstance(schema, dict):
        yield schema
        for value in schema.values():
            yield from schema_nodes(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from schema_nodes(value)


def plain_discriminators(schema: dict[str, Any]) -> None:
    """Write each discriminated union's ``discriminator`` as the JSON Schema validators that
    know the keyword read it: ``{propertyName}`` alone beside ``type: object``, the tag
    required in every branch (``required_tags``). pydantic writes OpenAPI's form, whose
    ``mapping`` Ajv (the JavaScript validator) refuses to compile ("discriminator: mapping is
    not supported"); each branch's ``const`` already says what the mapping did (an integrator
    review, Node.js)."""
    defs = schema.get("$defs", {})

    for node in schema_nodes(schema):
        union = node.get("discriminator")
        if isinstance(union, dict) and "oneOf" in node:
            node["discriminator"] = {"propertyName": union["propertyName"]}
            node.setdefault("type", "object")
    required_tags(schema, lambda ref: defs[ref.rsplit("/", 1)[1]])


def required_tags(schema: Any, resolve: Callable[[str], dict[str, Any]]) -> None:
    """Require a discriminated union's tag in each of its branches (``$ref`` ones through
    ``resolve``), without a default: the models refuse a member without its tag ("Unable to
    extract tag using discriminator"), but pydantic leaves a tag that has a default optional
    (the rules' ``reshuffle.kind``), so a client validating against the schema sent what the
    server refuses."""
    if isinstance(schema, dict):
        union = schema.get("discriminator")
        tag = union.get("propertyName") if isinstance(union, dict) else union
        if isinstance(tag, str) and isinstance(schema.get("oneOf"), list):
            for branch in schema["oneOf"]:
                target = resolve(branch["$ref"]) if "$ref" in branch else branch
                target["properties"][tag].pop("default", None)
                required = target.setdefault("required", [])
                if tag not in required:
                    required.insert(0, tag)
        for value in schema.values():
            required_tags(value, resolve)
    elif isinstance(schema, list):
        for value in schema:
            required_tags(value, resolve)


FRACTION = r"^[0-9]+(/[0-9]*[1-9][0-9]*|\.[0-9]+)?$"
"""A ratio written as text, as the models write it (``"3/2"``, ``"1"``) or a decimal
(``"1.2"``)."""

_BY_TYPE = {
    "integer": ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"),
    "string": ("pattern", "minLength", "maxLength"),
}
"""Keywords that apply to one type only."""


def standard_keywords(schema: Any) -> None:
    """Keep to what a strict validator compiles (Ajv's ``strict: true``, the JavaScript
    default an integrator turns on): pydantic's own ``format: fraction`` becomes the pattern
    of what the models write and read, and a keyword of one type given to an optional value
    (``anyOf`` integer or null, with ``exclusiveMinimum`` beside it: ``RemoveBet.amount``;
    ``sent_at``'s pattern) moves into that type's branch, where it applies anyway (Ajv:
    "missing type number for keyword exclusiveMinimum"; an integrator review, Node.js)."""
    if isinstance(schema, dict):
        if schema.get("format") == "fraction" and schema.get("type") == "string":
            del schema["format"]
            schema["pattern"] = FRACTION
        if "type" not in schema:
            for kind, keywords in _BY_TYPE.items():
                branches = [
                    branch
                    for branch in schema.get("anyOf", [])
                    if isinstance(branch, dict)
                    and branch.get("type") in ((kind, "number") if kind == "integer" else (kind,))
                ]
                if len(branches) == 1:
                    for keyword in keywords:
                        if keyword in schema:
                            branches[0][keyword] = schema.pop(keyword)
        for value in schema.values():
            standard_keywords(value)
    elif isinstance(schema, list):
        for value in schema:
            standard_keywords(value)


FINAL_LINE_FEED = {"type": "string", "pattern": "\n$"}
"""A text that ends in a line feed, in every regex dialect alike. Typed: ``pattern`` passes
anything that is not a string, so an untyped ``not`` of it refused a field's null (a
games report line's ``rtp_percent``, a review of the change)."""


def no_final_line_feed(schema: Any) -> None:
    """Refuse a final line feed wherever a ``pattern`` ends in ``$``, as the models do
    (pydantic's regex, as ECMA-262 and RE2, reads ``$`` as the end of the text): Python's
    ``re``, which the ``jsonschema`` package validates patterns with, also matches ``$``
    before a final line feed, so such a validator passed a command id ``"c1\n"`` that the
    handler refuses ``malformed`` (a review of the bad input). A lookahead would say it in
    the pattern, but Go's RE2 compiles none: a ``not`` beside it says it to every
    validator (with a ``not`` already there, either is refused)."""
    anchored = [
        node
        for node in schema_nodes(schema)
        if isinstance(node.get("pattern"), str)
        and node["pattern"].endswith("$")
        and not node["pattern"].endswith("\\$")
        and node["pattern"] != FINAL_LINE_FEED["pattern"]  # one this added (run again)
    ]
    for node in anchored:  # changed once gathered: a new "not" is no node to visit
        refused = node.get("not")
        if refused is None:
            node["not"] = dict(FINAL_LINE_FEED)
        elif refused != FINAL_LINE_FEED and FINAL_LINE_FEED not in refused.get("anyOf", []):
            node["not"] = {"anyOf": [refused, dict(FINAL_LINE_FEED)]}


def render(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def write(root: Path) -> list[Path]:
    written = []
    for relative, document in schema_documents().items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(render(document))
        written.append(path)
    return written


def drift(root: Path) -> list[str]:
    """Files that differ from what the models generate, or are missing, or are left over."""
    documents = schema_documents()
    problems = [
        relative
        for relative, document in documents.items()
        if not (root / relative).is_file() or (root / relative).read_text() != render(document)
    ]
    present = {str(p.relative_to(root)) for p in root.rglob("*.json")}
    # written by their own commands: `blackjack asyncapi`, `blackjack openapi`
    problems += sorted(present - set(documents) - {"asyncapi.json", "query-api.openapi.json"})
    return problems
