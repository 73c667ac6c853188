"""Records no reader can read, acknowledged by an operator (``blackjack audit --acknowledged``).

A record whose header name is not UTF-8 is stepped over unread by every reader
(``bus.header_names``), and what it holds is never audited: ``blackjack audit`` reports it as
a finding and fails. Once it sits on the events topic below the live positions it stays there
(the log is never edited), so every later audit would fail on it for good. The operator who has
looked at it (docs/operations.md, "A stuck projection worker": who wrote it, what it held)
acknowledges it in a file the audit reads: the record by its topic, partition, offset and the
SHA-256 of its key, value and headers (``record_sha256``, which the audit prints for each such
record), with who acknowledged it, on what day, and why. The audit then reports it as
acknowledged, with those, and does not fail on it; it still fails on any other such record,
and on one at an acknowledged position whose digest is not the one acknowledged (another
record there: a topic deleted and written again, another cluster). An acknowledgment that
matches no record is reported, and fails nothing.

The file is JSON, kept with the audit's configuration (a ConfigMap for the Job), and changed
by review like any other::

    {"acknowledged": [
      {"topic": "blackjack.events", "partition": 4, "offset": 18233,
       "sha256": "9f2c...e1", "by": "ops-jane", "date": "2026-12-03",
       "reason": "INC-4711: a test producer wrote to the live topic; ACL fixed"}]}
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

_SHA256 = re.compile(r"[0-9a-f]{64}")

Text = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=500)]


class Acknowledgment(BaseModel):
    """One record an operator has looked at and acknowledged."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    topic: Text
    partition: int = Field(ge=0)
    offset: int = Field(ge=0)
    sha256: Annotated[str, StringConstraints(pattern=_SHA256.pattern)] = Field(
        description="the record's digest as `blackjack audit` prints it (64 lowercase hex)"
    )
    by: Text = Field(description="who acknowledged it")
    date: datetime.date = Field(description="when (YYYY-MM-DD)")
    reason: Text = Field(description="why: what the record was, the incident")

    @property
    def where(self) -> tuple[str, int, int]:
        return (self.topic, self.partition, self.offset)

    def __str__(self) -> str:
        return f"acknowledged by {self.by} on {self.date.isoformat()}: {self.reason}"


class Acknowledgments(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    acknowledged: list[Acknowledgment]


class BadAcknowledgments(ValueError):
    """The file cannot be read, is not the format above, or names one position twice."""


def load(path: Path) -> list[Acknowledgment]:
    """The acknowledgments of ``path``, or ``BadAcknowledgments`` saying why not."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise BadAcknowledgments(f"cannot read {path}: {error}") from None
    try:
        found = Acknowledgments.model_validate_json(text).acknowledged  # a date: its string
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'document'}: {e['msg']}"
            for e in error.errors()
        )
        raise BadAcknowledgments(f"{path} is not a list of acknowledgments: {problems}") from None
    seen: set[tuple[str, int, int]] = set()
    for one in found:
        if one.where in seen:
            topic, partition, offset = one.where
            raise BadAcknowledgments(f"{path} names {topic}[{partition}] offset {offset} twice")
        seen.add(one.where)
    return found


@dataclass(frozen=True)
class UnreadableRecord:
    """A record no reader can read, stepped over by the audit's rebuild."""

    topic: str
    partition: int
    offset: int
    sha256: str
    acknowledged: Acknowledgment | None = None
    other_digest: str | None = None
    """an acknowledgment names this position with this other digest (not accepted)"""

    def __str__(self) -> str:
        said = f"{self.topic}[{self.partition}] offset {self.offset} sha256 {self.sha256}"
        if self.acknowledged is not None:
            return f"{said}: {self.acknowledged}"
        if self.other_digest is not None:
            return (
                f"{said} (an acknowledgment names this position with sha256 "
                f"{self.other_digest}: another record, not accepted)"
            )
        return said


def match(
    records: Iterable[tuple[str, int, int, str]], acknowledged: Sequence[Acknowledgment]
) -> tuple[list[UnreadableRecord], list[Acknowledgment]]:
    """Each unreadable record (topic, partition, offset, digest) with the acknowledgment of it,
    if any; and the acknowledgments that matched none."""
    by_where = {one.where: one for one in acknowledged}
    used: set[tuple[str, int, int]] = set()
    found: list[UnreadableRecord] = []
    for topic, partition, offset, sha256 in records:
        one = by_where.get((topic, partition, offset))
        if one is not None and one.sha256 == sha256:
            used.add(one.where)
            found.append(UnreadableRecord(topic, partition, offset, sha256, acknowledged=one))
        else:
            other = None if one is None else one.sha256
            found.append(UnreadableRecord(topic, partition, offset, sha256, other_digest=other))
    return found, [one for one in acknowledged if one.where not in used]
