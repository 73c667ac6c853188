"""The projection writer as it was at 6ea4ece (a statement a row; each table, wallet and round
read as the fold reached it), kept verbatim below this docstring (but for ``_as_stored``) as
the reference the batched writer is compared with (``fold_equivalence``): in the tree, not
read from git, so that the suite runs from any clone, shallow or squashed. Not used by the
service."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import date
from typing import Any, Protocol

from sqlalchemy import Table, and_, insert, select, update
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
from blackjack.projections.projector import StreamProjection, recalled_in
from blackjack.projections.revision import check_schema
from blackjack.projections.store import ProjectionStore
from blackjack.projections.views import (
    Account,
    GameDay,
    ProjectionError,
    RoundPlayer,
    RoundRecord,
    TableView,
)
from blackjack.projections.wallets import WalletProjection, WalletView
from blackjack.projections.writer import _as_stored as _stored_as_today

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
            batch = _Batch(connection)
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
    rounds: set[int] = field(default_factory=set)
    players: set[tuple[int, str]] = field(default_factory=set)


def _as_stored(raw: bytes, envelope: WireEnvelope) -> WireEnvelope:
    """Not verbatim: the stored form of an event's texts is today's writer's
    (``writer._as_stored``: a U+FFFD escaped since, so that it and a NUL are two keys), not
    6ea4ece's (a NUL as U+FFFD only); what is compared is the batching, not that form."""
    return _stored_as_today(raw, envelope)


class _Batch:
    def __init__(self, connection: AsyncConnection) -> None:
        self.connection = connection
        self.streams: dict[str, _Loaded] = {}
        self.wallets: dict[str, _LoadedWallet] = {}
        self.events: list[dict[str, Any]] = []
        self.folded: dict[tuple[str, int], WireEnvelope] = {}

    async def fold(self, record: Record) -> str | None:
        """Fold one record in; its event type, or None for a duplicate of an earlier event."""
        try:
            envelope = wire.decode(record.value)
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
        projection.apply(_as_stored(record.value, envelope))
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
        loaded = self.wallets.get(stream_id)
        if loaded is not None:
            return loaded
        w = schema.wallets
        row = (await self.connection.execute(select(w).where(w.c.stream_id == stream_id))).first()
        if row is None:
            loaded = _LoadedWallet(WalletProjection.new(stream_id), exists=False)
        else:
            values = row._asdict()
            values.pop("in_transit")
            loaded = _LoadedWallet(WalletProjection(WalletView.model_validate(values)), True)
        self.wallets[stream_id] = loaded
        return loaded

    async def _stream(self, stream_id: str) -> _Loaded:
        loaded = self.streams.get(stream_id)
        if loaded is not None:
            return loaded
        t, a = schema.table_views, schema.accounts
        row = (
            await self.connection.execute(select(t.c.view).where(t.c.stream_id == stream_id))
        ).first()
        if row is None:
            loaded = _Loaded(StreamProjection.new(stream_id), view_exists=False, accounts=set())
        else:
            rows = (
                await self.connection.execute(select(a).where(a.c.stream_id == stream_id))
            ).all()
            accounts = {r.player_id: Account.model_validate(r._asdict()) for r in rows}
            projection = StreamProjection(TableView.model_validate(row.view), accounts)
            loaded = _Loaded(projection, view_exists=True, accounts=set(accounts))
        self.streams[stream_id] = loaded
        return loaded

    async def _load_round(self, loaded: _Loaded, number: int) -> None:
        projection = loaded.projection
        if number in projection.rounds:
            return
        stream_id = projection.view.stream_id
        r, rp = schema.rounds, schema.round_players
        query = select(r.c.record).where(r.c.stream_id == stream_id, r.c.round == number)
        row = (await self.connection.execute(query)).first()
        if row is None:
            return  # the projection reports the unknown round
        projection.rounds[number] = RoundRecord.model_validate(row.record)
        loaded.rounds.add(number)
        query = select(rp).where(rp.c.stream_id == stream_id, rp.c.round == number)
        for player in (await self.connection.execute(query)).all():
            projection.players[(number, player.player_id)] = RoundPlayer.model_validate(
                player._asdict()
            )
            loaded.players.add((number, player.player_id))

    async def flush(self) -> None:
        for loaded in self.streams.values():
            await self._save(loaded)
        for wallet in self.wallets.values():
            values = wallet.projection.view.model_dump(mode="json", exclude={"updated_at"})
            values["updated_at"] = wallet.projection.view.updated_at
            values["in_transit"] = wallet.projection.view.in_transit
            key = {"stream_id": values.pop("stream_id")}
            await self._put(schema.wallets, key, values, exists=wallet.exists)
        if self.events:
            await self.connection.execute(insert(schema.events), self.events)

    def games(self) -> dict[tuple[str, str], GameDay]:
        summed: dict[tuple[str, str], GameDay] = {}
        for loaded in self.streams.values():
            view = loaded.projection.view
            for day in loaded.projection.days.values():
                summed.setdefault((view.variant or "", view.currency or ""), GameDay()).add(day)
        return summed

    async def _save(self, loaded: _Loaded) -> None:
        projection = loaded.projection
        view = projection.view
        stream_id = view.stream_id
        await self._put(
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
            await self._put(schema.accounts, key, values, exists=player_id in loaded.accounts)
        for number in sorted(projection.rounds_dirty):
            record = projection.rounds[number]
            await self._put(
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
            await self._put(schema.round_players, key, values, exists=exists)
        for day, totals in sorted(projection.days.items()):
            await self._add_day(stream_id, view.variant or "", view.currency or "", day, totals)

    async def _add_day(
        self, stream_id: str, variant: str, currency: str, day: date, totals: GameDay
    ) -> None:
        """Adds the batch's figures to the table's row of that day. A sum, so the row is the
        same whatever the batches were (a rebuild from offset 0 compares equal)."""
        sums = asdict(totals)
        table = schema.game_days
        statement = _upsert(self.connection.dialect.name, table).values(
            stream_id=stream_id, day=day, variant=variant, currency=currency, **sums
        )
        await self.connection.execute(
            statement.on_conflict_do_update(
                index_elements=[table.c.stream_id, table.c.day],
                set_={name: table.c[name] + statement.excluded[name] for name in sums},
            )
        )

    async def _put(
        self, table: Table, key: dict[str, Any], values: dict[str, Any], *, exists: bool
    ) -> None:
        if exists:
            where = [table.c[name] == value for name, value in key.items()]
            await self.connection.execute(update(table).where(*where).values(**values))
        else:
            await self.connection.execute(insert(table).values(**key, **values))
