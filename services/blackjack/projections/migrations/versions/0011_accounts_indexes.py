"""The accounts' indexes for what grows: the players who ever sat at a table, the tables a
player ever sat at.

- ``ix_accounts_seated``, the seated players' accounts of each table. A table keeps the
  account of every player who ever sat at it (their totals stay), and each projection batch
  and each table view read only the seated ones: through the primary key they read every past
  player's row as well (at a table 20,000 players had left, a batch of 500 events took
  1.1-1.2x its time at a new table and a batch of one 1.4-1.5x: docs/projections.md).
- ``ix_accounts_player_tables`` on (player, currency, table), in place of
  ``ix_accounts_player`` on the player alone: the wallet answer's page of a player's tables in
  its order, not all of them sorted for each page.

Both are built before the old index is dropped: on PostgreSQL a ``CREATE INDEX`` holds writes
to ``accounts`` from its build to the migration's commit, and a ``DROP INDEX`` holds reads too
(an exclusive lock), so the drop comes last, just before the commit.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


_PLAYER_TABLES = ["player_id", "currency", "stream_id"]


def _seated(dialect: str) -> sa.TextClause:
    # As the code's statements write it (schema.SEATED), so each planner matches the two.
    return sa.text("seated IS 1" if dialect == "sqlite" else "seated IS true")


def upgrade() -> None:
    # Plain CREATE INDEXes in the migration's transaction: writes to accounts wait while they
    # are built (one row a player a table: seconds at millions).
    seated = _seated(op.get_context().dialect.name)
    op.create_index(
        "ix_accounts_seated",
        "accounts",
        ["stream_id"],
        sqlite_where=seated,
        postgresql_where=seated,
    )
    op.create_index("ix_accounts_player_tables", "accounts", _PLAYER_TABLES)
    op.drop_index("ix_accounts_player", table_name="accounts")


def downgrade() -> None:
    op.create_index("ix_accounts_player", "accounts", ["player_id"])
    op.drop_index("ix_accounts_player_tables", table_name="accounts")
    op.drop_index("ix_accounts_seated", table_name="accounts")
