"""Each table's game cycles summed by UTC day: the game performance report (``game_days``).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_SUMS = ("rounds", "cancelled", "player_rounds", "initial_bets", "wagered", "paid")

# The tables as revision 0004 left them (not the live schema, which later revisions change).
_rounds = sa.table(
    "rounds",
    sa.column("stream_id", sa.String),
    sa.column("round", sa.Integer),
    sa.column("variant", sa.String),
    sa.column("currency", sa.String),
    sa.column("status", sa.String),
    sa.column("closed_at", sa.DateTime(timezone=True)),
    sa.column("record", sa.JSON().with_variant(JSONB(), "postgresql")),
)
_players = sa.table(
    "round_players",
    sa.column("stream_id", sa.String),
    sa.column("round", sa.Integer),
    sa.column("wagered", sa.BigInteger),
    sa.column("paid", sa.BigInteger),
)


def upgrade() -> None:
    op.create_table(
        "game_days",
        sa.Column("stream_id", sa.String(128), primary_key=True),
        sa.Column("day", sa.Date, primary_key=True, comment="the UTC day the rounds closed on"),
        sa.Column("variant", sa.String(64), nullable=False),
        sa.Column("currency", sa.String(8), nullable=False),
        sa.Column("rounds", sa.BigInteger, nullable=False, comment="rounds settled"),
        sa.Column(
            "cancelled", sa.BigInteger, nullable=False, comment="rounds cancelled, wagers returned"
        ),
        sa.Column(
            "player_rounds", sa.BigInteger, nullable=False, comment="players dealt in, summed"
        ),
        sa.Column(
            "initial_bets",
            sa.BigInteger,
            nullable=False,
            comment="the bets dealt, before any double",
        ),
        sa.Column(
            "wagered",
            sa.BigInteger,
            nullable=False,
            comment="every stake: doubles, splits, insurance",
        ),
        sa.Column(
            "paid", sa.BigInteger, nullable=False, comment="every payout, stakes returned included"
        ),
        comment="a table's game cycles of one day, summed: the game performance report",
    )
    op.create_index("ix_game_days_day", "game_days", ["day"])
    _backfill(op.get_bind())


def _backfill(connection: sa.Connection) -> None:
    """The rounds folded before this revision, summed as the fold sums them from the events
    (``projector._round_settled``): a settled round's players are those it settled (a wager
    is at least 1), its initial bets the boxes dealt. So the audit's rebuild compares equal."""

    def players(column: Any) -> Any:
        return (
            sa.select(column)
            .where(
                _players.c.stream_id == _rounds.c.stream_id,
                _players.c.round == _rounds.c.round,
                _players.c.wagered > 0,
            )
            .scalar_subquery()
        )

    query = sa.select(
        _rounds.c.stream_id,
        _rounds.c.variant,
        _rounds.c.currency,
        _rounds.c.status,
        _rounds.c.closed_at,
        _rounds.c.record,
        players(sa.func.count()).label("player_rounds"),
        players(sa.func.coalesce(sa.func.sum(_players.c.wagered), 0)).label("wagered"),
        players(sa.func.coalesce(sa.func.sum(_players.c.paid), 0)).label("paid"),
    ).where(_rounds.c.status.in_(["settled", "cancelled"]))
    days: dict[tuple[str, date], dict[str, Any]] = {}
    for row in connection.execute(query.execution_options(yield_per=1000)):
        day = days.setdefault(
            (row.stream_id, _utc(row.closed_at).date()),
            {"variant": row.variant, "currency": row.currency, **dict.fromkeys(_SUMS, 0)},
        )
        if row.status == "cancelled":
            day["cancelled"] += 1
            continue
        day["rounds"] += 1
        day["player_rounds"] += row.player_rounds
        day["wagered"] += row.wagered
        day["paid"] += row.paid
        day["initial_bets"] += sum(b["bet"] for b in row.record.get("boxes", []) if b.get("hands"))
    if days:
        rows = [{"stream_id": s, "day": d, **sums} for (s, d), sums in days.items()]
        game_days = sa.table(
            "game_days",
            *(sa.column(name) for name in ("stream_id", "day", "variant", "currency", *_SUMS)),
        )
        connection.execute(sa.insert(game_days), rows)


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def downgrade() -> None:
    op.drop_index("ix_game_days_day", table_name="game_days")
    op.drop_table("game_days")
