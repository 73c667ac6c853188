"""Every rejection code a platform can be answered with is explained where its engineers read:
the docs named eleven codes nowhere but the schema's enumeration (a review of docs/kafka.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import get_args

from blackjack.domain.rejections import RejectionCode

ROOT = Path(__file__).resolve().parents[2]


def test_the_schema_s_codes_are_the_decider_s() -> None:
    schema = json.loads((ROOT / "schemas/command-result.json").read_text())
    enums = [
        node["enum"]
        for node in _nodes(schema)
        if isinstance(node, dict) and "enum" in node and "malformed" in node["enum"]
    ]
    assert enums, "no enumeration of the rejection codes in schemas/command-result.json"
    assert {code for enum in enums for code in enum} == set(get_args(RejectionCode))


def test_every_code_is_named_in_the_docs() -> None:
    said = {
        name
        for path in ("docs/kafka.md", "README.md")
        for name in re.findall(r"`([a-z_]+)`", (ROOT / path).read_text())
    }
    assert sorted(set(get_args(RejectionCode)) - said) == []


def _nodes(node: object) -> list[object]:
    """Every dict and list in a JSON document, depth first."""
    found: list[object] = [node]
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else []
    for child in children:
        found.extend(_nodes(child))
    return found
