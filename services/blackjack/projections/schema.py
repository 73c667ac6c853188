"""The read model's tables (SQLAlchemy Core). The migrations in ``migrations/versions`` create
exactly these; a test checks that the two agree.

Every value is derived from the events of one stream (a table), never from the order in which
partitions happen to be consumed, so a rebuild from offset 0 gives the same rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Date,
    DateTime,
    Index,
    Integer,
    MetaData,
    Select,
    String,
    Table,
    Text,
    literal_column,
    select,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB

metadata = MetaData()

Document = JSON().with_variant(JSONB(), "postgresql")
"""A JSON document column: JSONB on PostgreSQL, JSON text on SQLite."""

Money = BigInteger
"""Integer minor units (cents)."""

ID = 128  # the envelope's id length limit

_SITTING_OUT = "left out by the betting clock, no bet or pass since; null: not known (0006)"
_ROUNDS_SAT_OUT = "rounds dealt in a row while sitting out, where counted; null: not known"
_PAID_OUT_AT = "a wallet-funded table's last payout to the wallet (0012); null: none"
_MOVED = "paid in / taken out at the table during the round (not wagers or payouts)"

positions = Table(
    "projection_positions",
    metadata,
    Column("topic", String(249), primary_key=True),
    Column("kafka_partition", Integer, primary_key=True),
    Column("next_offset", BigInteger, nullable=False, comment="first offset not yet folded in"),
    comment="tracking table: written in the same transaction as the changes it accounts for",
)

events = Table(
    "events",
    metadata,
    Column("stream_id", String(ID), primary_key=True),
    Column("sequence", BigInteger, primary_key=True),
    # unique by its derivation from the key (uuid5 of stream/sequence): no index (0009)
    Column("event_id", String(ID), nullable=False),
    Column("type", String(64), nullable=False),
    Column("round", Integer, nullable=True),
    Column("occurred_at", DateTime(timezone=True), nullable=False),
    Column("topic", String(249), nullable=False),
    Column("kafka_partition", Integer, nullable=False),
    Column("kafka_offset", BigInteger, nullable=False),
    Column("envelope", Text, nullable=False, comment="the wire envelope as JSON (shoe sealed)"),
    comment="every public event folded in, for recall and replay",
)

table_views = Table(
    "table_views",
    metadata,
    Column("stream_id", String(ID), primary_key=True),
    Column("variant", String(64), nullable=True),
    Column("currency", String(8), nullable=True),
    Column("last_sequence", BigInteger, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("view", Document, nullable=False, comment="public table state (TableView)"),
)

accounts = Table(
    "accounts",
    metadata,
    Column("stream_id", String(ID), primary_key=True),
    Column("player_id", String(ID), primary_key=True),
    Column("currency", String(8), nullable=False),
    Column("funded_by_wallet", Boolean, nullable=False, comment="a multi-seat table"),
    Column("seat", Integer, nullable=True),
    Column("seated", Boolean, nullable=False),
    Column("connected", Boolean, nullable=False),
    Column("available", Money, nullable=False),
    Column("in_play", Money, nullable=False),
    Column("deposited", Money, nullable=False),
    Column("withdrawn", Money, nullable=False),
    Column("cashed_out", Money, nullable=False, comment="paid out when the player left"),
    Column("wagered", Money, nullable=False),
    Column("won", Money, nullable=False),
    Column("lost", Money, nullable=False),
    Column("rounds", Integer, nullable=False),
    Column("sitting_out", Boolean, nullable=True, comment=_SITTING_OUT),
    Column("rounds_sat_out", Integer, nullable=True, comment=_ROUNDS_SAT_OUT),
    Column("paid_out_at", DateTime(timezone=True), nullable=True, comment=_PAID_OUT_AT),
    comment="a player's money at one table; a wallet is the sum over a player's tables",
)
# A player's tables in the wallet answer's order (its page needs no sort of them all).
Index("ix_accounts_player_tables", accounts.c.player_id, accounts.c.currency, accounts.c.stream_id)
# A table keeps the account of everyone who ever sat at it, and a fold or a table's view
# reads only the seated ones: partial, so that read costs the seated, not the table's past.
# Literal, as OPEN_ROUND below: a generic plan cannot prove a parameter true.
SEATED = accounts.c.seated.is_(True)
Index("ix_accounts_seated", accounts.c.stream_id, sqlite_where=SEATED, postgresql_where=SEATED)


def seated_accounts(stream_ids: Sequence[str]) -> Select[Any]:
    """The accounts of the players seated at these tables, read through ix_accounts_seated."""
    return select(accounts).where(accounts.c.stream_id.in_(stream_ids), SEATED)


wallets = Table(
    "wallets",
    metadata,
    Column("stream_id", String(ID), primary_key=True),
    Column("player_id", String(ID), nullable=False, unique=True),
    Column("balance", Money, nullable=False),
    Column("in_transit", Money, nullable=False, comment="buy-ins sent, not yet confirmed"),
    Column("deposited", Money, nullable=False),
    Column("withdrawn", Money, nullable=False),
    Column("bought_in", Money, nullable=False),
    Column("refunded", Money, nullable=False, comment="buy-ins a table refused"),
    Column("cashed_in", Money, nullable=False, comment="money tables paid back"),
    Column("last_sequence", BigInteger, nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("pending", Document, nullable=False, comment="the buy-ins in transit"),
    Column("currency", String(8), nullable=True, comment="set by the first deposit"),
    Column(
        "cashed_in_from",
        Document,
        nullable=False,
        server_default=text("'{}'"),  # as migration 0012 adds it (alembic does not compare it)
        comment="what each table paid back: table id -> minor units (0012)",
    ),
    comment="a player's wallet stream: the money between tables",
)

rounds = Table(
    "rounds",
    metadata,
    Column("stream_id", String(ID), primary_key=True),
    Column("round", Integer, primary_key=True),
    Column("round_id", String(ID + 12), nullable=False),  # STREAM_ID:ROUND, no index (0009)
    Column("variant", String(64), nullable=False),
    Column("currency", String(8), nullable=False),
    Column("status", String(16), nullable=False),
    Column("opened_at", DateTime(timezone=True), nullable=False),
    Column("closed_at", DateTime(timezone=True), nullable=True),
    Column("first_sequence", BigInteger, nullable=False),
    Column("last_sequence", BigInteger, nullable=False),
    Column("record", Document, nullable=False, comment="the full game cycle (RoundRecord)"),
)

# Literal values, not parameters: a prepared statement's generic plan cannot use a partial
# index whose condition it cannot prove from parameters.
OPEN_ROUND = rounds.c.status.in_([literal_column("'betting'"), literal_column("'playing'")])
Index(  # the few open rounds among all settled ones (operators' interrupted-rounds list)
    "ix_rounds_open", rounds.c.stream_id, sqlite_where=OPEN_ROUND, postgresql_where=OPEN_ROUND
)

round_players = Table(
    "round_players",
    metadata,
    Column("stream_id", String(ID), primary_key=True),
    Column("round", Integer, primary_key=True),
    Column("player_id", String(ID), primary_key=True),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("balance_before", Money, nullable=False),
    Column("balance_after", Money, nullable=False),
    Column("wagered", Money, nullable=False),
    Column("paid", Money, nullable=False),
    Column("net", Money, nullable=False),
    Column("deposited", Money, nullable=False, server_default="0", comment=_MOVED),
    Column("withdrawn", Money, nullable=False, server_default="0", comment=_MOVED),
    comment="who played which round: the index of a player's betting history",
)
Index(
    "ix_round_players_history",
    round_players.c.player_id,
    round_players.c.started_at,
    round_players.c.stream_id,
    round_players.c.round,
)

game_days = Table(
    "game_days",
    metadata,
    Column("stream_id", String(ID), primary_key=True),
    Column("day", Date, primary_key=True, comment="the UTC day the rounds closed on"),
    Column("variant", String(64), nullable=False),
    Column("currency", String(8), nullable=False),
    Column("rounds", BigInteger, nullable=False, comment="rounds settled"),
    Column("cancelled", BigInteger, nullable=False, comment="rounds cancelled, wagers returned"),
    Column(
        "voided",
        BigInteger,
        nullable=False,
        server_default="0",
        comment="rounds voided for a malfunction, wagers returned (0007)",
    ),
    Column("player_rounds", BigInteger, nullable=False, comment="players dealt in, summed"),
    Column("initial_bets", Money, nullable=False, comment="the bets dealt, before any double"),
    Column("wagered", Money, nullable=False, comment="every stake: doubles, splits, insurance"),
    Column("paid", Money, nullable=False, comment="every payout, stakes returned included"),
    comment="a table's game cycles of one day, summed: the game performance report",
)
Index("ix_game_days_day", game_days.c.day)  # a report reads a range of days, every table

token_revocations = Table(
    "token_revocations",
    metadata,
    Column("player_id", String(ID), primary_key=True),
    Column(
        "not_before",
        BigInteger,
        nullable=False,
        comment="Unix seconds: the player's tokens issued (iat) before it are refused",
    ),
    Column("revoked_at", DateTime(timezone=True), nullable=False),
    comment="the query API's revocations of players' tokens (0008): set by an operator, not "
    "derived from the events; a row is dropped once every token it refuses has expired",
)
"""Not the read model: no event makes it, a rebuild copies it from the live store only when
told to (``projections rebuild --revocations-from``), the dump and the audit leave it out
(``READ_MODEL``). It lives in the store because every query API process reads
that store (``api.revocations``)."""

READ_MODEL = (
    positions,
    events,
    table_views,
    accounts,
    wallets,
    rounds,
    round_players,
    game_days,
)
"""Every table of the read model, in the order of the canonical dump."""
