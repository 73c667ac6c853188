"""The canonical dump of the read model, and the differences between two read models.

A dump is one line of JSON per row (keys sorted, times in UTC with microseconds, documents
re-serialised), tables in a fixed order and rows in primary-key order compared byte-wise, so
the dump of the same events is the same text on SQLite and on PostgreSQL, and a rebuild from
offset 0 can be compared with the live store byte for byte.

Both are streamed: each table is read in key order through a server-side cursor
(``connection.stream``, ``PAGE`` rows fetched at a time), ``write_dump`` writes each line as
it is read, and ``compare`` merges two such ordered streams table by table, keeping the first
``limit`` differences of each table and counting the rest. Their memory does not grow with the
read model (docs/operations.md, "The read model at a casino's size"). ``dump`` collects the
same rows into a ``Dump`` for a small store (the tests, the load test's check).
"""

from __future__ import annotations

import copy
import hashlib
import json
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import partial
from typing import IO, Any, TypeVar

from sqlalchemy import String, Table, select
from sqlalchemy.ext.asyncio import AsyncConnection

from blackjack.messages.wire import ABSENT_FROM_OLDER_VERSIONS, decode, encode, upcast
from blackjack.projections.ids import utc
from blackjack.projections.schema import READ_MODEL

Key = tuple[Any, ...]
T = TypeVar("T")


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


PAGE = 2_000
"""the most rows fetched from the database at a time"""
PAGE_BYTES = 1_048_576
"""about the most bytes of dump lines a fetch brings (and ``write_dump`` holds before it
writes): a page of a wide table (``rounds``, about 16 KB a row) is fewer rows than ``PAGE``,
so that memory does not grow with the rows' width either"""
FIRST_PAGE = 16
"""rows of a table's first fetch, before its rows' width is known"""


class OutOfOrder(RuntimeError):
    """The database handed a table's rows in an order other than their keys' byte-wise order
    (a collation that is not byte-wise): a merge of two such streams would be wrong."""


def next_page(rows_read: int, size: int, page: int, page_bytes: int) -> int:
    """Rows of the next fetch: as many as ``page_bytes`` hold at the width of the last page's
    rows (``size`` characters of lines for ``rows_read`` rows), from 1 to ``page``."""
    if rows_read == 0:
        return min(page, FIRST_PAGE)
    return max(1, min(page, page_bytes * rows_read // max(1, size)))


async def rows(
    connection: AsyncConnection, table: Table, *, page: int = PAGE, page_bytes: int = PAGE_BYTES
) -> AsyncIterator[tuple[Key, dict[str, Any], str]]:
    """The table's rows in primary-key order compared byte-wise (each text key ``COLLATE
    "C"`` on PostgreSQL, whose database collation may sort otherwise; SQLite compares text
    byte-wise, ``BINARY``), each as (its key, its canonical values, its line of the dump),
    read through a server-side cursor at most ``page`` rows and about ``page_bytes`` of lines
    at a time (``next_page``). Raises ``OutOfOrder`` if a key is not after the one before it
    as Python compares them (code points: the byte order of UTF-8)."""
    key_columns = [c.name for c in table.primary_key.columns]
    postgres = connection.dialect.name == "postgresql"
    order = [
        c.collate("C") if postgres and isinstance(c.type, String) else c
        for c in table.primary_key.columns
    ]
    query = select(table).order_by(*order).execution_options(yield_per=page)
    result = (await connection.stream(query)).mappings()
    previous: Key | None = None
    fetch = next_page(0, 0, page, page_bytes)
    while chunk := await result.fetchmany(fetch):
        size = 0
        for row in chunk:
            values = {name: _canonical(value) for name, value in row.items()}
            if table.name == "events":
                values["envelope"] = _event_as_read(values["envelope"])
            elif table.name == "rounds":
                values["record"] = _recall_as_read(values["record"])
            key = tuple(values[name] for name in key_columns)
            if previous is not None and not previous < key:
                raise OutOfOrder(f"{table.name}: {list(key)} read after {list(previous)}")
            previous = key
            line = canonical_json(values)
            size += len(line)
            yield key, values, line
        fetch = next_page(len(chunk), size, page, page_bytes)
        del chunk


async def lines(
    connection: AsyncConnection, *, page: int = PAGE, page_bytes: int = PAGE_BYTES
) -> AsyncIterator[str]:
    """The dump's lines (without their newline), table by table, as they are read."""
    for table in READ_MODEL:
        yield f"# {table.name}"
        async for _, _, line in rows(connection, table, page=page, page_bytes=page_bytes):
            yield line


async def write_dump(
    connection: AsyncConnection,
    write: Callable[[str], object],
    *,
    page: int = PAGE,
    page_bytes: int = PAGE_BYTES,
) -> str:
    """Hand the dump's text to ``write`` a page of lines at a time (at most ``page`` lines,
    about ``page_bytes`` characters); returns its sha256 (of its UTF-8 bytes, as
    ``Dump.digest``)."""
    digest = hashlib.sha256()
    buffered: list[str] = []
    held = 0
    async for line in lines(connection, page=page, page_bytes=page_bytes):
        buffered.append(line + "\n")
        held += len(line) + 1
        if len(buffered) >= page or held >= page_bytes:
            _flush(buffered, write, digest)
            held = 0
    _flush(buffered, write, digest)
    return digest.hexdigest()


def _flush(buffered: list[str], write: Callable[[str], object], digest: Any) -> None:
    text = "".join(buffered)
    buffered.clear()
    if text:
        digest.update(text.encode())
        write(text)


async def dump(connection: AsyncConnection) -> Dump:
    """The whole dump in memory: for a small store only (``write_dump`` and ``compare``
    stream)."""
    tables = []
    for table in READ_MODEL:
        found = {key: values async for key, values, _ in rows(connection, table)}
        tables.append(TableDump(table.name, found))
    return Dump(tuple(tables))


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
    (``ABSENT_FROM_OLDER_VERSIONS``), the same event a rebuild folds upcast; and with the
    ``voided`` an older release left out (``_voided_as_read``)."""
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
    return _voided_as_read(copy.deepcopy({**record, "log": log}))


def _voided_as_read(doc: dict[str, Any]) -> dict[str, Any]:
    """A round's record with the ``voided`` of its hands and insurance as the store keeps it
    (``stored_record``) where the record leaves it out or says the default: a release before
    it folded none, and a voided round reads every one of them voided. A value that says
    otherwise stays, so the audit names it: a hand of a settled round stored ``voided: true``
    (nothing it paid stands, the recall said) compared equal before, made so on both sides."""
    voided = doc.get("status") == "voided"
    for box in doc.get("boxes", []):
        insurance = box.get("insurance")
        for part in [*box.get("hands", []), *([insurance] if insurance else [])]:
            if voided:
                part.setdefault("voided", True)
            elif part.get("voided") is False:
                del part["voided"]
    return doc


DIFFERENCES_SHOWN = 100
"""differences kept (and reported) per table by default; the rest are counted"""

RowKey = Key | Callable[[], Key]
"""a row's key, or how to read it (from its line: only when the merge needs it)"""
Rows = AsyncIterator[tuple[RowKey, str]]
"""a table's rows in key order, each as (its key, its line of the dump)"""


def _key(found: RowKey) -> Key:
    return found() if callable(found) else found


@dataclass
class Comparison:
    """The differences between two read models: the first ``limit`` of each table, in key
    order, and how many each table has in all."""

    limit: int = DIFFERENCES_SHOWN
    shown: list[Difference] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    """table -> differences found (shown or not), for each table with any"""

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def not_shown(self, table: str) -> int:
        return self.counts.get(table, 0) - sum(1 for d in self.shown if d.table == table)

    def found(self, difference: Difference | Callable[[], Difference], table: str) -> None:
        count = self.counts.get(table, 0)
        if count < self.limit:
            self.shown.append(difference() if callable(difference) else difference)
        self.counts[table] = count + 1


async def compare_tables(name: str, expected: Rows, actual: Rows, comparison: Comparison) -> None:
    """Merge two ordered streams of one table's rows: a key only in ``expected`` is a
    ``missing`` row, only in ``actual`` an ``unexpected`` one, a key in both whose lines
    differ a ``changed`` row, named by the innermost places its values differ."""
    want = await anext(expected, None)
    have = await anext(actual, None)
    while want is not None or have is not None:
        if want is not None and have is not None and want[1] == have[1]:
            # the same line: the same row, whose key need not be read (a dump file's is parsed)
            want = await anext(expected, None)
            have = await anext(actual, None)
            continue
        # each key read once (a dump file's parsed from its line), kept while the other advances
        want = None if want is None else (_key(want[0]), want[1])
        have = None if have is None else (_key(have[0]), have[1])
        want_key = None if want is None else _key(want[0])
        have_key = None if have is None else _key(have[0])
        if have_key is None or (want_key is not None and want_key < have_key):
            assert want_key is not None
            comparison.found(Difference(name, want_key, "missing", {}), name)
            want = await anext(expected, None)
        elif want_key is None or have_key < want_key:
            comparison.found(Difference(name, have_key, "unexpected", {}), name)
            have = await anext(actual, None)
        else:
            assert want is not None and have is not None
            comparison.found(partial(_changed, name, want_key, want[1], have[1]), name)
            want = await anext(expected, None)
            have = await anext(actual, None)


def _changed(table: str, key: Key, expected: str, actual: str) -> Difference:
    row, other = json.loads(expected), json.loads(actual)
    columns: dict[str, tuple[Any, Any]] = {}
    for column in sorted(set(row) | set(other)):
        _compare(column, row.get(column), other.get(column), columns)
    if not columns:  # equal as Python compares them (1 and true), not as written
        columns = {c: (row.get(c), other.get(c)) for c in sorted(set(row) | set(other))}
        columns = {c: v for c, v in columns.items() if canonical_json(v[0]) != canonical_json(v[1])}
    return Difference(table, key, "changed", columns)


async def table_lines(connection: AsyncConnection, table: Table) -> Rows:
    """A table's rows from a store, as ``compare_tables`` reads them."""
    async for key, _, line in rows(connection, table):
        yield key, line


class DumpFile:
    """A dump written to a file (``write_dump``), read back table by table in the order it was
    written, as ``compare_tables`` reads a store: so that one side of a comparison can be read
    in a short transaction and compared later (the audit's live store, before its rebuild)."""

    def __init__(self, file: IO[str]) -> None:
        self.file = file
        self.pending: str | None = None

    async def table(self, table: Table) -> Rows:
        key_columns = [c.name for c in table.primary_key.columns]
        header = self.pending if self.pending is not None else self.file.readline()
        self.pending = None
        if header.rstrip("\n") != f"# {table.name}":
            raise ValueError(f"dump file: {header[:80]!r} where '# {table.name}' was due")
        for line in self.file:
            if line.startswith("# "):
                self.pending = line
                return
            text = line.rstrip("\n")
            yield partial(_key_of, text, key_columns), text


def _key_of(line: str, key_columns: list[str]) -> Key:
    values = json.loads(line)
    return tuple(values[name] for name in key_columns)


async def compare(
    expected: Callable[[Table], Rows],
    actual: Callable[[Table], Rows],
    limit: int = DIFFERENCES_SHOWN,
) -> Comparison:
    """Every table of the read model compared, each a merge of its two ordered streams."""
    comparison = Comparison(max(1, limit))
    for table in READ_MODEL:
        await compare_tables(table.name, expected(table), actual(table), comparison)
    return comparison


def differences(expected: Dump, actual: Dump) -> list[Difference]:
    """Every difference between two dumps held in memory (small stores: ``compare``
    streams)."""

    async def of(table: TableDump) -> Rows:
        for key, row in table.rows.items():
            yield key, canonical_json(row)

    async def run() -> Comparison:
        comparison = Comparison(sys.maxsize)
        for want, have in zip(expected.tables, actual.tables, strict=True):
            await compare_tables(want.name, of(want), of(have), comparison)
        return comparison

    return _run_now(run()).shown


def _run_now(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never waits (its streams are in memory) to its end, from sync code
    and from inside an event loop alike."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()
    raise RuntimeError("a comparison of dumps in memory waited")


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
