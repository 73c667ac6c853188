"""The rounds an operator voided for a malfunction (``RoundVoided``), counted per table and
UTC day in ``game_days``: summed from the rounds already folded, as the fold counts them
(``fold_round._round_voided``: a day with only voided rounds has its row too), so a rebuild
compares equal. No round was voided before the release that added this, so on its first
upgrade every row reads 0; after a downgrade below it and an upgrade again (0005 sums only
the settled and cancelled rounds), the voided ones are counted again.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None
# its downgrade drops a column, which SQLite does by copying the table as the live database
# has it: `downgrade --sql` on SQLite refuses it (env.py)
sqlite_downgrade_renders_offline = False

_COMMENT = "rounds voided for a malfunction, wagers returned (0007)"

# The UTC day a round closed on, per dialect (as 0005 reads it).
_DAY = {
    "postgresql": "(r.closed_at AT TIME ZONE 'UTC')::date",
    "sqlite": "substr(r.closed_at, 1, 10)",
}


def upgrade() -> None:
    with op.batch_alter_table("game_days") as batch:
        batch.add_column(
            sa.Column("voided", sa.BigInteger, nullable=False, server_default="0", comment=_COMMENT)
        )
    _backfill(op.get_bind())


def _backfill(connection: sa.Connection) -> None:
    day = _DAY[connection.dialect.name]
    voided = "FROM rounds r WHERE r.status = 'voided'"
    connection.execute(
        sa.text(f"""
        UPDATE game_days SET voided = (
            SELECT count(*) {voided}
            AND r.stream_id = game_days.stream_id AND {day} = game_days.day)""")
    )
    connection.execute(
        sa.text(f"""
        INSERT INTO game_days (stream_id, day, variant, currency, rounds, cancelled, voided,
                               player_rounds, initial_bets, wagered, paid)
        SELECT r.stream_id, {day}, min(r.variant), min(r.currency), 0, 0, count(*), 0, 0, 0, 0
        {voided} AND NOT EXISTS (
            SELECT 1 FROM game_days g WHERE g.stream_id = r.stream_id AND g.day = {day})
        GROUP BY r.stream_id, {day}""")
    )


def downgrade() -> None:
    with op.batch_alter_table("game_days") as batch:
        batch.drop_column("voided")
