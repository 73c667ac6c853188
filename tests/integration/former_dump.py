"""The canonical dump of a1b3777 (``projections/dump.py`` before it streamed): the whole read
model read into memory. Kept only as the reference the streamed dump must equal byte for byte
(``test_dump_streamed``) and as the baseline of ``measure_audit_memory``. Do not change it."""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from sqlalchemy import String, Table, select
from sqlalchemy.ext.asyncio import AsyncConnection

from blackjack.messages.wire import ABSENT_FROM_OLDER_VERSIONS, decode, encode, upcast
from blackjack.projections.ids import utc
from blackjack.projections.schema import READ_MODEL
from blackjack.projections.views import stored_record

Key = tuple[Any, ...]


@dataclass(frozen=True)
class TableDump:
    name: str
    rows: dict[Key, dict[str, Any]]
    """primary key -> the row's canonical values, in primary-key order"""

    def lines(self) -> list[str]:
        return [f"# {self.name}", *(canonical_json(row) for row in self.rows.values())]


@dataclass(frozen=True)
class Dump:
    tables: tuple[TableDump, ...]

    def text(self) -> str:
        return "".join(line + "\n" for table in self.tables for line in table.lines())

    def digest(self) -> str:
        return hashlib.sha256(self.text().encode()).hexdigest()

    def table(self, name: str) -> TableDump:
        return next(t for t in self.tables if t.name == name)


@dataclass(frozen=True)
class Difference:
    table: str
    key: Key
    kind: str  # "missing" (only in the expected dump), "unexpected" (only in the actual), "changed"
    columns: dict[str, tuple[Any, Any]]
    """column -> (expected, actual), for a changed row"""

    def __str__(self) -> str:
        where = f"{self.table} {list(self.key)}"
        if self.kind != "changed":
            return f"{where}: {self.kind} row"
        changes = "; ".join(
            f"{column}: expected {_short(a)}, found {_short(b)}"
            for column, (a, b) in self.columns.items()
        )
        return f"{where}: {changes}"


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _canonical(value: Any) -> Any:
    if isinstance(value, datetime):
        return utc(value).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, date):
        return value.isoformat()
    return value


async def dump(connection: AsyncConnection) -> Dump:
    postgres = connection.dialect.name == "postgresql"
    return Dump(tuple([await _dump_table(connection, table, postgres) for table in READ_MODEL]))


async def _dump_table(connection: AsyncConnection, table: Table, postgres: bool) -> TableDump:
    key_columns = list(table.primary_key.columns)
    # Byte-wise order on both engines: PostgreSQL's default collation sorts text differently.
    order = [c.collate("C") if postgres and isinstance(c.type, String) else c for c in key_columns]
    result = await connection.execute(select(table).order_by(*order))
    rows: dict[Key, dict[str, Any]] = {}
    for row in result.mappings():
        values = {name: _canonical(value) for name, value in row.items()}
        if table.name == "events":
            values["envelope"] = _event_as_read(values["envelope"])
        elif table.name == "rounds":
            values["record"] = _recall_as_read(values["record"])
        rows[tuple(values[c.name] for c in key_columns)] = values
    return TableDump(table.name, rows)


def _event_as_read(stored: str) -> str:
    """A stored envelope as a reader reads it now: an older read model kept an upcast event
    under the envelope version it came with, the same event a rebuild stores renamed."""
    try:
        return encode(decode(stored.encode())).decode()
    except (ValueError, KeyError, TypeError):  # unreadable: compared as it is stored
        return stored


def _recall_as_read(record: Any) -> Any:
    """A round's record with each entry of its recall as a reader reads the event now: an
    older release folded an event of an older version without the fields its upcaster adds
    (``ABSENT_FROM_OLDER_VERSIONS``), the same event a rebuild folds upcast; and in the form the
    store keeps (``stored_record``: a voided round folded by an older release says every hand
    voided, as the record reads)."""
    if not isinstance(record, dict) or not isinstance(record.get("log"), list):
        return record
    log = []
    for entry in record["log"]:
        added = ABSENT_FROM_OLDER_VERSIONS.get(entry.get("event"), ())
        data = entry.get("data")
        if added and isinstance(data, dict) and any(name not in data for name in added):
            newer = upcast({**data, "type": entry["event"], "version": 1})
            data = {k: v for k, v in newer.items() if k in data or k in added}
            log.append({**entry, "data": data})
        else:
            log.append(entry)
    return stored_record(copy.deepcopy({**record, "log": log}))


def differences(expected: Dump, actual: Dump) -> list[Difference]:
    found: list[Difference] = []
    for want, have in zip(expected.tables, actual.tables, strict=True):
        for key, row in want.rows.items():
            other = have.rows.get(key)
            if other is None:
                found.append(Difference(want.name, key, "missing", {}))
            elif other != row:
                columns: dict[str, tuple[Any, Any]] = {}
                for column in sorted(set(row) | set(other)):
                    _compare(column, row.get(column), other.get(column), columns)
                found.append(Difference(want.name, key, "changed", columns))
        found += [
            Difference(want.name, key, "unexpected", {})
            for key in have.rows
            if key not in want.rows
        ]
    return found


def _compare(path: str, a: Any, b: Any, out: dict[str, tuple[Any, Any]]) -> None:
    """Name the innermost places where two values differ (``record.boxes[0].hands[1].payout``)."""
    if a == b:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for name in sorted(set(a) | set(b)):
            _compare(f"{path}.{name}", a.get(name), b.get(name), out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            _compare(f"{path}[{index}]", x, y, out)
    elif isinstance(a, list) and isinstance(b, list):
        # an entry missing or added (a round's log without a deposit): named from the first
        # place the two part, once, not as every later entry shifted by one
        same = (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
        first = next(same, min(len(a), len(b)))
        out[f"{path}[{first}:]"] = (a[first:], b[first:])
    else:
        out[path] = (a, b)


def _short(value: Any, limit: int = 160) -> str:
    text = canonical_json(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
