"""The read model: positions, the event log, tables, accounts, wallets, rounds.

Revision ID: 0001
Revises:
Create Date: 2026-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_DOCUMENT = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
_ID = 128


def _money(name: str, comment: str | None = None) -> sa.Column[int]:
    return sa.Column(name, sa.BigInteger(), nullable=False, comment=comment)


def upgrade() -> None:
    op.create_table(
        "projection_positions",
        sa.Column("topic", sa.String(249), primary_key=True),
        sa.Column("kafka_partition", sa.Integer(), primary_key=True),
        sa.Column(
            "next_offset",
            sa.BigInteger(),
            nullable=False,
            comment="first offset not yet folded in",
        ),
        comment="tracking table: written in the same transaction as the changes it accounts for",
    )
    op.create_table(
        "events",
        sa.Column("stream_id", sa.String(_ID), primary_key=True),
        sa.Column("sequence", sa.BigInteger(), primary_key=True),
        sa.Column("event_id", sa.String(_ID), nullable=False, unique=True),
        sa.Column("type", sa.String(64), nullable=False),
        sa.Column("round", sa.Integer(), nullable=True),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("topic", sa.String(249), nullable=False),
        sa.Column("kafka_partition", sa.Integer(), nullable=False),
        sa.Column("kafka_offset", sa.BigInteger(), nullable=False),
        sa.Column(
            "envelope",
            sa.Text(),
            nullable=False,
            comment="the wire envelope as JSON (shoe sealed)",
        ),
        comment="every public event folded in, for recall and replay",
    )
    op.create_index("ix_events_stream_round", "events", ["stream_id", "round"])
    op.create_table(
        "table_views",
        sa.Column("stream_id", sa.String(_ID), primary_key=True),
        sa.Column("variant", sa.String(64), nullable=True),
        sa.Column("currency", sa.String(8), nullable=True),
        sa.Column("last_sequence", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("view", _DOCUMENT, nullable=False, comment="public table state (TableView)"),
    )
    op.create_table(
        "accounts",
        sa.Column("stream_id", sa.String(_ID), primary_key=True),
        sa.Column("player_id", sa.String(_ID), primary_key=True),
        sa.Column("currency", sa.String(8), nullable=False),
        sa.Column("funded_by_wallet", sa.Boolean(), nullable=False, comment="a multi-seat table"),
        sa.Column("seat", sa.Integer(), nullable=True),
        sa.Column("seated", sa.Boolean(), nullable=False),
        sa.Column("connected", sa.Boolean(), nullable=False),
        _money("available"),
        _money("in_play"),
        _money("deposited"),
        _money("withdrawn"),
        _money("cashed_out", comment="paid out when the player left"),
        _money("wagered"),
        _money("won"),
        _money("lost"),
        sa.Column("rounds", sa.Integer(), nullable=False),
        comment="a player's money at one table; a wallet is the sum over a player's tables",
    )
    op.create_index("ix_accounts_player", "accounts", ["player_id"])
    op.create_table(
        "wallets",
        sa.Column("stream_id", sa.String(_ID), primary_key=True),
        sa.Column("player_id", sa.String(_ID), nullable=False, unique=True),
        _money("balance"),
        _money("in_transit", comment="buy-ins sent, not yet confirmed"),
        _money("deposited"),
        _money("withdrawn"),
        _money("bought_in"),
        _money("refunded", comment="buy-ins a table refused"),
        _money("cashed_in", comment="money tables paid back"),
        sa.Column("last_sequence", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("pending", _DOCUMENT, nullable=False, comment="the buy-ins in transit"),
        comment="a player's wallet stream: the money between tables",
    )
    op.create_table(
        "rounds",
        sa.Column("stream_id", sa.String(_ID), primary_key=True),
        sa.Column("round", sa.Integer(), primary_key=True),
        sa.Column("round_id", sa.String(_ID + 12), nullable=False, unique=True),
        sa.Column("variant", sa.String(64), nullable=False),
        sa.Column("currency", sa.String(8), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("first_sequence", sa.BigInteger(), nullable=False),
        sa.Column("last_sequence", sa.BigInteger(), nullable=False),
        sa.Column("record", _DOCUMENT, nullable=False, comment="the full game cycle (RoundRecord)"),
    )
    op.create_table(
        "round_players",
        sa.Column("stream_id", sa.String(_ID), primary_key=True),
        sa.Column("round", sa.Integer(), primary_key=True),
        sa.Column("player_id", sa.String(_ID), primary_key=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        _money("balance_before"),
        _money("balance_after"),
        _money("wagered"),
        _money("paid"),
        _money("net"),
        comment="who played which round: the index of a player's betting history",
    )
    op.create_index(
        "ix_round_players_history",
        "round_players",
        ["player_id", "started_at", "stream_id", "round"],
    )


def downgrade() -> None:
    op.drop_index("ix_round_players_history", table_name="round_players")
    op.drop_table("round_players")
    op.drop_table("rounds")
    op.drop_table("wallets")
    op.drop_index("ix_accounts_player", table_name="accounts")
    op.drop_table("accounts")
    op.drop_table("table_views")
    op.drop_index("ix_events_stream_round", table_name="events")
    op.drop_table("events")
    op.drop_table("projection_positions")
