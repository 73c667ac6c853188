"""The operator's file of acknowledged unreadable records (``blackjack audit --acknowledged``):
what it must say, and how a record is matched to it (by its digest too)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from blackjack.audit.acknowledged import Acknowledgment, BadAcknowledgments, load, match
from blackjack.bus.header_names import record_sha256

DIGEST = "a" * 64
ONE = {
    "topic": "blackjack.events",
    "partition": 4,
    "offset": 18233,
    "sha256": DIGEST,
    "by": "ops-jane",
    "date": "2026-12-03",
    "reason": "INC-4711",
}


def written(tmp_path: Path, document: Any) -> Path:
    path = tmp_path / "acknowledged.json"
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def test_a_file_of_acknowledgments_reads_back(tmp_path: Path) -> None:
    [one] = load(written(tmp_path, {"acknowledged": [ONE]}))
    assert one.where == ("blackjack.events", 4, 18233) and one.by == "ops-jane"
    assert str(one) == "acknowledged by ops-jane on 2026-12-03: INC-4711"


@pytest.mark.parametrize(
    ("document", "said"),
    [
        ("not json", "document"),
        ({"acknowledged": [{**ONE, "by": "  "}]}, "acknowledged.0.by"),
        ({"acknowledged": [{k: v for k, v in ONE.items() if k != "reason"}]}, "reason"),
        ({"acknowledged": [{**ONE, "sha256": "A" * 64}]}, "sha256"),
        ({"acknowledged": [{**ONE, "sha256": DIGEST[:63]}]}, "sha256"),
        ({"acknowledged": [{**ONE, "offset": -1}]}, "offset"),
        ({"acknowledged": [{**ONE, "partition": "4"}]}, "partition"),
        ({"acknowledged": [{**ONE, "date": "yesterday"}]}, "date"),
        ({"acknowledged": [{**ONE, "extra": 1}]}, "extra"),
        ({"acknowledged": [ONE, {**ONE, "sha256": "b" * 64}]}, "offset 18233 twice"),
    ],
)
def test_a_file_that_says_less_or_otherwise_is_refused_with_what_is_wrong(
    tmp_path: Path, document: Any, said: str
) -> None:
    with pytest.raises(BadAcknowledgments, match=said):
        load(written(tmp_path, document))


def test_a_missing_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BadAcknowledgments, match="cannot read"):
        load(tmp_path / "none.json")


def test_a_record_is_acknowledged_by_its_place_and_its_digest_only() -> None:
    ack = Acknowledgment.model_validate(ONE, strict=False)
    [right], unused = match([("blackjack.events", 4, 18233, DIGEST)], [ack])
    assert right.acknowledged == ack and unused == []
    [other], unused = match([("blackjack.events", 4, 18233, "b" * 64)], [ack])
    assert other.acknowledged is None and other.other_digest == DIGEST and unused == [ack]
    [elsewhere], unused = match([("blackjack.events", 5, 18233, DIGEST)], [ack])
    assert elsewhere.acknowledged is None and elsewhere.other_digest is None


def test_the_digest_is_of_the_records_bytes_as_documented() -> None:
    """Each field as its length (4 bytes, big-endian, -1 for none) then its bytes: key, value,
    the number of headers, each header's name (a non-UTF-8 name back to its bytes) and value."""
    name = b"\xff\xfebj".decode("utf-8", "surrogateescape")
    expected = hashlib.sha256(
        b"\x00\x00\x00\x01k" + b"\xff\xff\xff\xff" + b"\x00\x00\x00\x02"
        b"\x00\x00\x00\x04\xff\xfebj\x00\x00\x00\x011"
        b"\x00\x00\x00\x07ce_type\x00\x00\x00\x00"
    ).hexdigest()
    assert record_sha256(b"k", None, [(name, b"1"), ("ce_type", b"")]) == expected
    assert record_sha256(b"k", b"", [(name, b"1"), ("ce_type", b"")]) != expected
