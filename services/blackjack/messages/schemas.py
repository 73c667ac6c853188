"""JSON Schemas of the message contract, generated from the models into ``schemas/``."""

from __future__ import annotations

import json
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
    if isinstance(schema, dict):
        if schema.get("type") == "integer":
            schema.setdefault("format", "int64")
        for value in schema.values():
            int64_integers(value)
    elif isinstance(schema, list):
        for value in schema:
            int64_integers(value)


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
