"""Each table's game cycles summed by UTC day: the game performance report (``game_days``).

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

_SUMS = ("rounds", "cancelled", "player_rounds", "initial_bets", "wagered", "paid")


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


# The day a round closed on (UTC) and the bets of its boxes dealt (those with hands), per
# dialect: PostgreSQL keeps times with their zone and records as JSONB; SQLite keeps the UTC
# time as text (YYYY-MM-DD ...) and records as JSON text.
_DAY = {
    "postgresql": "(r.closed_at AT TIME ZONE 'UTC')::date",
    "sqlite": "substr(r.closed_at, 1, 10)",
}
_INITIAL_BETS = {
    "postgresql": (
        "SELECT coalesce(sum((b->>'bet')::bigint), 0) FROM jsonb_array_elements("
        "coalesce(r.record->'boxes', '[]'::jsonb)) AS b "
        "WHERE jsonb_array_length(coalesce(b->'hands', '[]'::jsonb)) > 0"
    ),
    "sqlite": (
        "SELECT coalesce(sum(json_extract(b.value, '$.bet')), 0) FROM json_each(r.record, "
        "'$.boxes') AS b WHERE json_array_length(json_extract(b.value, '$.hands')) > 0"
    ),
}


def _backfill(connection: sa.Connection) -> None:
    """The rounds folded before this revision, summed as the fold sums them from the events
    (``projector._round_settled``): a settled round's players are those it settled (a wager
    is at least 1), its initial bets the boxes dealt. So the audit's rebuild compares equal.
    In one statement: the database reads each record's boxes, not Python the whole record (a
    PostgreSQL store of 340,000 rounds took 108 s read row by row)."""
    dialect = connection.dialect.name
    settled = "r.status = 'settled'"
    players = (
        "FROM round_players p WHERE p.stream_id = r.stream_id AND p.round = r.round "
        "AND p.wagered > 0"
    )
    per_round = f"""
        SELECT r.stream_id, {_DAY[dialect]} AS day, r.variant, r.currency,
               CASE WHEN {settled} THEN 1 ELSE 0 END AS settled,
               CASE WHEN {settled} THEN 0 ELSE 1 END AS cancelled,
               CASE WHEN {settled} THEN (SELECT count(*) {players}) ELSE 0 END AS players,
               CASE WHEN {settled} THEN ({_INITIAL_BETS[dialect]}) ELSE 0 END AS initial_bets,
               CASE WHEN {settled} THEN (SELECT coalesce(sum(p.wagered), 0) {players}) ELSE 0
                    END AS wagered,
               CASE WHEN {settled} THEN (SELECT coalesce(sum(p.paid), 0) {players}) ELSE 0
                    END AS paid
        FROM rounds r WHERE r.status IN ('settled', 'cancelled')"""
    connection.execute(
        sa.text(f"""
        INSERT INTO game_days (stream_id, day, variant, currency, {", ".join(_SUMS)})
        SELECT stream_id, day, min(variant), min(currency), sum(settled), sum(cancelled),
               sum(players), sum(initial_bets), sum(wagered), sum(paid)
        FROM ({per_round}) AS closed
        GROUP BY stream_id, day""")
    )


def downgrade() -> None:
    op.drop_index("ix_game_days_day", table_name="game_days")
    op.drop_table("game_days")
