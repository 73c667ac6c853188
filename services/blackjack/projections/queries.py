"""Reading the read model: what the query API, replay and the audit ask of the store."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import AsyncIterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError
from sqlalchemy import (
    BigInteger,
    Boolean,
    ColumnElement,
    Select,
    and_,
    cast,
    exists,
    func,
    literal,
    not_,
    or_,
    select,
    true,
    tuple_,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from blackjack.domain.decided_by import DecisionsInOrder
from blackjack.domain.rules import PRESETS, every_term, with_later_terms
from blackjack.messages import wire
from blackjack.projections import schema
from blackjack.projections.ids import MAX_ROUND, utc
from blackjack.projections.pairs import one_of
from blackjack.projections.views import RoundRecord, TableView

MAX_PAGE = 100
SIT_OUT_FIELDS = ("sitting_out", "rounds_sat_out")
MONEY_FIELDS = (
    "available",
    "in_play",
    "deposited",
    "withdrawn",
    "cashed_out",
    "wagered",
    "won",
    "lost",
)


def iso(moment: datetime | None) -> str | None:
    return None if moment is None else utc(moment).isoformat().replace("+00:00", "Z")


MAX_WALLET_TABLES = 1000
"""The most table accounts one wallet answer lists (``limit``); the rest page by cursor."""


async def wallet(
    connection: AsyncConnection,
    player_id: str,
    limit: int = MAX_WALLET_TABLES,
    cursor: str | None = None,
) -> dict[str, Any] | None:
    """The player's money: the wallet stream (money between tables), the table accounts in
    (currency, stream id) order, ``limit`` at most after ``cursor`` (``next`` continues the
    list: a player who played at thousands of tables got every one in one answer), and per
    currency the totals over every table, summed by the database."""
    a, w = schema.accounts, schema.wallets
    query = (
        select(a)
        .where(a.c.player_id == player_id)
        .order_by(a.c.currency, a.c.stream_id)
        .limit(limit + 1)
    )
    if cursor is not None:
        query = query.where(tuple_(a.c.currency, a.c.stream_id) > tuple_(*_wallet_after(cursor)))
    rows = (await connection.execute(query)).all()
    found = (await connection.execute(select(w).where(w.c.player_id == player_id))).first()
    summed = [cast(func.sum(a.c[name]), BigInteger).label(name) for name in MONEY_FIELDS]
    totals_query = (
        select(a.c.currency, *summed, cast(func.sum(a.c.rounds), BigInteger).label("rounds"))
        .where(a.c.player_id == player_id)
        .group_by(a.c.currency)
        .order_by(a.c.currency)
    )
    totals = [row._asdict() for row in (await connection.execute(totals_query)).all()]
    if not totals and found is None:
        return None
    tables = []
    for row in rows[:limit]:
        table = row._asdict()
        # sitting out is the table answer's; the last payout's time the money in transit's
        for name in ("player_id", *SIT_OUT_FIELDS, "paid_out_at"):
            del table[name]
        tables.append(table)
    wallet_stream = None
    if found is not None:
        wallet_stream = found._asdict()
        del wallet_stream["player_id"]
        del wallet_stream["cashed_in_from"]  # one number a table ever cashed out: the alert's
        wallet_stream["updated_at"] = iso(found.updated_at)
    last = rows[limit - 1] if len(rows) > limit else None
    return {
        "player_id": player_id,
        "wallet": wallet_stream,
        "tables": tables,
        "totals": totals,
        "next": None if last is None else _wallet_cursor(last.currency, last.stream_id),
    }


def _check_storable(*texts: str) -> None:
    """No store holds a NUL (PostgreSQL's text cannot) nor a lone surrogate, which JSON's
    ``\\ud800`` decodes to and UTF-8 cannot write: on PostgreSQL asyncpg failed to encode it,
    which read as the store being down (503) rather than a cursor refused (400)."""
    for text in texts:
        if "\x00" in text:
            raise ValueError("NUL")
        text.encode()  # a UnicodeEncodeError is a ValueError


class BadCursor(ValueError):
    """A page's ``cursor`` this API did not hand out: the caller's (400), where any other
    ``ValueError`` while reading (a stored row the models refuse: pydantic's
    ``ValidationError`` is one) is the service's (500)."""

    def __init__(self) -> None:
        super().__init__("the cursor is not one this API handed out")


def _wallet_cursor(currency: str, stream_id: str) -> str:
    raw = json.dumps([currency, stream_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _cursor_items(cursor: str, count: int) -> list[Any]:
    """The ``count`` items of the JSON list a cursor of this API holds (``_wallet_cursor``,
    ``encode_cursor``); anything else raises. A JSON object or text of ``count`` keys or
    characters unpacked as the list would (before, a wallet page took them)."""
    raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
    items = json.loads(raw)
    if not (type(items) is list and len(items) == count):
        raise TypeError
    return items


def _wallet_after(cursor: str) -> tuple[str, str]:
    try:
        currency, stream_id = _cursor_items(cursor, 2)
        if not (isinstance(currency, str) and isinstance(stream_id, str)):
            raise TypeError
        _check_storable(currency, stream_id)
        return currency, stream_id
    except (binascii.Error, ValueError, TypeError, RecursionError) as error:
        raise BadCursor from error


def encode_cursor(started_at: datetime, stream_id: str, number: int) -> str:
    raw = json.dumps([iso(started_at), stream_id, number], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, str, int]:
    try:
        when, stream_id, number = _cursor_items(cursor, 3)
        if not isinstance(when, str) or not isinstance(stream_id, str) or type(number) is not int:
            raise TypeError
        _check_storable(stream_id)
        if not 1 <= number <= MAX_ROUND:
            raise ValueError
        return utc(datetime.fromisoformat(when)), stream_id, number
    except (binascii.Error, ValueError, TypeError, OverflowError, RecursionError) as error:
        raise BadCursor from error


async def player_rounds(
    connection: AsyncConnection, player_id: str, limit: int, cursor: str | None
) -> dict[str, Any] | None:
    """A player's rounds, newest first, ``limit`` at a time; ``next`` continues the list."""
    rp, r = schema.round_players, schema.rounds
    a, w = schema.accounts, schema.wallets
    seated = exists().where(a.c.player_id == player_id)
    funded = exists().where(w.c.player_id == player_id)
    if not (await connection.execute(select(or_(seated, funded)))).scalar_one():
        return None  # no seat and no wallet: an id the platform never used
    key = tuple_(rp.c.started_at, rp.c.stream_id, rp.c.round)
    query = (
        select(rp, r.c.round_id, r.c.variant, r.c.currency, r.c.status, r.c.closed_at)
        .join(r, (r.c.stream_id == rp.c.stream_id) & (r.c.round == rp.c.round))
        .where(rp.c.player_id == player_id)
        .order_by(rp.c.started_at.desc(), rp.c.stream_id.desc(), rp.c.round.desc())
        .limit(limit + 1)
    )
    if cursor is not None:
        query = query.where(key < tuple_(*decode_cursor(cursor)))
    rows = (await connection.execute(query)).all()
    records = await _open_records(connection, rows[:limit])
    page = [
        {
            "round_id": row.round_id,
            "stream_id": row.stream_id,
            "round": row.round,
            "variant": row.variant,
            "currency": row.currency,
            "status": row.status,
            "started_at": iso(row.started_at),
            "closed_at": iso(row.closed_at),
            "balance_before": row.balance_before,
            "balance_after": row.balance_after,
            **money_in_round(row, records.get((row.stream_id, row.round)), player_id),
            "deposited": row.deposited,
            "withdrawn": row.withdrawn,
        }
        for row in rows[:limit]
    ]
    more = len(rows) > limit
    last = rows[limit - 1] if more else None
    return {
        "player_id": player_id,
        "rounds": page,
        "next": encode_cursor(last.started_at, last.stream_id, last.round) if last else None,
    }


async def round_detail(
    connection: AsyncConnection, stream_id: str, number: int
) -> dict[str, Any] | None:
    """One game cycle in full: the record, and each player's balance before and after."""
    r, rp = schema.rounds, schema.round_players
    query = select(r.c.record).where(r.c.stream_id == stream_id, r.c.round == number)
    record = (await connection.execute(query)).scalar_one_or_none()
    if record is None:
        return None
    # Through the model, as a table's view: a record stored by an older release lacks the
    # fields added since (``dealer.upcard``), which the answer's document says are there.
    recorded = RoundRecord.model_validate(record)
    open_round = recorded if recorded.status in OPEN else None
    query = (
        select(rp).where(rp.c.stream_id == stream_id, rp.c.round == number).order_by(rp.c.player_id)
    )
    players = [
        {
            "player_id": row.player_id,
            "started_at": iso(row.started_at),
            "balance_before": row.balance_before,
            "balance_after": row.balance_after,
            **money_in_round(row, open_round, row.player_id),
            "deposited": row.deposited,
            "withdrawn": row.withdrawn,
        }
        for row in (await connection.execute(query)).all()
    ]
    record = recorded.model_dump(mode="json")
    log = await _who_decided(connection, stream_id, record["log"])
    return {**record, "log": log, "players": players}


OPEN = ("betting", "playing")
"""A round's status while it is open (``schema.OPEN_ROUND``)."""


def money_in_round(row: Any, open_round: RoundRecord | None, player_id: str) -> dict[str, int]:
    """A player's ``wagered``, ``paid`` and ``net`` in a round: the stored line's, or, while the
    round is open, as its record holds them (``RoundRecord.money_of``), which the fold also
    writes into the line at each event (``StreamProjection._recount``). Read from the record,
    a line an older release stored while the round played (its stakes or early payouts not
    counted) is right before the round's next event."""
    if open_round is None:
        return {"wagered": row.wagered, "paid": row.paid, "net": row.net}
    wagered, paid, settled = open_round.money_of(player_id)
    return {"wagered": wagered, "paid": paid, "net": paid - settled}


async def _open_records(
    connection: AsyncConnection, rows: Sequence[Any]
) -> dict[tuple[str, int], RoundRecord]:
    """The records of the open rounds among a page of the betting history (few: a player's
    rounds in play), by (stream, round)."""
    r = schema.rounds
    keys = [(row.stream_id, row.round) for row in rows if row.status in OPEN]
    if not keys:
        return {}
    columns = select(r.c.stream_id, r.c.round, r.c.record)
    query = one_of(columns, r.c.stream_id, r.c.round, keys, connection.dialect.name)
    return {
        (row.stream_id, row.round): RoundRecord.model_validate(row.record)
        for row in (await connection.execute(query)).all()
    }


OTHERS_MONEY_MOVES = frozenset({"FundsDeposited", "TransferDeclined", "FundsWithdrawn"})
"""Another player's money paid in or taken out at the table, or a buy-in of theirs declined
(its amount, transfer id and why): no part of the game a player sees played, so left out of
their view of a round."""


async def player_round(
    connection: AsyncConnection, player_id: str, stream_id: str, number: int
) -> dict[str, Any] | None:
    """One game cycle as one of its players may be shown it (a platform's game history page,
    GLI-19 recall to the player): what ``round_detail`` answers, with what was the other
    players' own left out (their balances, the options their money allowed, their money
    paid in or out, their results' balance and their command ids). What all saw at the
    table stays: every card, box, bet, decision and payout. None when there is no such
    round or the player had no part in it (no bet in it): told by the player's line alone,
    before the round is read, so that the time of the answer does not tell a round another
    player played from one no one did."""
    rp = schema.round_players
    played = exists().where(
        rp.c.stream_id == stream_id, rp.c.round == number, rp.c.player_id == player_id
    )
    if not (await connection.execute(select(played))).scalar_one():
        return None
    found = await round_detail(connection, stream_id, number)
    if found is None:
        return None
    seen = round_seen_by(player_id, found)
    return seen if seen["players"] else None


def round_seen_by(player_id: str, found: dict[str, Any]) -> dict[str, Any]:
    """``round_detail``'s answer with what was the other players' alone left out."""
    mine = [p for p in found["players"] if p["player_id"] == player_id]
    others = _others_commands(player_id, found["log"])
    log = [
        seen
        for entry in found["log"]
        if (seen := _seen_by(player_id, _without_command(entry, others))) is not None
    ]
    return {**found, "log": log, "players": mine}


def _others_commands(player_id: str, log: list[dict[str, Any]]) -> set[str]:
    """The ids of the commands in a round's log that are others': the other players' and the
    operator's. Each entry of another player was written by a command of theirs (or the
    server's, such as the clock's, left out as well); each entry naming a member of the
    operator's staff (``STAFF``: a suspension, a void, a stand-up, an interrupted round
    closed) by the operator's command, whose id its sender chose and may name them as the
    entry does. That id is also on the entries the command wrote that are no one's (the cards
    dealt, the round settled or voided) or the player's (their hand settled by another's
    stand, themselves stood up). The player's own decisions' commands stay theirs."""
    others: set[str] = set()
    own: set[str] = set()
    for entry in log:
        data, command = entry["data"], entry.get("command_id")
        if command is not None and data.get(STAFF) is not None:
            others.add(command)
        owner = data.get("player_id")
        if command is None or owner is None:
            continue
        if owner != player_id:
            others.add(command)
        elif entry.get("decided_by") == "player":
            own.add(command)
    return others - own


def _without_command(entry: dict[str, Any], others: set[str]) -> dict[str, Any]:
    return {**entry, "command_id": None} if entry.get("command_id") in others else entry


def _seen_by(player_id: str, entry: dict[str, Any]) -> dict[str, Any] | None:
    """A log entry as ``player_id`` may see it; None for one that is another's alone."""
    data = entry["data"]
    if STAFF in data:  # who on the operator's staff acted is the record's, no player's
        data = {k: v for k, v in data.items() if k != STAFF}
        entry = {**entry, "data": data}
    for each in PER_PLAYER:  # one item per player, one of them the player's
        if each in data:
            mine = [item for item in data[each] if item["player_id"] == player_id]
            return {**entry, "data": {**data, each: mine}}
    owner = data.get("player_id")
    if owner is None or owner == player_id:
        return entry
    if entry["event"] in OTHERS_MONEY_MOVES:
        return None
    public = {k: v for k, v in data.items() if not k.startswith("balance") and k not in OTHERS_OWN}
    return {**entry, "data": public, "command_id": None}


PER_PLAYER = ("results", "returns")
"""Lists of a round's entry with an item per player: ``RoundSettled.results``,
``RoundVoided.returns``; a player sees their own item."""

OTHERS_OWN = frozenset({"actions", "operator_reason"})
"""Fields of another player's entry that are theirs alone, besides their balances: the options
their money allowed (``TurnStarted``), and why the operator stood them up (``SeatLeft``: a
self-exclusion, a closed account); that they left is seen at the table."""

STAFF = "operator"
"""Who on the operator's staff suspended or resumed the table, closed an interrupted round,
voided one or stood a player up: for the record (the full answers, the audit), in no player's
view. What was done stays, and why where it is told to the players (``TableSuspended.reason``,
``RoundVoided.reason``) or to the player it was done to (``SeatLeft.operator_reason``)."""


async def _who_decided(
    connection: AsyncConnection, stream_id: str, log: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Each entry of a round's log with the command that wrote it (``command_id``) and, for a
    player's decision, who made it (``decided_by``: ``server`` when the clock or an operator's
    closing decided in the player's place, GLI-19). Read from the stored envelopes, so the
    rounds folded before these fields existed have them too."""
    if not log:
        return log
    e = schema.events
    sequences = [entry["sequence"] for entry in log]
    query = select(e.c.sequence, e.c.envelope).where(
        e.c.stream_id == stream_id, e.c.sequence.between(min(sequences), max(sequences))
    )
    causes = {
        sequence: json.loads(text).get("causation_id")
        for sequence, text in (await connection.execute(query)).all()
    }
    decisions = DecisionsInOrder()
    annotated = []
    for entry in log:
        cause = causes.get(entry["sequence"])
        data = entry["data"]
        by = decisions.decided_by(cause, entry["event"], data.get("player_id"), data)
        annotated.append({**entry, "command_id": cause, "decided_by": by})
    return annotated


async def table_state(connection: AsyncConnection, stream_id: str) -> dict[str, Any] | None:
    """A table as a reconnecting client sees it: the public view, the seated players, and
    the round in play (the hole card face down until it is revealed)."""
    t, a = schema.table_views, schema.accounts
    view = (
        await connection.execute(select(t.c.view).where(t.c.stream_id == stream_id))
    ).scalar_one_or_none()
    if view is None:
        return None
    # Through the model: a view stored by an older release lacks the fields added since
    # (``suspended``), which the answer's document says are always there.
    table = TableView.model_validate(view)
    if table.rules is not None:  # the event's document leaves out a preset's own terms
        try:
            table.rules = every_term(table.rules)
        except ValidationError:  # a term this release does not know (a newer one's table)
            table.rules = with_later_terms(table.rules)
    limit = (table.rules or {}).get("seat_released_after_rounds_sat_out")
    query = schema.seated_accounts([stream_id]).order_by(a.c.seat, a.c.player_id)
    players = [
        {
            "player_id": row.player_id,
            "seat": row.seat,
            "connected": row.connected,
            "available": row.available,
            "in_play": row.in_play,
            **sitting_out(row.sitting_out, row.rounds_sat_out, limit),
        }
        for row in (await connection.execute(query)).all()
    ]
    number = view.get("round", 0)
    current = None
    if number and view.get("round_open"):
        current = await round_detail(connection, stream_id, number)
    return {
        **table.model_dump(mode="json"),
        "players": players,
        "current_round": current,
        "last_round_id": f"{stream_id}:{number}" if number else None,
    }


PUBLIC_AT_THE_TABLE = ("player_id", "seat", "connected")


async def is_seated(connection: AsyncConnection, player_id: str, stream_id: str) -> bool:
    """Whether the player sits at the table: one account's key, read the same way whether the
    table exists or not (a player's own token is answered only where they sit)."""
    a = schema.accounts
    seated = exists().where(a.c.stream_id == stream_id, a.c.player_id == player_id, schema.SEATED)
    return bool((await connection.execute(select(seated))).scalar_one())


async def player_table(
    connection: AsyncConnection, player_id: str, stream_id: str
) -> dict[str, Any] | None:
    """A table as one player's client may be shown it (reconnecting, or watching a shared
    table): what ``table_state`` answers, with the player's own account as ``you`` (None when
    not seated) and of the others only what anyone at the table sees (seat, connected,
    sitting out), the options of another's turn left out and the round in play as
    ``round_seen_by`` the player."""
    found = await table_state(connection, stream_id)
    if found is None:
        return None
    you = next((p for p in found["players"] if p["player_id"] == player_id), None)
    others = [
        {k: v for k, v in p.items() if k in PUBLIC_AT_THE_TABLE or k in SITTING_OUT}
        for p in found["players"]
        if p["player_id"] != player_id
    ]
    active = found["active"]
    if active is not None and active.get("player_id") != player_id:
        active = {**active, "actions": None}
    current = found["current_round"]
    if current is not None:
        current = round_seen_by(player_id, current)
    return {**found, "active": active, "players": others, "you": you, "current_round": current}


SITTING_OUT = ("sitting_out", "rounds_sat_out", "rounds_before_seat_freed")


def sitting_out(out: bool | None, rounds: int | None, limit: int | None) -> dict[str, Any]:
    """A seated player's sitting out as the table answer says it: ``rounds_sat_out`` only
    where the table's rules free a seat after ``limit`` rounds sat out, and then, while the
    player sits out, the rounds still to be dealt without them before the seat is freed (0:
    at the end of the round in play). None for what is not known (an account folded before
    migration 0006 whose player has not bet, passed nor been left out since)."""
    counted = rounds if limit is not None else None
    left = None
    if out and counted is not None and limit is not None:
        left = max(limit - counted, 0)
    return {"sitting_out": out, "rounds_sat_out": counted, "rounds_before_seat_freed": left}


async def stream_envelopes(
    connection: AsyncConnection, stream_id: str, up_to: int | None = None
) -> list[wire.WireEnvelope]:
    """The stream's events as folded in, in sequence order (shoes sealed)."""
    e = schema.events
    query = select(e.c.envelope).where(e.c.stream_id == stream_id).order_by(e.c.sequence)
    if up_to is not None:
        query = query.where(e.c.sequence <= up_to)
    return [wire.decode(text.encode()) for text in (await connection.execute(query)).scalars()]


async def stream_envelope_pages(
    connection: AsyncConnection, stream_id: str, page: int = 2000
) -> AsyncIterator[list[wire.WireEnvelope]]:
    """``stream_envelopes`` a page at a time (``page`` events, by sequence): a table's log
    need not be in memory at once (a month of a busy table is about 860,000 events)."""
    after = 0
    while True:
        rows = (await connection.execute(_events_after(stream_id, after, page))).all()
        if not rows:
            return
        yield [wire.decode(row.envelope.encode()) for row in rows]
        after = rows[-1].sequence


def _events_after(stream_id: str, after: int, limit: int) -> Select[Any]:
    """The stream's (sequence, envelope) rows after sequence ``after``, ``limit`` at most."""
    e = schema.events
    return (
        select(e.c.sequence, e.c.envelope)
        .where(e.c.stream_id == stream_id, e.c.sequence > after)
        .order_by(e.c.sequence)
        .limit(limit)
    )


MAX_EVENTS_PAGE = 1000


async def folded_positions(connection: AsyncConnection) -> list[dict[str, Any]]:
    """The read model's position in each partition it folds (``topic``, ``partition``,
    ``next_offset``: the first offset not folded in), in topic and partition order."""
    p = schema.positions
    rows = await connection.execute(select(p).order_by(p.c.topic, p.c.kafka_partition))
    return [
        {"topic": row.topic, "partition": row.kafka_partition, "next_offset": row.next_offset}
        for row in rows.all()
    ]


async def stream_events(
    connection: AsyncConnection, stream_id: str, after: int, limit: int
) -> dict[str, Any]:
    """A stream's events as folded in (the envelopes as they came, shoes sealed), after
    sequence ``after``, ``limit`` at most, and the store's position in each partition it
    folds: every event of the stream below a partition's ``next_offset`` is in the read model,
    so a client that folds these and reads the stream's partition from that offset on misses
    nothing (an event read both ways is the same event, at the same sequence). The positions
    are read first: an event folded after them is read again from the topic, never lost."""
    positions = await folded_positions(connection)
    found = (await connection.execute(_events_after(stream_id, after, limit))).all()
    return {
        "stream_id": stream_id,
        "positions": positions,
        "events": [json.loads(row.envelope) for row in found],
        "next": found[-1].sequence if len(found) == limit else None,
    }


async def played_alone(connection: AsyncConnection, stream_id: str, player_id: str) -> bool:
    """Whether ``stream_id`` is a single-player table (not funded by wallets) at which
    ``player_id`` is the only player who ever sat: every event of a player there needs their
    account (``StreamProjection.account``), so its events hold no one else's money or play."""
    a = schema.accounts
    query = select(a.c.player_id, a.c.funded_by_wallet).where(a.c.stream_id == stream_id)
    found = (await connection.execute(query.limit(2))).all()
    return [(row.player_id, row.funded_by_wallet) for row in found] == [(player_id, False)]


def names_another_player(events: list[dict[str, Any]], player_id: str) -> bool:
    """Whether an event of the page names a player other than ``player_id`` anywhere in its
    data: a table only ``player_id`` sat at (``played_alone``) still holds events of others
    who never had an account there, a platform's money command for another player refused
    (``MoneyCommandRefused``: their id, the amount, why) or another's buy-in declined
    (``TransferDeclined``)."""
    return any(_other_player_in(e.get("data"), player_id) for e in events)


def _other_player_in(value: Any, player_id: str) -> bool:
    if isinstance(value, dict):
        named = value.get("player_id")
        if named is not None and named != player_id:
            return True
        return any(_other_player_in(item, player_id) for item in value.values())
    if isinstance(value, list):
        return any(_other_player_in(item, player_id) for item in value)
    return False


SHOWN_FOR_STAFF = "staff"
"""What a player's copy of a stream's events names for the member of the operator's staff who
suspended or resumed the table, voided or closed a round, or stood the player up (``STAFF``):
the events keep their shape (a client decodes them), the name is the record's."""


def _names_staff(envelope: dict[str, Any]) -> bool:
    data = envelope.get("data")
    return isinstance(data, dict) and data.get(STAFF) is not None


EDGE_READ = 8
"""How many events at a time ``staff_commands_at_edges`` reads past a page's edge."""


async def staff_commands_at_edges(
    connection: AsyncConnection, stream_id: str, events: list[dict[str, Any]]
) -> set[str]:
    """The staff's commands among those that wrote the first and the last event of a page of
    ``stream_id``'s ``events``, told by their events past the page's edges: a command's
    events are written together (consecutive sequences), and the one naming the member of
    staff may lie beyond the page (before, a page ending before it showed the command's id
    on the events within it: paged so, a player read the id the staff's tool chose)."""
    staff: set[str] = set()
    for edge, forward in ((events[:1], False), (events[-1:], True)):
        for envelope in edge:
            command = envelope.get("causation_id")
            if command is None or _names_staff(envelope):
                continue  # (one the page shows naming the staff is left out already)
            if await _staff_beyond(connection, stream_id, command, envelope["sequence"], forward):
                staff.add(command)
    return staff


async def _staff_beyond(
    connection: AsyncConnection, stream_id: str, command: str, sequence: int, forward: bool
) -> bool:
    """Whether an event of ``command`` next to ``sequence`` (after it, or before it) names
    a member of staff."""
    e = schema.events
    while True:
        past = e.c.sequence > sequence if forward else e.c.sequence < sequence
        order = e.c.sequence if forward else e.c.sequence.desc()
        query = select(e.c.sequence, e.c.envelope).where(e.c.stream_id == stream_id, past)
        rows = (await connection.execute(query.order_by(order).limit(EDGE_READ))).all()
        for row in rows:
            envelope = json.loads(row.envelope)
            if envelope.get("causation_id") != command:
                return False
            if _names_staff(envelope):
                return True
        if len(rows) < EDGE_READ:
            return False
        sequence = rows[-1].sequence


def events_seen_by_player(
    events: list[dict[str, Any]], staff_beyond: set[str]
) -> list[dict[str, Any]]:
    """A stream's envelopes as its player may be shown them (``played_alone``): the staff's
    names replaced by ``SHOWN_FOR_STAFF``, and the command and correlation ids of the staff's
    commands left out (their sender chose them, and may name them), on every event those
    commands wrote: those the page shows naming the staff, and ``staff_beyond``
    (``staff_commands_at_edges``)."""
    staff = {e.get("causation_id") for e in events if _names_staff(e)} - {None}
    staff |= staff_beyond
    seen = []
    for envelope in events:
        shown = envelope
        if _names_staff(envelope):
            shown = {**shown, "data": {**envelope["data"], STAFF: SHOWN_FOR_STAFF}}
        if envelope.get("causation_id") in staff:
            shown = {**shown, "causation_id": None, "correlation_id": None}
        seen.append(shown)
    return seen


def wallet_events_seen_by_player(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A player's wallet stream as they may be shown it: a ``CashOutReceived``'s correlation
    id left out. It carries the id of the command that began the cash-out at the table, which
    may be the staff's (an operator's stand-up: its sender chose the id, and may name the
    member of staff), left out of the table's own entries already (``events_seen_by_player``)."""
    return [
        {**envelope, "correlation_id": None}
        if envelope.get("type") == "CashOutReceived" and envelope.get("correlation_id")
        else envelope
        for envelope in events
    ]


async def stream_ids(connection: AsyncConnection) -> list[str]:
    """Every stream folded in: the tables, then the wallets."""
    found = []
    for table in (schema.table_views, schema.wallets):
        query = select(table.c.stream_id).order_by(table.c.stream_id)
        found += list((await connection.execute(query)).scalars())
    return found


async def event_partitions(connection: AsyncConnection) -> list[tuple[str, int, int, int]]:
    """Each stream's events by the partition they were read from: (stream, partition, first
    sequence, events), a stream's partitions in order."""
    events = schema.events
    query = (
        select(
            events.c.stream_id,
            events.c.kafka_partition,
            func.min(events.c.sequence),
            func.count(),
        )
        .group_by(events.c.stream_id, events.c.kafka_partition)
        .order_by(events.c.stream_id, events.c.kafka_partition)
    )
    return [
        (stream_id, int(partition), int(first), int(count))
        for stream_id, partition, first, count in await connection.execute(query)
    ]


async def interrupted_rounds(
    connection: AsyncConnection, idle_before: datetime, limit: int, *, every_table: bool = False
) -> list[dict[str, Any]]:
    """The rounds an operator may close as interrupted, or soon: open rounds at tables whose
    rules set ``interrupted_round_days`` and whose last event is no later than
    ``idle_before``, the longest waiting first, with the money each player has in them and
    the moment from which the table's rules let the round be closed. Rounds that wait at
    tables without the option (single-player rounds wait for their player for good) are not
    for the operator to close: listed only with ``every_table`` (GLI-19's unfinished games,
    for an operator to see), with no such moment."""
    r, t, a = schema.rounds, schema.table_views, schema.accounts
    tables = true() if every_table else _closable(connection)
    query = (
        select(r.c.stream_id, r.c.round, r.c.round_id, r.c.variant, r.c.status, r.c.opened_at)
        .add_columns(t.c.updated_at, t.c.view["rules"].label("rules"))
        .join(t, t.c.stream_id == r.c.stream_id)
        .where(schema.OPEN_ROUND, t.c.updated_at <= idle_before, tables)
        .order_by(t.c.updated_at, r.c.stream_id, r.c.round)
        .limit(limit)
    )
    found: list[dict[str, Any]] = []
    for row in (await connection.execute(query)).all():
        days = with_later_terms(row.rules or {})["interrupted_round_days"]
        if days is None and not every_table:  # _closable reads the rules as this does
            continue
        held = select(a.c.player_id, a.c.in_play).where(
            a.c.stream_id == row.stream_id, a.c.in_play > 0
        )
        players = await connection.execute(held.order_by(a.c.player_id))
        idle_since = utc(row.updated_at)
        found.append(
            {
                "round_id": row.round_id,
                "table": row.stream_id,
                "round": row.round,
                "variant": row.variant,
                "status": row.status,
                "opened_at": iso(row.opened_at),
                "idle_since": iso(idle_since),
                "closable_from": None if days is None else iso(idle_since + timedelta(days=days)),
                "in_play": {player: amount for player, amount in players.all()},
            }
        )
    return found


def _closable(connection: AsyncConnection) -> ColumnElement[bool]:
    """The tables whose rules let an operator close an interrupted round, in SQL (so the
    rounds that wait for their player for good, most of the open ones, are never read): the
    option set, or, in a view an older worker folded before the option existed (the key
    absent), a preset that has it, read as ``with_later_terms`` reads it. A key
    present and null is an option turned off."""
    view = schema.table_views.c.view
    days = view[("rules", "interrupted_round_days")]
    if connection.dialect.name == "postgresql":  # JSONB: ``?`` asks for the key itself
        rules = view.op("->")(literal("rules"))
        absent = not_(rules.op("?", return_type=Boolean)(literal("interrupted_round_days")))
    else:  # SQLite's json_type: NULL for a key absent, 'null' for a JSON null
        absent = func.json_type(view, "$.rules.interrupted_round_days").is_(None)
    with_days = [name for name, rules in PRESETS.items() if rules.interrupted_round_days]
    return or_(
        days.as_integer().is_not(None),
        and_(absent, view[("rules", "name")].as_string().in_(with_days)),
    )
