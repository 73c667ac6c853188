"""Folding Kafka records into the store, exactly once.

One batch of records is one database transaction. It begins by locking the tracking rows
(``projection_positions``) of the partitions in the batch, skips every record below the stored
position (already folded in by this or another worker), folds the rest, and moves the
positions past them in the same transaction. A crash before the commit leaves nothing; a crash
after it leaves the positions that say so. Kafka's own committed offsets play no part. A store
whose position is below what this writer committed there lost commits (``StoreBehind``): the
batch is refused and the worker reads the partition again from the store's position. Before
anything, the transaction checks that the store is at the schema revision this code folds into
(``revision.py``): a store another release migrated gets nothing of the batch.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import date
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError
from sqlalchemy import Table, and_, bindparam, insert, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from blackjack.bus.header_names import header_name_not_utf8, record_sha256
from blackjack.domain import events as ev
from blackjack.domain.wallet import is_wallet_stream
from blackjack.messages import wire
from blackjack.messages.wire import WireEnvelope
from blackjack.projections import schema
from blackjack.projections.ids import utc
from blackjack.projections.pairs import one_of
from blackjack.projections.projector import StreamProjection, recalled_in
from blackjack.projections.revision import check_schema
from blackjack.projections.store import ProjectionStore, in_chunks, nul_replaced, stored_texts
from blackjack.projections.transit import InTransit, money_in_transit
from blackjack.projections.views import (
    Account,
    GameDay,
    ProjectionError,
    RoundPlayer,
    RoundRecord,
    TableView,
)
from blackjack.projections.wallets import WalletProjection, WalletView

Position = tuple[str, int]
"""(topic, partition)"""


class KafkaRecord(Protocol):
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None

    @property
    def headers(self) -> Sequence[tuple[str, bytes | None]]: ...


@dataclass(frozen=True, slots=True)
class Record:
    topic: str
    partition: int
    offset: int
    value: bytes
    key: bytes | None = None
    foreign: bool = False
    """not written by the service (``wire.not_the_service_s``): stepped over, never folded;
    only a rebuild asked to (the audit's, ``projections rebuild``) marks one"""
    unreadable: bool = False
    """a header name of it is not UTF-8 (``bus.header_names``; none of the service's records
    has one): what it holds is not read, it is stepped over (``BatchResult.unreadable``)"""
    sha256: str | None = None
    """an unreadable record's digest (``record_sha256``): how an operator names it to
    acknowledge it (``audit.acknowledged``); None for every other record"""

    @classmethod
    def of(cls, record: KafkaRecord) -> Record:
        unreadable = header_name_not_utf8(record.headers)
        return cls(
            record.topic,
            record.partition,
            record.offset,
            record.value or b"",
            record.key,
            unreadable=unreadable,
            sha256=(
                record_sha256(record.key, record.value, record.headers) if unreadable else None
            ),
        )

    @property
    def position(self) -> Position:
        return (self.topic, self.partition)


@dataclass
class BatchResult:
    folded: int = 0
    skipped: int = 0
    """below the stored position: folded in before (a redelivery)"""
    duplicates: int = 0
    """the same event (stream, sequence, event id) again at a later offset"""
    positions: dict[Position, int] = field(default_factory=dict)
    types: dict[str, int] = field(default_factory=dict)
    games: dict[tuple[str, str], GameDay] = field(default_factory=dict)
    """the game cycles the batch closed, summed by (variant, currency)"""
    unreadable: list[Record] = field(default_factory=list)
    """records stepped over, their position with them, because a header name of theirs is not
    UTF-8 (``Record.unreadable``)"""


class StoreBehind(ProjectionError):
    """The store's position of a partition is below what this writer committed there."""


class ProjectionWriter:
    batch: type[_Batch]
    """how a batch reads and writes the store (``_Batch``; a measurement puts the former
    one beside it: ``tests.integration.measure_read_model``)"""

    def __init__(self, store: ProjectionStore) -> None:
        self.store = store
        self.positions: dict[Position, int] = {}
        self.failed_at: Record | None = None
        """The record whose fold made the last ``apply`` fail (None: it failed elsewhere, or
        did not fail), so the worker can tell which record it is stuck at."""
        self._progress = asyncio.Condition()

    async def stored_positions(self, topic: str | None = None) -> dict[Position, int]:
        async with self.store.reading() as connection:
            return await read_positions(connection, topic)

    async def money_in_transit(self) -> list[InTransit]:
        async with self.store.reading() as connection:
            return await money_in_transit(connection)

    async def probe(self) -> None:
        """A write that changes nothing, to learn whether the database takes writes again
        (a read alone succeeds on a read-only database)."""
        positions = schema.positions
        async with self.store.writing() as connection:
            await connection.execute(
                positions.update()
                .where(positions.c.next_offset < 0)
                .values(next_offset=positions.c.next_offset)
            )

    async def apply(self, records: Sequence[Record]) -> BatchResult:
        result = BatchResult()
        self.failed_at = None
        if not records:
            return result
        async with self.store.writing() as connection:
            # first: a store another release migrated is not written (``revision.py``)
            await self.check_schema(connection)
            keys = sorted({r.position for r in records})
            current = await _lock_positions(connection, self.store.dialect, keys)
            self._refuse_if_behind(current)
            batch = self.batch(connection)
            await batch.load(
                [
                    r
                    for r in records
                    if r.offset >= current[r.position] and not (r.unreadable or r.foreign)
                ]
            )
            for record in records:
                if record.offset < current[record.position]:
                    result.skipped += 1
                    continue
                if record.unreadable:  # nothing of it is read (``Record.unreadable``)
                    result.unreadable.append(record)
                    current[record.position] = record.offset + 1
                    continue
                if record.foreign:  # as the operator's step over it (docs/operations.md)
                    current[record.position] = record.offset + 1
                    continue
                try:
                    kind = await batch.fold(record)
                except Exception:
                    self.failed_at = record
                    raise
                if kind is None:
                    result.duplicates += 1
                else:
                    result.folded += 1
                    result.types[kind] = result.types.get(kind, 0) + 1
                current[record.position] = record.offset + 1
            await batch.flush()
            result.games = batch.games()
            for key in keys:
                await connection.execute(
                    update(schema.positions)
                    .where(_position_is(key))
                    .values(next_offset=current[key])
                )
        result.positions = {key: current[key] for key in keys}
        async with self._progress:
            self.positions.update(result.positions)
            self._progress.notify_all()
        return result

    def _refuse_if_behind(self, stored: Mapping[Position, int]) -> None:
        """The store's positions may only move forward: one below what this writer committed
        there lost commits (a crash of a server that does not wait for its disk, a failover to
        a standby that had not received them, a restore from a backup). The records between
        are folded nowhere, and a batch read on from the consumer's position would move the
        position past them for good: refused, so that the partition is read again from the
        store's position (the worker's ``put_back``). A partition another worker folded
        further meanwhile is ahead, never behind."""
        behind = {
            key: (offset, self.positions[key])
            for key, offset in stored.items()
            if key in self.positions and offset < self.positions[key]
        }
        if not behind:
            return
        for key, (offset, _) in behind.items():
            self.positions[key] = offset  # what the store holds is where folding resumes
        raise StoreBehind(
            "the read model is behind what this worker folded into it (it lost commits: a "
            "crash, a failover or a restore); reading again from its positions: "
            + ", ".join(
                f"{topic}[{partition}] at {offset}, folded to {folded}"
                for (topic, partition), (offset, folded) in sorted(behind.items())
            )
        )

    async def check_schema(self, connection: AsyncConnection) -> None:
        """``SchemaMismatch`` unless the store is at this code's revision; on PostgreSQL the
        revision stays share-locked until the fold commits."""
        await check_schema(connection)

    async def wait_for(self, targets: Mapping[Position, int], timeout: float) -> None:
        """Until every partition's position has reached its target (in this process)."""

        def reached() -> bool:
            return all(self.positions.get(key, 0) >= offset for key, offset in targets.items())

        async with asyncio.timeout(timeout), self._progress:
            await self._progress.wait_for(reached)


async def read_positions(
    connection: AsyncConnection, topic: str | None = None
) -> dict[Position, int]:
    query = select(schema.positions)
    if topic is not None:
        query = query.where(schema.positions.c.topic == topic)
    rows = (await connection.execute(query)).all()
    return {(row.topic, row.kafka_partition): row.next_offset for row in rows}


def _position_is(key: Position) -> Any:
    return and_(schema.positions.c.topic == key[0], schema.positions.c.kafka_partition == key[1])


def _upsert(dialect: str, table: Table) -> Any:
    """An INSERT that can say what to do on a conflict: each dialect has its own."""
    return (postgresql_insert if dialect == "postgresql" else sqlite_insert)(table)


async def _lock_positions(
    connection: AsyncConnection, dialect: str, keys: Iterable[Position]
) -> dict[Position, int]:
    """The stored positions of these partitions, their rows created if new and locked."""
    rows = [{"topic": t, "kafka_partition": p, "next_offset": 0} for t, p in keys]
    await connection.execute(_upsert(dialect, schema.positions).on_conflict_do_nothing(), rows)
    current = {}
    for key in keys:
        query = select(schema.positions.c.next_offset).where(_position_is(key)).with_for_update()
        current[key] = (await connection.execute(query)).scalar_one()
    return current


@dataclass
class _LoadedWallet:
    projection: WalletProjection
    exists: bool


@dataclass
class _Loaded:
    """One table's read model as loaded for a batch, and which of its rows exist already."""

    projection: StreamProjection
    view_exists: bool
    accounts: set[str]
    looked_up: set[str] = field(default_factory=set)
    """the players whose accounts were looked for (found or not) beside the seated ones"""
    rounds: set[int] = field(default_factory=set)
    players: set[tuple[int, str]] = field(default_factory=set)


def _as_stored(raw: bytes, envelope: WireEnvelope) -> WireEnvelope:
    """The event as the store holds its texts: its event's (``data``) ``store.as_stored``, one
    to one (a NUL as U+FFFD, a U+FFFD as U+FFFD and a mark), the envelope's own fields (the
    stream id: the keys of its tables) a NUL as U+FFFD (``store.nul_replaced``). The
    projection folds it so, as the rows it loads again in the next batch hold it: folded with
    the NUL, a player id of an older log named an account the next batch's projection, loaded
    from the rows, did not have (``ProjectionError``, the partition stuck for good). The
    ``events`` table keeps the envelope as it came."""
    if b"\\u" not in raw and _FFFD not in raw:  # a NUL or the mark is written escaped
        return envelope
    document = json.loads(raw)
    if not isinstance(document, dict):
        return envelope
    stored = {
        key: stored_texts(value) if key == "data" else nul_replaced(value)
        for key, value in document.items()
    }
    try:
        return wire.decode(json.dumps(stored).encode())
    except ValidationError as error:
        if any(found["type"] != "string_too_long" for found in error.errors()):
            raise
    # An older log's text (an operator's reason of a ``SeatLeft``) with U+FFFDs, longer than
    # its field allows once escaped, stopped the partition for good: such a text, longer than
    # any id, is kept as the log has it. Only then: the rows folded before keep their texts.
    stored["data"] = stored_texts(document["data"], long_as_logged=True)
    return wire.decode(json.dumps(stored).encode())


_FFFD = "\ufffd".encode()


class _Batch:
    def __init__(self, connection: AsyncConnection) -> None:
        self.connection = connection
        self.dialect = connection.dialect.name
        self.streams: dict[str, _Loaded] = {}
        self.wallets: dict[str, _LoadedWallet] = {}
        self.events: list[dict[str, Any]] = []
        self.folded: dict[tuple[str, int], WireEnvelope] = {}
        self.decoded: dict[tuple[str, int, int], WireEnvelope] = {}
        """the records ``load`` read, by (topic, partition, offset)"""
        self.looked_up: set[tuple[str, int]] = set()
        """the rounds (stream, number) ``load`` looked for, found or not"""
        self.stored: dict[tuple[str, int, int], tuple[WireEnvelope, set[str]]] = {}
        """the table events ``load`` read, as the store holds their texts (``_as_stored``),
        and those texts (``_texts_of``), by record"""

    async def load(self, records: Sequence[Record]) -> None:
        """Read what folding ``records`` needs from the store in a few statements, not a
        few a stream and a round (on PostgreSQL a batch of 500 events looked up its tables,
        their accounts and its rounds in about 50 round trips): the tables, their accounts,
        the wallets, and the rounds their events continue. What it does not foresee (a
        round a deposit is recalled in) ``fold`` still reads as it comes."""
        envelopes: dict[tuple[str, int, int], tuple[bytes, WireEnvelope]] = {}
        for record in records:
            try:
                envelope = wire.decode(record.value)
            except Exception:  # even a RecursionError: ``fold`` raises it again,
                continue  # naming the record (``failed_at``), the records before it folded
            place = (record.topic, record.partition, record.offset)
            self.decoded[place] = envelope
            envelopes[place] = (record.value, envelope)
        streams = {e.stream_id for _, e in envelopes.values()}
        streams -= set(self.streams) | set(self.wallets)
        named: dict[str, set[str]] = {}
        for place, (raw, envelope) in envelopes.items():
            if envelope.stream_id in streams and not is_wallet_stream(envelope.stream_id):
                try:
                    stored = _as_stored(raw, envelope)
                except Exception:  # as a record that does not decode: ``fold`` raises it
                    continue  # again, naming the record (``failed_at``); it looks up the rest
                texts = _texts_of(stored)
                self.stored[place] = (stored, texts)
                named.setdefault(envelope.stream_id, set()).update(texts)
        # A stored row that does not read is left to ``fold``, which reads it again as it
        # reaches the first record needing it and names that record (``failed_at``).
        await self._load_streams(
            sorted(s for s in streams if not is_wallet_stream(s)), True, named=named
        )
        await self._load_wallets(sorted(s for s in streams if is_wallet_stream(s)), True)
        rounds = {
            (e.stream_id, e.data.round)
            for _, e in envelopes.values()
            if isinstance(e.data, ev.RoundEvent) and not isinstance(e.data, ev.RoundOpened)
        }
        await self._load_rounds(sorted(rounds - self.looked_up), lenient=True)

    async def fold(self, record: Record) -> str | None:
        """Fold one record in; its event type, or None for a duplicate of an earlier event."""
        try:
            decoded = self.decoded.pop((record.topic, record.partition, record.offset), None)
            envelope = decoded or wire.decode(record.value)
        except (ValueError, KeyError, TypeError) as error:
            raise ProjectionError(
                f"{record.topic}[{record.partition}] offset {record.offset} is not an event "
                f"envelope: {error}"
            ) from error
        projection: StreamProjection | WalletProjection
        if is_wallet_stream(envelope.stream_id):
            projection = (await self._wallet(envelope.stream_id)).projection
        else:
            projection = (await self._stream(envelope.stream_id)).projection
        if envelope.sequence <= projection.view.last_sequence:
            # A duplicate only if it is the very event folded in at that place: event ids
            # derive from the place, so the id alone would not tell two events apart.
            earlier = await self._folded(envelope.stream_id, envelope.sequence)
            if earlier is None:
                raise ProjectionError(
                    f"{envelope.stream_id} event {envelope.sequence} is {envelope.event_id}; "
                    f"the store is past that place but holds no event there"
                )
            if earlier != envelope:
                same = earlier.event_id == envelope.event_id
                raise ProjectionError(
                    f"{envelope.stream_id} event {envelope.sequence} is {envelope.event_id}, "
                    f"but {earlier.event_id} was folded in at that place"
                    + (" with other contents" if same else "")
                )
            return None
        event = envelope.data
        if isinstance(event, ev.RoundEvent) and not isinstance(event, ev.RoundOpened):
            await self._load_round(self.streams[envelope.stream_id], event.round)
        elif isinstance(projection, StreamProjection):
            # a deposit or a disconnection during a round goes in its record (``recalled_in``)
            number = recalled_in(projection.view, event)
            if number is not None:
                await self._load_round(self.streams[envelope.stream_id], number)
        read = self.stored.pop((record.topic, record.partition, record.offset), None)
        stored = _as_stored(record.value, envelope) if read is None else read[0]
        if isinstance(projection, StreamProjection):
            texts = _texts_of(stored) if read is None else read[1]
            await self._load_accounts(self.streams[envelope.stream_id], texts)
        projection.apply(stored)
        self.events.append(
            {
                "stream_id": envelope.stream_id,
                "sequence": envelope.sequence,
                "event_id": envelope.event_id,
                "type": envelope.type,
                "round": event.round if isinstance(event, ev.RoundEvent) else None,
                "occurred_at": utc(envelope.occurred_at),
                "topic": record.topic,
                "kafka_partition": record.partition,
                "kafka_offset": record.offset,
                "envelope": wire.encode(envelope).decode(),
            }
        )
        self.folded[(envelope.stream_id, envelope.sequence)] = envelope
        return envelope.type

    async def _folded(self, stream_id: str, sequence: int) -> WireEnvelope | None:
        """The event folded in at that place of the stream, as it reads now (upcast)."""
        pending = self.folded.get((stream_id, sequence))
        if pending is not None:
            return pending
        query = select(schema.events.c.envelope).where(
            schema.events.c.stream_id == stream_id, schema.events.c.sequence == sequence
        )
        stored = (await self.connection.execute(query)).scalar_one_or_none()
        if stored is None:
            return None
        try:
            return wire.decode(stored.encode())
        except (ValueError, KeyError, TypeError) as error:  # pydantic's errors are ValueErrors
            raise ProjectionError(
                f"{stream_id} event {sequence} as stored cannot be read: {error}"
            ) from error

    async def _wallet(self, stream_id: str) -> _LoadedWallet:
        if stream_id not in self.wallets:
            await self._load_wallets([stream_id])
        return self.wallets[stream_id]

    async def _load_wallets(self, stream_ids: Sequence[str], lenient: bool = False) -> None:
        """``lenient``: a wallet whose row does not read is left unloaded, not raised."""
        if not stream_ids:
            return
        w = schema.wallets
        rows = {}
        for keys in in_chunks(sorted(_as_keys(stream_ids))):
            query = select(w).where(w.c.stream_id.in_(keys))
            rows.update(
                {row.stream_id: row for row in (await self.connection.execute(query)).all()}
            )
        for stream_id in stream_ids:
            row = rows.get(nul_replaced(stream_id))
            if row is None:
                loaded = _LoadedWallet(WalletProjection.new(stream_id), exists=False)
            else:
                values = row._asdict()
                values.pop("in_transit")
                try:
                    view = WalletView.model_validate(values)
                except ValueError:
                    if lenient:
                        continue
                    raise
                loaded = _LoadedWallet(WalletProjection(view), True)
            self.wallets[stream_id] = loaded

    async def _stream(self, stream_id: str) -> _Loaded:
        if stream_id not in self.streams:
            await self._load_streams([stream_id])
        return self.streams[stream_id]

    async def _load_streams(
        self,
        stream_ids: Sequence[str],
        lenient: bool = False,
        named: Mapping[str, set[str]] | None = None,
    ) -> None:
        """The tables' views and accounts, a few statements for all of them: the accounts
        of the players seated there and of those ``named`` (``_texts_of`` their events),
        not every player who ever sat there (``accounts`` keeps their rows for good: a
        table 50,000 players had sat at took about a second a batch to read theirs).
        ``lenient``: a table whose rows do not read is left unloaded, not raised."""
        if not stream_ids:
            return
        t = schema.table_views
        views: dict[str, Any] = {}
        for keys in in_chunks(sorted(_as_keys(stream_ids))):
            query = select(t.c.stream_id, t.c.view).where(t.c.stream_id.in_(keys))
            for row in (await self.connection.execute(query)).all():
                views[row.stream_id] = row.view
        wanted = {
            nul_replaced(stream_id): players
            for stream_id, players in (named or {}).items()
            if nul_replaced(stream_id) in views
        }
        accounts = await self._account_rows(sorted(views), wanted)
        for stream_id in stream_ids:
            key = nul_replaced(stream_id)
            view = views.get(key)
            if view is None:
                loaded = _Loaded(StreamProjection.new(stream_id), view_exists=False, accounts=set())
            else:
                try:
                    found = {r["player_id"]: Account.model_validate(r) for r in accounts[key]}
                    projection = StreamProjection(TableView.model_validate(view), found)
                except ValueError:
                    if lenient:
                        continue
                    raise
                loaded = _Loaded(projection, view_exists=True, accounts=set(found))
                loaded.looked_up = set(wanted.get(key, ()))
            self.streams[stream_id] = loaded

    async def _account_rows(
        self, seated_at: Sequence[str], named: Mapping[str, set[str]]
    ) -> dict[str, list[dict[str, Any]]]:
        """The rows of the accounts of the players seated at the tables ``seated_at`` and
        of the players ``named`` at each table (ids as the store holds them), by table."""
        a = schema.accounts
        rows: dict[str, dict[str, dict[str, Any]]] = {key: {} for key in seated_at}
        for keys in in_chunks(seated_at):
            for r in (await self.connection.execute(schema.seated_accounts(keys))).all():
                rows[r.stream_id][r.player_id] = r._asdict()
        pairs = sorted((key, player) for key, players in named.items() for player in players)
        for wanted in in_chunks(pairs):
            query = one_of(select(a), a.c.stream_id, a.c.player_id, wanted, self.dialect)
            for r in (await self.connection.execute(query)).all():
                rows.setdefault(r.stream_id, {})[r.player_id] = r._asdict()
        return {key: list(found.values()) for key, found in rows.items()}

    async def _load_accounts(self, loaded: _Loaded, texts: set[str]) -> None:
        """The accounts of the players an event names, where the batch has not looked them
        up yet: a fold asks only for those (``StreamProjection.account``) and the seated."""
        if not loaded.view_exists:
            return  # no stored account: a table opened in this batch
        missing = texts - loaded.looked_up - loaded.projection.accounts.keys()
        if not missing:
            return
        key = nul_replaced(loaded.projection.view.stream_id)
        found = (await self._account_rows([], {key: missing})).get(key, [])
        loaded.looked_up |= missing
        for row in found:
            if row["player_id"] not in loaded.projection.accounts:
                loaded.projection.accounts[row["player_id"]] = Account.model_validate(row)
                loaded.accounts.add(row["player_id"])

    async def _load_round(self, loaded: _Loaded, number: int) -> None:
        stream_id = loaded.projection.view.stream_id
        if number in loaded.projection.rounds or (stream_id, number) in self.looked_up:
            return  # a round not found is the projection's to report
        await self._load_rounds([(stream_id, number)])

    async def _load_rounds(self, keys: Sequence[tuple[str, int]], *, lenient: bool = False) -> None:
        """The rounds' records and their players' lines, two statements for all of them.
        ``lenient``: a round whose rows do not read is left unloaded and not looked up (its
        first event's fold reads it again, and raises), not raised."""
        self.looked_up.update(keys)
        keys = [(stream_id, number) for stream_id, number in keys if stream_id in self.streams]
        if not keys:
            return
        r, rp = schema.rounds, schema.round_players
        stored: dict[tuple[str, int], list[_Loaded]] = {}
        for stream_id, number in keys:  # as the store holds the id (``nul_replaced``)
            stored.setdefault((nul_replaced(stream_id), number), []).append(self.streams[stream_id])
        records: dict[tuple[str, int], Any] = {}
        lines: dict[tuple[str, int], list[dict[str, Any]]] = {}
        for wanted in in_chunks(sorted(stored)):
            columns = select(r.c.stream_id, r.c.round, r.c.record)
            query = one_of(columns, r.c.stream_id, r.c.round, wanted, self.dialect)
            for row in (await self.connection.execute(query)).all():
                records[(row.stream_id, row.round)] = row.record
        for wanted in in_chunks(sorted(records)):
            query = one_of(select(rp), rp.c.stream_id, rp.c.round, wanted, self.dialect)
            for line in (await self.connection.execute(query)).all():
                lines.setdefault((line.stream_id, line.round), []).append(line._asdict())
        unread: set[tuple[str, int]] = set()
        for key, record in records.items():
            number = key[1]
            for loaded in stored[key]:
                if number in loaded.projection.rounds:
                    continue  # opened in this batch: the record in memory is newer
                try:
                    read = RoundRecord.model_validate(record)
                    players = [RoundPlayer.model_validate(row) for row in lines.get(key, [])]
                except ValueError:
                    if not lenient:
                        raise
                    unread.add(key)
                    continue
                loaded.projection.rounds[number] = read
                loaded.rounds.add(number)
                for player in players:
                    loaded.projection.players[(number, player.player_id)] = player
                    loaded.players.add((number, player.player_id))
        self.looked_up -= {(s, n) for s, n in keys if (nul_replaced(s), n) in unread}

    def _rows(self) -> _Rows:
        """Where ``flush`` puts the batch's rows before writing them."""
        return _Rows()

    async def flush(self) -> None:
        """Write what the batch changed: each table's new rows in one INSERT and its changed
        rows in one UPDATE run for all of them (``_Rows``), not a statement a row (a batch of
        500 events made about 190 round trips on PostgreSQL)."""
        rows = self._rows()
        for loaded in self.streams.values():
            self._save(loaded, rows)
        for wallet in self.wallets.values():
            values = wallet.projection.view.model_dump(mode="json", exclude={"updated_at"})
            values["updated_at"] = wallet.projection.view.updated_at
            values["in_transit"] = wallet.projection.view.in_transit
            key = {"stream_id": values.pop("stream_id")}
            rows.put(schema.wallets, key, values, exists=wallet.exists)
        await rows.write(self.connection)
        if self.events:
            await self.connection.execute(insert(schema.events), self.events)

    def games(self) -> dict[tuple[str, str], GameDay]:
        summed: dict[tuple[str, str], GameDay] = {}
        for loaded in self.streams.values():
            view = loaded.projection.view
            for day in loaded.projection.days.values():
                summed.setdefault((view.variant or "", view.currency or ""), GameDay()).add(day)
        return summed

    @staticmethod
    def _save(loaded: _Loaded, rows: _Rows) -> None:
        projection = loaded.projection
        view = projection.view
        stream_id = view.stream_id
        rows.put(
            schema.table_views,
            {"stream_id": stream_id},
            {
                "variant": view.variant,
                "currency": view.currency,
                "last_sequence": view.last_sequence,
                "updated_at": view.updated_at,
                "view": view.model_dump(mode="json"),
            },
            exists=loaded.view_exists,
        )
        for player_id in sorted(projection.accounts_dirty):
            values = projection.accounts[player_id].model_dump()
            key = {"stream_id": values.pop("stream_id"), "player_id": values.pop("player_id")}
            rows.put(schema.accounts, key, values, exists=player_id in loaded.accounts)
        for number in sorted(projection.rounds_dirty):
            record = projection.rounds[number]
            rows.put(
                schema.rounds,
                {"stream_id": stream_id, "round": number},
                {
                    "round_id": record.round_id,
                    "variant": record.variant,
                    "currency": record.currency,
                    "status": record.status,
                    "opened_at": record.opened_at,
                    "closed_at": record.closed_at,
                    "first_sequence": record.first_sequence,
                    "last_sequence": record.last_sequence,
                    "record": record.stored(),
                },
                exists=number in loaded.rounds,
            )
        for number, player_id in sorted(projection.players_dirty):
            values = projection.players[(number, player_id)].model_dump()
            key = {k: values.pop(k) for k in ("stream_id", "round", "player_id")}
            exists = (number, player_id) in loaded.players
            rows.put(schema.round_players, key, values, exists=exists)
        for day, totals in sorted(projection.days.items()):
            rows.add_day(stream_id, view.variant or "", view.currency or "", day, totals)


MAX_NAMED_TEXT = 256
"""The longest text of an event taken for a player's id (``_texts_of``): ids are 128
characters at most; a sealed shoe's text is thousands."""


def _texts_of(stored: WireEnvelope) -> set[str]:
    """Every text in an event as the store holds its texts (``_as_stored``), keys too: the
    ids of the players whose accounts its fold asks for are among them, however the event
    names them (its ``player_id``, a settlement's ``results``, a void's ``returns``). More
    than those (a card, a reason) only looks up accounts that are not there."""
    found: set[str] = set()
    pending: list[Any] = [stored.data]
    while pending:
        value = pending.pop()
        if isinstance(value, str):
            if len(value) <= MAX_NAMED_TEXT:
                found.add(value)
        elif isinstance(value, BaseModel):
            pending.extend(value.__dict__.values())
        elif isinstance(value, dict):
            pending.extend(value)
            pending.extend(value.values())
        elif isinstance(value, list | tuple | set | frozenset):
            pending.extend(value)
    return found


def _as_keys(stream_ids: Iterable[str]) -> set[str]:
    """The ids as the store holds them (a NUL as ``NUL_STORED_AS``)."""
    return {nul_replaced(stream_id) for stream_id in stream_ids}


KEY_PREFIX = "key_"
"""The names of an UPDATE's key parameters, apart from the columns it sets."""


class _Rows:
    """The rows one batch writes, gathered by table and written with one statement a table,
    kind and set of columns (a table's rows have the same columns: one statement): the new
    rows in one INSERT (executemany: one multi-row INSERT on PostgreSQL), the changed rows in
    one UPDATE executed for each (asyncpg sends them in one go), the batch's game days in one
    upsert (a stream's days are distinct keys: no row is upserted twice in one statement).
    The tables in ``schema.READ_MODEL`` order."""

    def __init__(self) -> None:
        self.inserts: dict[tuple[Table, tuple[str, ...]], list[dict[str, Any]]] = {}
        """new rows by table and columns"""
        self.updates: dict[tuple[Table, tuple[str, ...], tuple[str, ...]], list[dict[str, Any]]]
        self.updates = {}
        """changed rows by table, key columns and columns set"""
        self.days: list[dict[str, Any]] = []

    def put(
        self, table: Table, key: dict[str, Any], values: dict[str, Any], *, exists: bool
    ) -> None:
        # One statement serves the rows of the same columns only: executemany makes it from
        # the first row's, and a later row's other column was dropped without a word.
        if exists:
            keyed = {f"{KEY_PREFIX}{name}": value for name, value in key.items()}
            group = (table, tuple(key), tuple(values))
            self.updates.setdefault(group, []).append({**keyed, **values})
        else:
            row = {**key, **values}
            self.inserts.setdefault((table, tuple(row)), []).append(row)

    def add_day(
        self, stream_id: str, variant: str, currency: str, day: date, totals: GameDay
    ) -> None:
        """The batch's figures added to the table's row of that day. A sum, so the row is
        the same whatever the batches were (a rebuild from offset 0 compares equal)."""
        self.days.append(
            {"stream_id": stream_id, "day": day, "variant": variant, "currency": currency}
            | asdict(totals)
        )

    async def write(self, connection: AsyncConnection) -> None:
        for table in schema.READ_MODEL:
            for (inserted, _), new in self.inserts.items():
                if inserted is table:
                    await connection.execute(insert(table), new)
            for (updated, key, _), changed in self.updates.items():
                if updated is table:
                    where = [table.c[name] == bindparam(f"{KEY_PREFIX}{name}") for name in key]
                    await connection.execute(update(table).where(*where), changed)
        if self.days:
            table = schema.game_days
            sums = [name for name in self.days[0] if name not in GAME_DAY_KEY]
            statement = _upsert(connection.dialect.name, table)
            await connection.execute(
                statement.on_conflict_do_update(
                    index_elements=[table.c.stream_id, table.c.day],
                    set_={name: table.c[name] + statement.excluded[name] for name in sums},
                ),
                self.days,
            )


GAME_DAY_KEY = ("stream_id", "day", "variant", "currency")
"""The columns of a ``game_days`` row that are not summed."""


ProjectionWriter.batch = _Batch
